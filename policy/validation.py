"""Validation on the frozen held-out set: one jitted evaluation, then the paper's table.

`validate(params, network, key, cap=...)` loads the 3,150 held-out levels
(`jaxenv.mapf.benchmark.heldout.load_heldout`), evaluates the policy on all of them in one call
(`policy.evaluate`), and aggregates valid % / optimal % by agents x size x wait-ratio subset
with `jaxenv.mapf.benchmark.report.make_table`. The failure breakdown per size maps each episode's
ending to the whole-plan check it breaks (`cause_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import jax
import numpy as np

from jaxenv.mapf.config import Capacity
from jaxenv.mapf.env import CAUSES, MAPFFrozenLake
from jaxenv.mapf.level import Level
from policy.evaluate import Cost, EvalResult, Evaluator, Mode
from policy.network import ActorCritic

# Episode ending -> the whole-plan check (jaxenv.mapf.plans.CHECKS) it fails. Every failed
# episode also misses goals_reached (a violation ends the episode before the goals).
_CAUSE_CHECK = {"vertex": "conflict_free", "edge": "conflict_free", "hole": "no_hole",
                "oob": "in_bounds", "timeout": "goals_reached"}


def cause_checks(cause: np.ndarray) -> np.ndarray:
    """[N] CAUSES indices -> [N, 8] bool pass/fail per `jaxenv.mapf.plans.CHECKS`."""
    from jaxenv.mapf.plans import CHECKS

    cause = np.asarray(cause)
    checks = np.ones((cause.size, len(CHECKS)), bool)
    for i, name in enumerate(CAUSES):
        if name in _CAUSE_CHECK:
            rows = cause == i
            checks[rows, CHECKS.index(_CAUSE_CHECK[name])] = False
            checks[rows, CHECKS.index("goals_reached")] = False
    return checks


@dataclass
class Validation:
    table: Any  # jaxenv.mapf.benchmark.report.Table
    result: EvalResult  # per instance (numpy)
    meta: dict  # load_heldout's metadata


@cache
def heldout(max_size: int = 10, max_agents: int = 5) -> tuple[Level, dict]:
    """The held-out levels and metadata (loaded once per process)."""
    from jaxenv.mapf.benchmark.heldout import load_heldout

    return load_heldout(max_size=max_size, max_agents=max_agents)


_EVALUATORS: dict[tuple, Evaluator] = {}


def validate(params, network: ActorCritic, key: jax.Array, *, cap: Capacity | None = None,
             mode: Mode = "greedy", cost: Cost = "makespan", record: bool = True) -> Validation:
    """Evaluate on the whole held-out set and build the paper's table.

    `cap` sets view radius and step cap; its grid and agent capacity must hold the set
    (10 x 10, 5 agents). The policy's view radius (and, for MAPPO, max_size) must match
    the capacity it was trained with.
    """
    from jaxenv.mapf.benchmark.report import make_table

    cap = cap or Capacity(max_size=10, max_agents=5)
    k = (cap, network, cost, record)
    if k not in _EVALUATORS:
        _EVALUATORS[k] = Evaluator(MAPFFrozenLake(cap), network, cost=cost, record=record)
    levels, meta = heldout(cap.max_size, cap.max_agents)
    res = _EVALUATORS[k](params, levels, key, mode=mode).numpy()
    table = make_table(res.valid, res.optimal, meta["agents"], meta["size"], meta["subset"],
                       checks=cause_checks(res.cause))
    return Validation(table=table, result=res, meta=meta)
