"""The task validator: which levels the policy is judged on and how its episodes are read.

A `Validator` names a frozen split (`heldout` for the numbers we publish, `validation` for
anything that tunes an engineer or a choice rule), holds its levels and metadata, an
environment that can play them (capacity 10 x 10, 5 agents; view radius and step cap those of
the trainee), and turns per-instance results into the paper's table. Every failed episode maps
to the whole-plan checks it breaks (`cause_checks`), so the table's failure breakdown speaks the
verifier's language. `policy.validation.validate` plays the levels; this module knows MAPF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.report import Table, make_table
from jaxenv.mapf.config import Capacity
from jaxenv.mapf.env import MAPFFrozenLake
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.verify import CHECKS
from jaxenv.mapf.rules import CAUSES

# Episode ending -> the whole-plan check it fails. Every failed episode also misses
# goals_reached (a violation ends the episode before the goals).
CAUSE_CHECK = {"vertex": "conflict_free", "edge": "conflict_free", "hole": "no_hole",
               "oob": "in_bounds", "timeout": "goals_reached"}
COSTS = ("makespan", "soc")


def cause_checks(cause: np.ndarray) -> np.ndarray:
    """[N] `CAUSES` indices -> [N, 8] bool pass/fail per `jaxenv.mapf.plans.CHECKS`."""
    cause = np.asarray(cause)
    checks = np.ones((cause.size, len(CHECKS)), bool)
    for i, name in enumerate(CAUSES):
        if name in CAUSE_CHECK:
            rows = cause == i
            checks[rows, CHECKS.index(CAUSE_CHECK[name])] = False
            checks[rows, CHECKS.index("goals_reached")] = False
    return checks


@dataclass(frozen=True)
class Validator:
    """A frozen split, an env to play it, and the reading of its results (see above)."""

    split: str
    env: MAPFFrozenLake
    levels: Level = field(repr=False)
    meta: dict = field(repr=False)
    cost: str = "makespan"

    def table(self, result: Any) -> Table:
        """The paper's table of per-instance results (valid, optimal_<cost>, outcome)."""
        optimal = result.optimal_makespan if self.cost == "makespan" else result.optimal_soc
        m = self.meta
        return make_table(result.valid, optimal, m["agents"], m["size"], m["subset"],
                          checks=cause_checks(result.outcome), split=self.split)

    def __hash__(self) -> int:
        return hash((self.split, self.env, self.cost))


@cache
def _split(split: str) -> tuple[Level, dict]:
    return load_split(split, max_size=10, max_agents=5)


@cache
def load_validator(split: str = "heldout", *, view_radius: int = 3, max_steps: int = 128,
                   cost: str = "makespan") -> Validator:
    """The validator of a split for a trainee of this view radius and step cap (cached)."""
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    levels, meta = _split(split)
    cap = Capacity(max_size=10, max_agents=5, view_radius=view_radius, max_steps=max_steps)
    return Validator(split=split, env=MAPFFrozenLake(cap), levels=levels, meta=meta, cost=cost)
