"""The trainee contract beyond MAPF: the same `make_train` learns CartPole-v1 whose physics
is a config pytree, each env with its own config values, with no recompilation."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxenv.control import CartPole
from policy import ActorCritic, Hparams, check_finite, make_train

HP = Hparams(num_envs=32, num_steps=128, num_updates=10, update_epochs=4, num_minibatches=4,
             lr=2.5e-3, ent_coef=0.0)
STAGES = 12  # 12 x 10 updates x 32 envs x 128 steps = 491,520 env steps


@pytest.fixture(scope="module")
def setup():
    env = CartPole()
    return env, env.config_space, make_train(env, ActorCritic(num_actions=2), HP)


def test_derived_physics_follow_the_knobs(setup):
    _, cs, _ = setup
    p = cs.to_config(dict(cs.default(), masscart=2.0, masspole=0.3, length=0.8))
    assert np.isclose(p.total_mass, 2.3) and np.isclose(p.polemass_length, 0.24)
    assert all(np.asarray(x).dtype in (np.float32, np.int32) for x in jax.tree.leaves(p))
    assert "tau" not in cs.json_schema()["properties"]  # the integration step is a rule


@pytest.mark.slow
def test_ppo_learns_cartpole_with_per_env_physics(setup):
    env, cs, tr = setup
    base = cs.default()
    cfgs = cs.stack([base, dict(base, gravity=12.0), dict(base, length=0.7),
                     dict(base, force_mag=12.0, masspole=0.2)])  # 8 envs per config
    runner = tr.init(jax.random.PRNGKey(0))
    for i in range(STAGES):
        runner, metrics = tr.train_stage(runner, cfgs, jax.random.PRNGKey(100 + i))
        check_finite(metrics)
    res = tr.evaluate(runner.params, cfgs, jax.random.PRNGKey(7), n_per_config=16)
    assert res.rates()["return"] > 400, res.rates()
    compiled = tr.train_stage._cache_size()
    other = cs.stack([dict(base, gravity=g, length=ln) for g, ln in
                      ((6.0, 0.3), (15.0, 0.9), (9.8, 1.2), (18.0, 0.5))])
    tr.train_stage(runner, other, jax.random.PRNGKey(1))
    assert tr.train_stage._cache_size() == compiled == 1


def test_physics_knobs_change_trajectories(setup):
    env, cs, _ = setup
    base = cs.default()
    key = jax.random.PRNGKey(3)
    finals = []
    for v in (base, dict(base, gravity=15.0), dict(base, length=1.0), dict(base, masspole=0.5),
              dict(base, masscart=2.0), dict(base, force_mag=20.0)):
        p = cs.to_config(v)
        _, s = env.reset(key, p)
        for t in range(10):
            _, s, *_ = env.step_env(key, s, t % 2, p)
        finals.append(np.array([s.x, s.x_dot, s.theta, s.theta_dot]))
    for f in finals[1:]:
        assert not np.allclose(f, finals[0])
