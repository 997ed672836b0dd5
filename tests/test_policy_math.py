"""GAE and the PPO loss against values computed by hand on tiny arrays."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from policy.gae import gae
from policy.loss import LossBatch, ppo_loss


def test_gae_hand_computed():
    # gamma 0.9, lambda 0.8; step 1 ends its episode (no bootstrap from V(s_2)).
    r = jnp.array([1.0, 0.0, 2.0])
    v = jnp.array([0.5, 0.2, 0.1])
    done = jnp.array([False, True, False])
    adv, target = gae(r, v, done, jnp.float32(0.4), 0.9, 0.8)
    # delta_2 = 2 + 0.9*0.4 - 0.1 = 2.26; A_2 = 2.26
    # delta_1 = 0 - 0.2 = -0.2 (done); A_1 = -0.2
    # delta_0 = 1 + 0.9*0.2 - 0.5 = 0.68; A_0 = 0.68 + 0.72*(-0.2) = 0.536
    np.testing.assert_allclose(adv, [0.536, -0.2, 2.26], rtol=1e-6)
    np.testing.assert_allclose(target, [1.036, 0.0, 2.36], rtol=1e-6)


def test_gae_batched_matches_columns_and_broadcasts_env_dones():
    key = jax.random.PRNGKey(0)
    t, b, a = 5, 3, 2
    k1, k2, k3, k4 = jax.random.split(key, 4)
    r = jax.random.normal(k1, (t, b, a))
    v = jax.random.normal(k2, (t, b, a))
    last = jax.random.normal(k3, (b, a))
    done = jax.random.bernoulli(k4, 0.3, (t, b))  # one flag per env, shared by its agents
    adv, target = gae(r, v, done, last, 0.99, 0.95)
    assert adv.shape == (t, b, a)
    for i in range(b):
        for j in range(a):
            ai, ti = gae(r[:, i, j], v[:, i, j], done[:, i], last[i, j], 0.99, 0.95)
            np.testing.assert_allclose(adv[:, i, j], ai, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(target[:, i, j], ti, rtol=1e-6, atol=1e-6)


def _batch(**over) -> LossBatch:
    # Samples 0 and 1 count; sample 2 is masked out with absurd values that must not matter.
    base = dict(
        action=jnp.array([0, 0, 1]),
        old_logp=jnp.log(jnp.array([0.5, 0.5, 1e-6])),
        old_value=jnp.array([0.0, 1.0, 0.0]),
        adv=jnp.array([1.0, 2.0, 1e6]),
        target=jnp.array([1.0, 1.0, 1e6]),
        pi_mask=jnp.array([True, True, False]),
        v_mask=jnp.array([True, True, False]),
    )
    base.update(over)
    return LossBatch(**base)


LOGITS = jnp.array([[0.0, 0.0], [math.log(3.0), 0.0], [0.0, 50.0]])  # p = .5/.5, .75/.25
VALUE = jnp.array([0.5, 2.0, -1e3])


def test_ppo_loss_hand_computed():
    total, aux = ppo_loss(LOGITS, VALUE, _batch(), n_pi=jnp.float32(2), n_v=jnp.float32(2),
                          clip_eps=0.2, vf_coef=0.5, ent_coef=0.01)
    # ratios 1 and 1.5 (clipped to 1.2): pg = (-1 - min(3, 2.4)) / 2 = -1.7
    assert aux["pg_loss"] == pytest.approx(-1.7, rel=1e-6)
    # values: unclipped errors .25, 1; clipped preds .2, 1.2 -> .64, .04; max -> .64, 1
    assert aux["v_loss"] == pytest.approx(0.5 * (0.64 + 1.0) / 2, rel=1e-6)
    ent = (math.log(2) - (0.75 * math.log(0.75) + 0.25 * math.log(0.25))) / 2
    assert aux["entropy"] == pytest.approx(ent, rel=1e-6)
    assert aux["clip_frac"] == pytest.approx(0.5)
    assert aux["approx_kl"] == pytest.approx((0.5 - math.log(1.5)) / 2, rel=1e-5)
    assert total == pytest.approx(-1.7 + 0.5 * 0.41 - 0.01 * ent, rel=1e-6)


def test_ppo_loss_without_value_clipping_and_with_global_counts():
    _, aux = ppo_loss(LOGITS, VALUE, _batch(), n_pi=jnp.float32(4), n_v=jnp.float32(8),
                      clip_eps=0.2, vf_coef=0.5, ent_coef=0.0, clip_value=False)
    # Sums divided by the counts given (what a sharded update passes: global counts).
    assert aux["pg_loss"] == pytest.approx(-3.4 / 4, rel=1e-6)
    assert aux["v_loss"] == pytest.approx(0.5 * (0.25 + 1.0) / 8, rel=1e-6)


def test_ppo_clip_stops_the_gradient_outside_the_trust_region():
    def pg(logits):
        return ppo_loss(logits, VALUE, _batch(), n_pi=jnp.float32(2), n_v=jnp.float32(2),
                        clip_eps=0.2, vf_coef=0.0, ent_coef=0.0)[1]["pg_loss"]

    g = jax.grad(pg)(LOGITS)
    assert jnp.all(g[1] == 0.0)  # ratio 1.5 > 1.2 with a positive advantage: clipped
    assert jnp.all(g[2] == 0.0)  # masked out
    # Sample 0 (ratio 1): d(-A * p_0 / p_old)/dlogits = -A * (onehot - p) / 2 samples.
    np.testing.assert_allclose(g[0], [-0.25, 0.25], rtol=1e-6)


@pytest.mark.parametrize("torso,critic", [("mlp", "ippo"), ("conv", "mappo")])
def test_network_shares_parameters_across_agents(torso, critic):
    """Params made for 2 agent slots run on 5, and permuting agents permutes the outputs."""
    from jaxenv.agents import AgentObs
    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.network import ActorCritic, init_params

    net = ActorCritic(hidden=16, torso=torso, conv_features=4, critic=critic)
    params = init_params(net, MAPFFrozenLake(Capacity(max_size=6, max_agents=2)),
                         jax.random.PRNGKey(0))
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(1), 3)
    mask = jnp.ones(5, bool)
    x = AgentObs(view=jax.random.randint(k1, (5, 7, 7, 4), 0, 2).astype(jnp.uint8),
                 vec=jax.random.normal(k2, (5, 3)), agent_mask=mask, acting=mask,
                 glob=jax.random.randint(k3, (6, 6, 4), 0, 2).astype(jnp.uint8)
                 if critic == "mappo" else None)
    logits, value = net.apply(params, x)
    assert logits.shape == (5, 5) and value.shape == (5,)
    perm = jnp.array([3, 0, 4, 1, 2])
    xp = x.replace(view=x.view[perm], vec=x.vec[perm])
    lp, vp = net.apply(params, xp)
    np.testing.assert_allclose(lp, logits[perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vp, value[perm], rtol=1e-5, atol=1e-6)
