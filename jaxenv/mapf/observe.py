"""What MAPF-FrozenLake's agents see: the observation variants, chosen by `Capacity` flags.

`Observer(cap)` builds every agent's `MAPFObs` from a state (`observe`, pure), turns it into
the network's input (`agent_obs`) and gives the critic's whole-board map (`global_state`) and
the bit-packed views (`packed_views`). The env keeps the rules and is handed its observer, the
way Jumanji's environments are handed their generator and reward.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from jaxenv.agents import AgentObs
from jaxenv.mapf import rules, views
from jaxenv.mapf.config import Capacity
from jaxenv.mapf.grid import DIST_INF
from jaxenv.mapf.state import MAPFState, on_goal

VIEW_CHANNELS = ("obstacle", "other_agents", "own_goal", "other_goals")
GLOBAL_CHANNELS = ("obstacle", "agents", "goals", "agents_at_goal")
CTG_MAX = 4.0  # the observed distance / max_size is clipped here (long detours in a maze)


@struct.dataclass
class MAPFObs:
    view: jax.Array  # [A, V, V, 4] uint8, channels VIEW_CHANNELS, centred on the agent
    goal_vec: jax.Array  # [A, 2] float32, (goal - pos) / max_size
    agent_mask: jax.Array  # [A] bool: the agent exists in this level
    at_goal: jax.Array  # [A] bool: stands on its goal
    acting: jax.Array  # [A] bool: its action has an effect (not frozen by the freeze rule)
    # [A, 5] float32 with `Capacity.cost_to_go`, else None: the agent's shortest-path distance
    # to its goal / max_size, then per move (up, down, left, right) -1 if it shortens that
    # distance and +1 if not (a hole or the edge counts as +1)
    cost_to_go: jax.Array | None = None
    # [A, V, V] uint8 with `Capacity.priority`, else None: 1 where an active agent of a lower
    # slot index (a higher priority) stands in the agent's view
    priority: jax.Array | None = None
    # [A, V, V] uint8 with `Capacity.intent`, else None: 1 where another active agent's
    # distance-shortening move would take it, in the agent's view
    intent: jax.Array | None = None


@dataclass(frozen=True)
class Observer:
    """The observation of a capacity: local views and goal vectors, plus the planes its flags
    turn on (cost-to-go, priority, intent). Hashable, so an env holding it stays a static jit
    argument."""

    cap: Capacity

    def space(self) -> spaces.Dict:
        """gymnax's observation space of `observe`'s output."""
        a, v = self.cap.max_agents, 2 * self.cap.view_radius + 1
        return spaces.Dict({
            "view": spaces.Box(0, 255, (a, v, v, len(VIEW_CHANNELS)), jnp.uint8),
            "goal_vec": spaces.Box(-1.0, 1.0, (a, 2), jnp.float32),
            "agent_mask": spaces.Box(0, 1, (a,), jnp.bool_),
            "at_goal": spaces.Box(0, 1, (a,), jnp.bool_),
            "acting": spaces.Box(0, 1, (a,), jnp.bool_),
            **({"cost_to_go": spaces.Box(-1.0, float(CTG_MAX), (a, 5), jnp.float32)}
               if self.cap.cost_to_go else {}),
            **({"priority": spaces.Box(0, 1, (a, v, v), jnp.uint8)}
               if self.cap.priority else {}),
            **({"intent": spaces.Box(0, 1, (a, v, v), jnp.uint8)}
               if self.cap.intent else {}),
        })

    def observe(self, state: MAPFState) -> MAPFObs:
        """Every agent slot's egocentric view and goal vector, and the flagged planes."""
        cap, active = self.cap, state.level.agent_mask()
        goal_vec = jnp.where(active[:, None], (state.level.goals - state.pos) / cap.max_size,
                             0.0)
        return MAPFObs(view=local_views(state, cap), goal_vec=goal_vec.astype(jnp.float32),
                       agent_mask=active, at_goal=on_goal(state), acting=active & ~state.frozen,
                       cost_to_go=cost_to_go(state, cap) if cap.cost_to_go else None,
                       priority=priority_view(state, cap) if cap.priority else None,
                       intent=intent_view(state, cap) if cap.intent else None)

    def agent_obs(self, obs: MAPFObs, state: MAPFState, with_global: bool = False) -> AgentObs:
        """Each agent's network input: its local view (with `Capacity.priority` and
        `Capacity.intent`, those planes as further channels in that order), (goal vector,
        at-goal, cost-to-go), its position and masks; the action mask rules out only moves off
        the grid (holes and conflicts stay choosable: they are failures the engineer must
        see)."""
        vec = jnp.concatenate([obs.goal_vec, obs.at_goal[..., None].astype(jnp.float32)]
                              + ([obs.cost_to_go] if obs.cost_to_go is not None else []), -1)
        _, inside = move_targets(state)
        extra = [p[..., None] for p in (obs.priority, obs.intent) if p is not None]
        view = jnp.concatenate([obs.view, *extra], -1) if extra else obs.view
        return AgentObs(vec=vec, agent_mask=obs.agent_mask,
                        acting=obs.acting, view=view,
                        glob=self.global_state(state) if with_global else None,
                        pos=(state.pos / self.cap.max_size).astype(jnp.float32),
                        action_mask=inside)

    def global_state(self, state: MAPFState) -> jax.Array:
        """[S, S, 4] uint8 map for a centralised critic, channels GLOBAL_CHANNELS."""
        done = views.mark_cells(state.pos, on_goal(state), self.cap.max_size)
        return jnp.concatenate([planes(state, self.cap), done[..., None]], -1)

    def packed_views(self, state: MAPFState) -> jax.Array:
        """`observe(state).view` bit-packed: [A, V, 4] uint32, bit j of [a, i, c] is cell
        (i, j) of channel c (`jaxenv.mapf.views`; `views.unpack` gives the uint8 views back
        exactly), for readers that unpack where they read; needs max_size <= 32
        (`views.packable`)."""
        lv, r = state.level, self.cap.view_radius
        if lv.rows is None:
            return views.packed_views(planes(state, self.cap), lv.size, state.pos, lv.goals,
                                      lv.agent_mask(), r)
        views.check_packable(self.cap.max_size, r)
        # The level's obstacle and goal rows are packed once per level: pack the agents only.
        agents = views.pack_rows(agents_plane(state, self.cap))
        rows3 = jnp.stack([lv.rows[0], agents, lv.rows[1]])
        return views.packed_views_of_rows(rows3, lv.size, state.pos, lv.goals,
                                          lv.agent_mask(), r)


