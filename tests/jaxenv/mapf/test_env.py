"""The gymnax API of MAPF-FrozenLake: shapes, observations, auto-reset, no recompilation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.levels import make_pool
from jaxenv.mapf import Capacity, MAPFFrozenLake, make_level
from jaxenv.mapf.rules import DOWN, LEFT, RIGHT, STAY, UP
from jaxenv.wrappers import PoolReset

CAP = Capacity(max_size=6, max_agents=3, view_radius=2, max_steps=20, label_waits=False)
ENV = MAPFFrozenLake(CAP)
SPACE = ENV.config_space


def _level():
    holes = np.zeros((4, 4), bool)
    holes[1, 1] = True
    return make_level(holes, [(0, 0), (3, 3)], [(0, 2), (3, 0)], max_size=6, max_agents=3)


def test_reset_and_step_shapes_follow_gymnax():
    cfg = ENV.default_params
    obs, state = ENV.reset(jax.random.key(0), cfg)
    assert obs.view.shape == (3, 5, 5, 4) and obs.view.dtype == jnp.uint8
    assert obs.goal_vec.shape == (3, 2)
    out = ENV.step(jax.random.key(1), state, jnp.zeros(3, jnp.int32), cfg)
    obs, state, reward, terminated, truncated, info = out
    assert reward.shape == (3,) and terminated.shape == () and truncated.shape == ()
    assert {"success", "failed", "cause", "final_observation"} <= set(info)
    assert ENV.observer.global_state(state).shape == (6, 6, 4)
    assert bool(ENV.observation_space(cfg).contains(obs))
    assert bool(ENV.action_space(cfg).contains(ENV.sample_actions(jax.random.key(2))))


def test_local_view_channels():
    _, state = ENV.reset_to_level(jax.random.key(0), _level(), ENV.default_params)
    obs = ENV.get_obs(state)
    v = np.asarray(obs.view)
    # Agent 0 at (0, 0): rows/cols above and left are outside the grid -> obstacle.
    assert v[0, :2, :, 0].all() and v[0, :, :2, 0].all()
    assert v[0, 3, 3, 0] == 1  # the hole at (1, 1)
    assert v[0, 2, 4, 2] == 1 and v[0, ..., 2].sum() == 1  # own goal (0, 2) two cells right
    assert v[0, ..., 1].sum() == 0  # agent 1 at (3, 3) is outside the 5x5 window
    assert v[1, 0, 0, 1] == 0 and v[1, 2, 2, 1] == 0  # agent 1 does not see itself
    assert v[1, 2, 0, 2] == 0 and v[1, 2, 0, 3] == 0  # its goal (3, 0) is 3 cells away
    assert v[2].sum() == 0  # inactive agent slot
    np.testing.assert_allclose(obs.goal_vec[0], [0.0, 2 / 6])
    assert obs.agent_mask.tolist() == [True, True, False]


FREEZE = SPACE.to_config(dict(SPACE.default(), goal_rule="freeze"))


def test_success_freezes_agents_and_counts_costs():
    cfg = FREEZE
    _, s = ENV.reset_to_level(jax.random.key(0), _level(), cfg)
    for act in ([RIGHT, LEFT], [RIGHT, LEFT], [STAY, LEFT]):
        _, s, r, term, _ = ENV.step_env(jax.random.key(0), s, jnp.array(act + [0]), cfg)
    assert bool(s.frozen[0]) and int(s.cost[0]) == 2 and bool(term)
    assert bool(s.success) and r.tolist() == [1.0, 1.0, 0.0]
    assert s.cost[:2].tolist() == [2, 3]


def _play(cfg, moves):
    """Play joint moves of the two agents of `_level()`; (state, rewards [T, A], terminated)."""
    _, s = ENV.reset_to_level(jax.random.key(0), _level(), cfg)
    rewards, terms = [], []
    for act in moves:
        _, s, r, term, _ = ENV.step_env(jax.random.key(0), s, jnp.array(act + [0]), cfg)
        rewards.append(np.asarray(r))
        terms.append(bool(term))
    return s, np.stack(rewards), terms


# A0 (0,0) -> goal (0,2) in two steps, leaves it, comes back; A1 (3,3) -> goal (3,0) in three.
LEAVE_AND_RETURN = [[RIGHT, LEFT], [RIGHT, LEFT], [DOWN, STAY], [UP, LEFT]]


def test_leave_and_return_succeeds_under_the_plan_rule_and_costs_the_last_arrival():
    s, _, terms = _play(ENV.default_params, LEAVE_AND_RETURN)
    assert terms == [False, False, False, True] and bool(s.success)
    assert s.cost[:2].tolist() == [4, 4]  # A0's cost is its last arrival, not its first
    m = ENV.episode_metrics(s)
    assert bool(m["valid"]) and int(m["makespan"]) == 4 and int(m["soc"]) == 8


def test_leave_and_return_fails_under_the_freeze_rule():
    # Frozen on its goal, A0 ignores DOWN/UP: nobody moves A0 back, A1 arrives at step 4.
    s, _, terms = _play(FREEZE, LEAVE_AND_RETURN)
    assert bool(s.frozen[0]) and s.pos[0].tolist() == [0, 2]
    assert s.cost[:2].tolist() == [2, 4] and terms[-1]


def test_cost_rewards_are_the_verifiers_costs_paid_on_success():
    w = dict(SPACE.default(), success_reward=0.0, soc_cost=1.0)
    _, r, _ = _play(SPACE.to_config(w), LEAVE_AND_RETURN)
    assert not r[:-1].any() and r[-1, :2].tolist() == [-4.0, -4.0]
    w = dict(SPACE.default(), success_reward=1.0, soc_cost=0.1, makespan_cost=0.05)
    _, r, _ = _play(SPACE.to_config(w), [[RIGHT, LEFT], [RIGHT, LEFT], [STAY, LEFT]])
    np.testing.assert_allclose(r[-1, :2], [1 - 0.1 * 2 - 0.05 * 3, 1 - 0.1 * 3 - 0.05 * 3])
    _, r, terms = _play(SPACE.to_config(w), [[UP, STAY]])  # a violation: no cost at all
    assert terms == [True] and not r.any()


def test_goal_rule_is_a_knob_not_a_recompile():
    step = jax.jit(ENV.step_env)
    _, s = ENV.reset_to_level(jax.random.key(0), _level(), ENV.default_params)
    a = jnp.zeros(3, jnp.int32)
    step(jax.random.key(0), s, a, ENV.default_params)
    _, s2 = ENV.reset_to_level(jax.random.key(0), _level(), FREEZE)
    step(jax.random.key(0), s2, a, FREEZE)
    assert step._cache_size() == 1
    assert "goal_rule" not in SPACE.editable_names()


def test_fail_mode_reports_the_cause():
    cfg = ENV.default_params
    _, s = ENV.reset_to_level(jax.random.key(0), _level(), cfg)
    _, s, _, term, info = ENV.step_env(jax.random.key(0), s, jnp.array([UP, STAY, 0]), cfg)
    assert bool(term) and bool(s.failed) and int(info["cause"]) == 4  # out of bounds
    block = SPACE.to_config(dict(SPACE.default(), conflict_mode="block"))
    _, s = ENV.reset_to_level(jax.random.key(0), _level(), block)
    _, s, _, term, _ = ENV.step_env(jax.random.key(0), s, jnp.array([DOWN, STAY, 0]), block)
    _, s, _, term, info = ENV.step_env(jax.random.key(0), s, jnp.array([RIGHT, STAY, 0]), block)
    assert not bool(term) and s.pos[0].tolist() == [1, 0]  # the hole move was cancelled
    assert s.violations.tolist() == [0, 0, 1, 0]


@pytest.mark.slow
def test_truncation_at_step_limit_then_auto_reset_from_own_config():
    small = dict(SPACE.default(), step_limit_factor=1.0)
    small["size_weights"] = [1.0, 0.0, 0.0, 0.0]
    big = dict(SPACE.default(), step_limit_factor=1.0)
    big["size_weights"] = [0.0, 0.0, 0.0, 1.0]
    cfgs = SPACE.stack([small, big])
    step = jax.jit(jax.vmap(ENV.step))
    _, state = jax.jit(jax.vmap(ENV.reset))(jax.random.split(jax.random.key(0), 2), cfgs)
    assert state.level.size.tolist() == [3, 6]
    stay = jnp.zeros((2, 3), jnp.int32)
    seen_trunc = np.zeros(2, bool)
    for t in range(40):
        _, state, _, term, trunc, _ = step(jax.random.split(jax.random.key(t), 2), state, stay,
                                           cfgs)
        seen_trunc |= np.asarray(trunc)
        assert not bool(term.any())  # standing still never fails or succeeds
        assert state.level.size.tolist() == [3, 6]  # each env resets from its own config
    assert seen_trunc.all()


def test_no_recompile_across_100_configs():
    traces = []

    @jax.jit
    def run(key, state, cfg):
        traces.append(1)
        return ENV.step(key, state, jnp.ones(3, jnp.int32), cfg)

    rng = np.random.default_rng(0)
    _, state = ENV.reset(jax.random.key(0), ENV.default_params)
    for i in range(100):
        v, _ = SPACE.project({"slip_prob": float(rng.uniform(0, 0.5)),
                              "hole_ratio": list(rng.uniform(0, 0.6, CAP.n_sizes)),
                              "size_weights": list(rng.random(CAP.n_sizes) + 0.01),
                              "wait_ratio": list(rng.random(CAP.n_sizes))})
        v["conflict_mode"] = "block" if i % 2 else "fail"
        out = run(jax.random.key(i), state, SPACE.to_config(v))
        state = out[1]
    assert len(traces) == 1
    assert run._cache_size() == 1


def test_pool_env_resets_from_its_pool():
    """(Reset and step jitted: one compile each, where op by op every step compiled its loops
    again.)"""
    penv = PoolReset(ENV)
    params = make_pool(ENV, jax.random.key(0), ENV.default_params, 8)
    pool_holes = np.asarray(params.pool.holes)
    reset, step = jax.jit(penv.reset), jax.jit(penv.step)
    _, state = reset(jax.random.key(1), params)
    for t in range(30):
        _, state, *_ = step(jax.random.key(t), state, penv.sample_actions(
            jax.random.key(100 + t)), params)
        assert any(np.array_equal(state.level.holes, h) for h in pool_holes)
