"""Generalised advantage estimation over [T, ...] rollouts (Schulman et al. 2016).

One reverse `lax.scan` over time serves every trailing shape, so the same function handles
[T, B, A] multi-agent rollouts and tiny hand-checked arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(rewards: jax.Array, values: jax.Array, dones: jax.Array, last_value: jax.Array,
        gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets, both shaped like `rewards` [T, ...].

    values[t] is V(s_t); last_value is V(s_T), the bootstrap after the last step; dones[t]
    says that step t ended its episode (the next state is a fresh episode, no bootstrap).
    `dones` may have fewer trailing axes than `rewards` (one flag per env, shared by agents).
    """
    while dones.ndim < rewards.ndim:
        dones = dones[..., None]
    rewards = rewards.astype(jnp.float32)
    values = values.astype(jnp.float32)
    discount = gamma * (1.0 - jnp.broadcast_to(dones, rewards.shape).astype(jnp.float32))
    next_v = jnp.concatenate([values[1:], last_value[None].astype(jnp.float32)], 0)
    delta = rewards + discount * next_v - values

    def back(acc: jax.Array, x: tuple[jax.Array, jax.Array]):
        d, disc = x
        acc = d + disc * lam * acc
        return acc, acc

    _, adv = jax.lax.scan(back, jnp.zeros_like(delta[0]), (delta, discount), reverse=True)
    return adv, adv + values


def normalize(adv: jax.Array, mask: jax.Array, psum=lambda x: x) -> jax.Array:
    """Advantages standardised over the masked entries (`psum` sums across shards)."""
    m = mask.astype(jnp.float32)
    n = jnp.maximum(psum(m.sum()), 1.0)
    mean = psum((adv * m).sum()) / n
    std = jnp.sqrt(psum((jnp.square(adv - mean) * m).sum()) / n)
    return (adv - mean) / (std + 1e-8)