def local_views(state: MAPFState, cap: Capacity) -> jax.Array:
    """[A, V, V, 4] uint8 (`MAPFObs.view`): three padded planes (obstacle, agents, goals) are
    built once per env; each agent slices its window and only corrects its own cell and its
    own goal."""
    lv, r = state.level, cap.view_radius
    v = 2 * r + 1
    active = lv.agent_mask()
    grid = planes(state, cap)
    # Outside the padded map is obstacle; no agents or goals there.
    padded = jnp.pad(grid, ((r, r), (r, r), (0, 0))).at[..., 0].set(
        jnp.pad(grid[..., 0], r, constant_values=1))
    offs = jnp.arange(v) - r
    centre = ((offs[:, None] == 0) & (offs[None, :] == 0))[..., None]

    def view(pos, goal):
        w = jax.lax.dynamic_slice(padded, (pos[0], pos[1], 0), (v, v, 3))
        rel = goal - pos
        own = ((offs[:, None] == rel[0]) & (offs[None, :] == rel[1]))[..., None]
        return jnp.concatenate([w[..., :1], jnp.where(centre, 0, w[..., 1:2]),
                                own.astype(jnp.uint8), jnp.where(own, 0, w[..., 2:])], -1)

    out = jnp.where(active[:, None, None, None], jax.vmap(view)(state.pos, lv.goals), 0)
    return out.astype(jnp.uint8)


