"""NaN guard: a non-finite loss or gradient is never trained on, and always reported.

Inside the jitted update, `optax.apply_if_finite` turns a step with non-finite gradients
(a non-finite loss poisons the gradients first) into a no-op, and the update's metrics count
it (`nonfinite`). After each stage, `check_finite` raises on the Python side, so a run stops
with a message that says where, instead of continuing on a silently frozen policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class NonFiniteError(FloatingPointError):
    """A training stage met a non-finite loss, gradient or parameter."""


def all_finite(tree: Any) -> jax.Array:
    """[] bool: every floating leaf of `tree` is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def poison_if(bad: jax.Array, tree: Any) -> Any:
    """NaN every leaf when `bad`, so `apply_if_finite` skips the step."""
    return jax.tree.map(lambda g: jnp.where(bad, jnp.nan, g), tree)


def check_finite(metrics: Mapping[str, Any], where: str = "train_stage") -> None:
    """Raise `NonFiniteError` if a stage skipped any update or ended with bad parameters."""
    bad = np.asarray(metrics["nonfinite"])
    params_ok = np.asarray(metrics["params_finite"])
    if bad.sum() == 0 and params_ok.all():
        return
    first = np.argwhere(np.atleast_1d(bad) > 0)
    at = first[0].tolist() if len(first) else None
    loss = np.asarray(metrics.get("loss", np.nan))
    raise NonFiniteError(
        f"{where}: {int(bad.sum())} minibatch step(s) had a non-finite loss or gradient and "
        f"were skipped (first at update index {at}); parameters finite: "
        f"{bool(params_ok.all())}; last losses: {loss.ravel()[-3:].tolist()}. Check the "
        f"config's reward values and the learning rate.")
