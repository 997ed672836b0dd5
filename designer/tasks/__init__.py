"""Environment families as the loop sees them (`Task`, `Family`: see `designer.tasks.base`).

Every subpackage of `designer.tasks` is one family's home and exports its `FAMILY`; the
registries below are read from them, so adding a family adds its folder and nothing here.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from designer.tasks.base import CauseRule, Curriculum, Failures, Family, Task

__all__ = ["DEFAULT_ENV", "FAMILIES", "TASKS", "TRAINEE_DEFAULTS", "VERIFY_DEFAULTS", "CauseRule",
           "Curriculum", "Failures", "Family", "Task", "family_of", "make_task"]


def _families() -> tuple[Family, ...]:
    return tuple(importlib.import_module(f"{__name__}.{m.name}").FAMILY
                 for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
                 if m.ispkg)


DEFAULT_ENV = "mapf"  # the environment of a run (and of an engineer) that names none
FAMILIES: tuple[Family, ...] = _families()
# environment name -> its family (e.g. "mapf", "cartpole", "brax:hopper")
TASKS: dict[str, Family] = {n: f for f in FAMILIES for n in f.names}
# Trainee settings a family needs unless the run sets them (`RunSettings` applies them when it
# is built, so run.json holds the values the run used and a resume reads the same).
TRAINEE_DEFAULTS: dict[str, dict[str, Any]] = {n: f.trainee_defaults(n) for n, f in TASKS.items()}
# Verification settings a family needs unless the run sets them (applied like the trainee's).
VERIFY_DEFAULTS: dict[str, dict[str, Any]] = {n: dict(f.verify_defaults) for n, f in TASKS.items()}


def family_of(env: str) -> Family:
    """The family of environment `env` (ValueError naming the known ones)."""
    if env not in TASKS:
        raise ValueError(f"unknown environment {env!r} (known: {', '.join(TASKS)})")
    return TASKS[env]


def make_task(settings: Any) -> Task:
    """The `Task` a `RunSettings` names (`settings.env`)."""
    name = getattr(settings, "env", DEFAULT_ENV)
    return family_of(name).task(name, settings)
