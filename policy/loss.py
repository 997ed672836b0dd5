"""The clipped PPO objective with agent masks, as a pure function of logits and values.

Masks: `pi_mask` selects agents that act (active and not frozen on their goal: a frozen
agent's action is ignored by the env, so it carries no policy gradient and no entropy bonus);
`v_mask` selects active agents. Frozen agents stay in the value loss on purpose: the last
acting step of an agent bootstraps from the value of its frozen state, which must be trained.
Means are sums divided by counts passed in (`n_pi`, `n_v`), so a sharded update can divide
local sums by the *global* counts and psum the gradients: identical to one device.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from policy import categorical


@struct.dataclass
class LossBatch:
    action: jax.Array  # [..., A] int32, or [..., A, D] float32 (continuous)
    old_logp: jax.Array  # [..., A]
    old_value: jax.Array  # [..., A]
    adv: jax.Array  # [..., A] (already normalised)
    target: jax.Array  # [..., A] value targets
    pi_mask: jax.Array  # [..., A] bool
    v_mask: jax.Array  # [..., A] bool


def ppo_loss(logits: jax.Array, value: jax.Array, b: LossBatch, *, n_pi: jax.Array,
             n_v: jax.Array, clip_eps: float, vf_coef: float, ent_coef: float,
             clip_value: bool = True, dist: Any = categorical
             ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """total = pg + vf_coef * vf - ent_coef * entropy, each a masked sum / count.

    `dist`: the action distribution's module (`policy.categorical` or `policy.gaussian`).
    """
    logp = dist.log_prob(logits, b.action)
    pm, vm = b.pi_mask.astype(jnp.float32), b.v_mask.astype(jnp.float32)
    n_pi, n_v = jnp.maximum(n_pi, 1.0), jnp.maximum(n_v, 1.0)

    ratio = jnp.exp(logp - b.old_logp)
    pg1 = ratio * b.adv
    pg2 = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * b.adv
    pg = jnp.sum(-jnp.minimum(pg1, pg2) * pm) / n_pi

    err = jnp.square(value - b.target)
    if clip_value:
        v_clip = b.old_value + jnp.clip(value - b.old_value, -clip_eps, clip_eps)
        err = jnp.maximum(err, jnp.square(v_clip - b.target))
    vf = 0.5 * jnp.sum(err * vm) / n_v

    ent = jnp.sum(dist.entropy(logits) * pm) / n_pi
    total = pg + vf_coef * vf - ent_coef * ent
    aux = {
        "pg_loss": pg, "v_loss": vf, "entropy": ent,
        "approx_kl": jnp.sum(((ratio - 1.0) - (logp - b.old_logp)) * pm) / n_pi,
        "clip_frac": jnp.sum((jnp.abs(ratio - 1.0) > clip_eps) * pm) / n_pi,
    }
    return total, aux
