"""The rollout phase: `num_steps` joint steps of B environments under the current policy.

Environments are any `jaxenv.agents.MultiAgentEnv` with gymnax's auto-resetting `step` (for
levels, `jaxenv.wrappers.PoolReset`); the phase calls only `env.step`, `env.agent_obs` and
`env.outcome`. Every env carries its own key stream, so a sharded run (each device holding a
slice of the envs) draws exactly what one device would.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxenv.agents import AgentObs


@struct.dataclass
class EnvCarry:
    """The environments' side of the rollout carry (leading axis B)."""

    state: Any
    obs: Any
    key: jax.Array  # [B] per-env key stream
    ep_return: jax.Array  # [B] team return of the running episode so far
    ep_len: jax.Array  # [B] steps of the running episode so far


@struct.dataclass
class Transition:
    """One step of B envs: what the update phase needs (leading axes [T, B] once stacked)."""

    inp: AgentObs  # [B, A, ...]; inp.acting / inp.agent_mask are the policy / value masks
    action: jax.Array  # [B, A] int32, or [B, A, D] float32 (continuous)
    logp: jax.Array  # [B, A]
    value: jax.Array  # [B, A]
    reward: jax.Array  # [B, A]
    done: jax.Array  # [B]


def agent_inputs(env: Any, obs: Any, state: Any, with_global: bool) -> AgentObs:
    """`env.agent_obs` over a batch of envs."""
    return jax.vmap(lambda o, s: env.agent_obs(o, s, with_global))(obs, state)


def start(env: Any, env_params: Any, params_axes: Any, keys: jax.Array) -> EnvCarry:
    """First episodes of B envs; `keys` [B] become their key streams."""
    first = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, 0x5EED)
    obs, state = jax.vmap(env.reset, in_axes=(0, params_axes))(first, env_params)
    zeros = jnp.zeros(keys.shape[:1], jnp.float32)
    return EnvCarry(state=state, obs=obs, key=keys, ep_return=zeros,
                    ep_len=zeros.astype(jnp.int32))


def rollout(env: Any, network: Any, params: Any, envc: EnvCarry, env_params: Any,
            params_axes: Any, num_steps: int) -> tuple[EnvCarry, Transition, dict]:
    """`num_steps` steps: (carry, transitions [T, B, ...], per-step episode stats [T, ...]).

    Stats count the episodes that ended at each step: how many, how many with outcome 0 (the
    env's success or normal end), each outcome, and their summed lengths and team returns.
    """
    glob = network.uses_global
    n_out = len(env.outcomes)

    def step(c: EnvCarry, _):
        inp = agent_inputs(env, c.obs, c.state, glob)
        logits, value = network.apply(params, inp)
        ks = jax.vmap(lambda k: jax.random.split(k, 3))(c.key)
        action = jax.vmap(network.dist.sample)(ks[:, 1], logits)
        logp = network.dist.log_prob(logits, action)
        obs, state, reward, term, trunc, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, params_axes))(ks[:, 2], c.state, action, env_params)
        done = term | trunc
        ep_return = c.ep_return + jnp.sum(jnp.where(inp.agent_mask, reward, 0.0), -1)
        ep_len = c.ep_len + 1
        outcome = jax.vmap(env.outcome)(info, term, trunc)
        stats = {
            "episodes": done.sum(),
            "successes": (done & (outcome == 0)).sum(),
            "outcomes": jnp.sum(jax.nn.one_hot(outcome, n_out, dtype=jnp.int32)
                                * done[:, None], 0),
            "ep_len_sum": jnp.sum(jnp.where(done, ep_len, 0)),
            "return_sum": jnp.sum(jnp.where(done, ep_return, 0.0)),
        }
        tr = Transition(inp=inp, action=action, logp=logp, value=value, reward=reward,
                        done=done)
        c = EnvCarry(state=state, obs=obs, key=ks[:, 0],
                     ep_return=jnp.where(done, 0.0, ep_return), ep_len=jnp.where(done, 0, ep_len))
        return c, (tr, stats)

    envc, (traj, stats) = jax.lax.scan(step, envc, None, num_steps)
    return envc, traj, stats
