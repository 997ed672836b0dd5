"""What each file of a run folder holds: pydantic schemas its readers validate against.

A run folder is read back by `resume`, `eval` and `report`; whatever it holds was written by
this program, but a disk, a copy or a hand can change it since. Each reader validates the
file against its schema here (`designer.run.folder.RunFolder.read`) and refuses it with one
line naming the file and the field, instead of a `KeyError` or a silently different table.
The schemas check what the readers use and let any other field through (`extra="allow"`), so
a newer field never breaks an older reader.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=False)


class RunJson(_Open):
    """`run.json`: the settings a run started with (validated again by `RunSettings`)."""

    settings: dict[str, Any]
    seed: int | None = None


class MapfCell(_Open):
    valid: float
    optimal: float


class MapfTable(_Open):
    """A MAPF split's table (`jaxenv.mapf.benchmark.report`)."""

    overall: MapfCell
    mean_over_sizes: dict[str, MapfCell]
    by_size: dict[str, dict[str, MapfCell]]


class ControlTable(_Open):
    """A control family's split table (`jaxenv.control.validator`)."""

    family: str
    n: NonNegativeInt
    success: float
    normalized_return: float
    overall: dict[str, Any]


Table = MapfTable | ControlTable


class Done(_Open):
    """`stages/NNN/done.json`: the finished stage's summary (one line of `metrics.jsonl`)."""

    stage: NonNegativeInt
    env_steps: NonNegativeInt
    times: dict[str, float]
    last: bool
    values: dict[str, Any]
    choice: dict[str, Any]
    fallback: str | None = None  # why the engineer fell back to `rules` at this stage


class Config(_Open):
    values: dict[str, Any]


class Train(_Open):
    env_steps: NonNegativeInt
    success_rate: float


class Validation(_Open):
    split: Literal["validation"]
    summary: str
    table: Table
    failures: dict[str, Any]


class Heldout(_Open):
    split: Literal["heldout"]
    table: Table | None


class Choice(_Open):
    index: int | None
    reason: str
    next_values: dict[str, Any]
    rationale: str | None = None


class Selected(_Open):
    """`selected.json`: the run's result (`designer.run.selection`)."""

    rule: str
    stage: NonNegativeInt
    last_stage: NonNegativeInt
    scores: list[float | None]
    heldout: Table | None
    heldout_evaluated_after_run: bool = False


class Candidate(_Open):
    values: dict[str, Any]
    source: str = Field("", description="Which engineer (and backend) proposed it.")


# file name in a stage folder (or the run folder) -> its schema
STAGE_FILES: dict[str, Any] = {"done.json": Done, "config.json": Config, "train.json": Train,
                               "validation.json": Validation, "heldout.json": Heldout,
                               "choice.json": Choice, "candidates.json": list[Candidate],
                               "context.json": dict[str, Any]}
