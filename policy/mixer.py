"""Agents that see each other: one attention layer across the agents of an episode.

The per-agent MLP decides from its own local view; yielding at a corridor (the instances that
need a wait) is a joint decision. `AgentAttention` lets every agent read the others' torso
features once per step: agent i attends over the agents j of its episode (`agent_mask`; itself
included, so an agent alone still has a defined output), with the relative position
`pos_j - pos_i` added to keys and values when the environment provides `AgentObs.pos`.

Properties the tests check (`tests/policy/test_mixer.py`):
- permutation equivariance: shuffling the agent slots shuffles the outputs the same way;
- empty slots (agent_mask False) change nothing: a policy trained with 2 agents runs on 5;
- with `radius`, agents farther apart than `radius` (Chebyshev, in `pos` units) never see each
  other, which keeps execution decentralised among agents that cannot see each other.

Execution is centralised within the radius (the default, `radius=None`, is the whole episode):
the paper's trainee writes every agent's plan in one reply, so a joint plan is within its rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from policy.orthogonal import orthogonal

NEG = -1e9


class AgentAttention(nn.Module):
    """Residual multi-head attention over the agent axis: h [..., A, H] -> [..., A, H]."""

    heads: int = 4
    radius: float | None = None

    @nn.compact
    def __call__(self, h: jax.Array, agent_mask: jax.Array,
                 pos: jax.Array | None = None) -> jax.Array:
        width = h.shape[-1]
        if width % self.heads:
            raise ValueError(f"hidden width {width} is not divisible by heads={self.heads}")
        d = width // self.heads
        split = lambda x: x.reshape(*x.shape[:-1], self.heads, d)  # noqa: E731
        ortho = orthogonal
        q = split(nn.Dense(width, kernel_init=ortho(1.0), name="q")(h))      # [..., A, K, d]
        k = split(nn.Dense(width, kernel_init=ortho(1.0), name="k")(h))      # [..., A, K, d]
        v = split(nn.Dense(width, kernel_init=ortho(1.0), name="v")(h))      # [..., A, K, d]
        # pairwise terms [..., A(i), A(j), K, d]: keys and values of j as seen from i
        k = jnp.broadcast_to(k[..., None, :, :, :], (*h.shape[:-2], h.shape[-2], *k.shape[-3:]))
        v = jnp.broadcast_to(v[..., None, :, :, :], k.shape)
        allowed = agent_mask[..., None, :] & agent_mask[..., :, None]          # [..., A, A]
        if pos is not None:
            rel = pos[..., None, :, :] - pos[..., :, None, :]                 # [..., A, A, 2]
            k = k + split(nn.Dense(width, name="k_rel")(rel))
            v = v + split(nn.Dense(width, name="v_rel")(rel))
            if self.radius is not None:
                allowed = allowed & (jnp.abs(rel).max(-1) <= self.radius)
        elif self.radius is not None:
            raise ValueError("radius needs AgentObs.pos (this environment gives no positions)")
        eye = jnp.eye(h.shape[-2], dtype=bool)
        allowed = allowed | eye  # every agent sees itself: no all-masked softmax row
        score = jnp.einsum("...ikd,...ijkd->...ijk", q, k) / np.sqrt(d)
        score = jnp.where(allowed[..., None], score, NEG)
        weight = jax.nn.softmax(score, axis=-2)
        out = jnp.einsum("...ijk,...ijkd->...ikd", weight, v).reshape(h.shape)
        out = nn.Dense(width, kernel_init=ortho(np.sqrt(2)), name="out")(out)
        return h + nn.relu(out)
