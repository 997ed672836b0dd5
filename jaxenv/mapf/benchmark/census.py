"""The census: do the stored optimal plans of a split survive being played step by step?

Each stored SoC-optimal plan is turned into joint actions and replayed through the
environment (`jaxenv.mapf.replay`) under a goal rule. An instance is *solvable* when the
episode succeeds, and *matched* when, in addition, the episode's sum of costs equals the stored
optimum and the verifier, reading the plan the episode traced, calls it SoC-optimal. Under the
`plan` rule every instance should be both (the environment is the verifier's task); under
`freeze` a plan that passes through a goal cannot be replayed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenv.batching import broadcast
from jaxenv.mapf.config import GOAL_RULES, Capacity
from jaxenv.mapf.env import MAPFFrozenLake
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.verify import verify_episodes
from jaxenv.mapf.replay import plan_actions, replay


def census(levels: Level, meta: dict[str, Any], goal_rule: str,
           env: MAPFFrozenLake | None = None) -> dict[str, Any]:
    """Replay the stored plans of `levels` (a loaded split and its meta) under `goal_rule`.

    Returns counts (`instances`, `solvable`, `stored_optimum_matched`, `makespan_equal`:
    the episode's makespan equals the stored optimal makespan) and per-instance boolean arrays
    (`per_instance`) for a closer look.
    """
    if goal_rule not in GOAL_RULES:
        raise ValueError(f"goal_rule must be one of {GOAL_RULES}, got {goal_rule!r}")
    env = env or MAPFFrozenLake(Capacity(max_size=levels.max_size,
                                         max_agents=levels.max_agents, max_steps=128))
    n = int(levels.size.shape[0])
    space = env.config_space
    cfg = broadcast(space.to_config(dict(space.default(), goal_rule=goal_rule)), n)
    cells, length = jnp.asarray(meta["plan_cells"]), jnp.asarray(meta["plan_len"])
    actions, legal = jax.vmap(plan_actions)(cells, length)
    out = replay(env, levels, actions, cfg)
    verdict = verify_episodes(levels, out.trace, out.steps, cost="soc")
    got = jax.device_get({"success": out.success, "soc": out.metrics["soc"],
                          "makespan": out.metrics["makespan"], "optimal": verdict.optimal,
                          "legal": legal})
    opt_soc, opt_ms = np.asarray(meta["opt_soc"]), np.asarray(meta["opt_makespan"])
    solvable = np.asarray(got["success"]) & np.asarray(got["legal"])
    matched = solvable & (got["soc"] == opt_soc) & np.asarray(got["optimal"])
    makespan_equal = solvable & (got["makespan"] == opt_ms)
    return {"goal_rule": goal_rule, "instances": n, "solvable": int(solvable.sum()),
            "stored_optimum_matched": int(matched.sum()),
            "makespan_equal": int(makespan_equal.sum()),
            "per_instance": {"solvable": solvable, "matched": matched}}
