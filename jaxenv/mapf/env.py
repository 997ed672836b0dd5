"""MAPF-FrozenLake as a gymnax 1.0 environment whose params are a dynamic config pytree.

`reset(key, cfg)` and `step(key, state, actions, cfg)` are pure; `cfg` is a `MAPFConfig`
(one per environment when vmapped), so thousands of differently configured environments run
in one `vmap` under one `jit` and a new config never recompiles. Static capacity (grid, agents,
view radius, step cap) is fixed on the env object. All per-agent arrays are [max_agents, ...]
with an agent mask; rewards are per agent. The rules live in `jaxenv.mapf.rules`.

An environment with levels: `generate(key, cfg)` draws a level, `reset_to_level` starts an
episode on one, `step_env` plays without resetting. Where the next level comes from is a
wrapper's job (`jaxenv.wrappers`): `step` is `AutoReset(env).step` (a fresh level from the
env's own config), and training draws from a pre-generated pool through `PoolReset`. The
multi-agent protocol of `jaxenv.agents` (`agent_obs`, `outcome`, `episode_metrics`, `trace`)
is what trainees read.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxenv.agents import AgentObs
from jaxenv.mapf import rules, views
from jaxenv.mapf.config import FAIL, FREEZE, Capacity, MAPFConfig, make_config_space
from jaxenv.mapf.generator import generate, with_derived
from jaxenv.mapf.grid import DIST_INF
from jaxenv.mapf.level import Level
from jaxenv.mapf.rules import CAUSES, TIMEOUT
from jaxenv.wrappers import AutoReset

VIEW_CHANNELS = ("obstacle", "other_agents", "own_goal", "other_goals")
GLOBAL_CHANNELS = ("obstacle", "agents", "goals", "agents_at_goal")
CTG_MAX = 4.0  # the observed distance / max_size is clipped here (long detours in a maze)


@struct.dataclass
class MAPFState(environment.EnvState):
    level: Level
    pos: jax.Array  # [A, 2] int32
    tried: jax.Array  # [A, 2] int32: the cells the last step's moves aimed at (after slips)
    frozen: jax.Array  # [A] bool: its action is ignored (on its goal under the freeze rule)
    cost: jax.Array  # [A] int32: the verifier's cost of its path so far, 1 + the last time it
    # was off its goal (0 if never); once it is home for good, its arrival time
    step_limit: jax.Array  # [] int32
    success: jax.Array  # [] bool
    failed: jax.Array  # [] bool
    violations: jax.Array  # [4] int32 cumulative (vertex, edge, hole, oob) agent-violations


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


def on_goal(state: MAPFState) -> jax.Array:
    """[A] bool: the active agents that stand on their goals."""
    lv = state.level
    return lv.agent_mask() & jnp.all(state.pos == lv.goals, -1)


def step_limit(level: Level, cfg: MAPFConfig, max_steps: int) -> jax.Array:
    """Episode limit (docs/rules.md): factor * (longest Manhattan start-goal distance + N)."""
    far = jnp.max(jnp.where(level.agent_mask(), rules.manhattan(level.starts, level.goals), 0))
    lim = jnp.ceil(cfg.step_limit_factor * (far + level.size)).astype(jnp.int32)
    return jnp.clip(lim, 1, max_steps)


class MAPFFrozenLake(environment.Environment[MAPFState, MAPFConfig]):
    """Multi-agent path finding on a frozen lake (see docs/rules.md)."""

    outcomes = CAUSES

    def __init__(self, capacity: Capacity | None = None):
        super().__init__()
        self.cap = capacity or Capacity()
        self.config_space = make_config_space(self.cap.max_size, self.cap.max_agents,
                                              label_waits=self.cap.label_waits)
        self.num_agents = self.cap.max_agents
        self.horizon = self.cap.max_steps
        self._auto_reset = AutoReset(self)
        self._prepare = jax.jit(jax.vmap(partial(with_derived, cap=self.cap)))  # compiled once

    # ------------------------------------------------------------------ gymnax
    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: MAPFState, action: jax.Array,
             params: MAPFConfig | None = None):
        """gymnax's step; a finished episode restarts on a fresh level of this env's config."""
        return self._auto_reset.step(key, state, action, params)

    @property
    def name(self) -> str:
        return "MAPF-FrozenLake"

    @property
    def num_actions(self) -> int:
        return rules.NUM_ACTIONS

    @property
    def default_params(self) -> MAPFConfig:
        return self.config_space.to_config()

    def action_space(self, params: MAPFConfig | None = None) -> spaces.Box:
        """Joint action: one of 0 stay, 1 up, 2 down, 3 left, 4 right per agent."""
        return spaces.Box(0, rules.NUM_ACTIONS - 1, (self.cap.max_agents,), jnp.int32)

    def observation_space(self, params: MAPFConfig | None = None) -> spaces.Dict:
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

    def generate(self, key: jax.Array, cfg: MAPFConfig) -> Level:
        """A fresh level from `cfg` at this env's capacity (see `jaxenv.mapf.generator`)."""
        return generate(key, cfg, self.cap)

    def prepare_levels(self, levels: Any) -> Any:
        """A batch of stored levels in this env's form: the per-level fields its capacity
        reads added (`Level.dist` for the cost-to-go, `Level.rows` for packed views) and the
        others dropped, so levels from disk, the held-out set or another capacity pass
        `policy.evaluate`'s shape check. Anything else is returned as is, for the caller's own
        check to reject."""
        if not isinstance(levels, Level):
            return levels
        if ((levels.dist is not None) == self.cap.cost_to_go
                and (levels.rows is not None) == self.cap.static_rows):
            return levels  # already in this env's form (e.g. the validator's, at every stage)
        return self._prepare(levels)

    def reset_env(self, key: jax.Array, params: MAPFConfig) -> tuple[MAPFObs, MAPFState]:
        """A fresh level drawn from this env's own config."""
        k_gen, k_reset = jax.random.split(key)
        return self.reset_to_level(k_reset, self.generate(k_gen, params), params)

    def reset_to_level(self, key: jax.Array, level: Level,
                       params: MAPFConfig) -> tuple[MAPFObs, MAPFState]:
        """Start an episode on a given level (evaluation on fixed levels)."""
        del key
        a = self.cap.max_agents
        level = with_derived(level, self.cap)  # stored levels lack the per-level fields
        active = level.agent_mask()
        home = active & jnp.all(level.starts == level.goals, -1)
        state = MAPFState(
            time=jnp.int32(0), level=level, pos=level.starts, tried=level.starts,
            frozen=home & (params.goal_rule == FREEZE),
            cost=(active & ~home).astype(jnp.int32),
            step_limit=step_limit(level, params, self.cap.max_steps),
            success=jnp.all(home | ~active), failed=jnp.bool_(False),
            violations=jnp.zeros(4, jnp.int32),
        )
        chex.assert_shape(state.pos, (a, 2))
        return self.get_obs(state, params), state

    def step_env(self, key: jax.Array, state: MAPFState, action: jax.Array,
                 params: MAPFConfig) -> tuple[MAPFObs, MAPFState, jax.Array, jax.Array, dict]:
        """One joint move under docs/rules.md (no auto-reset); reward is per agent [A]."""
        state, reward, terminated, info = self.transition(key, state, action, params)
        return self.get_obs(state), state, reward, terminated, info

    def transition(self, key: jax.Array, state: MAPFState, action: jax.Array,
                   params: MAPFConfig) -> tuple[MAPFState, jax.Array, jax.Array, dict]:
        """The rules alone (no observation, no auto-reset): state, reward [A], terminated, info.

        Costs follow the verifier (docs/plan_format.md): an agent's cost is 1 + the last time it
        is off its goal, so under the plan rule an episode's costs are its traced plan's. The
        cost rewards are paid on success only, as minus the verifier's costs of the plan: an
        invalid plan has no cost (the paper's reward gives it 0), so failing early never pays.
        """
        lv = state.level
        active = lv.agent_mask()
        movable = active & ~state.frozen
        home_before = on_goal(state)
        u, side = rules.slip_noise(key, self.cap.max_agents)
        act = jnp.where(movable, jnp.asarray(action, jnp.int32), rules.STAY)
        act = rules.apply_slip(act, u, side, params.slip_prob)
        tgt = state.pos + rules.DELTAS[act]
        v = rules.violations(lv.holes, lv.size, state.pos, tgt, active)
        new_pos = rules.resolve(lv.holes, state.pos, tgt, active, v)
        broke = v.any()
        fail_mode = params.conflict_mode == FAIL
        failed = fail_mode & jnp.any(broke)
        at_goal = jnp.all(new_pos == lv.goals, -1) & active
        success = jnp.all(at_goal | ~active) & ~failed
        time = state.time + 1
        frozen = (state.frozen | at_goal) & (params.goal_rule == FREEZE)
        cost = jnp.where(active & ~at_goal, time + 1, state.cost)
        makespan = jnp.max(jnp.where(active, cost, 0))

        blocked = jnp.any(new_pos != tgt, -1) & active
        penalised = jnp.where(fail_mode, broke, blocked)
        progress = rules.manhattan(state.pos, lv.goals) - rules.manhattan(new_pos, lv.goals)
        reward = (params.success_reward * success
                  - params.step_cost * (active & ~home_before)
                  + params.shaping * progress * movable
                  - params.conflict_penalty * penalised
                  - success * (params.soc_cost * cost + params.makespan_cost * makespan))
        reward = jnp.where(active, reward, 0.0).astype(jnp.float32)

        counts = v.counts()
        state = state.replace(time=time, pos=new_pos, tried=tgt, frozen=frozen, cost=cost,
                              success=success, failed=failed,
                              violations=state.violations + counts)
        terminated = success | failed
        cause = jnp.where(failed, 1 + jnp.argmax(counts > 0), 0)
        info = {"success": success, "failed": failed, "cause": cause.astype(jnp.int32)}
        return state, reward, terminated, info

    def is_truncated(self, state: MAPFState, params: MAPFConfig) -> jax.Array:
        return (state.time >= state.step_limit) & ~state.success & ~state.failed

    def is_terminated(self, state: MAPFState, params: MAPFConfig) -> jax.Array:
        return state.success | state.failed

    # ------------------------------------------------------------ observations
    def get_obs(self, state: MAPFState, params: Any = None, key: Any = None) -> MAPFObs:
        """Egocentric local views plus goal vectors, for every agent slot.

        Three padded uint8 planes (obstacle, agents, goals) are built once per env; each agent
        slices its window and only corrects its own cell and its own goal.
        """
        lv, r = state.level, self.cap.view_radius
        s, v = self.cap.max_size, 2 * r + 1
        active = lv.agent_mask()
        grid = self._planes(state)
        # Outside the padded map is obstacle; no agents or goals there.
        planes = jnp.pad(grid, ((r, r), (r, r), (0, 0))).at[..., 0].set(
            jnp.pad(grid[..., 0], r, constant_values=1))
        offs = jnp.arange(v) - r
        centre = ((offs[:, None] == 0) & (offs[None, :] == 0))[..., None]

        def view(pos, goal):
            w = jax.lax.dynamic_slice(planes, (pos[0], pos[1], 0), (v, v, 3))
            rel = goal - pos
            own = ((offs[:, None] == rel[0]) & (offs[None, :] == rel[1]))[..., None]
            return jnp.concatenate([w[..., :1], jnp.where(centre, 0, w[..., 1:2]),
                                    own.astype(jnp.uint8), jnp.where(own, 0, w[..., 2:])], -1)

        views = jnp.where(active[:, None, None, None], jax.vmap(view)(state.pos, lv.goals), 0)
        goal_vec = jnp.where(active[:, None], (lv.goals - state.pos) / s, 0.0)
        at_goal = on_goal(state)
        return MAPFObs(view=views.astype(jnp.uint8), goal_vec=goal_vec.astype(jnp.float32),
                       agent_mask=active, at_goal=at_goal, acting=active & ~state.frozen,
                       cost_to_go=self.cost_to_go(state) if self.cap.cost_to_go else None,
                       priority=self.priority_view(state) if self.cap.priority else None,
                       intent=self.intent_view(state) if self.cap.intent else None)

    def cost_to_go(self, state: MAPFState) -> jax.Array:
        """[A, 5] float32 (`MAPFObs.cost_to_go`): five reads of the level's distance fields."""
        lv, s = state.level, self.cap.max_size
        _, inside, d = self._target_distances(state)
        reachable = d[:, :1] < DIST_INF
        shorter = inside[:, 1:] & (d[:, 1:] < d[:, :1])
        moves = jnp.where(shorter, -1.0, 1.0)
        here = jnp.minimum(d[:, :1] / s, CTG_MAX)
        out = jnp.concatenate([here, moves], -1)
        keep = lv.agent_mask()[:, None] & reachable
        return jnp.where(keep, out, 0.0).astype(jnp.float32)

    def priority_view(self, state: MAPFState) -> jax.Array:
        """[A, V, V] uint8 (`MAPFObs.priority`): each agent's window of the active agents with
        a lower slot index than its own."""
        slot = jnp.arange(self.cap.max_agents)
        return self._others_window(state.pos, state, slot[None, :] < slot[:, None])

    def intent_view(self, state: MAPFState) -> jax.Array:
        """[A, V, V] uint8 (`MAPFObs.intent`): each agent's window of the cells the other
        active agents would enter by their first move that shortens their distance to their
        goal (their own cell when on the goal or cut off from it): where a neighbour is likely
        headed, so that a vertex or edge conflict can be seen one step before it happens."""
        cells, inside, d = self._target_distances(state)
        d = jnp.where(inside, d, DIST_INF)
        shortens = (d[:, 1:].min(-1) < d[:, 0]) & (d[:, 0] < DIST_INF)  # cut off: stays
        move = jnp.where(shortens, jnp.argmin(d[:, 1:], -1) + 1, 0)
        target = jnp.take_along_axis(cells, move[:, None, None], 1)[:, 0]
        slot = jnp.arange(self.cap.max_agents)
        return self._others_window(target, state, slot[None, :] != slot[:, None])

    def _others_window(self, cells: jax.Array, state: MAPFState, pair: jax.Array) -> jax.Array:
        """[A, V, V] uint8: 1 in agent a's window at `cells[b]` ([A, 2]) for every active b with
        `pair[a, b]`. A points per agent, so O(A^2): meant for the few agents of the paper's
        levels."""
        r = self.cap.view_radius
        v = 2 * r + 1
        active = state.level.agent_mask()

        def window(pos, mine):
            rel = cells - pos + r
            seen = active & mine & jnp.all((rel >= 0) & (rel < v), -1)
            return views.mark_cells(jnp.clip(rel, 0, v - 1), seen, v)

        out = jax.vmap(window)(state.pos, pair)
        return jnp.where(active[:, None, None], out, 0)

    def _target_distances(self, state: MAPFState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`_move_targets` and each target's distance to its agent's goal, [A, 5] int32 (five
        reads of `Level.dist`; a target off the grid reads a clipped cell: mask it with
        `inside`)."""
        cells, inside = self._move_targets(state)
        c = jnp.clip(cells, 0, self.cap.max_size - 1)
        d = state.level.dist[jnp.arange(self.cap.max_agents)[:, None], c[..., 0], c[..., 1]]
        return cells, inside, d.astype(jnp.int32)

    def _move_targets(self, state: MAPFState) -> tuple[jax.Array, jax.Array]:
        """The cells each action would enter, [A, 5, 2] (stay first), and whether they are
        inside the grid, [A, 5]."""
        cells = state.pos[:, None, :] + rules.DELTAS[None]
        return cells, rules.in_bounds(cells, state.level.size)

    def packed_views(self, state: MAPFState) -> jax.Array:
        """`get_obs(state).view` bit-packed: [A, V, 4] uint32, bit j of [a, i, c] is cell (i, j)
        of channel c (`jaxenv.mapf.views`; `views.unpack` gives the uint8 views back exactly).
        176 bytes per agent at V = 11 instead of 484, for readers that unpack where they read;
        needs max_size <= 32 (`views.packable`)."""
        lv, r = state.level, self.cap.view_radius
        if lv.rows is None:
            return views.packed_views(self._planes(state), lv.size, state.pos, lv.goals,
                                      lv.agent_mask(), r)
        views.check_packable(self.cap.max_size, r)
        # The level's obstacle and goal rows are packed once per level: pack the agents only.
        agents = views.pack_rows(self._agents_plane(state))
        rows3 = jnp.stack([lv.rows[0], agents, lv.rows[1]])
        return views.packed_views_of_rows(rows3, lv.size, state.pos, lv.goals,
                                          lv.agent_mask(), r)

    def _planes(self, state: MAPFState) -> jax.Array:
        """[S, S, 3] uint8 map of (obstacle or outside the grid, active agents, their goals)."""
        lv = state.level
        obstacle, goals = views.static_planes(lv.holes, lv.size, lv.goals, lv.agent_mask())
        return jnp.stack([obstacle, self._agents_plane(state), goals], -1)

    def _agents_plane(self, state: MAPFState) -> jax.Array:
        """[S, S] uint8: 1 where an active agent stands."""
        return views.mark_cells(state.pos, state.level.agent_mask(), self.cap.max_size)

    def global_state(self, state: MAPFState) -> jax.Array:
        """[S, S, 4] uint8 map for a centralised critic, channels GLOBAL_CHANNELS."""
        done = views.mark_cells(state.pos, on_goal(state), self.cap.max_size)
        return jnp.concatenate([self._planes(state), done[..., None]], -1)

    # ------------------------------------------------------- multi-agent protocol
    def agent_obs(self, obs: MAPFObs, state: MAPFState, with_global: bool = False) -> AgentObs:
        """Each agent's network input: its local view (with `Capacity.priority` and
        `Capacity.intent`, those planes as further channels in that order), (goal vector,
        at-goal, cost-to-go), its position and masks; the action mask rules out only moves off
        the grid (holes and conflicts stay choosable: they are failures the engineer must
        see)."""
        vec = jnp.concatenate([obs.goal_vec, obs.at_goal[..., None].astype(jnp.float32)]
                              + ([obs.cost_to_go] if obs.cost_to_go is not None else []), -1)
        _, inside = self._move_targets(state)
        extra = [p[..., None] for p in (obs.priority, obs.intent) if p is not None]
        view = jnp.concatenate([obs.view, *extra], -1) if extra else obs.view
        return AgentObs(vec=vec, agent_mask=obs.agent_mask,
                        acting=obs.acting, view=view,
                        glob=self.global_state(state) if with_global else None,
                        pos=(state.pos / self.cap.max_size).astype(jnp.float32),
                        action_mask=inside)

    def outcome(self, info: dict, terminated: jax.Array, truncated: jax.Array) -> jax.Array:
        """Index into `CAUSES`: the violation that failed the episode, timeout, or 0."""
        ran_out = truncated & ~info["success"]
        return jnp.where(info["failed"], info["cause"],
                         jnp.where(ran_out, TIMEOUT, 0)).astype(jnp.int32)

    def episode_metrics(self, state: MAPFState) -> dict[str, jax.Array]:
        """The paper's per-instance numbers of a finished episode (docs/rules.md costs).

        valid: every agent on its goal with no violation; makespan / soc: -1 unless valid;
        optimal: valid at the level's optimal makespan (the verifier's default cost; unknown
        optima never count), optimal_soc: at its optimal sum of costs; isr: the share of the
        level's agents on their goals at the end.
        """
        lv = state.level
        active = lv.agent_mask()
        on_goal = jnp.all(state.pos == lv.goals, -1) & active
        valid = state.success & (state.violations.sum(-1) == 0)
        cost = jnp.where(active, state.cost, 0)
        makespan = jnp.where(valid, cost.max(-1), -1).astype(jnp.int32)
        soc = jnp.where(valid, cost.sum(-1), -1).astype(jnp.int32)
        opt_ms = valid & (lv.opt_makespan >= 0) & (makespan == lv.opt_makespan)
        opt_soc = valid & (lv.opt_soc >= 0) & (soc == lv.opt_soc)
        return {"valid": valid, "optimal": opt_ms, "optimal_makespan": opt_ms,
                "optimal_soc": opt_soc, "isr": on_goal.sum(-1) / jnp.maximum(lv.n_agents, 1),
                "makespan": makespan, "soc": soc, "n_agents": lv.n_agents, "size": lv.size}

    def trace(self, state: MAPFState) -> jax.Array:
        """What a recorded trajectory keeps per time step: positions [A, 2] int8.

        The step that fails an episode records the cells the agents *tried* to enter, so the
        traced plan shows the violation and the verifier rejects it as the environment did
        (`jaxenv.mapf.plans.episodes`). Cells are clipped to the int8 range.
        """
        cells = jnp.where(state.failed, state.tried, state.pos)
        return jnp.clip(cells, -128, 127).astype(jnp.int8)

    def sample_actions(self, key: jax.Array) -> jax.Array:
        """Uniformly random joint action [A]."""
        return jax.random.randint(key, (self.cap.max_agents,), 0, rules.NUM_ACTIONS)
