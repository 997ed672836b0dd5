"""Observations against a plain copy of the pre-packing code (`reference_obs.py`).

Random states: many agents, agents on the border and in the corners, inactive agent slots
(with arbitrary positions), boards smaller than the capacity, several view radii, and cells
shared by two agents or two goals. `get_obs`, `global_state` and what `agent_obs` hands the
network must equal the reference exactly, and the bit-packed views must unpack to the same
bytes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import Capacity, MAPFFrozenLake, MAPFState
from jaxenv.mapf.level import Level
from jaxenv.mapf.views import pack_rows, packable, unpack
from tests.jaxenv.mapf.reference_obs import ref_agent_obs, ref_get_obs, ref_global_state

# (max_size, max_agents, view_radius): radius 0, radius wider than the board, S = 32 with
# r = 5 (the headline case), and a capacity too large for packed views.
CAPS = ((5, 3, 0), (6, 4, 7), (8, 12, 2), (32, 64, 5), (12, 9, 3), (34, 6, 4))
ENVS = {c: MAPFFrozenLake(Capacity(max_size=c[0], max_agents=c[1], view_radius=c[2],
                                   max_steps=16, label_waits=False)) for c in CAPS}
# The same capacities with each level's obstacle and goal planes packed once (Level.rows).
ROWS = {c: MAPFFrozenLake(Capacity(max_size=c[0], max_agents=c[1], view_radius=c[2],
                                   max_steps=16, label_waits=False, static_rows=True))
        for c in CAPS if c[0] <= 32}


def random_states(env: MAPFFrozenLake, rng: np.random.Generator, batch: int) -> MAPFState:
    """`batch` random states of `env`'s capacity (batched pytree)."""
    s, a = env.cap.max_size, env.cap.max_agents
    sizes = rng.integers(max(2, s // 2), s + 1, batch)
    border = rng.random((batch, a, 2)) < 0.3  # push some agents to an edge
    pos = np.where(border, rng.integers(0, 2, (batch, a, 2)) * (sizes[:, None, None] - 1),
                   rng.integers(0, sizes[:, None, None], (batch, a, 2)))
    goals = rng.integers(0, sizes[:, None, None], (batch, a, 2))
    n_agents = rng.integers(1, a + 1, batch)
    inactive = np.arange(a)[None] >= n_agents[:, None]
    # Inactive slots hold junk anywhere on the capacity grid: they must show nothing.
    pos = np.where(inactive[..., None], rng.integers(0, s, (batch, a, 2)), pos)
    holes = rng.random((batch, s, s)) < rng.uniform(0.0, 0.5, (batch, 1, 1))
    holes &= (np.arange(s)[None, :, None] < sizes[:, None, None]) & \
        (np.arange(s)[None, None, :] < sizes[:, None, None])
    level = Level(holes=jnp.asarray(holes), starts=jnp.asarray(pos, jnp.int32),
                  goals=jnp.asarray(goals, jnp.int32), size=jnp.asarray(sizes, jnp.int32),
                  n_agents=jnp.asarray(n_agents, jnp.int32),
                  opt_makespan=jnp.full(batch, -1, jnp.int32),
                  opt_soc=jnp.full(batch, -1, jnp.int32),
                  needs_wait=jnp.full(batch, -1, jnp.int32))
    frozen = rng.random((batch, a)) < 0.3
    return MAPFState(time=jnp.zeros(batch, jnp.int32), level=level,
                     pos=jnp.asarray(pos, jnp.int32), tried=jnp.asarray(pos, jnp.int32),
                     frozen=jnp.asarray(frozen), cost=jnp.zeros((batch, a), jnp.int32),
                     step_limit=jnp.full(batch, 16, jnp.int32),
                     success=jnp.zeros(batch, bool), failed=jnp.zeros(batch, bool),
                     violations=jnp.zeros((batch, 4), jnp.int32))


def _assert_tree_equal(a, b) -> None:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(la, lb):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@functools.cache
def _observers(cap: tuple[int, int, int]):
    """The batched observers of one capacity, jitted once for all of its examples."""
    env, rows_env = ENVS[cap], ROWS.get(cap)  # no packed rows beyond 32 columns
    return (jax.jit(jax.vmap(env.get_obs)), jax.jit(jax.vmap(lambda s: ref_get_obs(env, s))),
            jax.jit(jax.vmap(env.observer.global_state)),
            jax.jit(jax.vmap(env.observer.packed_views)),
            rows_env and jax.jit(jax.vmap(rows_env.observer.packed_views)))


@pytest.mark.slow
@pytest.mark.parametrize("cap", CAPS, ids=lambda c: f"S{c[0]}A{c[1]}r{c[2]}")
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_observations_equal_the_reference(cap, seed):
    env = ENVS[cap]
    get_obs, ref_obs, global_state, packed_views, rows_packed_views = _observers(cap)
    state = random_states(env, np.random.default_rng(seed), 16)
    obs = get_obs(state)
    ref = ref_obs(state)
    for k in ("view", "goal_vec", "agent_mask", "at_goal", "acting"):
        x, y = getattr(obs, k), ref[k]
        assert x.shape == y.shape and x.dtype == y.dtype, k
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=k)
    glob = global_state(state)
    np.testing.assert_array_equal(np.asarray(glob),
                                  np.asarray(jax.vmap(lambda s: ref_global_state(env, s))(state)))
    if packable(env.cap.max_size, env.cap.view_radius):
        packed = packed_views(state)
        v = 2 * env.cap.view_radius + 1
        assert packed.shape == (16, env.cap.max_agents, v, 4) and packed.dtype == jnp.uint32
        np.testing.assert_array_equal(np.asarray(unpack(packed)), np.asarray(ref["view"]))
        # Packed from the level's stored rows: the same words.
        rows_env = ROWS[cap]
        with_rows = state.replace(level=rows_env.prepare_levels(state.level))
        assert with_rows.level.rows.shape == (16, 2, env.cap.max_size)
        np.testing.assert_array_equal(np.asarray(rows_packed_views(with_rows)),
                                      np.asarray(packed))


@pytest.mark.parametrize("with_global", [False, True])
@pytest.mark.parametrize("cap", [(8, 12, 2), (32, 64, 5)], ids=lambda c: f"S{c[0]}A{c[1]}")
def test_agent_obs_hands_the_network_the_same_input(cap, with_global):
    env = ENVS[cap]
    state = random_states(env, np.random.default_rng(7), 8)
    got = jax.jit(jax.vmap(lambda s: env.agent_obs(env.get_obs(s), s, with_global)))(state)
    want = jax.jit(jax.vmap(lambda s: ref_agent_obs(env, s, with_global)))(state)
    _assert_tree_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [False, True], ids=["packed_per_step", "static_rows"])
