"""A trial's process: `envengineer ARGS` that dies with the Ray worker that started it.

`python -m designer.sweep.child ARGS` asks Linux to SIGKILL it when its parent dies
(`PR_SET_PDEATHSIG`), so a retry never meets a live predecessor, then runs the command line
module as `python -m designer.cli ARGS` would: the sweep drives the command as a process, the
way a user at a shell does, and imports nothing of it.

Fault injection for tests and drills: `ENVENGINEER_SWEEP_FAULT="trial:stage[:attempts];..."`
(read by the driver) SIGKILLs the named trial's child right after it finishes `stage` (`-1`:
it exits before the first stage), on its first `attempts` attempts (default 1).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from contextlib import suppress
from typing import Any

from designer.run.folder import RunFolder
from designer.sweep.launch import FAULT_CHILD_ENV

CLI_MODULE = "designer.cli"  # the `envengineer` command, run as a process


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent (the Ray worker) dies."""
    with suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _inject_fault(stage: int) -> None:
    """The fault hook (module docstring): die right after `stage` is finished."""
    if stage < 0:
        print("error: injected fault before the first stage", file=sys.stderr)
        raise SystemExit(3)
    finish = RunFolder.finish_stage

    def finish_then_die(self: RunFolder, k: int, summary: dict[str, Any]) -> None:
        finish(self, k, summary)
        if k == stage:
            os.kill(os.getpid(), signal.SIGKILL)

    RunFolder.finish_stage = finish_then_die  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    """Run `envengineer ARGS` in this process (it exits with the command's status)."""
    _die_with_parent()
    stage = os.environ.pop(FAULT_CHILD_ENV, None)
    if stage is not None:
        _inject_fault(int(stage))
    sys.argv = [CLI_MODULE, *argv]
    runpy.run_module(CLI_MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
