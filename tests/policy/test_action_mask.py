"""Action masking: a masked action is never chosen, and log-probabilities and entropy are those
of the distribution renormalised over the allowed actions; MAPF masks only moves off the grid."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import Capacity, MAPFFrozenLake, make_level
from jaxenv.mapf.rules import DOWN, LEFT, RIGHT, STAY, UP
from policy import categorical
from policy.network import ActorCritic, init_params
from policy.ppo import Hparams, make_train
from tests.helpers.mapf_policies import zero_params

ENV = MAPFFrozenLake(Capacity(max_size=5, max_agents=2, max_steps=24, label_waits=False))


def _inputs(key: jax.Array):
    """AgentObs of a random env state, with a random action mask (stay always allowed)."""
    k1, k2 = jax.random.split(key)
    obs, state = ENV.reset(k1, ENV.default_params)
    x = ENV.agent_obs(obs, state)
    mask = jax.random.bernoulli(k2, 0.5, x.action_mask.shape).at[:, STAY].set(True)
    return x.replace(action_mask=mask)


@jax.jit
def _masked_and_free(key: jax.Array, sample_key: jax.Array):
    """One example: the random masked inputs, the masked and unmasked logits on large random
    weights (so the unmasked logits differ a lot), and 256 sampled actions. Jitted once:
    every example has the same shapes, only the keys differ."""
    net = ActorCritic(hidden=8, mask_actions=True)
    x = _inputs(key)
    params = init_params(net, ENV, key)
    params = jax.tree.map(lambda p: 50 * jax.random.normal(key, p.shape), params)
    logits, _ = net.apply(params, x)
    free, _ = ActorCritic(hidden=8).apply(params, x)
    keys = jax.random.split(sample_key, 256)
    acts = jax.vmap(lambda k: categorical.sample(k, logits))(keys)  # [256, A]
    return x.action_mask, logits, free, acts


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_masked_actions_are_never_sampled_and_probabilities_renormalise(seed):
    mask, logits, free, acts = _masked_and_free(jax.random.PRNGKey(seed),
                                                jax.random.PRNGKey(seed + 1))
    mask = np.asarray(mask)
    assert mask[np.arange(acts.shape[1])[None, :], np.asarray(acts)].all()
    allowed = np.where(mask, np.asarray(free), -np.inf)
    p = np.where(mask, np.exp(allowed - allowed.max(-1, keepdims=True)), 0.0)
    p = p / p.sum(-1, keepdims=True)
    for a in range(5):
        got = categorical.log_prob(logits, jnp.full(mask.shape[0], a))
        want = np.where(p[:, a] > 0, np.log(np.maximum(p[:, a], 1e-30)), -np.inf)
        ok = mask[:, a] & (p[:, a] > 1e-6)
        np.testing.assert_allclose(np.asarray(got)[ok], want[ok], rtol=1e-4, atol=1e-4)
    ent = -np.sum(np.where(p > 0, p * np.log(np.maximum(p, 1e-30)), 0.0), -1)
    np.testing.assert_allclose(categorical.entropy(logits), ent, rtol=1e-4, atol=1e-4)


def test_mapf_masks_only_moves_off_the_grid():
    holes = np.zeros((3, 3), bool)
    holes[0, 1] = True  # a hole next to A0 stays choosable: a failure the engineer must see
    lv = make_level(holes, [(0, 0), (2, 2)], [(2, 0), (0, 2)], max_size=5, max_agents=2)
    obs, state = ENV.reset_to_level(jax.random.PRNGKey(0), lv, ENV.default_params)
    m = np.asarray(ENV.agent_obs(obs, state).action_mask)
    assert m[0, [STAY, DOWN, RIGHT]].all() and not m[0, [UP, LEFT]].any()
    assert m[1, [STAY, UP, LEFT]].all() and not m[1, [DOWN, RIGHT]].any()


def test_a_network_without_the_env_mask_says_so():
    x = _inputs(jax.random.PRNGKey(0)).replace(action_mask=None)
    params = zero_params(ActorCritic(hidden=8), ENV)  # any values: apply refuses the input
    with pytest.raises(ValueError, match="action_mask"):
        ActorCritic(hidden=8, mask_actions=True).apply(params, x)


@pytest.mark.slow
def test_training_with_masking_runs_and_never_leaves_the_grid():
    net = ActorCritic(hidden=16, mask_actions=True)
    hp = Hparams(num_envs=32, num_steps=16, num_updates=4, update_epochs=1, num_minibatches=2,
                 pool_size=64)
    trainer = make_train(ENV, net, hp)
    runner, metrics = trainer.train_stage(trainer.init(jax.random.PRNGKey(0)),
                                          ENV.default_params, jax.random.PRNGKey(1))
    s = trainer.summarize(metrics)
    assert np.isfinite(s["loss"]) and s["nonfinite"] == 0 and s["episodes"] > 100
    assert s["cause_oob"] == 0.0  # masked: no episode ever ends off the grid
    assert s["cause_hole"] > 0.0  # holes are not masked: a random policy still falls in
