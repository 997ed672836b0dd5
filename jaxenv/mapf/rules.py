"""The rules of MAPF-FrozenLake (docs/rules.md), written once.

Stepwise play (`jaxenv.mapf.env`) and whole-plan verification use these functions; nothing
else in the package decides what a move, a hole, a bound or a conflict is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

STAY, UP, DOWN, LEFT, RIGHT = range(5)
NUM_ACTIONS = 5
# (d_row, d_col) of each action.
DELTAS = jnp.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], jnp.int32)
# Perpendicular slips: [action, side] -> action (side True: left for vertical, up for horizontal).
_SLIP = jnp.array([[STAY, STAY], [RIGHT, LEFT], [RIGHT, LEFT], [DOWN, UP], [DOWN, UP]], jnp.int32)

# Rule violations, in the order `Violations.counts` reports them and a failed episode names its
# cause (the first one found); the one definition of that order.
VIOLATIONS = ("vertex", "edge", "hole", "oob")
# How an episode ends: index 0 success (or still running), then each violation, then the limit.
CAUSES = ("none", *VIOLATIONS, "timeout")
TIMEOUT = CAUSES.index("timeout")


@struct.dataclass
class Violations:
    """Per-agent rule violations of one step, computed on the intended targets."""

    oob: jax.Array  # [A] bool: target outside the N x N grid
    hole: jax.Array  # [A] bool: target is a hole
    vertex: jax.Array  # [A] bool: another agent targets the same cell
    edge: jax.Array  # [A] bool: two agents swap cells

    def any(self) -> jax.Array:
        """[A] bool: agent broke any rule."""
        return self.oob | self.hole | self.vertex | self.edge

    def counts(self) -> jax.Array:
        """[4] int32: agents with each violation, in `VIOLATIONS` order."""
        return jnp.stack([getattr(self, name).sum() for name in VIOLATIONS])


def slip_noise(key: jax.Array, max_agents: int) -> tuple[jax.Array, jax.Array]:
    """The random draws of one step's slips: (u [A] in [0, 1), side [A] bool)."""
    ku, ks = jax.random.split(key)
    return jax.random.uniform(ku, (max_agents,)), jax.random.bernoulli(ks, 0.5, (max_agents,))


def apply_slip(actions: jax.Array, u: jax.Array, side: jax.Array,
               slip_prob: jax.Array) -> jax.Array:
    """Replace each move by a perpendicular one where u < slip_prob (stay never slips)."""
    slipped = _SLIP[actions, side.astype(jnp.int32)]
    return jnp.where(u < slip_prob, slipped, actions)


def in_bounds(cells: jax.Array, size: jax.Array) -> jax.Array:
    """[..., 2] cells -> [...] bool: inside the N x N grid."""
    return jnp.all((cells >= 0) & (cells < size), axis=-1)


def is_hole(holes: jax.Array, cells: jax.Array) -> jax.Array:
    """[..., 2] cells (in the array, clipped) -> [...] bool."""
    s = holes.shape[-1]
    c = jnp.clip(cells, 0, s - 1)
    return holes[c[..., 0], c[..., 1]]


def _cell_ids(cells: jax.Array, s: int) -> jax.Array:
    """Flat ids on the grid padded by one cell, so one-step off-grid targets get an id too."""
    c = jnp.clip(cells + 1, 0, s + 1)
    return c[..., 0] * (s + 2) + c[..., 1]


def _conflicts(pos_id: jax.Array, tgt_id: jax.Array, active: jax.Array,
               s: int) -> tuple[jax.Array, jax.Array]:
    """Vertex and edge conflicts among active agents: ([A] bool, [A] bool).

    A vertex conflict is a target shared with another active agent; an edge conflict is a
    move into the cell of an agent that moves into ours. Few agents compare all pairs
    (O(A^2), vectorises well under vmap); many agents use the grid (O(cells + A) scatters).
    Both give the same answer (tests/jaxenv/mapf/test_rules.py).
    """
    if pos_id.shape[0] ** 2 <= (s + 2) ** 2:
        return _pair_conflicts(pos_id, tgt_id, active)
    return _grid_conflicts(pos_id, tgt_id, active, s)


def _pair_conflicts(pos_id: jax.Array, tgt_id: jax.Array,
                    active: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`_conflicts` by comparing every pair of agents (for few agents)."""
    a = pos_id.shape[0]
    pair = active[:, None] & active[None, :] & ~jnp.eye(a, dtype=bool)
    vertex = jnp.any(pair & (tgt_id[:, None] == tgt_id[None, :]), 1)
    swap = (tgt_id[:, None] == pos_id[None, :]) & (tgt_id[None, :] == pos_id[:, None])
    return vertex, jnp.any(pair & swap, 1) & (tgt_id != pos_id)


def _grid_conflicts(pos_id: jax.Array, tgt_id: jax.Array, active: jax.Array,
                    s: int) -> tuple[jax.Array, jax.Array]:
    """`_conflicts` through per-cell counts and an occupant map (for many agents)."""
    a = pos_id.shape[0]
    count = jnp.zeros((s + 2) ** 2, jnp.int32).at[tgt_id].add(active)
    vertex = active & (count[tgt_id] > 1)
    ids = jnp.where(active, jnp.arange(a), -1)
    occupant = jnp.full((s + 2) ** 2, -1, jnp.int32).at[pos_id].max(ids)
    j = occupant[tgt_id]
    jj = jnp.maximum(j, 0)
    moved = tgt_id != pos_id
    edge = active & moved & (j >= 0) & (tgt_id[jj] == pos_id) & (jj != jnp.arange(a))
    return vertex, edge


def violations(holes: jax.Array, size: jax.Array, pos: jax.Array, tgt: jax.Array,
               active: jax.Array) -> Violations:
    """Rule violations of the joint move pos -> tgt ([A, 2] each) for the active agents."""
    s = holes.shape[-1]
    inside = in_bounds(tgt, size)
    oob = active & ~inside
    hole = active & inside & is_hole(holes, tgt)
    vertex, edge = _conflicts(_cell_ids(pos, s), _cell_ids(tgt, s), active, s)
    return Violations(oob=oob, hole=hole, vertex=vertex, edge=edge)


def resolve(holes: jax.Array, pos: jax.Array, tgt: jax.Array, active: jax.Array,
            v: Violations) -> jax.Array:
    """POGEMA-like blocking: cancel illegal moves, then conflicting ones, until none is left."""
    s = holes.shape[-1]
    pos_id = _cell_ids(pos, s)
    t0 = jnp.where((v.oob | v.hole), pos_id, _cell_ids(tgt, s))

    def body(carry):
        t, _ = carry
        vertex, edge = _conflicts(pos_id, t, active, s)
        cancel = (vertex | edge) & (t != pos_id)
        return jnp.where(cancel, pos_id, t), jnp.any(cancel)

    t, _ = jax.lax.while_loop(lambda c: c[1], body, (t0, jnp.bool_(True)))
    return jnp.where((t == pos_id)[:, None], pos, tgt)


def manhattan(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.abs(a - b).sum(-1)
