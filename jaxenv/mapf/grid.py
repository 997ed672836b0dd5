"""Grid utilities on padded boolean maps: shifts, flood-fill distances, connected components.

All loops are `lax.while_loop`s that stop when nothing changes, so small maps cost little
even inside a large padded array (under `vmap` the batch runs until its slowest member stops).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

INF = jnp.int32(1 << 20)
DIST_INF = 32767  # int16 distances (`goal_distances`): unreachable


def shift(x: jax.Array, dr: int, dc: int, fill=False) -> jax.Array:
    """y[r, c] = x[r - dr, c - dc] over the last two axes (no wrap-around)."""
    s0, s1 = x.shape[-2:]
    pad = [(0, 0)] * (x.ndim - 2) + [(max(dr, 0), max(-dr, 0)), (max(dc, 0), max(-dc, 0))]
    y = jnp.pad(x, pad, constant_values=fill)
    r0, c0 = max(-dr, 0), max(-dc, 0)
    return y[..., r0:r0 + s0, c0:c0 + s1]


def neighbours_any(x: jax.Array) -> jax.Array:
    """Cells with a 4-neighbour set in x (boolean dilation without the centre)."""
    return shift(x, 1, 0) | shift(x, -1, 0) | shift(x, 0, 1) | shift(x, 0, -1)


def in_grid_mask(size: jax.Array, max_size: int) -> jax.Array:
    idx = jnp.arange(max_size)
    return (idx[:, None] < size) & (idx[None, :] < size)


def bfs_distance(free: jax.Array, source: jax.Array) -> jax.Array:
    """Shortest 4-connected path length from `source` cells through `free` cells; INF if none."""
    start = source & free

    def cond(c):
        return jnp.any(c[1])

    def body(c):
        dist, frontier, d = c
        nxt = neighbours_any(frontier) & free & (dist == INF)
        return jnp.where(nxt, d + 1, dist), nxt, d + 1

    dist0 = jnp.where(start, 0, INF).astype(jnp.int32)
    dist, _, _ = jax.lax.while_loop(cond, body, (dist0, start, jnp.int32(0)))
    return dist


def components(free: jax.Array) -> jax.Array:
    """Connected-component labels of free cells (min flat index of the component); -1 if blocked."""
    s0, s1 = free.shape
    big = s0 * s1
    lab0 = jnp.where(free, jnp.arange(big).reshape(s0, s1), big)

    def body(c):
        lab, _ = c
        m = lab
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            m = jnp.minimum(m, shift(lab, dr, dc, fill=big))
        m = jnp.where(free, m, big)
        return m, jnp.any(m != lab)

    lab, _ = jax.lax.while_loop(lambda c: c[1], body, (lab0, jnp.bool_(True)))
    return jnp.where(free, lab, -1)


def goal_distances(holes: jax.Array, size: jax.Array, goals: jax.Array,
                   active: jax.Array) -> jax.Array:
    """[A, S, S] int16: each agent's shortest-path distance to its own goal from every cell
    (the cost-to-go a MAPF policy needs where the Manhattan direction leads into a dead end);
    `DIST_INF` where the goal cannot be reached, and everywhere for inactive agents."""
    s = holes.shape[-1]
    free = in_grid_mask(size, s) & ~holes
    idx = jnp.arange(s)
    src = ((idx[None, :, None] == goals[:, 0, None, None])
           & (idx[None, None, :] == goals[:, 1, None, None]) & active[:, None, None])
    d = jax.vmap(bfs_distance, in_axes=(None, 0))(free, src)
    return jnp.minimum(d, DIST_INF).astype(jnp.int16)
