"""The orthogonal initializer of PureJaxRL's actor-critic, without LAPACK.

`jax.nn.initializers.orthogonal` takes the Q of a Gaussian matrix's QR from LAPACK (`geqrf`).
Under `vmap` (a batch of seeds: `jax.vmap(trainer.init)`) that becomes one batched LAPACK call,
which jaxlib's CPU kernel splits over XLA's intra-op thread pool and then waits for *inside* a
pool thread (`jax::ParallelBatchMap` -> `BlockingCounter::Wait`); when two such calls run at
once the process can hang forever with no CPU used (the gdb stacks: tests/xla_flags.py). Here Q is
the Gram-Schmidt orthonormalisation of the same Gaussian matrix (classical Gram-Schmidt run
twice, "twice is enough"), which is the same Q as LAPACK's after jax's sign fix (the QR with a
positive diagonal is unique), built from plain matmuls that batch like any other op.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp


def gram_schmidt(z: jax.Array) -> jax.Array:
    """Q [n, k] of the QR of z [n, k] (n >= k) whose R has a positive diagonal."""
    n, k = z.shape
    cols = jnp.arange(k)

    def column(j: jax.Array, q: jax.Array) -> jax.Array:
        v = jax.lax.dynamic_index_in_dim(z, j, axis=1, keepdims=False)
        earlier = (cols < j).astype(z.dtype)
        for _ in range(2):  # the second pass restores orthogonality lost in the first
            v = v - q @ ((q.T @ v) * earlier)
        return jax.lax.dynamic_update_index_in_dim(q, v / jnp.sqrt(jnp.sum(v * v)), j, axis=1)

    return jax.lax.fori_loop(0, k, column, jnp.zeros_like(z))


def orthogonal(scale: float = 1.0) -> Callable[..., jax.Array]:
    """`jax.nn.initializers.orthogonal(scale)` (columns on the last axis), LAPACK-free.

    Draws the same Gaussian matrix from the key as jax does, so the result equals jax's to
    float rounding.
    """
    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        n_rows, n_cols = math.prod(shape) // shape[-1], shape[-1]
        if n_rows == 0 or n_cols == 0:
            return jnp.zeros(shape, dtype)
        z = jax.random.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), dtype)
        q = gram_schmidt(z)
        q = q.T if n_rows < n_cols else q
        return jnp.asarray(scale, dtype) * jnp.reshape(q, shape)

    return init
