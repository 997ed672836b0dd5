"""MAPF-FrozenLake's home in designer (jaxenv.mapf): its `Task`, its F, its report, and the
whole-plan prompt, evaluation and answer log of the LLM trainee's setting.

Importing this package loads no JAX: the task and the report load when they are used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from designer.tasks.base import Curriculum, Family, Task


def task(name: str, settings: Any) -> Task:
    from designer.tasks.mapf.task import mapf_task

    return mapf_task(settings)


def report(runs: list[Any], out: Path, *, title: str, command: str | None) -> Path:
    from designer.tasks.mapf.report import write_mapf_report

    return write_mapf_report(runs, out, title=title, command=command)


def curriculum(name: str) -> Curriculum:
    from designer.tasks.mapf.task import CURRICULUM

    return CURRICULUM


# MAPF verifies on success and keeps the trainee's own defaults, as it always has.
FAMILY = Family(name="mapf", names=("mapf",), task=task, report=report, curriculum=curriculum)
