"""The diagonal Gaussian policy over continuous actions, as pure functions of its parameters.

The same four functions as `policy.categorical` (sample, log_prob, entropy, mode), so rollout,
loss and evaluation take either module (`ActorCritic.dist`). The network's policy output packs
the distribution into one array `p [..., 2D]`: the mean, then the log standard deviation. Actions
are unbounded; the environment clips them to its range (gymnax's Pendulum does).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


def split(p: jax.Array) -> tuple[jax.Array, jax.Array]:
    """p [..., 2D] -> (mean [..., D], log_std [..., D])."""
    d = p.shape[-1] // 2
    return p[..., :d], p[..., d:]


def sample(key: jax.Array, p: jax.Array) -> jax.Array:
    """One action per leading index: p [..., 2D] -> [..., D] float32."""
    mean, log_std = split(p)
    return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)


def log_prob(p: jax.Array, action: jax.Array) -> jax.Array:
    """log pi(action), summed over action dimensions: p [..., 2D], action [..., D] -> [...]."""
    mean, log_std = split(p)
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z * z - log_std - 0.5 * LOG_2PI, axis=-1)


def entropy(p: jax.Array) -> jax.Array:
    """H(pi) = sum of log_std + (1 + log 2 pi) / 2: p [..., 2D] -> [...]."""
    _, log_std = split(p)
    return jnp.sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=-1)


def mode(p: jax.Array) -> jax.Array:
    """The greedy action (the mean): p [..., 2D] -> [..., D]."""
    return split(p)[0]
