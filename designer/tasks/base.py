"""The seam between the loop and an environment family: everything that is not generic.

A `Task` bundles, for one family (MAPF-FrozenLake, a gymnax control task, ...), what the closed
loop, the engineers and the report read about it: the training environment and its config
space (after the preset and the run's pinned rules), the frozen validation and held-out
validators (`policy.split_eval.evaluate_split` plays them), the rules they are played under, the
coverage targets of verification, how a validation becomes F (the failure breakdown the
engineer reads), the guidelines file G, the headline numbers of a table and how the hand-written
`rules` engineer moves the knobs (`Curriculum`). The loop and the engineers never branch on the
family: a new family is a new `Task` builder in `designer.tasks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Failures(Protocol):
    """F of one stage, as the context builder, the history and the rules engineer read it."""

    split: str
    train: dict[str, float]
    trajectories: list[str]

    def summary(self) -> str: ...

    def render(self, *, n_traj: int, sizes: int | None, cells: bool = True) -> str: ...

    def cause_totals(self) -> dict[str, int]: ...

    def failures_by_key(self, knob: str) -> dict[str, float] | None: ...


@dataclass(frozen=True)
class CauseRule:
    """When failures with these `causes` are over `share` of all failures, move `knob` by
    `step` (the instances that teach what fails), with `why` as the rationale."""

    causes: tuple[str, ...]
    share: float
    knob: str
    step: float
    why: str


@dataclass(frozen=True)
class Curriculum:
    """What the `rules` engineer moves, as data (no family-specific code in the engineer).

    harder: knob -> the step that makes training harder (a float/int knob moves by the step;
    a simplex knob with +1 moves weight to its later keys, -1 to its earlier ones); easier is
    the opposite step. follow: a simplex knob whose weights follow where validation fails
    (`Failures.failures_by_key`). rules: `CauseRule`s read from the failure causes.
    """

    harder: Mapping[str, float]
    follow: str | None = None
    # (low knob, high knob, step): a range drawn from per episode; harder widens it by `step`
    # at each end, easier narrows it (either order of the two values reads as the same range)
    ranges: tuple[tuple[str, str, float], ...] = ()
    rules: tuple[CauseRule, ...] = ()
    what: str = "harder levels"  # the rationale's words for harder ("larger maps, more holes")
    easier: str = "easier levels"  # ... and for easier ("smaller maps, fewer holes")


@dataclass
class Task:
    """One environment family as the loop sees it (see the module docstring)."""

    name: str
    env: Any  # the training environment (jaxenv.agents.MultiAgentEnv)
    space: Any  # its ConfigSpace with the run's preset and pinned rules applied
    validator: Any  # the validation split (the engineer's evidence)
    heldout: Any  # the held-out split (the numbers we publish; no engineer reads it)
    eval_cfg: Any  # one config of the validators' env: the rules they are played under
    failures: Callable[[Any, Mapping[str, float], int], Failures]  # (validation, train, seed)
    headline: Callable[[Mapping[str, Any]], dict[str, float]]  # a table's to_dict -> numbers
    markdown: Callable[[Any, str], str]  # (table, title) -> the task's table in markdown
    guidelines: Path | tuple[Path, ...]  # G: the family's shipped guidelines (files, joined)
    curriculum: Curriculum
    # the one validation number model selection maximises (designer.selection): a table's
    # to_dict -> a float, larger is better
    score: Callable[[Mapping[str, Any]], float]
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # verification coverage
    describe: str = ""  # one line: what the family is
