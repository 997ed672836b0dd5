"""Environment families as the loop sees them (`Task`, see `designer.tasks.base`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from designer.tasks.base import CauseRule, Curriculum, Failures, Task

__all__ = ["TASKS", "TRAINEE_DEFAULTS", "VERIFY_DEFAULTS", "CauseRule", "Curriculum", "Failures",
           "Task", "make_task"]


def _mapf(settings: Any) -> Task:
    from designer.tasks.mapf import mapf_task

    return mapf_task(settings)


def _control(name: str) -> Callable[[Any], Task]:
    def build(settings: Any) -> Task:
        from designer.tasks.control import control_task

        return control_task(name, settings)
    return build


def _control_names() -> tuple[str, ...]:
    from jaxenv.control.registry import ALL_NAMES

    return ALL_NAMES  # the Brax families need `brax` when they are built


TASKS: dict[str, Callable[[Any], Task]] = {"mapf": _mapf,
                                           **{n: _control(n) for n in _control_names()}}


def _trainee_defaults(name: str) -> dict[str, Any]:
    if name == "mapf":
        return {}
    from designer.tasks.control import trainee_defaults

    return trainee_defaults(name)


# Trainee settings a family needs unless the run sets them (`RunSettings` applies them when it
# is built, so run.json holds the values the run used and a resume reads the same).
TRAINEE_DEFAULTS: dict[str, dict[str, Any]] = {n: _trainee_defaults(n) for n in TASKS}


def _verify_defaults(name: str) -> dict[str, Any]:
    if name == "mapf":
        return {}  # MAPF verifies on success, as it always has
    from designer.tasks.control import VERIFY_DEFAULTS as control

    return control


# Verification settings a family needs unless the run sets them (`RunSettings` applies them
# like the trainee's; run.json holds the values used).
VERIFY_DEFAULTS: dict[str, dict[str, Any]] = {n: _verify_defaults(n) for n in TASKS}


def make_task(settings: Any) -> Task:
    """The `Task` a `RunSettings` names (`settings.env`)."""
    name = getattr(settings, "env", "mapf")
    if name not in TASKS:
        raise ValueError(f"unknown environment {name!r} (known: {', '.join(TASKS)})")
    return TASKS[name](settings)
