"""Scripted MAPF policies as parameters of the shared actor-critic (for tests)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from policy.network import ActorCritic, init_params

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def zero_params(net: ActorCritic, env) -> dict:
    """All-zero parameters of `net` on `env`, from the init's shapes alone (nothing runs, so
    the orthogonal initializer compiles nothing)."""
    shapes = jax.eval_shape(lambda: init_params(net, env, jax.random.PRNGKey(0)))
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def constant_policy(net: ActorCritic, env, action: int) -> dict:
    p = zero_params(net, env)["params"]
    return {"params": {**p, "pi": {**p["pi"], "bias": jnp.zeros(5).at[action].set(10.0)}}}


def toward_goal_policy(net: ActorCritic, env) -> dict:
    """Greedy on the goal vector: logits of down/up/right/left = 100 * (dr+, dr-, dc+, dc-),
    and stay = 100 on the goal (under the plan rule an agent on its goal still acts)."""
    p = zero_params(net, env)["params"]
    view = (2 * env.cap.view_radius + 1) ** 2 * 4  # the vec features follow the flat view
    t0 = p["torso0"]["kernel"]
    t0 = t0.at[view, 0].set(1.0).at[view, 1].set(-1.0)  # dr (goal row - row) / S
    t0 = t0.at[view + 1, 2].set(1.0).at[view + 1, 3].set(-1.0)  # dc
    t0 = t0.at[view + 2, 4].set(1.0)  # at its goal
    t1 = p["torso1"]["kernel"].at[jnp.arange(5), jnp.arange(5)].set(1.0)
    pi = p["pi"]["kernel"]
    pi = pi.at[0, DOWN].set(100.0).at[1, UP].set(100.0)
    pi = pi.at[2, RIGHT].set(100.0).at[3, LEFT].set(100.0).at[4, STAY].set(100.0)
    return {"params": {**p, "torso0": {**p["torso0"], "kernel": t0},
                       "torso1": {**p["torso1"], "kernel": t1},
                       "pi": {**p["pi"], "kernel": pi}}}


def follow_cost_to_go_policy(net: ActorCritic, env) -> dict:
    """Takes a move that shortens its BFS distance to the goal (`MAPFObs.cost_to_go`: -1 in
    the move's feature), stays on its goal; needs an env with `Capacity.cost_to_go`."""
    p = zero_params(net, env)["params"]
    view = (2 * env.cap.view_radius + 1) ** 2 * 4
    ctg = view + 4  # vec: dr, dc, at goal, distance, then up, down, left, right
    t0 = p["torso0"]["kernel"]
    for k in range(4):  # hidden unit k fires when move k + 1 shortens the distance
        t0 = t0.at[ctg + k, k].set(-1.0)
    t0 = t0.at[view + 2, 4].set(1.0)  # at its goal
    t1 = p["torso1"]["kernel"].at[jnp.arange(5), jnp.arange(5)].set(1.0)
    pi = p["pi"]["kernel"]
    for k, a in enumerate((UP, DOWN, LEFT, RIGHT, STAY)):
        pi = pi.at[k, a].set(100.0)
    return {"params": {**p, "torso0": {**p["torso0"], "kernel": t0},
                       "torso1": {**p["torso1"], "kernel": t1},
                       "pi": {**p["pi"], "kernel": pi}}}