def cost_to_go(state: MAPFState, cap: Capacity) -> jax.Array:
    """[A, 5] float32 (`MAPFObs.cost_to_go`): five reads of the level's distance fields."""
    lv, s = state.level, cap.max_size
    _, inside, d = target_distances(state, cap)
    reachable = d[:, :1] < DIST_INF
    shorter = inside[:, 1:] & (d[:, 1:] < d[:, :1])
    moves = jnp.where(shorter, -1.0, 1.0)
    here = jnp.minimum(d[:, :1] / s, CTG_MAX)
    out = jnp.concatenate([here, moves], -1)
    keep = lv.agent_mask()[:, None] & reachable
    return jnp.where(keep, out, 0.0).astype(jnp.float32)


def priority_view(state: MAPFState, cap: Capacity) -> jax.Array:
    """[A, V, V] uint8 (`MAPFObs.priority`): each agent's window of the active agents with a
    lower slot index than its own."""
    slot = jnp.arange(cap.max_agents)
    return others_window(state.pos, state, slot[None, :] < slot[:, None], cap.view_radius)


def intent_view(state: MAPFState, cap: Capacity) -> jax.Array:
    """[A, V, V] uint8 (`MAPFObs.intent`): each agent's window of the cells the other active
    agents would enter by their first move that shortens their distance to their goal (their
    own cell when on the goal or cut off from it): where a neighbour is likely headed, so that
    a vertex or edge conflict can be seen one step before it happens."""
    cells, inside, d = target_distances(state, cap)
    d = jnp.where(inside, d, DIST_INF)
    shortens = (d[:, 1:].min(-1) < d[:, 0]) & (d[:, 0] < DIST_INF)  # cut off: stays
    move = jnp.where(shortens, jnp.argmin(d[:, 1:], -1) + 1, 0)
    target = jnp.take_along_axis(cells, move[:, None, None], 1)[:, 0]
    slot = jnp.arange(cap.max_agents)
    return others_window(target, state, slot[None, :] != slot[:, None], cap.view_radius)


def others_window(cells: jax.Array, state: MAPFState, pair: jax.Array,
                  radius: int) -> jax.Array:
    """[A, V, V] uint8: 1 in agent a's window at `cells[b]` ([A, 2]) for every active b with
    `pair[a, b]`. A points per agent, so O(A^2): meant for the few agents of the paper's
    levels."""
    v = 2 * radius + 1
    active = state.level.agent_mask()

    def window(pos, mine):
        rel = cells - pos + radius
        seen = active & mine & jnp.all((rel >= 0) & (rel < v), -1)
        return views.mark_cells(jnp.clip(rel, 0, v - 1), seen, v)

    out = jax.vmap(window)(state.pos, pair)
    return jnp.where(active[:, None, None], out, 0)


def target_distances(state: MAPFState, cap: Capacity) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`move_targets` and each target's distance to its agent's goal, [A, 5] int32 (five reads
    of `Level.dist`; a target off the grid reads a clipped cell: mask it with `inside`)."""
    cells, inside = move_targets(state)
    c = jnp.clip(cells, 0, cap.max_size - 1)
    d = state.level.dist[jnp.arange(cap.max_agents)[:, None], c[..., 0], c[..., 1]]
    return cells, inside, d.astype(jnp.int32)


def move_targets(state: MAPFState) -> tuple[jax.Array, jax.Array]:
    """The cells each action would enter, [A, 5, 2] (stay first), and whether they are inside
    the grid, [A, 5]."""
    cells = state.pos[:, None, :] + rules.DELTAS[None]
    return cells, rules.in_bounds(cells, state.level.size)


def planes(state: MAPFState, cap: Capacity) -> jax.Array:
    """[S, S, 3] uint8 map of (obstacle or outside the grid, active agents, their goals)."""
    lv = state.level
    obstacle, goals = views.static_planes(lv.holes, lv.size, lv.goals, lv.agent_mask())
    return jnp.stack([obstacle, agents_plane(state, cap), goals], -1)


def agents_plane(state: MAPFState, cap: Capacity) -> jax.Array:
    """[S, S] uint8: 1 where an active agent stands."""
    return views.mark_cells(state.pos, state.level.agent_mask(), cap.max_size)
