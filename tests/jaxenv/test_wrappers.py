"""Wrappers: level sampling (one auto-reset), gymnax clients on our env, single-agent view."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments.classic_control import cartpole
from gymnax.wrappers.purerl import LogWrapper
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.agents import MultiAgentEnv
from jaxenv.batching import take
from jaxenv.levels import env_pool_params, make_pool, stage_pool, take_rows
from jaxenv.mapf import Capacity, MAPFFrozenLake, make_config_space, make_level
from jaxenv.wrappers import AutoReset, PoolReset, SingleAgent, TeamReward, multi_agent

CAP = Capacity(max_size=4, max_agents=2, max_steps=8, label_waits=False)
ENV = MAPFFrozenLake(CAP)


@pytest.mark.slow
def test_log_wrapper_runs_on_the_team_reward_view_under_scan():
    """gymnax's LogWrapper keeps a scalar return in its carry: the team view gives it one."""
    env = LogWrapper(TeamReward(ENV))
    cfg = ENV.default_params
    _, state = env.reset(jax.random.key(0), cfg)

    def body(state, k):
        ka, ks = jax.random.split(k)
        _, state, r, term, trunc, info = env.step(ks, state, ENV.sample_actions(ka), cfg)
        return state, (r, term | trunc, info["returned_episode_returns"])

    _, (r, done, returned) = jax.lax.scan(body, state, jax.random.split(jax.random.key(1), 200))
    assert r.shape == (200,) and bool(done.any())
    # The logged return of each finished episode is the sum of its team rewards.
    r, done, returned = map(np.asarray, (r, done, returned))
    start = 0
    for t in np.flatnonzero(done):
        assert np.isclose(returned[t], r[start:t + 1].sum())
        start = t + 1


@pytest.mark.slow
def test_log_wrapper_over_a_batch_of_configs_with_a_pool():
    cs = ENV.config_space
    cfgs = cs.stack([cs.default(), dict(cs.default(), hole_ratio=[0.3, 0.3])])
    pool = stage_pool(ENV, jax.random.key(0), cfgs, 2, 8)
    params = env_pool_params(cfgs, pool, jnp.array([0, 1]), 2, 8)
    env = LogWrapper(TeamReward(PoolReset(ENV)))
    axes = params.in_axes()
    _, state = jax.vmap(env.reset, (0, axes))(jax.random.split(jax.random.key(1), 2), params)

    def body(state, k):
        acts = jax.random.randint(k, (2, CAP.max_agents), 0, 5)
        _, state, r, *_ = jax.vmap(env.step, (0, 0, 0, axes))(jax.random.split(k, 2), state,
                                                                acts, params)
        return state, r

    _, r = jax.lax.scan(body, state, jax.random.split(jax.random.key(2), 20))
    assert r.shape == (20, 2)


def test_auto_reset_draws_from_its_sampler():
    fixed = make_level(np.zeros((3, 3), bool), [(0, 0)], [(0, 2)], max_size=4, max_agents=2)
    env = AutoReset(ENV, lambda key, cfg: fixed)
    cfg = ENV.default_params
    _, state = env.reset(jax.random.key(0), cfg)
    step = jax.jit(env.step)  # one compile, not one per eager step
    for t in range(12):  # episodes end by violation or the limit; every restart is `fixed`
        _, state, *_ = step(jax.random.key(t), state, ENV.sample_actions(
            jax.random.key(50 + t)), cfg)
        assert np.array_equal(state.level.starts, fixed.starts)


@pytest.mark.slow
def test_env_step_is_the_auto_reset_wrapper():
    """MAPFFrozenLake.step is AutoReset(env).step: same keys, same states. (Both steps
    jitted: one compile each, not one per eager step.)"""
    cfg = ENV.default_params
    _, s0 = ENV.reset(jax.random.key(0), cfg)
    a, b = s0, s0
    env_step, auto_step = jax.jit(ENV.step), jax.jit(AutoReset(ENV).step)
    for t in range(20):
        act = ENV.sample_actions(jax.random.key(t))
        _, a, ra, *_ = env_step(jax.random.key(100 + t), a, act, cfg)
        _, b, rb, *_ = auto_step(jax.random.key(100 + t), b, act, cfg)
        assert jax.tree.all(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b))


def test_pool_params_need_building():
    params = make_pool(ENV, jax.random.key(0), ENV.default_params, 4)
    assert int(params.count) == 4 and params.pool.holes.shape[0] == 4


def test_a_static_flag_never_hides_a_dynamic_knob():
    assert make_config_space(6, 2, label_waits=True)["wait_ratio"].editable
    off = make_config_space(6, 2, label_waits=False)
    assert not off["wait_ratio"].editable
    assert "wait_ratio" not in off.json_schema()["properties"]
    assert "wait_ratio" not in ENV.config_space.json_schema()["properties"]


def test_single_agent_view_of_a_gymnax_env():
    env = multi_agent(cartpole.CartPole())
    assert isinstance(env, SingleAgent) and isinstance(env, MultiAgentEnv)
    assert multi_agent(ENV) is ENV and multi_agent(PoolReset(ENV)) is ENV
    params = env.default_params
    obs, state = env.reset(jax.random.key(0), params)
    inp = env.agent_obs(obs, state)
    assert inp.vec.shape == (1, 4) and inp.agent_mask.tolist() == [True]
    _, state, r, term, trunc, info = env.step(jax.random.key(1), state, jnp.array([1]), params)
    assert r.shape == (1,) and env.horizon == 500
    assert int(env.outcome(info, jnp.bool_(True), jnp.bool_(False))) == 1


# Jitted: one compile per example's pool size, where op by op each gather compiled on its own.
_take_rows, _take = jax.jit(take_rows), jax.jit(take)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 40), seed=st.integers(0, 2**31 - 1), batched=st.booleans())
def test_take_rows_equals_take_on_mixed_pools(p, seed, batched):
    """Packed row gathers (jaxenv.levels.take_rows) give exactly what per-leaf gathers give."""
    rng = np.random.default_rng(seed)
    pool = {"a": jnp.asarray(rng.normal(size=p), jnp.float32),
            "b": jnp.asarray(rng.normal(size=p), jnp.float32),
            "n": jnp.asarray(rng.integers(-5, 5, p), jnp.int32),
            "flag": jnp.asarray(rng.random(p) < 0.5),
            "grid": jnp.asarray(rng.integers(0, 3, (p, 4, 3)), jnp.int8),
            "nested": {"c": jnp.asarray(rng.normal(size=p), jnp.float32)}}
    index = jnp.asarray(rng.integers(0, p, 7 if batched else ()), jnp.int32)
    got, want = _take_rows(pool, index), _take(pool, index)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    under_vmap = jax.vmap(lambda i: _take_rows(pool, i))(jnp.atleast_1d(index))
    batch = _take(pool, jnp.atleast_1d(index))
    for g, w in zip(jax.tree.leaves(under_vmap), jax.tree.leaves(batch)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
