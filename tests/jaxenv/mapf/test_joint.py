"""The JAX joint-state BFS against a plain-Python exact search on random two-agent levels."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import solve_pair
from tests.jaxenv.mapf.plain_mapf import needs_wait, optimal_makespan, optimal_soc

S = 6
_solve = jax.jit(jax.vmap(solve_pair))


def _instances(seed: int, count: int):
    rng = np.random.default_rng(seed)
    frees, cells = [], []
    for _ in range(count):
        n = int(rng.integers(2, S + 1))
        free = np.zeros((S, S), bool)
        free[:n, :n] = rng.random((n, n)) > rng.uniform(0.0, 0.45)
        picks = rng.choice(n * n, 4, replace=False)
        rc = [(int(p // n), int(p % n)) for p in picks]
        for r, c in rc:
            free[r, c] = True
        frees.append(free)
        cells.append(rc)
    return np.stack(frees), np.asarray(cells, np.int32)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_solve_pair_matches_plain_search(seed):
    frees, cells = _instances(seed, 60)
    out = jax.device_get(_solve(jnp.asarray(frees), *[jnp.asarray(cells[:, i]) for i in range(4)]))
    for i in range(len(frees)):
        s0, g0, s1, g1 = (tuple(c) for c in cells[i])
        args = ((~frees[i]).tolist(), [s0, s1], [g0, g1])
        soc = optimal_soc(*args)
        where = f"instance {i}: {args}"
        assert bool(out.solvable[i]) == (soc is not None), where
        if soc is None:
            continue
        assert int(out.soc[i]) == soc, where
        assert int(out.makespan[i]) == optimal_makespan(*args), where
        assert bool(out.needs_wait[i]) == needs_wait(*args), where


def test_known_cases():
    free = np.zeros((S, S), bool)
    free[0, :3] = True
    swap = [jnp.array(c) for c in ((0, 0), (0, 2), (0, 2), (0, 0))]
    out = solve_pair(jnp.asarray(free), *swap)
    assert not bool(out.solvable)  # a one-wide corridor swap is impossible
    free[1, 1] = True  # a side pocket: one agent ducks in and the other must wait for it
    out = solve_pair(jnp.asarray(free), *swap)
    assert bool(out.solvable) and int(out.soc) == 7 and int(out.makespan) == 4
    assert bool(out.needs_wait)
    open3 = np.zeros((S, S), bool)
    open3[:3, :3] = True  # on an open 3x3 a detour is as cheap as waiting: no wait needed
    out = solve_pair(jnp.asarray(open3), *swap)
    assert int(out.soc) == 6 and not bool(out.needs_wait)
