"""Small pytree helpers for batches of environments (one home for each)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def broadcast(tree: Any, n: int) -> Any:
    """One unbatched pytree (e.g. a config) repeated n times along a new leading axis."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *jnp.shape(x))), tree)


def take(tree: Any, index: jax.Array | int) -> Any:
    """Row(s) `index` of every leaf of a batched pytree."""
    return jax.tree.map(lambda x: x[index], tree)


def stack(trees: list[Any]) -> Any:
    """Equal-shaped pytrees -> one pytree with a new leading axis."""
    if not trees:
        raise ValueError("stack needs at least one pytree")
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-row choice between two batched pytrees: `pred` [B] bool picks `on_true` rows.

    Leaves may have any trailing shape; an unbatched `pred` ([]) selects whole trees.
    """
    def pick(a: jax.Array, b: jax.Array) -> jax.Array:
        p = jnp.reshape(pred, jnp.shape(pred) + (1,) * (jnp.ndim(a) - jnp.ndim(pred)))
        return jnp.where(p, a, b)

    return jax.tree.map(pick, on_true, on_false)
