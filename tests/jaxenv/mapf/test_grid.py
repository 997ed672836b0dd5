"""Grid utilities against plain Python: component labels on random maps and on maze-like maps,
where label propagation needs a round per cell of the longest corridor."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf.grid import components
from tests.jaxenv.mapf.plain_mapf import component_labels

_components = jax.jit(components)


def serpentine(rows: int, cols: int, gaps_right_first: bool) -> np.ndarray:
    """One corridor through the whole map: walls on odd rows with one gap at alternating ends."""
    free = np.ones((rows, cols), bool)
    for i, r in enumerate(range(1, rows, 2)):
        free[r, :] = False
        free[r, cols - 1 if (i % 2 == 0) == gaps_right_first else 0] = True
    return free


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 14), st.integers(1, 14), st.floats(0.0, 0.7), st.integers(0, 2**31 - 1))
def test_components_equal_plain_flood_fill_on_random_maps(rows, cols, holes, seed):
    free = np.random.default_rng(seed).random((rows, cols)) >= holes
    got = np.asarray(_components(free))
    assert got.tolist() == component_labels(free.tolist())


@settings(max_examples=12, deadline=None)
@given(st.integers(2, 32), st.integers(2, 32), st.booleans(), st.integers(0, 2**31 - 1),
       st.integers(0, 6))
def test_components_equal_plain_flood_fill_on_mazes(rows, cols, right_first, seed, cuts):
    """A serpentine corridor (one component, the longest possible path), sometimes cut into
    several components by a few walls."""
    free = serpentine(rows, cols, right_first)
    rng = np.random.default_rng(seed)
    for _ in range(cuts):
        free[rng.integers(rows), rng.integers(cols)] = False
    got = np.asarray(_components(free))
    want = component_labels(free.tolist())
    assert got.tolist() == want
    if cuts == 0:  # the whole corridor is one component, labelled by its first cell
        assert set(got[free].tolist()) == {0}
