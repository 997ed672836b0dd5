"""Exact two-agent optimum by joint-state BFS, in JAX.

The joint state of two agents is a pair of cells; the set of pairs reachable at time t,
``R_t``, grows by one synchronous joint move per iteration (vertex and swap conflicts
excluded). An agent's cost is its last arrival at its goal, after which it stays; when
agent 0 settles at time t with agent 1 at p1, agent 1 still needs ``D1[p1]`` (its shortest
path with agent 0's goal blocked), so

    makespan* = min_t [ t  + min_{(g0, p1) in R_t} D1[p1] ]   (and symmetrically)
    soc*      = min_t [ 2t + min_{(g0, p1) in R_t} D1[p1] ]

which is exact because every plan settles one agent first. The *needs-wait* label ("every
SoC-optimal plan contains a wait", a wait being a stay before an agent's final arrival) runs
the same recursion over ``Q_t``, the pairs reachable with both agents moving at every step;
after settling, the other agent's shortest path never waits. So
``needs_wait = soc*(Q) > soc*(R)``.

Representation: ``R[r0, c0, r1]`` is a uint32 whose bit ``c1`` marks the pair
((r0, c0), (r1, c1)), so agent 1's column moves are bit shifts (grids up to 32 wide).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxenv.mapf.grid import INF, bfs_distance, shift

_MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))


@struct.dataclass
class PairSolution:
    makespan: jax.Array  # [] int32, INF if unsolvable
    soc: jax.Array  # [] int32, INF if unsolvable
    needs_wait: jax.Array  # [] bool
    solvable: jax.Array  # [] bool


def _pack(x: jax.Array) -> jax.Array:
    """[..., S] bool -> [...] uint32 (bit c = x[..., c])."""
    s = x.shape[-1]
    return jnp.sum(x.astype(jnp.uint32) << jnp.arange(s, dtype=jnp.uint32), axis=-1,
                   dtype=jnp.uint32)


def _unpack(x: jax.Array, s: int) -> jax.Array:
    return ((x[..., None] >> jnp.arange(s, dtype=jnp.uint32)) & 1).astype(bool)


def _bitshift(x: jax.Array, dc: int, full: jax.Array) -> jax.Array:
    """Move every set bit c to c + dc, dropping bits that leave the row."""
    if dc > 0:
        return (x << dc) & full
    if dc < 0:
        return x >> (-dc)
    return x


def _shift1(x: jax.Array, d: tuple[int, int], full: jax.Array) -> jax.Array:
    """Move agent 1 by d in a packed joint array [S, S, S]."""
    rows = jnp.moveaxis(shift(jnp.moveaxis(x, 2, 1), d[0], 0, fill=0), 1, 2) if d[0] else x
    return _bitshift(rows, d[1], full)


def _expand(r, can0, can1, diag, full, allow_wait: bool):
    """One synchronous joint move from every packed pair in r; conflicts excluded."""
    moves = (((0, 0),) if allow_wait else ()) + _MOVES
    out = jnp.zeros_like(r)
    for d0 in moves:
        src0 = jnp.where(can0[d0][:, :, None], r, jnp.uint32(0))
        a = jnp.moveaxis(shift(jnp.moveaxis(src0, 2, 0), d0[0], d0[1], fill=0), 0, 2)
        for d1 in moves:
            b = a & can1[d1][None, None, :]
            if d0 != (0, 0) and d1 == (-d0[0], -d0[1]):
                b = b & ~diag  # agent 1 stands where agent 0 arrives and walks back: a swap
            out = out | _shift1(b, d1, full)
    return out & ~diag


def solve_pair(free: jax.Array, s0: jax.Array, g0: jax.Array, s1: jax.Array, g1: jax.Array,
               t_cap: int | None = None) -> PairSolution:
    """Exact optimal makespan, sum of costs and needs-wait label of a two-agent level.

    free: [S, S] bool, ice inside the grid. s*, g*: [2] int32 cells. Jittable and vmappable.
    """
    s = free.shape[-1]
    if s > 32:
        raise ValueError("solve_pair packs a grid row into 32 bits: max_size must be <= 32")
    t_cap = 4 * s * s if t_cap is None else t_cap
    full = jnp.uint32((1 << s) - 1)
    idx = jnp.arange(s)
    # diag[r0, c0, r1] has bit c0 set iff r1 == r0: the pairs where both agents share a cell.
    diag = jnp.where(idx[:, None, None] == idx[None, None, :],
                     (jnp.uint32(1) << idx.astype(jnp.uint32))[None, :, None], jnp.uint32(0))
    can0 = {d: shift(free, -d[0], -d[1]) for d in ((0, 0),) + _MOVES}  # p + d is free
    can1 = {d: _pack(v) for d, v in can0.items()}
    onehot = lambda c: (idx[:, None] == c[0]) & (idx[None, :] == c[1])  # noqa: E731
    g0m, g1m = onehot(g0), onehot(g1)
    d1 = bfs_distance(free & ~g0m, g1m)  # agent 1's rest once agent 0 has settled
    d0 = bfs_distance(free & ~g1m, g0m)
    r0 = jnp.where(onehot(s0)[:, :, None], _pack(onehot(s1))[None, None, :], jnp.uint32(0))

    def settle(r):
        a = jnp.min(jnp.where(_unpack(r[g0[0], g0[1]], s), d1, INF))
        at_g1 = ((r[:, :, g1[0]] >> g1[1].astype(jnp.uint32)) & 1).astype(bool)
        b = jnp.min(jnp.where(at_g1, d0, INF))
        return jnp.minimum(a, b)

    def best(t, r, ms, soc):
        rest = settle(r)
        ok = rest < INF
        return (jnp.where(ok, jnp.minimum(ms, t + rest), ms),
                jnp.where(ok, jnp.minimum(soc, 2 * t + rest), soc))

    def cond(c):
        t, r, q, ms, soc, soc_q, grew = c
        done = (t >= ms) & (2 * t > soc)
        return ~done & grew & (t < t_cap)

    def body(c):
        t, r, q, ms, soc, soc_q, _ = c
        r2 = _expand(r, can0, can1, diag, full, True)
        q2 = _expand(q, can0, can1, diag, full, False)
        ms, soc = best(t + 1, r2, ms, soc)
        _, soc_q = best(t + 1, q2, INF, soc_q)
        return t + 1, r2, q2, ms, soc, soc_q, jnp.any(r2 != r)

    ms, soc = best(0, r0, INF, INF)
    _, soc_q = best(0, r0, INF, INF)
    init = (jnp.int32(0), r0, r0, ms, soc, soc_q, jnp.bool_(True))
    _, _, _, ms, soc, soc_q, _ = jax.lax.while_loop(cond, body, init)
    solvable = soc < INF
    return PairSolution(makespan=ms, soc=soc, needs_wait=solvable & (soc_q > soc),
                        solvable=solvable)