def test_observations_of_played_states_equal_the_reference(rows):
    """States reached by the rules (crowded, frozen agents, resets), not only drawn ones; with
    `static_rows` generated and auto-reset levels carry `Level.rows` and the packed views read
    them."""
    env = (ROWS if rows else ENVS)[(8, 12, 2)]
    cfg = env.default_params
    # Jitted (one compile each, not an eager dispatch per operation at every step).
    _, state = jax.jit(jax.vmap(env.reset, (0, None)))(jax.random.split(jax.random.key(0), 8),
                                                        cfg)
    step = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))
    ref_obs = jax.jit(jax.vmap(lambda s: ref_get_obs(env, s)))
    packed_views = jax.jit(jax.vmap(env.observer.packed_views))
    for t in range(6):
        k = jax.random.key(t + 1)
        act = jax.random.randint(k, (8, env.cap.max_agents), 0, env.num_actions)
        obs, state, *_ = step(jax.random.split(k, 8), state, act, cfg)
        assert (state.level.rows is not None) == rows
        ref = ref_obs(state)
        np.testing.assert_array_equal(np.asarray(obs.view), np.asarray(ref["view"]))
        np.testing.assert_array_equal(np.asarray(unpack(packed_views(state))),
                                      np.asarray(ref["view"]))


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=32), min_size=1, max_size=4))
def test_pack_rows_puts_column_c_in_bit_c(rows):
    """(Jitted: one compile per shape, where op by op each operation compiled on its own.)"""
    n = min(len(r) for r in rows)
    bits = np.array([r[:n] for r in rows], bool)
    want = [sum(1 << c for c in range(n) if row[c]) for row in bits]
    assert np.asarray(jax.jit(pack_rows)(jnp.asarray(bits))).tolist() == want


def test_packed_views_refuse_capacities_they_cannot_hold():
    env = ENVS[(34, 6, 4)]
    _, state = env.reset(jax.random.key(0), env.default_params)
    with pytest.raises(ValueError, match="packed views"):
        env.observer.packed_views(state)
