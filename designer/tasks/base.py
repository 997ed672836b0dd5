"""The seam between the loop and an environment family: everything that is not generic.

A `Task` bundles, for one family (MAPF-FrozenLake, a gymnax control task, ...), what the closed
loop, the engineers and the report read about it: the training environment and its config
space (after the preset and the run's pinned rules), the frozen validation and held-out
validators (`policy.split_eval.evaluate_split` plays them), the rules they are played under, the
coverage targets of verification, how a validation becomes F (the failure breakdown the
engineer reads), the guidelines file G, the headline numbers of a table and how the hand-written
`rules` engineer moves the knobs (`Curriculum`). A `Family` is what designer reads of a family
before a run builds its `Task`: its environment names, the builder, its report and the settings
it needs. The loop, the report and the engineers never branch on the family: a new family is a
new folder `designer.tasks.<family>` exporting its `FAMILY`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from designer.tasks.failures import Failures


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
    # the one validation number model selection maximises (designer.run.selection): a table's
    # to_dict -> a float, larger is better
    score: Callable[[Mapping[str, Any]], float]
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # verification coverage
    describe: str = ""  # one line: what the family is


@dataclass(frozen=True)
class Family:
    """One family's entry in `designer.tasks`: what the settings, the loop and the report read.

    names: the environment names it serves (`RunSettings.env`); task: (name, settings) ->
    `Task`; report: (runs, out, *, title, command) -> the written `report.md` (the generic
    report hands it the loaded runs, `designer.tasks.report.Run`); curriculum: name -> the
    `rules` engineer's `Curriculum` (without building the task); trainee_defaults: name -> the
    trainee settings it needs unless the run sets them; verify_defaults: likewise for
    candidate scoring.
    """

    name: str
    names: tuple[str, ...]
    task: Callable[[str, Any], Task]
    report: Callable[..., Path]
    curriculum: Callable[[str], Curriculum]
    trainee_defaults: Callable[[str], dict[str, Any]] = lambda name: {}
    verify_defaults: Mapping[str, Any] = field(default_factory=dict)
