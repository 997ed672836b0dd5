"""The shared actor-critic: one set of weights for every agent slot.

Parameter sharing makes the network independent of the agent count: it maps one agent's input
(`jaxenv.agents.AgentObs`: an optional local image `view` and a feature vector `vec`) to action
logits (or a Gaussian's parameters) and a value, so a policy trained with 2 agents runs on
levels with 3, 4 or 5. The environment decides what the input holds; nothing here knows the
task. Its options (critic, action mask, attention across agents, continuous heads, observation
normalisation, separate critic, conv torso) and why each exists: docs/trainee.md, "The network".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from jaxenv.agents import AgentObs
from policy import categorical, gaussian
from policy import obs_norm as obsnorm
from policy.mixer import AgentAttention
from policy.orthogonal import orthogonal

Critic = Literal["ippo", "mappo"]
MASKED_LOGIT = -1e9
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # a state-dependent log std stays in this range
Torso = Literal["mlp", "conv"]
Mixer = Literal["none", "attention"]


class SplitDense(nn.Module):
    """`nn.Dense` on the concatenation of `parts`, computed without building it.

    Each part multiplies its own rows of one kernel ([sum of part widths, features]: the
    parameters, names and initialisation `nn.Dense` would have, so checkpoints load either
    way); the result differs from the concatenated product only by float summation order.
    Why: on XLA's CPU backend, concatenating a float copy of every agent's view with its
    feature vector cost more than the layer's product (docs/experiments/throughput.md, "The
    PPO stage at this size").
    """

    features: int
    kernel_init: Callable[..., jax.Array] = nn.initializers.lecun_normal()
    bias_init: Callable[..., jax.Array] = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, parts: Sequence[jax.Array]) -> jax.Array:
        widths = [p.shape[-1] for p in parts]
        kernel = self.param("kernel", self.kernel_init, (sum(widths), self.features),
                            jnp.float32)
        bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
        rows = np.cumsum([0, *widths])
        return sum(p @ kernel[lo:hi] for p, lo, hi in zip(parts, rows[:-1], rows[1:])) + bias


class ActorCritic(nn.Module):
    """Per-agent policy output and values [..., A] from an `AgentObs`.

    The policy output is logits [..., A, num_actions] (discrete) or the Gaussian's packed
    parameters [..., A, 2 * action_dim] (continuous, `action_dim > 0`).
    """

    num_actions: int = 5
    action_dim: int = 0
    hidden: int = 64
    torso: Torso = "mlp"
    conv_features: int = 16
    critic: Critic = "ippo"
    mask_actions: bool = False
    mixer: Mixer = "none"
    mixer_heads: int = 4
    mixer_radius: float | None = None
    obs_norm: bool = False
    separate_critic: bool = False
    state_std: bool = False
    log_std_init: float = 0.0

    @property
    def dist(self) -> Any:
        """The action distribution's module (sample, log_prob, entropy, mode)."""
        return gaussian if self.action_dim > 0 else categorical

    @property
    def uses_global(self) -> bool:
        return self.critic == "mappo"

    @nn.compact
    def __call__(self, x: AgentObs) -> tuple[jax.Array, jax.Array]:
        if self.critic not in ("ippo", "mappo") or self.torso not in ("mlp", "conv"):
            raise ValueError(f"unknown critic/torso {self.critic!r}/{self.torso!r}")
        if self.mixer not in ("none", "attention"):
            raise ValueError(f"unknown mixer {self.mixer!r} (none | attention)")
        feats = []
        if x.view is not None:
            v = x.view.astype(jnp.float32)
            if self.torso == "conv":
                v = nn.relu(nn.Conv(self.conv_features, (3, 3), name="conv0")(v))
                v = nn.relu(nn.Conv(self.conv_features, (3, 3), name="conv1")(v))
            feats.append(v.reshape(*v.shape[:-3], -1))
        vec = x.vec.astype(jnp.float32)
        if self.obs_norm:
            zero = obsnorm.init(vec.shape[-1])
            stats = {k: jax.lax.stop_gradient(self.variable(obsnorm.OBS_NORM, k,
                                                            lambda v=v: v).value)
                     for k, v in zero.items()}
            vec = obsnorm.normalize(stats, vec)
        feats.append(vec)
        ortho = orthogonal
        h = nn.relu(SplitDense(self.hidden, kernel_init=ortho(np.sqrt(2)), name="torso0")(feats))
        if self.mixer == "attention":
            h = AgentAttention(heads=self.mixer_heads, radius=self.mixer_radius,
                               name="mixer")(h, x.agent_mask, x.pos)
        h = nn.relu(nn.Dense(self.hidden, kernel_init=ortho(np.sqrt(2)), name="torso1")(h))
        if self.action_dim > 0:
            if self.mask_actions:
                raise ValueError("mask_actions applies to discrete actions only")
            mean = nn.Dense(self.action_dim, kernel_init=ortho(0.01), name="pi")(h)
            if self.state_std:  # brax's choice: the torso sets the spread per state
                log_std = nn.Dense(self.action_dim, kernel_init=ortho(0.01),
                                   bias_init=nn.initializers.constant(self.log_std_init),
                                   name="log_std_head")(h)
                log_std = jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
            else:
                log_std = self.param("log_std", nn.initializers.constant(self.log_std_init),
                                     (self.action_dim,))
            logits = jnp.concatenate([mean, jnp.broadcast_to(log_std, mean.shape)], -1)
        else:
            logits = nn.Dense(self.num_actions, kernel_init=ortho(0.01), name="pi")(h)
        if self.mask_actions:
            if x.action_mask is None:
                raise ValueError("mask_actions needs AgentObs.action_mask (this environment "
                                 "does not provide one)")
            logits = jnp.where(x.action_mask, logits, MASKED_LOGIT)
        if self.critic == "mappo":
            if x.glob is None:
                raise ValueError("the MAPPO critic needs AgentObs.glob (the env builds it with "
                                 "agent_obs(..., with_global=True))")
            g = x.glob.astype(jnp.float32)
            g = g.reshape(*g.shape[:-3], -1)
            g = nn.relu(nn.Dense(self.hidden, kernel_init=ortho(np.sqrt(2)), name="glob0")(g))
            g = jnp.broadcast_to(g[..., None, :], (*h.shape[:-1], g.shape[-1]))
            c = jnp.concatenate([h, g], -1)
            c = nn.relu(nn.Dense(self.hidden, kernel_init=ortho(np.sqrt(2)), name="critic0")(c))
        else:
            c = h
        if self.separate_critic:  # the value's own torso: its gradients leave the policy's alone
            if self.critic == "mappo" or self.mixer != "none":
                raise ValueError("separate_critic is for the plain ippo critic without a mixer")
            c = nn.relu(SplitDense(self.hidden, kernel_init=ortho(np.sqrt(2)),
                                   name="vtorso0")(feats))
            c = nn.relu(nn.Dense(self.hidden, kernel_init=ortho(np.sqrt(2)), name="vtorso1")(c))
        value = nn.Dense(1, kernel_init=ortho(1.0), name="v")(c)[..., 0]
        return logits, value


def dummy_obs(env: Any, with_global: bool) -> AgentObs:
    """A zero `AgentObs` of one env's shapes, read off `env.reset` without running it."""
    def first(key: jax.Array) -> AgentObs:
        obs, state = env.reset(key, env.default_params)
        return env.agent_obs(obs, state, with_global)

    shapes = jax.eval_shape(first, jax.random.PRNGKey(0))
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def init_params(network: ActorCritic, env: Any, key: jax.Array) -> Any:
    """Parameters for `network` on `env`'s agent inputs."""
    return network.init(key, dummy_obs(env, network.uses_global))
