"""The attention layer across agents (policy.mixer): reference, symmetry, masks, radius."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import Capacity, MAPFFrozenLake
from policy.mixer import AgentAttention
from policy.network import ActorCritic, dummy_obs, init_params

H, HEADS = 8, 2


def _layer(radius=None):
    m = AgentAttention(heads=HEADS, radius=radius)
    params = m.init(jax.random.PRNGKey(0), jnp.zeros((5, H)), jnp.ones(5, bool), jnp.zeros((5, 2)))
    return m, params


def _reference(params, h, mask, pos, radius=None):
    """The layer written as loops over agent pairs, in numpy."""
    p = jax.tree.map(np.asarray, params["params"])
    dense = lambda name, x: x @ p[name]["kernel"] + p[name]["bias"]  # noqa: E731
    a, d = h.shape[0], H // HEADS
    q, k, v = dense("q", h), dense("k", h), dense("v", h)
    out = np.zeros_like(h)
    for i in range(a):
        for head in range(HEADS):
            sl = slice(head * d, (head + 1) * d)
            scores, values = [], []
            for j in range(a):
                rel = pos[j] - pos[i]
                ok = (mask[i] and mask[j]) or i == j
                if radius is not None and np.abs(rel).max() > radius and i != j:
                    ok = False
                if not ok:
                    continue
                kk = k[j, sl] + dense("k_rel", rel)[sl]
                scores.append(q[i, sl] @ kk / np.sqrt(d))
                values.append(v[j, sl] + dense("v_rel", rel)[sl])
            w = np.exp(np.array(scores) - max(scores))
            out[i, sl] = (w / w.sum()) @ np.array(values)
    return h + np.maximum(dense("out", out), 0.0)


@functools.cache
def _jitted_layer(radius=None):
    """The layer (one per radius), its apply jitted once: every example has the same shapes,
    so the examples run one compiled program instead of re-running flax op by op."""
    m, params = _layer(radius)
    return jax.jit(m.apply), params


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.sampled_from([None, 0.25]))
def test_attention_matches_the_pairwise_reference(seed, n_real, radius):
    apply, params = _jitted_layer(radius)
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(5, H)).astype(np.float32)
    pos = rng.uniform(0, 1, size=(5, 2)).astype(np.float32)
    mask = np.arange(5) < n_real
    got = np.asarray(apply(params, h, mask, pos))
    np.testing.assert_allclose(got, _reference(params, h, mask, pos, radius), atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(st.permutations(list(range(5))), st.integers(0, 2**31 - 1))
def test_permuting_agents_permutes_outputs(perm, seed):
    apply, params = _jitted_layer()
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(5, H)).astype(np.float32)
    pos = rng.uniform(0, 1, size=(5, 2)).astype(np.float32)
    mask = rng.uniform(size=5) < 0.7
    perm = np.asarray(perm)
    out = np.asarray(apply(params, h, mask, pos))
    out_p = np.asarray(apply(params, h[perm], mask[perm], pos[perm]))
    np.testing.assert_allclose(out_p, out[perm], atol=1e-5)


def test_empty_slots_and_far_agents_change_nothing():
    m, params = _layer(radius=0.2)
    rng = np.random.default_rng(1)
    h = rng.normal(size=(5, H)).astype(np.float32)
    pos = np.array([[0.1, 0.1], [0.2, 0.15], [0.9, 0.9], [0.5, 0.5], [0.0, 0.0]], np.float32)
    mask = np.array([True, True, True, False, False])
    out = np.asarray(m.apply(params, h, mask, pos))
    h2 = h.copy()
    h2[3:] = rng.normal(size=(2, H))          # empty slots: anything
    h2[2] = rng.normal(size=H)                # agent 2 is beyond the radius of agents 0 and 1
    out2 = np.asarray(m.apply(params, h2, mask, pos))
    np.testing.assert_allclose(out2[:2], out[:2], atol=1e-6)
    assert not np.allclose(out2[2], out[2])   # ...but its own output follows its input
    h3 = h.copy()
    h3[1] = rng.normal(size=H)                # agent 1 is within agent 0's radius
    assert not np.allclose(np.asarray(m.apply(params, h3, mask, pos))[0], out[0])


def test_radius_without_positions_is_a_clear_error():
    m = AgentAttention(heads=HEADS, radius=0.5)
    with pytest.raises(ValueError, match="radius needs AgentObs.pos"):
        m.init(jax.random.PRNGKey(0), jnp.zeros((3, H)), jnp.ones(3, bool), None)


@pytest.mark.slow
@pytest.mark.parametrize("critic", ["ippo", "mappo"])
def test_a_policy_trained_with_two_agents_runs_with_five(critic):
    """Parameters do not depend on the agent count, and the other agents move the logits.

    The inits are jitted: one compiled program each, where op by op the orthogonal
    initializer's loop compiles once per kernel."""
    net = ActorCritic(hidden=16, mixer="attention", critic=critic)
    small = MAPFFrozenLake(Capacity(max_size=6, max_agents=2))
    big = MAPFFrozenLake(Capacity(max_size=6, max_agents=5))
    params = jax.jit(lambda k: init_params(net, small, k))(jax.random.PRNGKey(0))
    obs = dummy_obs(big, net.uses_global)
    rng = np.random.default_rng(0)
    obs = obs.replace(vec=jnp.asarray(rng.normal(size=obs.vec.shape), jnp.float32),
                      pos=jnp.asarray(rng.uniform(size=obs.pos.shape), jnp.float32),
                      agent_mask=jnp.ones(obs.agent_mask.shape, bool))
    logits, value = net.apply(params, obs)
    assert logits.shape == (5, 5) and value.shape == (5,)
    assert np.isfinite(np.asarray(logits)).all()
    moved = obs.replace(vec=obs.vec.at[4].set(obs.vec[4] + 1.0))
    logits2, _ = net.apply(params, moved)
    assert not np.allclose(np.asarray(logits2[0]), np.asarray(logits[0]))
    plain = ActorCritic(hidden=16, critic=critic)
    p2 = jax.jit(lambda k: init_params(plain, big, k))(jax.random.PRNGKey(0))
    l3, _ = plain.apply(p2, obs)
    l4, _ = plain.apply(p2, moved)
    np.testing.assert_allclose(np.asarray(l3[0]), np.asarray(l4[0]))  # without it: blind
