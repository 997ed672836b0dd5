"""Training: learning, determinism, resume, no recompilation, the NaN guard, vmapped seeds.

One small trainer (1 agent, 5x5, no holes, two updates a stage) is compiled once and shared by
every test here, and the same trainer with a fresh pool at update 1 by the tests of `pool_every`:
every distinct trainer is a compile of its own.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.mapf import Capacity, MAPFFrozenLake
from policy import checkpoint
from policy.evaluate import Evaluator
from policy.guard import NonFiniteError, check_finite
from policy.network import ActorCritic
from policy.ppo import Hparams, make_train

pytestmark = pytest.mark.slow

CAP = Capacity(max_size=5, max_agents=1, max_steps=32, label_waits=False)
HP = Hparams(num_envs=64, num_steps=32, num_updates=2, update_epochs=2, num_minibatches=4,
             pool_size=256, lr=1e-3)
LEARN_STAGES = 20  # 20 x 2 updates x 64 envs x 32 steps = 81,920 env steps


@pytest.fixture(scope="module")
def setup():
    env = MAPFFrozenLake(CAP)
    cs = env.config_space
    vals = cs.default()
    vals.update(size_weights=[0.0, 0.0, 1.0], hole_ratio=[0.0] * 3, agent_weights=[1.0])
    net = ActorCritic()
    return env, cs, vals, net, make_train(env, net, HP)


def _equal(a, b) -> bool:
    return jax.tree.all(jax.tree.map(lambda x, y: bool(np.array_equal(x, y)), a, b))


def test_learns_single_agent_5x5(setup):
    env, cs, vals, net, tr = setup
    cfg = cs.to_config(vals)
    runner = tr.init(jax.random.PRNGKey(0))
    for i in range(LEARN_STAGES):
        runner, metrics = tr.train_stage(runner, cfg, jax.random.PRNGKey(100 + i))
        check_finite(metrics)
    assert int(runner.env_steps) == LEARN_STAGES * HP.num_updates * HP.steps_per_update
    assert int(runner.stage) == LEARN_STAGES
    res = Evaluator(env, net, record=False)(runner.params, cs.stack([vals]), jax.random.PRNGKey(7),
                                            n_per_config=512)
    assert res.rates()["valid"] >= 0.9, res.rates()


def test_determinism(setup):
    _, cs, vals, _, tr = setup
    cfg = cs.to_config(vals)
    out = [tr.train_stage(tr.init(jax.random.PRNGKey(3)), cfg, jax.random.PRNGKey(4))
           for _ in range(2)]
    assert _equal(out[0], out[1])
    other = tr.train_stage(tr.init(jax.random.PRNGKey(3)), cfg, jax.random.PRNGKey(5))
    assert not _equal(out[0][0].params, other[0].params)


def test_no_recompilation_when_config_values_change(setup):
    _, cs, vals, _, tr = setup
    runner = tr.init(jax.random.PRNGKey(0))
    runner, _ = tr.train_stage(runner, cs.to_config(vals), jax.random.PRNGKey(1))
    before = tr.train_stage._cache_size()
    changed = dict(vals, size_weights=[0.3, 0.3, 0.4], hole_ratio=[0.1, 0.2, 0.3],
                   slip_prob=0.1, step_limit_factor=3.0, shaping=0.05, conflict_mode="block")
    runner, m = tr.train_stage(runner, cs.to_config(changed), jax.random.PRNGKey(2))
    check_finite(m)
    assert tr.train_stage._cache_size() == before


def test_checkpoint_roundtrip_and_bit_identical_resume(setup, tmp_path):
    _, cs, vals, _, tr = setup
    cfg = cs.to_config(vals)
    k0, k1 = jax.random.PRNGKey(10), jax.random.PRNGKey(11)
    mid, _ = tr.train_stage(tr.init(jax.random.PRNGKey(9)), cfg, k0)
    straight, m_straight = tr.train_stage(mid, cfg, k1)

    checkpoint.save(tmp_path / "ckpt", mid, step=int(mid.stage))
    assert checkpoint.latest_step(tmp_path / "ckpt") == 1
    template = tr.init(jax.random.PRNGKey(123))  # other values, same structure
    restored = checkpoint.restore(tmp_path / "ckpt", template)
    assert jax.tree.structure(restored) == jax.tree.structure(mid)
    assert _equal(restored, mid)
    assert jax.tree.all(jax.tree.map(lambda x, y: x.dtype == y.dtype, restored, mid))

    compiled = tr.train_stage._cache_size()
    resumed, m_resumed = tr.train_stage(restored, cfg, k1)
    assert tr.train_stage._cache_size() == compiled  # resuming does not recompile
    assert _equal(resumed, straight)
    assert _equal(m_resumed, m_straight)


def test_nan_guard_skips_and_reports(setup):
    _, cs, vals, _, tr = setup
    runner, _ = tr.train_stage(tr.init(jax.random.PRNGKey(0)), cs.to_config(vals),
                               jax.random.PRNGKey(1))
    bad = cs.to_config(vals).replace(success_reward=jnp.float32(jnp.nan))
    after, metrics = tr.train_stage(runner, bad, jax.random.PRNGKey(2))
    assert int(np.sum(metrics["nonfinite"])) > 0
    assert _equal(after.params, runner.params)  # nothing was trained on the NaNs
    with pytest.raises(NonFiniteError, match="non-finite"):
        check_finite(metrics)

    poisoned = runner.replace(params=jax.tree.map(lambda x: x.at[..., 0].set(jnp.nan),
                                                  runner.params))
    _, metrics = tr.train_stage(poisoned, cs.to_config(vals), jax.random.PRNGKey(3))
    assert not bool(metrics["params_finite"])
    with pytest.raises(NonFiniteError):
        check_finite(metrics)


@pytest.fixture(scope="module")
def short(setup):
    """The trainer of `setup` (one pool a stage) and one with a fresh pool at update 1. Two
    updates a stage: comparisons of vmapped and single runs stay within float rounding over two
    updates (over ten, a rounding difference can flip a sampled action and the runs part by
    1e-3)."""
    env, _, _, net, tr = setup
    return tr, make_train(env, net, dataclasses.replace(HP, pool_every=1))


@pytest.mark.parametrize("fresh", [False, True], ids=["one_pool", "fresh_pool"])
def test_vmapped_seeds_match_single_runs(setup, short, fresh):
    _, cs, vals, _, _ = setup
    tr = short[fresh]
    cfg = cs.to_config(vals)
    keys = jax.random.split(jax.random.PRNGKey(42), 2)
    runners = jax.vmap(tr.init)(keys)
    out, metrics = tr.train_seeds(runners, cfg, keys)
    assert metrics["loss"].shape == (2, 2)
    for i in range(2):
        single, _ = tr.train_stage(tr.init(keys[i]), cfg, keys[i])
        got = jax.tree.map(lambda x, i=i: x[i], out.params)
        # Float rounding only (a batched matmul sums in another order), but Adam divides by
        # the gradient's own scale: where a gradient is ~0 its rounding noise becomes a step
        # of up to lr, so single elements may differ by lr per Adam step; the bulk does not,
        # and another seed differs by O(0.1) everywhere.
        diff = np.concatenate([np.abs(np.asarray(a) - np.asarray(b)).ravel() for a, b in
                               zip(jax.tree.leaves(got), jax.tree.leaves(single.params),
                                   strict=True)])
        adam_steps = HP.num_updates * HP.update_epochs * HP.num_minibatches
        assert diff.max() <= adam_steps * HP.lr * 1.01, diff.max()
        assert np.mean(diff > 1e-4) < 0.02 and diff.mean() < 1e-5, (np.mean(diff > 1e-4),
                                                                      diff.mean())
    other = np.concatenate([np.abs(np.asarray(a[0]) - np.asarray(a[1])).ravel()
                            for a in jax.tree.leaves(out.params)])
    assert other.mean() > 1e-2


def test_fresh_pool_every_k_updates(setup, short):
    """`pool_every`: a new pool inside a stage changes the data (so the params) and stays
    deterministic; the refresh is a cond on an unbatched flag, so it vmaps over seeds
    (`test_vmapped_seeds_match_single_runs[fresh_pool]`) and shards (test_policy_distributed)."""
    env, cs, vals, net, _ = setup
    one_pool, fresh = short
    cfg = cs.to_config(vals)
    key0, key = jax.random.PRNGKey(3), jax.random.PRNGKey(4)
    base, _ = one_pool.train_stage(one_pool.init(key0), cfg, key)
    a, m = fresh.train_stage(fresh.init(key0), cfg, key)
    b, _ = fresh.train_stage(fresh.init(key0), cfg, key)
    assert _equal(a, b)
    assert not _equal(base.params, a.params)
    assert m["loss"].shape == (2,) and int(np.sum(m["episodes"])) > 0
    with pytest.raises(ValueError, match="pool_every"):
        make_train(env, net, dataclasses.replace(HP, pool_every=-1)).train_stage(
            fresh.init(key0), cfg, key)


def test_linear_lr_anneals_across_stages_and_checkpoints(setup, short, tmp_path):
    """`anneal_updates`: the learning rate falls to 0 over that many updates counted across
    stages and through a checkpoint (Adam's count is in the saved state): the stage that ends
    the schedule still moves the params, the stage after it leaves them where they are."""
    env, cs, vals, net, _ = setup
    cfg = cs.to_config(vals)
    hp = dataclasses.replace(HP, anneal_updates=4)  # two stages of schedule
    tr = make_train(env, net, hp)
    first, _ = tr.train_stage(tr.init(jax.random.PRNGKey(5)), cfg, jax.random.PRNGKey(6))
    checkpoint.save(tmp_path / "ckpt", first, step=1)
    first = checkpoint.restore(tmp_path / "ckpt", tr.init(jax.random.PRNGKey(0)))
    second, _ = tr.train_stage(first, cfg, jax.random.PRNGKey(7))
    third, m = tr.train_stage(second, cfg, jax.random.PRNGKey(8))
    assert not _equal(first.params, second.params)
    assert _equal(second.params, third.params)
    assert float(np.mean(m["loss"])) != 0.0  # it did train: the rate, not the data, is 0
    # from the first step the rate is below the constant one: the same stage lands elsewhere
    const = short[False]
    c1, _ = const.train_stage(const.init(jax.random.PRNGKey(5)), cfg, jax.random.PRNGKey(6))
    assert not _equal(c1.params, first.params)
    with pytest.raises(ValueError, match="decay_steps"):
        make_train(env, net, dataclasses.replace(HP, anneal_updates=-1))
