"""The `Level` pytree: one MAPF-FrozenLake instance, padded to the env's static capacity."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

UNKNOWN = -1  # cost or label not computed (e.g. > 2 agents before the exact solver ran)


@struct.dataclass
class Level:
    """A grid with holes, starts and goals; everything an episode or a plan check needs.

    Arrays are padded: `holes` is [max_size, max_size] (cells at row or col >= size are
    outside the grid), agent arrays are [max_agents, 2] (rows >= n_agents are inactive).
    Costs follow docs/rules.md: an agent's cost is its last arrival time at its goal.
    """

    holes: jax.Array  # [S, S] bool
    starts: jax.Array  # [A, 2] int32 (row, col)
    goals: jax.Array  # [A, 2] int32
    size: jax.Array  # [] int32, N of the N x N grid
    n_agents: jax.Array  # [] int32
    opt_makespan: jax.Array  # [] int32, UNKNOWN if not computed
    opt_soc: jax.Array  # [] int32, UNKNOWN if not computed
    needs_wait: jax.Array  # [] int32: 1 every optimal plan waits, 0 not, UNKNOWN
    # [A, S, S] int16 each agent's distance to its goal from every cell (`grid.goal_distances`),
    # filled where the env observes the cost-to-go (`Capacity.cost_to_go`): once per level,
    # at generation or at the first reset, never per step. None where not computed.
    dist: jax.Array | None = None
    # [2, S] uint32 the obstacle and goal planes row-packed (`views.static_rows`), filled where
    # the env packs its views from them (`Capacity.static_rows`); None where not computed.
    rows: jax.Array | None = None

    @property
    def max_size(self) -> int:
        return self.holes.shape[-1]

    @property
    def max_agents(self) -> int:
        return self.starts.shape[-2]

    def agent_mask(self) -> jax.Array:
        return jnp.arange(self.max_agents) < self.n_agents[..., None]

    def check_shapes(self) -> None:
        """chex checks at package boundaries (works batched or not)."""
        s, a = self.max_size, self.max_agents
        chex.assert_shape(self.holes, (..., s, s))
        chex.assert_shape([self.starts, self.goals], (..., a, 2))
        chex.assert_equal_shape([self.size, self.n_agents, self.opt_makespan, self.opt_soc,
                                 self.needs_wait])
        if self.dist is not None:
            chex.assert_shape(self.dist, (..., a, s, s))
        if self.rows is not None:
            chex.assert_shape(self.rows, (..., 2, s))


def make_level(holes, starts, goals, *, max_size: int, max_agents: int,
               opt_makespan: int = UNKNOWN, opt_soc: int = UNKNOWN,
               needs_wait: int = UNKNOWN) -> Level:
    """A `Level` from plain (unpadded) arrays: holes [N, N] bool, starts/goals [n, 2]."""

    holes = np.asarray(holes, bool)
    n = holes.shape[0]
    starts = np.asarray(starts, np.int32).reshape(-1, 2)
    goals = np.asarray(goals, np.int32).reshape(-1, 2)
    k = starts.shape[0]
    if holes.shape != (n, n) or n > max_size:
        raise ValueError(f"holes must be square and at most {max_size} wide, got {holes.shape}")
    if goals.shape[0] != k or k > max_agents or k < 1:
        raise ValueError(f"need 1..{max_agents} starts and as many goals, got {k}/{goals.shape[0]}")
    ph = np.zeros((max_size, max_size), bool)
    ph[:n, :n] = holes
    ps = np.zeros((max_agents, 2), np.int32)
    pg = np.zeros((max_agents, 2), np.int32)
    ps[:k], pg[:k] = starts, goals
    return Level(holes=jnp.asarray(ph), starts=jnp.asarray(ps), goals=jnp.asarray(pg),
                 size=jnp.int32(n), n_agents=jnp.int32(k), opt_makespan=jnp.int32(opt_makespan),
                 opt_soc=jnp.int32(opt_soc), needs_wait=jnp.int32(needs_wait))
