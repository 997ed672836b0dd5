"""Bit-packed local views: every agent's view in V * 4 words instead of V * V * 4 bytes.

`Observer.observe` hands each agent a [V, V, 4] uint8 window (channels `VIEW_CHANNELS` of
`jaxenv.mapf.observe`). At 64 agents on 32x32 (V = 11) that is 31 kB per env step, and on
XLA's CPU backend writing those bytes costs about as much as all the rules (about 0.3 ns a
byte whatever the formulation: gather, uint32 cells, or unpacking bits; see
docs/scaling.md). The packed form holds the same information in 176 bytes per agent: bit
j of [a, i, c] is view cell (i, j) of channel c. Each plane row is packed into one word
(max_size <= 32), an agent's window is V words per channel read with one dynamic slice and
shifted into place, and its own cell, its own goal and the outside of the map are bit
operations. `unpack` gives back exactly `get_obs`'s uint8 views, for a reader that wants
bytes where it reads them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxenv.mapf.grid import in_grid_mask

WORD = 32


def packable(max_size: int, radius: int) -> bool:
    """Whether packed views exist for this capacity: a map row and a view row fit a word."""
    return max_size <= WORD and 2 * radius + 1 < WORD


def pack_rows(planes: jax.Array) -> jax.Array:
    """[..., n] bool/0-1 with n <= 32 -> [...] uint32, column c in bit c.

    Neighbouring pairs are merged five times (an OR tree of elementwise ops): XLA's CPU
    reductions are much slower than its fused elementwise loops.
    """
    n = planes.shape[-1]
    x = jnp.pad(planes.astype(jnp.uint32), [(0, 0)] * (planes.ndim - 1) + [(0, WORD - n)])
    width = 1
    while width < WORD:
        x = x.reshape(*x.shape[:-1], -1, 2)
        x = x[..., 0] | (x[..., 1] << width)
        width *= 2
    return x[..., 0]


def mark_cells(cells: jax.Array, on: jax.Array, s: int) -> jax.Array:
    """[S, S] uint8: 1 at each cell of `cells` ([A, 2]) whose `on` ([A] bool) is set."""
    return jnp.zeros((s, s), jnp.uint8).at[cells[:, 0], cells[:, 1]].max(on.astype(jnp.uint8))


def static_planes(holes: jax.Array, size: jax.Array, goals: jax.Array,
                  active: jax.Array) -> jax.Array:
    """[2, S, S] uint8: a level's obstacle plane (holes and the outside of its N x N grid) and
    its active agents' goal plane: the part of the view that never changes in an episode."""
    s = holes.shape[-1]
    obstacle = (~in_grid_mask(size, s) | holes).astype(jnp.uint8)
    return jnp.stack([obstacle, mark_cells(goals, active, s)])


def static_rows(holes: jax.Array, size: jax.Array, goals: jax.Array,
                active: jax.Array) -> jax.Array:
    """[2, S] uint32: `static_planes` row by row packed, so a level can carry them
    (`Level.rows`, `Capacity.static_rows`) and a step packs only the agents' plane."""
    return pack_rows(static_planes(holes, size, goals, active))


def packed_views(planes: jax.Array, size: jax.Array, pos: jax.Array, goals: jax.Array,
                 active: jax.Array, radius: int) -> jax.Array:
    """[A, V, 4] uint32: bit j of [a, i, c] is the view's cell (i, j) in channel c.

    `planes` is [S, S, 3] uint8 (holes, active agents, their goals; S <= 32), `size` the
    level's N: rows and columns outside [0, N) are obstacle, and outside [0, S) empty.
    """
    check_packable(planes.shape[0], radius)
    return packed_views_of_rows(pack_rows(jnp.moveaxis(planes, -1, 0)), size, pos, goals,
                                active, radius)


def check_packable(max_size: int, radius: int) -> None:
    if not packable(max_size, radius):
        raise ValueError(f"packed views need max_size <= {WORD} and 2r + 1 < {WORD}")


def packed_views_of_rows(rows3: jax.Array, size: jax.Array, pos: jax.Array, goals: jax.Array,
                         active: jax.Array, radius: int) -> jax.Array:
    """`packed_views` from the three planes already packed: [3, S] uint32 (obstacle, agents,
    goals), e.g. the agents' row words of this step beside a level's `static_rows`."""
    r, v = radius, 2 * radius + 1
    full = jnp.uint32((1 << v) - 1)
    # Rows padded by r empty rows on each side; materialised, so that the gathers below read
    # words instead of re-packing them per read (XLA would fuse the packing into them).
    words = jax.lax.optimization_barrier(jnp.pad(rows3, ((0, 0), (r, r))))  # [3, S + 2r]
    i = jnp.arange(v)
    y = pos[:, :1] - r + i  # [A, V] map rows of the window
    # One dynamic slice per agent: a gather whose index is the agent's row (small under vmap).
    rows = jax.vmap(lambda p: jax.lax.dynamic_slice_in_dim(words, p, v, 1))(pos[:, 0])
    rows = jnp.moveaxis(rows, 1, 2)  # [A, V, 3]
    sh = (pos[:, 1] - r)[:, None, None]  # first map column of the window
    cols = jnp.where(sh >= 0, rows >> jnp.maximum(sh, 0).astype(jnp.uint32),
                     rows << jnp.maximum(-sh, 0).astype(jnp.uint32)) & full
    # Obstacle outside the level: whole rows, and the columns left of 0 / right of N - 1.
    left = jnp.clip(r - pos[:, 1], 0, v).astype(jnp.uint32)
    first_right = jnp.clip(size - pos[:, 1] + r, 0, v).astype(jnp.uint32)
    out_cols = ((jnp.uint32(1) << left) - 1) | (full & ~((jnp.uint32(1) << first_right) - 1))
    out_row = (y < 0) | (y >= size)
    obstacle = jnp.where(out_row, full, cols[..., 0] | out_cols[:, None])
    rel = goals - pos
    in_cols = (rel[:, 1] >= -r) & (rel[:, 1] <= r)
    goal_bit = jnp.where(in_cols, jnp.uint32(1) << jnp.clip(rel[:, 1] + r, 0, v - 1)
                         .astype(jnp.uint32), jnp.uint32(0))
    own = jnp.where(i[None, :] == rel[:, :1] + r, goal_bit[:, None], jnp.uint32(0))  # [A, V]
    centre = jnp.where(i == r, jnp.uint32(1 << r), jnp.uint32(0))  # [V]
    out = jnp.stack([obstacle, cols[..., 1] & ~centre, own, cols[..., 2] & ~own], -1)
    return jnp.where(active[:, None, None], out, jnp.uint32(0))


def unpack(packed: jax.Array) -> jax.Array:
    """[..., V, C] uint32 packed views -> [..., V, V, C] uint8, exactly `get_obs`'s views."""
    v = packed.shape[-2]
    bit = (jnp.uint32(1) << jnp.arange(v, dtype=jnp.uint32))[:, None]
    return ((packed[..., None, :] & bit) != 0).astype(jnp.uint8)
