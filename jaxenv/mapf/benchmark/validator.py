"""The task validator: which levels the policy is judged on and how its episodes are read.

A `Validator` names a frozen split (`heldout` for the numbers we publish, `validation` for
anything that tunes an engineer or a choice rule), holds its levels and metadata, an
environment that can play them (capacity 10 x 10, 5 agents; view radius and step cap those of
the trainee), and turns per-instance results into the paper's table. Every failed episode maps
to the whole-plan checks it breaks (`cause_checks`), so the table's failure breakdown speaks the
verifier's language. `policy.split_eval.evaluate_split` plays the levels; this module knows MAPF.

Valid and optimal are the **verifier's** verdict on the plan each episode traced
(`Validator.read`), not the environment's own bookkeeping; the environment's `valid` is kept as
`env_valid`, and any instance where the two differ is counted (`disagree`) and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import jax
import numpy as np

from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.report import Table, make_table
from jaxenv.mapf.config import Capacity
from jaxenv.mapf.env import MAPFFrozenLake
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.verify import CHECKS, verify_episodes
from jaxenv.mapf.rules import CAUSES

# Episode ending -> the whole-plan check it fails. Every failed episode also misses
# goals_reached (a violation ends the episode before the goals).
CAUSE_CHECK = {"vertex": "conflict_free", "edge": "conflict_free", "hole": "no_hole",
               "oob": "in_bounds", "timeout": "goals_reached"}
COSTS = ("makespan", "soc")
log = logging.getLogger(__name__)


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

    def read(self, result: Any) -> Any:
        """The result with valid / optimal / costs from the verifier on each traced plan.

        Needs the recorded trajectories (`Evaluator(record=True)`). Adds `env_valid` (the
        environment's own verdict) and `disagree` (the two differ); disagreements are logged.
        """
        if result.trace is None:
            raise ValueError("validation reads each episode as a whole plan: evaluate with "
                             "record=True so the trajectories are kept")
        levels = self.levels if result.levels is None else result.levels
        mode = "map" if jax.default_backend() == "cpu" else "vmap"
        v = jax.device_get(verify_episodes(levels, result.trace, result.steps, mode=mode))
        m = dict(result.metrics)
        env_valid = np.asarray(m["valid"])
        opt_ms, opt_soc = (np.asarray(levels.opt_makespan), np.asarray(levels.opt_soc))
        valid = np.asarray(v.valid)
        m.update(valid=valid, env_valid=env_valid, disagree=valid != env_valid,
                 makespan=np.asarray(v.makespan), soc=np.asarray(v.soc),
                 optimal_makespan=valid & (opt_ms >= 0) & (v.makespan == opt_ms),
                 optimal_soc=valid & (opt_soc >= 0) & (v.soc == opt_soc))
        m["optimal"] = m["optimal_makespan"]
        n = int(m["disagree"].sum())
        if n:
            log.warning("%s: the verifier and the environment disagree on %d of %d episodes "
                        "(verifier valid %d, environment valid %d); the table uses the verifier",
                        self.split, n, valid.size, int(valid.sum()), int(env_valid.sum()))
        return result.replace(metrics=m)

    def table(self, result: Any) -> Table:
        """The paper's table of per-instance results (valid, optimal_<cost>, outcome); by
        makespan, each cell also counts optimal by sum of costs (`optimal_soc`)."""
        by_ms = self.cost == "makespan"
        optimal = result.optimal_makespan if by_ms else result.optimal_soc
        m = self.meta
        return make_table(result.valid, optimal, m["agents"], m["size"], m["subset"],
                          checks=cause_checks(result.outcome), split=self.split,
                          optimal_soc=result.optimal_soc if by_ms else None)

    def __hash__(self) -> int:
        return hash((self.split, self.env, self.cost))


SPLIT_SIZE, SPLIT_AGENTS = 10, 5  # the frozen splits' largest map side and agent count


@cache
def _split(split: str) -> tuple[Level, dict]:
    return load_split(split, max_size=SPLIT_SIZE, max_agents=SPLIT_AGENTS)


@cache
def load_validator(split: str = "heldout", *, seen: Capacity | None = None,
                   cost: str = "makespan") -> Validator:
    """The validator of a split for a trainee that sees as `seen` (the training env's
    capacity: its view radius, step cap and observation planes; the split's own map side and
    agent count replace its shapes) does (cached)."""
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    levels, meta = _split(split)
    cap = replace(seen or Capacity(), max_size=SPLIT_SIZE, max_agents=SPLIT_AGENTS)
    env = MAPFFrozenLake(cap)
    return Validator(split=split, env=env, levels=env.prepare_levels(levels), meta=meta,
                     cost=cost)
