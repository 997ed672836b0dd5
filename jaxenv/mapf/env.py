"""MAPF-FrozenLake as a gymnax 1.0 environment whose params are a dynamic config pytree.

`reset(key, cfg)` and `step(key, state, actions, cfg)` are pure; `cfg` is a `MAPFConfig`
(one per environment when vmapped), so thousands of differently configured environments run
in one `vmap` under one `jit` and a new config never recompiles. Static capacity (grid, agents,
view radius, step cap) is fixed on the env object. All per-agent arrays are [max_agents, ...]
with an agent mask; rewards are per agent. The env keeps the rules (`jaxenv.mapf.rules`);
what the agents see is its injected `Observer` (`jaxenv.mapf.observe`).

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
from gymnax.environments import environment, spaces

from jaxenv.agents import AgentObs
from jaxenv.mapf import rules
from jaxenv.mapf.config import FAIL, FREEZE, Capacity, MAPFConfig, make_config_space
from jaxenv.mapf.generator import generate, with_derived
from jaxenv.mapf.level import Level
from jaxenv.mapf.observe import MAPFObs, Observer
from jaxenv.mapf.rules import CAUSES, TIMEOUT
from jaxenv.mapf.state import MAPFState, on_goal
from jaxenv.wrappers import AutoReset


def step_limit(level: Level, cfg: MAPFConfig, max_steps: int) -> jax.Array:
    """Episode limit (docs/rules.md): factor * (longest Manhattan start-goal distance + N)."""
    far = jnp.max(jnp.where(level.agent_mask(), rules.manhattan(level.starts, level.goals), 0))
    lim = jnp.ceil(cfg.step_limit_factor * (far + level.size)).astype(jnp.int32)
    return jnp.clip(lim, 1, max_steps)


class MAPFFrozenLake(environment.Environment[MAPFState, MAPFConfig]):
    """Multi-agent path finding on a frozen lake (see docs/rules.md)."""

    outcomes = CAUSES

    def __init__(self, capacity: Capacity | None = None, observer: Observer | None = None):
        """`observer`: what the agents see (default: `Observer(capacity)`, the planes the
        capacity's flags turn on); it must be of the same capacity."""
        super().__init__()
        self.cap = capacity or Capacity()
        self.observer = Observer(self.cap) if observer is None else observer
        if self.observer.cap != self.cap:
            raise ValueError(f"the observer's capacity {self.observer.cap} is not the env's "
                             f"{self.cap}")
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
        return self.observer.space()

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
        """What every agent slot sees (`jaxenv.mapf.observe`)."""
        return self.observer.observe(state)

    # ------------------------------------------------------- multi-agent protocol
    def agent_obs(self, obs: MAPFObs, state: MAPFState, with_global: bool = False) -> AgentObs:
        """Each agent's network input (`Observer.agent_obs`)."""
        return self.observer.agent_obs(obs, state, with_global)

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
        (`jaxenv.mapf.plans.verify.episode_plans`). Cells are clipped to the int8 range.
        """
        cells = jnp.where(state.failed, state.tried, state.pos)
        return jnp.clip(cells, -128, 127).astype(jnp.int8)

    def sample_actions(self, key: jax.Array) -> jax.Array:
        """Uniformly random joint action [A]."""
        return jax.random.randint(key, (self.cap.max_agents,), 0, rules.NUM_ACTIONS)
