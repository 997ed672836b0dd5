"""The state of one MAPF-FrozenLake episode, read by the rules (`jaxenv.mapf.env`) and by what
the agents see (`jaxenv.mapf.observe`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment

from jaxenv.mapf.level import Level


@struct.dataclass
class MAPFState(environment.EnvState):
    level: Level
    pos: jax.Array  # [A, 2] int32
    tried: jax.Array  # [A, 2] int32: the cells the last step's moves aimed at (after slips)
    frozen: jax.Array  # [A] bool: its action is ignored (on its goal under the freeze rule)
    cost: jax.Array  # [A] int32: the verifier's cost of its path so far, 1 + the last time it
    # was off its goal (0 if never); once it is home for good, its arrival time
    step_limit: jax.Array  # [] int32
    success: jax.Array  # [] bool
    failed: jax.Array  # [] bool
    violations: jax.Array  # [4] int32 cumulative (vertex, edge, hole, oob) agent-violations


def on_goal(state: MAPFState) -> jax.Array:
    """[A] bool: the active agents that stand on their goals."""
    lv = state.level
    return lv.agent_mask() & jnp.all(state.pos == lv.goals, -1)
