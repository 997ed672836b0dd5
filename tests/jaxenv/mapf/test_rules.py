"""The two conflict algorithms in `jaxenv.mapf.rules` agree (pairs vs grid counts).

Their meaning is pinned by the differential test against the plain-Python reference
(test_env_differential.py); here the grid path, used for many agents, must give the
same flags as the pair path on random joint moves, including off-grid targets.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import rules

# Jitted (the size static): one compile per function and shape, where op by op every example's
# new shapes compiled each operation on its own.
_cell_ids = jax.jit(rules._cell_ids, static_argnums=1)
_pair_conflicts = jax.jit(rules._pair_conflicts)
_grid_conflicts = jax.jit(rules._grid_conflicts, static_argnums=3)
_conflicts = jax.jit(rules._conflicts, static_argnums=3)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 12), st.integers(3, 8))
def test_pair_and_grid_conflicts_agree(seed, agents, size):
    rng = np.random.default_rng(seed)
    agents = min(agents, size * size)
    cells = rng.choice(size * size, agents, replace=False)
    pos = np.stack([cells // size, cells % size], -1)
    # Crowd the moves: many agents head for a few cells so conflicts are common.
    tgt = pos + np.asarray(rules.DELTAS)[rng.integers(0, 5, agents)]
    active = jnp.asarray(rng.random(agents) < 0.8)
    pid = _cell_ids(jnp.asarray(pos), size)
    tid = _cell_ids(jnp.asarray(tgt), size)
    pv, pe = _pair_conflicts(pid, tid, active)
    gv, ge = _grid_conflicts(pid, tid, active, size)
    assert pv.tolist() == gv.tolist()
    assert pe.tolist() == ge.tolist()
    dv, de = _conflicts(pid, tid, active, size)
    assert dv.tolist() == pv.tolist() and de.tolist() == pe.tolist()


def test_grid_path_finds_a_swap_and_a_shared_target():
    pos = jnp.array([[0, 0], [0, 1], [2, 2], [2, 0]])
    tgt = jnp.array([[0, 1], [0, 0], [2, 1], [2, 1]])
    pid, tid = rules._cell_ids(pos, 3), rules._cell_ids(tgt, 3)
    v, e = rules._grid_conflicts(pid, tid, jnp.ones(4, bool), 3)
    assert v.tolist() == [False, False, True, True]
    assert e.tolist() == [True, True, False, False]
