"""Plain copy of the observation code as it was before the bit-packed views (commit a99a796).

Kept verbatim (as functions of the env) so the differential tests in `test_obs.py` next to it can
check that the fast path hands every agent exactly the arrays it used to. The goal flags
follow the goal rule (docs/rules.md): `at_goal` is "stands on its goal", `acting` "not
frozen"; under the freeze rule both equal the old flags on every reachable state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxenv.agents import AgentObs
from jaxenv.mapf import rules
from jaxenv.mapf.grid import in_grid_mask


def ref_planes(env, state) -> jax.Array:
    """[S, S, 3] uint8 map of (obstacle or outside the grid, active agents, their goals)."""
    lv, s = state.level, env.cap.max_size
    on = lv.agent_mask().astype(jnp.uint8)
    obstacle = (~in_grid_mask(lv.size, s) | lv.holes).astype(jnp.uint8)
    agents = jnp.zeros((s, s), jnp.uint8).at[state.pos[:, 0], state.pos[:, 1]].max(on)
    goals = jnp.zeros((s, s), jnp.uint8).at[lv.goals[:, 0], lv.goals[:, 1]].max(on)
    return jnp.stack([obstacle, agents, goals], -1)


def ref_get_obs(env, state) -> dict[str, jax.Array]:
    """Egocentric local views plus goal vectors, for every agent slot (the old `get_obs`)."""
    lv, r = state.level, env.cap.view_radius
    s, v = env.cap.max_size, 2 * r + 1
    active = lv.agent_mask()
    grid = ref_planes(env, state)
    planes = jnp.pad(grid, ((r, r), (r, r), (0, 0))).at[..., 0].set(
        jnp.pad(grid[..., 0], r, constant_values=1))
    offs = jnp.arange(v) - r
    centre = ((offs[:, None] == 0) & (offs[None, :] == 0))[..., None]

    def view(pos, goal):
        w = jax.lax.dynamic_slice(planes, (pos[0], pos[1], 0), (v, v, 3))
        rel = goal - pos
        own = ((offs[:, None] == rel[0]) & (offs[None, :] == rel[1]))[..., None]
        return jnp.concatenate([w[..., :1], jnp.where(centre, 0, w[..., 1:2]),
                                own.astype(jnp.uint8), jnp.where(own, 0, w[..., 2:])], -1)

    views = jnp.where(active[:, None, None, None], jax.vmap(view)(state.pos, lv.goals), 0)
    goal_vec = jnp.where(active[:, None], (lv.goals - state.pos) / s, 0.0)
    return {"view": views.astype(jnp.uint8), "goal_vec": goal_vec.astype(jnp.float32),
            "agent_mask": active, "at_goal": active & jnp.all(state.pos == lv.goals, -1),
            "acting": active & ~state.frozen}


def ref_global_state(env, state) -> jax.Array:
    """[S, S, 4] uint8 map for a centralised critic (the old `global_state`)."""
    lv, s = state.level, env.cap.max_size
    on = (lv.agent_mask() & jnp.all(state.pos == lv.goals, -1)).astype(jnp.uint8)
    done = jnp.zeros((s, s), jnp.uint8).at[state.pos[:, 0], state.pos[:, 1]].max(on)
    return jnp.concatenate([ref_planes(env, state), done[..., None]], -1)


def ref_agent_obs(env, state, with_global: bool = False) -> AgentObs:
    """The old `agent_obs(get_obs(state), state)`: what the network was handed."""
    obs = ref_get_obs(env, state)
    vec = jnp.concatenate([obs["goal_vec"], obs["at_goal"][..., None].astype(jnp.float32)], -1)
    targets = state.pos[:, None, :] + rules.DELTAS[None]
    return AgentObs(vec=vec, agent_mask=obs["agent_mask"],
                    acting=obs["acting"], view=obs["view"],
                    glob=ref_global_state(env, state) if with_global else None,
                    pos=(state.pos / env.cap.max_size).astype(jnp.float32),
                    action_mask=rules.in_bounds(targets, state.level.size))
