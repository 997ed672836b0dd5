"""Running observation statistics (count, mean, M2) and the normalisation they define.

Physics observations mix scales (positions in metres, angular velocities in rad/s, ...); brax's
PPO and PureJaxRL's `NormalizeVecObservation` both feed the policy `(obs - mean) / std` with
running statistics. Here the statistics are a flax variable collection of the actor-critic
(`OBS_NORM`, beside `params`), so whoever applies the network with the runner's variables
(rollouts, the loss, evaluation, verification, validation, a checkpoint) uses the same ones.

Batches merge with Chan et al.'s parallel form of Welford's update (exact in exact arithmetic,
stable in float32): each rollout's observations of the agents that exist (`mask`) are one
batch. `psum` sums the batch's moments over the devices of a sharded run first, so every shard
ends with the statistics of the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

OBS_NORM = "obs_norm"  # the flax collection holding the statistics
CLIP = 10.0  # normalised features are clipped to [-CLIP, CLIP] (SB3's VecNormalize default)
EPS = 1e-8  # added to the variance: a constant feature normalises to 0, not a division by 0


def init(features: int) -> dict[str, jax.Array]:
    """No data yet: `normalize` is the identity until the first batch arrives."""
    return {"count": jnp.zeros((), jnp.float32), "mean": jnp.zeros((features,), jnp.float32),
            "m2": jnp.zeros((features,), jnp.float32)}


def variance(stats: dict[str, jax.Array]) -> jax.Array:
    """Population variance M2 / count; 1 before any data (so normalising changes nothing)."""
    n = stats["count"]
    return jnp.where(n > 0, stats["m2"] / jnp.maximum(n, 1.0), 1.0)


def normalize(stats: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """(x - mean) / sqrt(var + EPS), clipped to +-CLIP; x [..., F]."""
    z = (x - stats["mean"]) * jax.lax.rsqrt(variance(stats) + EPS)
    return jnp.clip(z, -CLIP, CLIP)


def update(stats: dict[str, jax.Array], x: jax.Array, mask: jax.Array | None = None,
           psum: Callable[[Any], Any] = lambda v: v) -> dict[str, jax.Array]:
    """Merge the rows of `x` [..., F] where `mask` [...] is true into the running statistics."""
    x = x.reshape(-1, x.shape[-1]).astype(jnp.float32)
    w = (jnp.ones(x.shape[:1], jnp.float32) if mask is None
         else mask.reshape(-1).astype(jnp.float32))
    n_b = psum(w.sum())
    mean_b = psum((w[:, None] * x).sum(0)) / jnp.maximum(n_b, 1.0)
    m2_b = psum((w[:, None] * jnp.square(x - mean_b)).sum(0))
    n_a, mean_a = stats["count"], stats["mean"]
    n = n_a + n_b
    frac = n_b / jnp.maximum(n, 1.0)
    delta = mean_b - mean_a
    return {"count": n, "mean": mean_a + delta * frac,
            "m2": stats["m2"] + m2_b + jnp.square(delta) * n_a * frac}


__all__ = ["CLIP", "EPS", "OBS_NORM", "init", "normalize", "update", "variance"]
