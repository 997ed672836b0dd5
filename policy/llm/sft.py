"""SFT warm start: cross-entropy on solver-optimal plans, a plain optax loop over a tunix model.

A 135M model may earn no reward at all under the paper's all-or-nothing accuracy, and GRPO
learns nothing from a group whose rewards are all equal; a few supervised steps on the
generator's exact plans (``Stage.answers``) give it something to sharpen. The loss is the
mean token cross-entropy of the reply (prompt tokens masked out), the update Adam on every
parameter (``nnx.Param``) of the model, in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from policy.llm import tunix_adapter as adapter
from policy.llm.stage import Stage


class SFTSettings(BaseModel):
    """Warm-start hyperparameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: int = Field(40, ge=1, le=1_000_000, description="Optimizer steps.")
    batch: int = Field(4, ge=1, le=4096, description="Examples per step.")
    learning_rate: float = Field(5e-5, gt=0.0, le=1.0, description="Adam learning rate.")
    max_len: int = Field(320, ge=8, le=32_768, description="Prompt + reply tokens (padded).")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Example order.")


def examples(tok: Any, stage: Stage, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [N, L], loss mask [N, L]) of prompt + optimal reply + eos, right-padded."""
    tok = adapter.fix_tokenizer(tok)
    rows, masks = [], []
    for messages, answer in zip(stage.messages, stage.answers, strict=True):
        p = tok(adapter.chat_prompt(tok, messages), add_special_tokens=False)["input_ids"]
        a = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids = (p + a)[:max_len]
        m = ([0] * len(p) + [1] * len(a))[:max_len]
        rows.append(ids + [tok.pad_token_id] * (max_len - len(ids)))
        masks.append(m + [0] * (max_len - len(m)))
    return np.asarray(rows, np.int32), np.asarray(masks, np.float32)


def loss_fn(model: Any, tokens: Any, mask: Any, pad_id: int) -> Any:
    """Mean cross-entropy of the masked next tokens."""
    import jax.numpy as jnp
    import optax

    x, y, m = tokens[:, :-1], tokens[:, 1:], mask[:, 1:]
    valid = x != pad_id
    length = x.shape[1]
    causal = jnp.tril(jnp.ones((length, length), bool))
    attn = causal[None] & valid[:, None, :]
    positions = jnp.cumsum(valid, axis=1) - 1
    logits, _ = model(x, positions, None, attn)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), y)
    return jnp.sum(ce * m) / jnp.maximum(jnp.sum(m), 1.0)


def warm_start(model: Any, tok: Any, stage: Stage, settings: SFTSettings) -> list[float]:
    """Fine-tune ``model`` in place on ``stage``'s optimal plans; returns the loss per step."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    adapter.fix_rope()
    tokens, mask = examples(tok, stage, settings.max_len)
    pad = int(tok.pad_token_id)
    opt = nnx.Optimizer(model, optax.adam(settings.learning_rate), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, t, m):
        loss, grads = nnx.value_and_grad(lambda mdl: loss_fn(mdl, t, m, pad))(model)
        opt.update(model, grads)
        return loss

    rng = np.random.default_rng(settings.seed)
    losses = []
    for _ in range(settings.steps):
        idx = rng.choice(len(tokens), settings.batch, replace=len(tokens) < settings.batch)
        losses.append(float(step(model, opt, jnp.asarray(tokens[idx]), jnp.asarray(mask[idx]))))
    return losses
