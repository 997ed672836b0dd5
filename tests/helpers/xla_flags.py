"""XLA flags for every test process, the pytest process and the ones it starts.

`--xla_cpu_multi_thread_eigen=false`: tests check results, not speed, and run two pytest
workers on two cores (the Makefile), so each process keeps XLA's Eigen pool single-threaded.

`--xla_backend_optimization_level=0`: most tests compile many small programs and run each a few
times, so LLVM's optimisation of the CPU code costs more than it saves; at level 0 the same
programs compute the same values to float32 rounding (differential tests compare within a few
roundings, not bit for bit, against code compiled another way). A process that runs a whole
training loop (the `envengineer` runs of the end-to-end tests) spends its time running, not
compiling: `xla_flags(optimized=True)` keeps XLA's default level for it.

The CI hang this file used to blame on the Eigen pool (tests/policy/test_policy_train.py,
`test_vmapped_seeds_match_single_runs`, three times; PyAutoLabs/PyAutoFit#1528 saw a similar
one) had another cause, found with `gdb -p` on a hung process (`thread apply all bt`): two
pool threads parked in `absl::BlockingCounter::Wait` inside `jax::ParallelBatchMap`, called
from jaxlib's LAPACK `lapack_sgeqrf_ffi` custom call. A batched QR (flax's orthogonal
initializer under `jax.vmap(trainer.init)` over seeds) splits its batch over the same thread
pool and waits for it from inside the pool; the main thread then waited in the CPU client's
`Execute` for ever, with no CPU used. It reproduced every time with async dispatch off. The
networks now initialise without LAPACK (`policy.orthogonal`, tests/policy/test_orthogonal.py), and
the same tests pass.
"""

from __future__ import annotations

import os

FAST_COMPILE = "--xla_backend_optimization_level=0"
TEST_XLA_FLAGS = ("--xla_cpu_multi_thread_eigen=false", FAST_COMPILE)


def xla_flags(devices: int | None = None, optimized: bool = False) -> str:
    """XLA_FLAGS for a test process: this process's flags plus the test flags, with `devices`
    host CPU devices when given (any earlier device count is replaced); `optimized` leaves
    out the fast-compile level (a process that mostly runs rather than compiles)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags += [f for f in TEST_XLA_FLAGS if f not in flags]
    if optimized:
        flags = [f for f in flags if not f.startswith("--xla_backend_optimization_level")]
    if devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    return " ".join(flags)
