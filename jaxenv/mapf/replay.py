"""Replay whole plans step by step through the environment (the plan → episode direction).

`plan_actions` turns a plan's cells into the joint actions that walk it; `replay` plays those
actions on a batch of levels under one config per level, in one jit, and returns what the
episodes traced. Together with `jaxenv.mapf.plans.verify.episode_plans` (episode → plan) this
closes the loop between stepwise play and whole-plan verification:
`benchmarks/heldout_census.py` replays every stored optimal plan of the held-out set under both
goal rules.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct

from jaxenv.mapf import rules
from jaxenv.mapf.level import Level


@struct.dataclass
class Replay:
    """What N replayed episodes did (leading axis N)."""

    success: jax.Array  # [N] bool: every agent on its goal with no violation, before the limit
    steps: jax.Array  # [N] int32: episode length (steps until it ended, or all of the plan)
    trace: jax.Array  # [N, T+1, A, 2] int32 `env.trace` at each time (frozen after the end)
    state: Any  # [N] final env states
    metrics: dict  # [N] env.episode_metrics of the final states


def plan_actions(cells: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Joint actions of a plan: cells [A, T, 2], length [A] -> (actions [T-1, A], legal [])."""
    chex.assert_rank(cells, 3)
    t = cells.shape[1]
    k = jnp.arange(t)
    last = jnp.take_along_axis(cells, jnp.clip(length - 1, 0, t - 1)[:, None, None], axis=1)
    path = jnp.where(k[None, :, None] < length[:, None, None], cells, last)
    delta = (path[:, 1:] - path[:, :-1]).swapaxes(0, 1)  # [T-1, A, 2]
    match = jnp.all(delta[..., None, :] == rules.DELTAS, -1)  # [T-1, A, 5]
    legal = jnp.all(jnp.any(match, -1) | (length == 0)[None, :])
    return jnp.argmax(match, -1).astype(jnp.int32), legal


@partial(jax.jit, static_argnames=("env",))
def replay(env: Any, levels: Level, actions: jax.Array, cfg: Any) -> Replay:
    """Play actions [N, T, A] on levels [N] under configs [N] (no auto-reset, one jit)."""
    n, t = actions.shape[:2]
    keys = jax.random.split(jax.random.key(0), n)
    _, state = jax.vmap(env.reset_to_level)(keys, levels, cfg)
    done0 = jax.vmap(env.is_terminated)(state, cfg)

    def step(carry, act):
        state, done, steps = carry
        _, nxt, _, term, _ = jax.vmap(env.step_env)(keys, state, act, cfg)
        trunc = jax.vmap(env.is_truncated)(nxt, cfg)
        live = ~done
        state = jax.tree.map(lambda a, b: jnp.where(
            live.reshape((n,) + (1,) * (a.ndim - 1)), a, b), nxt, state)
        return (state, done | term | trunc, steps + live), jax.vmap(env.trace)(state)

    (state, _, steps), pos = jax.lax.scan(step, (state, done0, jnp.zeros(n, jnp.int32)),
                                          jnp.swapaxes(actions, 0, 1))
    trace = jnp.concatenate([levels.starts[None], pos.astype(jnp.int32)], 0).swapaxes(0, 1)
    metrics = jax.vmap(env.episode_metrics)(state)
    return Replay(success=metrics["valid"], steps=steps, trace=trace, state=state,
                  metrics=metrics)
