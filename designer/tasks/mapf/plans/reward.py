"""The paper's GRPO reward for whole plans: accuracy from the jitted verifier plus a length term.

accuracy (``jaxenv.mapf.plans.verify.accuracy_reward``): 0 unless all eight checks pass; with
c = cost - optimal and c_max = 2 * optimal, 1 at c = 0, 1 - 0.7 c / c_max for 0 < c <= c_max,
0.3 beyond. length: 0 up to ``free_tokens`` (paper: 1,500), then linear down to -1 at
``max_tokens`` (paper: 4,096) and -1 beyond. total = w_acc * accuracy + w_len * length, the
weights moving linearly from (0.5, 0.5) at the first step to (0.8, 0.2) at the last
(``weights``). Replies are parsed in Python (bounded, linear: ``parse.py``); everything after
parsing is one jitted, batched call.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.parse import parse_plan, stack_plans
from jaxenv.mapf.plans.verify import verify_batch


class RewardConfig(BaseModel):
    """The paper's reward constants (defaults: the paper's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    free_tokens: int = Field(1500, ge=1, le=1_000_000,
                             description="Reply length (tokens) with no length penalty.")
    max_tokens: int = Field(4096, ge=2, le=1_000_000,
                            description="Reply length at which the length term reaches -1.")
    w_start: tuple[float, float] = Field((0.5, 0.5), description="(accuracy, length) weights "
                                         "at the first step; each in [0, 1].")
    w_end: tuple[float, float] = Field((0.8, 0.2), description="(accuracy, length) weights at "
                                       "the last step; each in [0, 1].")
    cost: str = Field("makespan", pattern="^(makespan|soc)$",
                      description="The cost the accuracy reward grades (makespan or soc).")
    horizon: int = Field(64, ge=8, le=4096, description="Longest plan (time steps) the "
                         "verifier reads; a longer path is unparsable (reward 0).")

    def model_post_init(self, _):
        if self.max_tokens <= self.free_tokens:
            raise ValueError("max_tokens must exceed free_tokens")
        for w in (*self.w_start, *self.w_end):
            if not 0.0 <= w <= 1.0:
                raise ValueError(f"reward weights must lie in [0, 1], got {w}")


def length_term(n_tokens: jax.Array, free_tokens: int, max_tokens: int) -> jax.Array:
    """0 up to ``free_tokens``, linear to -1 at ``max_tokens``, -1 beyond."""
    over = (jnp.asarray(n_tokens, jnp.float32) - free_tokens) / (max_tokens - free_tokens)
    return -jnp.clip(over, 0.0, 1.0)


def weights(progress: float | jax.Array, cfg: RewardConfig) -> jax.Array:
    """(w_acc, w_len) at training progress in [0, 1]: linear from ``w_start`` to ``w_end``."""
    p = jnp.clip(jnp.asarray(progress, jnp.float32), 0.0, 1.0)
    return (1 - p) * jnp.asarray(cfg.w_start, jnp.float32) + p * jnp.asarray(cfg.w_end,
                                                                            jnp.float32)


@jax.jit
def combine(accuracy: jax.Array, length: jax.Array, w: jax.Array) -> jax.Array:
    return w[0] * accuracy + w[1] * length


def accuracy(levels: Level, texts: Sequence[str], cfg: RewardConfig) -> np.ndarray:
    """The accuracy reward of each reply against its level (levels batched [B], B replies)."""
    max_agents = int(np.asarray(levels.starts).shape[-2])
    plans = stack_plans([parse_plan(t).to_arrays(max_agents, cfg.horizon) for t in texts])
    v = verify_batch(levels, plans.cells, plans.length, plans.parsed_ok, cost=cfg.cost)
    return np.asarray(v.reward)


def plan_reward(levels: Level, texts: Sequence[str], n_tokens: Sequence[int],
                progress: float, cfg: RewardConfig) -> dict[str, np.ndarray]:
    """accuracy, length and total reward of each reply (batched; see the module docstring)."""
    acc = jnp.asarray(accuracy(levels, texts, cfg))
    ln = length_term(jnp.asarray(n_tokens), cfg.free_tokens, cfg.max_tokens)
    total = combine(acc, ln, weights(progress, cfg))
    return {"accuracy": np.asarray(acc), "length": np.asarray(ln), "total": np.asarray(total)}
