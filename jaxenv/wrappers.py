"""Wrappers: where the next level comes from, and gymnax-shaped views of our environments.

Level sampling is a wrapper's job, not the environment's (JaxUED's shape): an environment with
levels offers `generate(key, cfg)` and `reset_to_level(key, level, cfg)`, and

- `AutoReset(env, sample_level)` starts every episode on a level from `sample_level(key, cfg)`
  (default: a fresh `env.generate`), the gymnax contract of `env.step`;
- `PoolReset(env)` starts every episode on a random level of a pre-generated pool carried in
  its params (`jaxenv.levels.PoolParams`), which keeps generation off the per-step hot path.

Both share `LevelReset.step`, the one auto-reset of the code base. Views:

- `TeamReward(env)`: one scalar reward per step (the sum over agents), for gymnax clients such
  as `gymnax.wrappers.purerl.LogWrapper` whose carry is a scalar;
- `SingleAgent(env)`: any gymnax environment with discrete actions as the one-agent case of the
  multi-agent protocol (`jaxenv.agents`), so `policy.make_train` trains it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces
from gymnax.wrappers.purerl import GymnaxWrapper

from jaxenv.agents import AgentObs, MultiAgentEnv
from jaxenv.batching import select
from jaxenv.levels import PoolParams


class LevelReset(GymnaxWrapper):
    """Auto-reset onto levels chosen by `sample_level` (subclasses say from where)."""

    #: `sample_level` reads its key's raw bits and never hashes it, so the level draw may share
    #: the reset's key (which the reset hashes): one key fewer to split per env step.
    level_from_key_bits: bool = False

    def sample_level(self, key: jax.Array, params: Any) -> Any:
        """The level of the next episode."""
        raise TypeError(f"{type(self).__name__} must define sample_level")

    def config(self, params: Any) -> Any:
        """The environment config inside `params` (the params themselves by default)."""
        return params

    @partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        params = self.default_params if params is None else params
        k_level, k_reset = (key, key) if self.level_from_key_bits else jax.random.split(key)
        return self._restart(k_level, k_reset, params)

    def _restart(self, k_level: jax.Array, k_reset: jax.Array, params: Any) -> tuple[Any, Any]:
        return self._env.reset_to_level(k_reset, self.sample_level(k_level, params),
                                        self.config(params))

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None):
        """gymnax's step: a finished episode restarts on a sampled level.

        The observation is built once, of the state that is kept; `info["final_observation"]`
        (the observation before the reset) costs nothing unless it is used. Keys: the reset
        computed under `vmap` runs every step, and on a classic-control task each threefry call
        costs about as much as the physics, so a level draw that reads raw key bits shares the
        reset's key (`level_from_key_bits`) and the step splits two keys, as gymnax's own
        `step` (a third key costs a classic-control step a measurable share of its rate).
        """
        params = self.default_params if params is None else params
        cfg = self.config(params)
        if self.level_from_key_bits:
            key_step, key_reset = jax.random.split(key)
            key_level = key_reset
        else:
            key_step, key_reset, key_level = jax.random.split(key, 3)
        obs_st, state_st, reward, terminated, info = self._env.step_env(key_step, state, action,
                                                                        cfg)
        truncated = self._env.is_truncated(state_st, cfg)
        _, state_re = self._restart(key_level, key_reset, params)
        next_state = select(terminated | truncated, state_re, state_st)
        info = {**info, "terminated": terminated, "truncated": truncated,
                "final_observation": obs_st}
        return (self._env.get_obs(next_state, cfg), next_state, reward, terminated, truncated,
                info)


class AutoReset(LevelReset):
    """Every episode on a level from `sample_level(key, cfg)` (default: `env.generate`)."""

    def __init__(self, env: Any, sample_level: Callable[[jax.Array, Any], Any] | None = None):
        super().__init__(env)
        self._sample = env.generate if sample_level is None else sample_level

    def sample_level(self, key: jax.Array, params: Any) -> Any:
        return self._sample(key, params)


class PoolReset(LevelReset):
    """Every episode on a random level of the pool in its params (`jaxenv.levels.PoolParams`).

    The level index is read from the reset key's raw bits (`PoolParams.sample`), which the
    reset itself only hashes: independent draws from one key."""

    level_from_key_bits = True

    @property
    def default_params(self) -> PoolParams:
        raise ValueError("PoolReset has no default params: build them with jaxenv.levels."
                         "make_pool (one config) or env_pool_params (a stage's config batch)")

    def config(self, params: PoolParams) -> Any:
        return params.cfg

    def sample_level(self, key: jax.Array, params: PoolParams) -> Any:
        return params.sample(key)


class TeamReward(GymnaxWrapper):
    """One scalar reward per step, the sum of the agents' rewards (inactive slots give 0)."""

    @partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        return self._env.reset(key, params)

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action,
                                                                         params)
        return obs, state, jnp.sum(reward, -1), terminated, truncated, info


class SingleAgent(GymnaxWrapper):
    """A gymnax env as a one-agent `jaxenv.agents.MultiAgentEnv`.

    Actions are `[1]` (discrete) or `[1, D]` (continuous: `action_dim = D`), rewards `[1]`,
    the observation is flattened into the agent's `vec`.
    `horizon` (the longest episode) defaults to the default params' `max_steps_in_episode`.
    Outcomes: `time_limit` (the episode ran to its limit) or `terminated` (the env ended it).
    """

    num_agents = 1
    outcomes = ("time_limit", "terminated")

    def __init__(self, env: Any, horizon: int | None = None):
        super().__init__(env)
        self.horizon = int(env.default_params.max_steps_in_episode if horizon is None
                           else horizon)
        space = env.action_space(env.default_params)
        # continuous (a Box): the action is a float vector of this size; 0: discrete
        self.action_dim = int(np.prod(space.shape)) if isinstance(space, spaces.Box) else 0

    @partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        return self._env.reset(key, params)

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action[0],
                                                                         params)
        return obs, state, jnp.reshape(reward, (1,)), terminated, truncated, info

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        obs, state, reward, terminated, info = self._env.step_env(key, state, action[0], params)
        return obs, state, jnp.reshape(reward, (1,)), terminated, info

    def agent_obs(self, obs: jax.Array, state: Any, with_global: bool = False) -> AgentObs:
        one = jnp.ones((1,), bool)
        return AgentObs(vec=jnp.reshape(obs, (1, -1)).astype(jnp.float32), agent_mask=one,
                        acting=one)

    def outcome(self, info: dict, terminated: jax.Array, truncated: jax.Array) -> jax.Array:
        return jnp.where(terminated, 1, 0).astype(jnp.int32)

    def episode_metrics(self, state: Any) -> dict[str, jax.Array]:
        return {}

    def trace(self, state: Any) -> None:
        return None


def has_levels(env: Any) -> bool:
    """Does `env` offer levels (`generate` and `reset_to_level`)?"""
    return hasattr(env, "generate") and hasattr(env, "reset_to_level")


def multi_agent(env: Any) -> Any:
    """`env` as a `jaxenv.agents.MultiAgentEnv` for a trainee.

    Level-sampling wrappers are taken off (the trainee decides where levels come from: a stage
    pool in training, fixed levels in evaluation); a single-agent gymnax env is wrapped in
    `SingleAgent`.
    """
    while isinstance(env, LevelReset):
        env = env._env
    return env if isinstance(env, MultiAgentEnv) else SingleAgent(env)
