"""The categorical policy over discrete actions, as three pure functions of the logits.

Written out (a few lines each) rather than taken from a distributions library, so `policy`
imports jax, flax and optax only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """One action per leading index: logits [..., n] -> [...] int32."""
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


def log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    """log pi(action): logits [..., n], action [...] -> [...]."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def entropy(logits: jax.Array) -> jax.Array:
    """H(pi) = -sum p log p: logits [..., n] -> [...]."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def mode(logits: jax.Array) -> jax.Array:
    """The greedy action: logits [..., n] -> [...] int32."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)
