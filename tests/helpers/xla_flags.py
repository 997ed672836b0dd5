"""XLA flags for every test process, the pytest process and the ones it starts.

`--xla_cpu_multi_thread_eigen=false`: tests check results, not speed, and run two pytest
workers on two cores (the Makefile), so each process keeps XLA's Eigen pool single-threaded.

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

TEST_XLA_FLAGS = ("--xla_cpu_multi_thread_eigen=false",)


def xla_flags(devices: int | None = None) -> str:
    """XLA_FLAGS for a test process: this process's flags plus the test flags, with `devices`
    host CPU devices when given (any earlier device count is replaced)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags += [f for f in TEST_XLA_FLAGS if f not in flags]
    if devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    return " ".join(flags)
