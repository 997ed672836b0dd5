"""Generalised advantage estimation over [T, ...] rollouts, via rlax.

rlax works on one sequence; we flatten every trailing axis (envs, agents) and vmap it, so
the same function serves [T, B, A] multi-agent rollouts and tiny hand-checked arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import rlax


def gae(rewards: jax.Array, values: jax.Array, dones: jax.Array, last_value: jax.Array,
        gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets, both shaped like `rewards` [T, ...].

    values[t] is V(s_t); last_value is V(s_T), the bootstrap after the last step; dones[t]
    says that step t ended its episode (the next state is a fresh episode, no bootstrap).
    `dones` may have fewer trailing axes than `rewards` (one flag per env, shared by agents).
    """
    while dones.ndim < rewards.ndim:
        dones = dones[..., None]
    discount = gamma * (1.0 - jnp.broadcast_to(dones, rewards.shape).astype(jnp.float32))
    v_ext = jnp.concatenate([values, last_value[None]], 0)
    flat = lambda x: x.reshape(x.shape[0], -1)  # noqa: E731
    adv = jax.vmap(rlax.truncated_generalized_advantage_estimation,
                   in_axes=(1, 1, None, 1), out_axes=1)(
        flat(rewards.astype(jnp.float32)), flat(discount), lam, flat(v_ext.astype(jnp.float32)))
    adv = adv.reshape(rewards.shape)
    return adv, adv + values


def normalize(adv: jax.Array, mask: jax.Array, psum=lambda x: x) -> jax.Array:
    """Advantages standardised over the masked entries (`psum` sums across shards)."""
    m = mask.astype(jnp.float32)
    n = jnp.maximum(psum(m.sum()), 1.0)
    mean = psum((adv * m).sum()) / n
    std = jnp.sqrt(psum((jnp.square(adv - mean) * m).sum()) / n)
    return (adv - mean) / (std + 1e-8)
