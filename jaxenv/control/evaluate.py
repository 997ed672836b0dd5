"""Play a batch of physics variants with any pure-JAX policy: one episode per level, one jit.

`play(env, policy, levels, key)` runs every level from `reset_to_level` until its episode ends
(or the family's horizon) and returns the per-variant episode metrics (`ControlEnv.
episode_metrics`) and outcome; `evaluate_set` does it on a frozen split and summarises it
(`jaxenv.control.sets.summarize`). The trainee's own evaluator (`policy.evaluate`) plays the same
levels with a network; `summarize` reads either.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxenv.batching import select
from jaxenv.control.family import ControlEnv
from jaxenv.control.sets import HELDOUT, load_set, summarize

Policy = Callable[[jax.Array, jax.Array], jax.Array]  # (obs, key) -> action [1]


@partial(jax.jit, static_argnames=("env", "policy"))
def play(env: ControlEnv, policy: Policy, levels: Any, key: jax.Array) -> dict[str, jax.Array]:
    """One episode per level [N]: ``episode_metrics`` plus ``outcome`` (index into outcomes)."""
    n = jax.tree.leaves(levels)[0].shape[0]
    cfg = env.default_params
    k_reset, k_run = jax.random.split(key)
    obs, state = jax.vmap(env.reset_to_level, in_axes=(0, 0, None))(
        jax.random.split(k_reset, n), levels, cfg)

    def step(carry, k):
        obs, state, done = carry
        ks = jax.random.split(k, 2 * n).reshape(2, n, -1)
        act = jax.vmap(policy)(obs, ks[0])
        o2, s2, _, term, _ = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))(ks[1], state, act,
                                                                              cfg)
        ended = term | jax.vmap(env.is_truncated, in_axes=(0, None))(s2, cfg)
        live = ~done
        return (select(live, o2, obs), select(live, s2, state), done | ended), None

    done0 = jnp.zeros(n, bool)
    (_, state, _), _ = jax.lax.scan(step, (obs, state, done0), jax.random.split(k_run, env.horizon))
    return {**jax.vmap(env.episode_metrics)(state),
            "outcome": jax.vmap(env.episode_outcome)(state)}


def evaluate_set(env: ControlEnv, policy: Policy, key: jax.Array, split: str = HELDOUT
                 ) -> dict[str, Any]:
    """Success %, mean normalised return, outcomes and per-parameter bins on a frozen split."""
    name = env.family.name
    levels, meta = load_set(name, split)
    m = play(env, policy, levels, key)
    return summarize(name, meta, m["success"], m["normalized_return"], m["outcome"])
