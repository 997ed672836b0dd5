"""Episodes as whole plans: the trajectory an episode traced, read by the verifier.

Under the `plan` goal rule (docs/rules.md) an episode *is* a whole plan: each agent's cells at
times 0..T, where T is the step at which every agent first stands on its goal. Turning the
recorded positions into the plan's array form and verifying it makes the verifier, not the
environment, the judge of valid and optimal, so the two can never disagree silently
(`jaxenv.mapf.benchmark.validator.Validator.read` counts any disagreement).
"""

from __future__ import annotations

from functools import partial

import chex
import jax
import jax.numpy as jnp

from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.parse import Plan
from jaxenv.mapf.plans.verify import Verdict, verify_batch


def episode_plans(trace: jax.Array, steps: jax.Array, n_agents: jax.Array) -> Plan:
    """Plans of N episodes: trace [N, T+1, A, 2] positions, steps [N], n_agents [N].

    Agent rows below the level's agent count get the cells of times 0..steps (length
    steps + 1); the other rows are empty. Cells after an episode's end are ignored (the
    verifier pads a path with its last cell).
    """
    chex.assert_rank(trace, 4)
    n, _, a, _ = trace.shape
    chex.assert_shape([steps, n_agents], (n,))
    cells = jnp.swapaxes(jnp.asarray(trace, jnp.int32), 1, 2)  # [N, A, T+1, 2]
    used = jnp.arange(a)[None, :] < n_agents[:, None]
    length = jnp.where(used, steps[:, None] + 1, 0).astype(jnp.int32)
    return Plan(cells=cells, length=length, parsed_ok=jnp.ones(n, bool))


@partial(jax.jit, static_argnames=("cost", "mode"))
def verify_episodes(levels: Level, trace: jax.Array, steps: jax.Array, cost: str = "makespan",
                    mode: str = "vmap") -> Verdict:
    """The verifier's verdict on the plan each of N episodes traced (levels batched [N])."""
    plan = episode_plans(trace, steps, levels.n_agents)
    return verify_batch(levels, plan.cells, plan.length, plan.parsed_ok, cost=cost, mode=mode)
