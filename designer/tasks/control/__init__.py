"""The physics families' home in designer (jaxenv.control): their `Task` and their report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from designer.tasks.base import Family
from designer.tasks.control.task import (
    VERIFY_DEFAULTS,
    control_task,
    curriculum,
    trainee_defaults,
)
from jaxenv.control.registry import ALL_NAMES


def report(runs: list[Any], out: Path, *, title: str, command: str | None) -> Path:
    from designer.tasks.control.report import write_control_report

    return write_control_report(runs, out, title=title, command=command)


# The Brax families need `brax` when they are built, not when they are named.
FAMILY = Family(name="control", names=ALL_NAMES, task=control_task, report=report,
                curriculum=curriculum, trainee_defaults=trainee_defaults,
                verify_defaults=VERIFY_DEFAULTS)
