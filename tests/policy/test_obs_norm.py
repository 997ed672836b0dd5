"""Observation normalisation: the running statistics against numpy over the concatenated
batches, the network reading them, the trainer updating them from each rollout, and the
statistics travelling with a checkpoint."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.agents import AgentObs
from policy import ActorCritic, Hparams, check_finite, checkpoint, make_train, obs_norm
from tests.policy.test_gaussian import Pendulum

shapes = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 3)), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(shapes, st.integers(1, 5), st.integers(0, 2**31 - 1), st.booleans())
def test_running_statistics_match_numpy_over_the_concatenated_batches(batches, feats, seed,
                                                                      masked):
    """Each batch's new shape compiles the update anew (most of an example's time): fifteen
    examples of up to six batches still mix masked and unmasked data, one to five features of
    very different scales and batch shapes from one row to forty rows of three agents."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.01, 100.0, feats)  # features of very different scales, off-centre
    shift = rng.uniform(-50.0, 50.0, feats)
    stats, seen = obs_norm.init(feats), []
    for rows, agents in batches:
        x = (rng.normal(size=(rows, agents, feats)) * scale + shift).astype(np.float32)
        mask = rng.random((rows, agents)) < 0.7 if masked else np.ones((rows, agents), bool)
        stats = jax.jit(obs_norm.update)(stats, jnp.asarray(x), jnp.asarray(mask))
        seen.append(x[mask])
    ref = np.concatenate(seen).astype(np.float64)
    assert float(stats["count"]) == len(ref)
    if not len(ref):
        return
    # compared in units of each feature's scale (float32 statistics, float64 reference)
    np.testing.assert_allclose(np.asarray(stats["mean"]) / scale, ref.mean(0) / scale,
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(obs_norm.variance(stats)) / scale ** 2,
                               ref.var(0) / scale ** 2, rtol=1e-3, atol=1e-3)


def test_normalize_is_the_identity_before_data_and_standardises_after():
    x = jnp.asarray([[1.0, -2.0], [3.0, 5.0]], jnp.float32)
    np.testing.assert_allclose(obs_norm.normalize(obs_norm.init(2), x), x)
    data = jax.random.normal(jax.random.PRNGKey(0), (4096, 2)) * jnp.array([0.1, 30.0]) + 7.0
    z = obs_norm.normalize(obs_norm.update(obs_norm.init(2), data), data)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-3)
    np.testing.assert_allclose(z.std(0), 1.0, rtol=1e-3)
    assert float(jnp.abs(obs_norm.normalize(obs_norm.update(obs_norm.init(1), jnp.zeros(
        (8, 1))), jnp.full((1, 1), 1e6))).max()) == obs_norm.CLIP  # clipped, never huge


def _obs(vec: jax.Array) -> AgentObs:
    one = jnp.ones(vec.shape[:-1], bool)
    return AgentObs(vec=vec, agent_mask=one, acting=one)


def test_the_network_reads_its_statistics_and_they_carry_no_gradient():
    on = ActorCritic(action_dim=1, hidden=16, obs_norm=True)
    x = _obs(jax.random.normal(jax.random.PRNGKey(1), (5, 1, 3)) * 20.0 + 4.0)
    v = on.init(jax.random.PRNGKey(0), x)
    assert set(v) == {"params", obs_norm.OBS_NORM}
    v = {**v, obs_norm.OBS_NORM: obs_norm.update(v[obs_norm.OBS_NORM], x.vec)}
    off = ActorCritic(action_dim=1, hidden=16)
    assert set(off.init(jax.random.PRNGKey(0), x)) == {"params"}  # default: nothing new
    want = off.apply({"params": v["params"]},
                     _obs(obs_norm.normalize(v[obs_norm.OBS_NORM], x.vec)))
    got = on.apply(v, x)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, want)
    g = jax.grad(lambda p: on.apply(p, x)[1].sum())(v)
    assert all(float(jnp.abs(leaf).max()) == 0.0 for leaf in jax.tree.leaves(
        g[obs_norm.OBS_NORM]))


@pytest.fixture(scope="module")
def trained():
    env = Pendulum()
    hp = Hparams(num_envs=8, num_steps=16, num_updates=3, num_minibatches=2, reward_scale=0.1)
    tr = make_train(env, ActorCritic(action_dim=1, hidden=16, obs_norm=True,
                                     separate_critic=True), hp)
    cfgs = env.config_space.stack([{"m": 1.0}, {"m": 2.0}])
    runner, metrics = tr.train_stage(tr.init(jax.random.PRNGKey(0)), cfgs, jax.random.PRNGKey(1))
    check_finite(metrics)
    return tr, cfgs, runner


def test_each_rollout_joins_the_statistics(trained):
    tr, _, runner = trained
    stats = runner.params[obs_norm.OBS_NORM]
    hp = tr.hparams
    assert float(stats["count"]) == hp.num_envs * hp.num_steps * hp.num_updates
    # Pendulum observes (cos, sin, angular velocity): the first two within [-1, 1]
    assert np.all(np.abs(np.asarray(stats["mean"][:2])) <= 1.0)
    assert np.all(np.asarray(obs_norm.variance(stats)) > 0.0)


def test_the_statistics_are_saved_and_restored_with_the_checkpoint(trained, tmp_path):
    tr, cfgs, runner = trained
    checkpoint.save(tmp_path, runner, 1)
    back = checkpoint.restore(tmp_path, tr.init(jax.random.PRNGKey(9)))
    for a, b in zip(jax.tree.leaves(back.params[obs_norm.OBS_NORM]),
                    jax.tree.leaves(runner.params[obs_norm.OBS_NORM]), strict=True):
        np.testing.assert_array_equal(a, b)
    r1 = tr.evaluate(runner.params, cfgs, jax.random.PRNGKey(2), n_per_config=2)
    r2 = tr.evaluate(back.params, cfgs, jax.random.PRNGKey(2), n_per_config=2)
    np.testing.assert_array_equal(r1.metrics["return"], r2.metrics["return"])


def test_family_defaults_and_the_cli_switch():
    import argparse

    from designer.cli import on_off
    from designer.settings import RunSettings
    from designer.stage_settings import TraineeSettings

    brax = RunSettings(env="brax:inverted_pendulum").trainee
    assert brax.obs_norm and brax.separate_critic and brax.state_std and brax.gamma == 0.97
    off = RunSettings(env="brax:inverted_pendulum", trainee={"obs_norm": False}).trainee
    assert not off.obs_norm and off.state_std  # one override keeps the family's other defaults
    assert RunSettings().trainee == TraineeSettings()  # MAPF: nothing new switched on
    assert not TraineeSettings().obs_norm and TraineeSettings().reward_scale == 1.0
    assert on_off("Off") is False and on_off("on") is True
    with pytest.raises(argparse.ArgumentTypeError):
        on_off("maybe")
