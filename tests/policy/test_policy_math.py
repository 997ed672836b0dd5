"""GAE and the PPO loss against values computed by hand on tiny arrays."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


@pytest.mark.slow
@pytest.mark.parametrize("torso,critic", [("mlp", "ippo"), ("conv", "mappo")])
def test_network_shares_parameters_across_agents(torso, critic):
    """Params made for 2 agent slots run on 5, and permuting agents permutes the outputs."""
    from jaxenv.agents import AgentObs
    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.network import ActorCritic, init_params

    net = ActorCritic(hidden=16, torso=torso, conv_features=4, critic=critic)
    env = MAPFFrozenLake(Capacity(max_size=6, max_agents=2))
    params = jax.jit(lambda k: init_params(net, env, k))(jax.random.PRNGKey(0))  # one compile
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


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@example(widths=[3], lead=[], seed=0)  # fewer kernel rows than columns
@example(widths=[5, 40, 1], lead=[2, 3], seed=1)  # more rows, three parts, two leading axes
@given(widths=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       lead=st.lists(st.integers(1, 4), min_size=0, max_size=2), seed=st.integers(0, 2**16))
def test_split_dense_is_dense_on_the_concatenation(widths, lead, seed):
    """The same parameters as `nn.Dense` on the concatenated parts (names, shapes, values at
    init), and the same output up to float summation order.

    Every example has new shapes, so it compiles the orthogonal initializer anew (seconds):
    the two explicit examples cover three parts, two leading axes and none, and kernels with
    fewer and with more rows than their 8 columns; four drawn examples vary them."""
    from flax import linen as nn

    from policy.network import SplitDense
    from policy.orthogonal import orthogonal

    keys = jax.random.split(jax.random.PRNGKey(seed), len(widths) + 2)
    parts = [jax.random.normal(k, (*lead, w)) for k, w in zip(keys[2:], widths)]
    whole = jnp.concatenate(parts, -1)
    split, dense = (SplitDense(8, kernel_init=orthogonal(1.4)),
                    nn.Dense(8, kernel_init=orthogonal(1.4)))
    p_split, p_dense = split.init(keys[0], parts), dense.init(keys[0], whole)
    chex.assert_trees_all_equal(p_split, p_dense)
    p = jax.tree.map(lambda x: x + jax.random.normal(keys[1], x.shape), p_dense)  # bias != 0
    np.testing.assert_allclose(split.apply(p, parts), dense.apply(p, whole), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.slow
def test_ppo_epochs_equals_a_plain_loop_over_minibatches():
    """Differential: the scanned update against a plain Python loop that, per epoch, splits
    a permutation of the time steps into minibatches and takes one clipped-PPO Adam step on
    each (counts from the minibatch's masks). Same parameters after two epochs."""
    import optax

    from jaxenv.agents import AgentObs
    from policy.network import ActorCritic
    from policy.ppo import Hparams
    from policy.rollout import Transition
    from policy.update import make_optimizer, ppo_epochs

    t, b, a = 8, 3, 2
    ks = jax.random.split(jax.random.PRNGKey(0), 8)
    mask = jnp.ones((t, b, a), bool)
    inp = AgentObs(view=jax.random.randint(ks[0], (t, b, a, 3, 3, 2), 0, 2).astype(jnp.uint8),
                   vec=jax.random.normal(ks[1], (t, b, a, 3)), agent_mask=mask,
                   acting=jax.random.bernoulli(ks[2], 0.8, (t, b, a)))
    traj = Transition(inp=inp, action=jax.random.randint(ks[3], (t, b, a), 0, 5),
                      logp=jnp.full((t, b, a), -1.6), value=jax.random.normal(ks[4], (t, b, a)),
                      reward=jnp.zeros((t, b, a)), done=jnp.zeros((t, b), bool))
    adv, target = jax.random.normal(ks[5], (t, b, a)), jax.random.normal(ks[6], (t, b, a))
    net = ActorCritic(hidden=8)
    hp = Hparams(update_epochs=2, num_minibatches=4, num_steps=t)
    tx = make_optimizer(1e-2, 0.5, 1e-5)
    params = jax.jit(net.init)(ks[7], jax.tree.map(lambda x: x[0], inp))  # one compile
    out, _, _ = ppo_epochs(net, tx, hp, params, tx.init(params), traj, adv, target,
                           jax.random.PRNGKey(3))

    @jax.jit  # one Adam step on one minibatch (compiled once: every minibatch has one shape)
    def step(p, opt, tr, ad, tg):
        lb = LossBatch(action=tr.action, old_logp=tr.logp, old_value=tr.value, adv=ad,
                       target=tg, pi_mask=tr.inp.acting, v_mask=tr.inp.agent_mask)

        def loss(q):
            logits, value = net.apply(q, tr.inp)
            return ppo_loss(logits, value, lb, n_pi=lb.pi_mask.sum(), n_v=lb.v_mask.sum(),
                            clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef)[0]

        upd, opt = tx.update(jax.grad(loss)(p), opt, p)
        return optax.apply_updates(p, upd), opt

    ref, opt = params, tx.init(params)
    for k in jax.random.split(jax.random.PRNGKey(3), hp.update_epochs):
        for idx in jax.random.permutation(k, t).reshape(hp.num_minibatches, -1):
            ref, opt = step(ref, opt, *jax.tree.map(lambda x, i=idx: x[i], (traj, adv, target)))
    chex.assert_trees_all_close(out, ref, rtol=1e-5, atol=1e-6)
    moved = jax.tree.map(lambda x, y: not np.allclose(x, y), out, params)
    assert any(jax.tree.leaves(moved))  # the comparison is not between two untouched copies
