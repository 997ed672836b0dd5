"""The LAPACK-free orthogonal initializer: equal to jax's, orthonormal, and batched without any
LAPACK call (a batched `geqrf` on the CPU can deadlock XLA's thread pool:
tests/helpers/xla_flags.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jaxenv.mapf import Capacity, MAPFFrozenLake
from policy.network import ActorCritic, init_params
from policy.orthogonal import gram_schmidt, orthogonal

SHAPES = st.tuples(st.integers(1, 64), st.integers(1, 64))


@pytest.mark.slow
# every shape compiles anew: a tall, a wide and a one-element shape named, a few more drawn
@settings(max_examples=5, deadline=None)
@example(shape=(40, 7), seed=0, scale=1.414)
@example(shape=(7, 40), seed=1, scale=0.01)
@example(shape=(1, 1), seed=2, scale=1.0)
@given(shape=SHAPES, seed=st.integers(0, 2**31 - 1), scale=st.sampled_from([0.01, 1.0, 1.414]))
def test_equals_jax_orthogonal(shape, seed, scale):
    key = jax.random.PRNGKey(seed)
    ours = np.asarray(orthogonal(scale)(key, shape))
    theirs = np.asarray(jax.nn.initializers.orthogonal(scale)(key, shape))
    np.testing.assert_allclose(ours, theirs, atol=1e-5 * max(scale, 1.0))
    q = ours / scale
    small = min(shape)
    gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_gram_schmidt_is_a_qr_with_positive_diagonal():
    z = jax.random.normal(jax.random.PRNGKey(0), (40, 12))
    q = np.asarray(gram_schmidt(z))
    r = q.T @ np.asarray(z)
    np.testing.assert_allclose(np.tril(r, -1), 0.0, atol=1e-4)
    assert (np.diag(r) > 0).all()
    np.testing.assert_allclose(q @ r, np.asarray(z), atol=1e-4)


def test_a_batch_of_seeds_has_no_lapack_call_and_equals_one_at_a_time():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    init = lambda k: orthogonal(1.0)(k, (30, 16))  # noqa: E731
    hlo = jax.jit(jax.vmap(init)).lower(keys).as_text()
    assert "lapack" not in hlo.lower() and "custom_call" not in hlo
    batched = np.asarray(jax.vmap(init)(keys))
    for i in range(4):
        np.testing.assert_allclose(batched[i], np.asarray(init(keys[i])), atol=1e-6)
    assert not np.allclose(batched[0], batched[1])
    # jax's own initializer lowers to the LAPACK call this module avoids
    theirs = lambda k: jax.nn.initializers.orthogonal()(k, (30, 16))  # noqa: E731
    assert "lapack" in jax.jit(jax.vmap(theirs)).lower(keys).as_text().lower()


def test_the_networks_seed_batched_init_has_no_lapack_call():
    env = MAPFFrozenLake(Capacity(max_size=5, max_agents=2, max_steps=16, label_waits=False))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    for net in (ActorCritic(hidden=16), ActorCritic(hidden=16, mixer="attention")):
        hlo = jax.jit(jax.vmap(lambda k, net=net: init_params(net, env, k))).lower(keys)
        assert "lapack" not in hlo.as_text().lower()
