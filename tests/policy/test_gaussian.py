"""Continuous actions: the Gaussian policy's math against a plain reference, a PPO run that
must learn a continuous bandit, and Pendulum (gymnax) through the same `make_train`."""

from __future__ import annotations

import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment, spaces
from gymnax.environments.classic_control import pendulum
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.config_space import ConfigSpace, Knob
from policy import ActorCritic, Hparams, check_finite, gaussian, make_train

floats = st.floats(-3, 3, allow_nan=False, width=32)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(floats, st.floats(-2, 1, width=32), floats), min_size=1, max_size=4))
def test_log_prob_and_entropy_match_the_textbook_formulas(rows):
    mean, log_std, a = (np.array(c, np.float32) for c in zip(*rows))
    p = jnp.concatenate([mean, log_std])
    sd = np.exp(log_std.astype(np.float64))
    ref_lp = np.sum(-0.5 * ((a - mean) / sd) ** 2 - np.log(sd * math.sqrt(2 * math.pi)))
    ref_h = np.sum(0.5 * np.log(2 * math.pi * math.e * sd ** 2))
    np.testing.assert_allclose(gaussian.log_prob(p, jnp.asarray(a)), ref_lp, rtol=1e-4,
                               atol=1e-3)
    np.testing.assert_allclose(gaussian.entropy(p), ref_h, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(gaussian.mode(p), mean)


def test_samples_have_the_distributions_moments():
    p = jnp.array([0.5, -1.0, np.log(0.3), np.log(2.0)], jnp.float32)
    x = jax.vmap(lambda k: gaussian.sample(k, p))(jax.random.split(jax.random.PRNGKey(0),
                                                                   20_000))
    np.testing.assert_allclose(x.mean(0), [0.5, -1.0], atol=0.05)
    np.testing.assert_allclose(x.std(0), [0.3, 2.0], rtol=0.05)


@struct.dataclass
class BanditState(environment.EnvState):
    target: jax.Array


@struct.dataclass
class BanditParams(environment.EnvParams):
    scale: jax.Array = struct.field(default_factory=lambda: jnp.float32(1.0))
    max_steps_in_episode: jax.Array = struct.field(default_factory=lambda: jnp.int32(1))


class Bandit(environment.Environment):
    """One-step episodes: observe a target in [-1, 1], get -(action - scale * target)^2."""

    config_space = ConfigSpace(
        [Knob(name="scale", kind="float", low=0.1, high=2.0, default=1.0,
              description="How far the best action is from the observed target.")],
        lambda v: BanditParams(scale=jnp.float32(v["scale"])))

    @property
    def default_params(self) -> BanditParams:
        return BanditParams()

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        reward = -jnp.sum(jnp.square(action - params.scale * state.target))
        state = state.replace(time=state.time + 1)
        return (self.get_obs(state), state, reward, jnp.bool_(True), {})

    def reset_env(self, key: jax.Array, params: Any):
        state = BanditState(time=0, target=jax.random.uniform(key, (), minval=-1, maxval=1))
        return self.get_obs(state), state

    def get_obs(self, state: Any, params: Any = None, key: Any = None) -> jax.Array:
        return jnp.array([state.target])

    def is_terminated(self, state: Any, params: Any) -> jax.Array:
        return state.time >= 1

    @property
    def num_actions(self) -> int:
        return 1

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-3.0, 3.0, (1,), jnp.float32)

    def observation_space(self, params: Any) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


@pytest.mark.slow
def test_ppo_learns_a_continuous_bandit():
    """The greedy action must follow the observed target (squared error far below chance)."""
    hp = Hparams(num_envs=64, num_steps=8, num_updates=20, update_epochs=4, num_minibatches=2,
                 lr=3e-3, ent_coef=0.0)
    tr = make_train(Bandit(), ActorCritic(action_dim=1, hidden=32), hp)
    runner = tr.init(jax.random.PRNGKey(0))
    cfg = Bandit.config_space.as_batch(Bandit.config_space.to_config())
    before = tr.evaluate(runner.params, cfg, jax.random.PRNGKey(1), n_per_config=512)
    for i in range(6):
        runner, metrics = tr.train_stage(runner, cfg, jax.random.PRNGKey(10 + i))
        check_finite(metrics)
    after = tr.evaluate(runner.params, cfg, jax.random.PRNGKey(1), n_per_config=512)
    err0, err1 = -float(before.rates()["return"]), -float(after.rates()["return"])
    assert err0 > 0.25 and err1 < 0.05 * err0, (err0, err1)   # chance: E[t^2] = 1/3
    log_std = runner.params["params"]["log_std"]
    assert float(log_std.mean()) < 0.0                          # exploration narrowed


def test_discrete_network_on_a_continuous_env_is_a_clear_error():
    with pytest.raises(ValueError, match="action_dim"):
        make_train(Bandit(), ActorCritic(num_actions=2), Hparams(num_envs=8, num_steps=4))


class Pendulum(pendulum.Pendulum):
    """gymnax's Pendulum-v1 with its mass as a knob (enough for the trainee contract)."""

    config_space = ConfigSpace(
        [Knob(name="m", kind="float", low=0.5, high=2.0, default=1.0, description="kg")],
        lambda v: pendulum.EnvParams(m=jnp.float32(v["m"])))


@pytest.mark.slow
def test_pendulum_trains_per_env_physics_and_records_float_actions():
    env = Pendulum()
    hp = Hparams(num_envs=8, num_steps=16, num_updates=2, num_minibatches=2)
    tr = make_train(env, ActorCritic(action_dim=1, hidden=16), hp)
    cfgs = env.config_space.stack([{"m": 1.0}, {"m": 2.0}])
    runner = tr.init(jax.random.PRNGKey(0))
    runner, metrics = tr.train_stage(runner, cfgs, jax.random.PRNGKey(1))
    check_finite(metrics)
    res = tr.evaluate(runner.params, cfgs, jax.random.PRNGKey(2), n_per_config=2)
    chex.assert_shape(res.actions, (4, 200, 1, 1))
    assert res.actions.dtype == jnp.float32
    assert np.isfinite(np.asarray(res.metrics["return"])).all()
