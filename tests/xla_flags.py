"""XLA flags for every test process, the pytest process and the ones it starts.

`--xla_cpu_multi_thread_eigen=false`: XLA's multi-threaded Eigen pool on the CPU can wedge
while a vmapped program's result is materialised (a known, unexplained XLA CPU hang:
PyAutoLabs/PyAutoFit#1528/#1530 isolated it to this one flag). We saw it twice on the 2-core
CI machine in tests/test_policy_train.py, the second time in
`test_vmapped_seeds_match_single_runs`, eating the whole CI budget. Tests
check results, not speed, so they run with the single-threaded pool; benchmarks and the
product keep XLA's default.
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
