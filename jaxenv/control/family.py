"""A physics family: a gymnax task whose physics are drawn per episode from an edited distribution.

The three objects, in MAPF's shapes so one loop drives every family: the *config* (what the
engineer edits) is a distribution over physics, per parameter ``p_min`` / ``p_max``, whose
default pins the standard task; a *level* is one physics variant (one float32 per varied
parameter), from which `Family.env_params` builds consistent gymnax params inside each step;
the *rules* (step, thresholds, horizon) are fixed per family. `ControlEnv` is the gymnax
environment of one family: the level rides in its state (no recompile across variants), a
non-finite state ends the episode (outcome ``nonfinite``, no NaN reaches a trainee), and it
speaks the one-agent case of `jaxenv.agents`. Semantics in full: docs/families.md.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxenv.agents import AgentObs
from jaxenv.batching import select
from jaxenv.config_space import ConfigSpace, Knob
from jaxenv.wrappers import AutoReset

NONFINITE = "nonfinite"
TIME_LIMIT = "time_limit"
RUNNING = -1  # `ControlState.cause` of an episode that has not ended


@dataclasses.dataclass(frozen=True)
class Param:
    """One physical parameter a family varies: its standard value and bounds.

    The engineer's knobs ``{name}_min`` / ``{name}_max`` range over [low, high] on a grid of
    `step`; the held-out and validation sets span the same bounds (`span`, as multipliers of
    the standard value; see `jaxenv.control.sets`).
    """

    name: str  # field of the gymnax EnvParams (derived fields follow in `Family.build`)
    unit: str
    description: str  # what it is, one sentence (the LLM reads it)
    nominal: float  # the standard task's value
    low: float
    high: float
    step: float

    def __post_init__(self) -> None:
        if not (0 < self.low <= self.nominal <= self.high):
            raise ValueError(f"{self.name}: need 0 < low <= nominal <= high, got "
                             f"{self.low}, {self.nominal}, {self.high}")

    @property
    def span(self) -> tuple[float, float]:
        """The bounds as multipliers of the standard value."""
        return self.low / self.nominal, self.high / self.nominal


@dataclasses.dataclass(frozen=True)
class Family:
    """Everything task-specific about one family; `ControlEnv` is generic over it.

    build: drawn values (name -> [] float32) -> the raw env's ``EnvParams`` (all arrays,
    derived fields computed, the rules filled in). level_cls: the family's level pytree
    (`level_class`).
    cause: (raw state, params) -> [] int32 index into `outcomes` of a natural termination
    (called only where the raw env terminated).
    """

    name: str  # registry name, e.g. "cartpole"
    gym_id: str  # e.g. "CartPole-v1"
    raw: Callable[[], environment.Environment]  # the raw gymnax env class
    params: tuple[Param, ...]
    build: Callable[[Mapping[str, jax.Array]], Any]
    level_cls: type
    outcomes: tuple[str, ...]  # index 0: the task's success or normal end
    cause: Callable[[Any, Any], jax.Array]
    horizon: int  # the task's episode limit (a rule)
    success_threshold: float  # return at or above which an episode is a success
    return_range: tuple[float, float]  # (worst, best) return: 0 and 1 of the normalised return
    worst_reward: float  # step reward of a non-finite step (the task's worst)
    continuous: bool = False  # one real action (Pendulum's torque) rather than discrete ones
    action_bound: float = 0.0  # continuous: the action space is [-bound, bound]
    action_dim: int = 1  # continuous: the action's size (brax's hopper: 3 motors)
    notes: str = ""  # where the family departs from the raw task (docs, the LLM's guidelines)

    def __post_init__(self) -> None:
        if self.outcomes[-1] != NONFINITE or TIME_LIMIT not in self.outcomes:
            raise ValueError(f"{self.name}: outcomes need {TIME_LIMIT!r} and end with "
                             f"{NONFINITE!r}, got {self.outcomes}")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def nominal(self) -> dict[str, float]:
        return {p.name: p.nominal for p in self.params}

    def level(self, values: Mapping[str, Any] | None = None) -> Any:
        """One level from plain values (missing parameters at their standard value)."""
        vals = {**self.nominal(), **dict(values or {})}
        unknown = sorted(set(vals) - set(self.param_names))
        if unknown:
            raise ValueError(f"{self.name}: unknown parameters {unknown} "
                             f"(known: {', '.join(self.param_names)})")
        return self.level_cls(**{k: jnp.asarray(v, jnp.float32) for k, v in vals.items()})

    def levels(self, values: np.ndarray) -> Any:
        """A batch of levels from a [N, K] array of values (columns in `param_names` order)."""
        values = np.asarray(values, np.float32)
        if values.ndim != 2 or values.shape[1] != len(self.params):
            raise ValueError(f"{self.name}: expected values [N, {len(self.params)}], "
                             f"got {values.shape}")
        return self.level_cls(**{p.name: jnp.asarray(values[:, i])
                                  for i, p in enumerate(self.params)})

    def env_params(self, level: Any) -> Any:
        """A level's raw gymnax ``EnvParams`` (derived fields computed, rules filled in)."""
        return self.build({p.name: getattr(level, p.name) for p in self.params})


# ------------------------------------------------------------------------- the config


def range_config_class(family_name: str, params: Sequence[Param], module: str) -> type:
    """The config pytree of a family: one float32 array per knob ``{p}_min`` / ``{p}_max``.

    Built once per family module and stored there under its name, so it pickles and
    `isinstance` checks (the trainee's evaluator) see one class.
    """
    fields = {f"{p.name}_{end}": jax.Array for p in params for end in ("min", "max")}
    doc = (f"The {family_name} training distribution: per physical parameter the ends of the "
           f"uniform range each episode's value is drawn from.")
    cls = struct.dataclass(type(f"{family_name}Config", (), {
        "__annotations__": fields, "__module__": module, "__doc__": doc}))
    setattr(sys.modules[module], cls.__name__, cls)
    return cls


def constant_cause(outcomes: Sequence[str], outcome: str) -> Callable[[Any, Any], jax.Array]:
    """A family's ``cause`` when every termination means the same (``outcome``): Acrobot and
    MountainCar end only at the goal, brax's envs only when they fall, Pendulum never."""
    index = jnp.int32(list(outcomes).index(outcome))
    return lambda state, params: index


def level_class(family_name: str, params: Sequence[Param], module: str,
                gather_rows: bool = True) -> type:
    """The level pytree of a family: one float32 array per varied parameter (see
    `range_config_class` for why it is built once and stored in its module).

    `gather_rows`: how a level pool is read (`jaxenv.levels.take_rows`): one gather of a row
    of all parameters, or one per parameter; set by the family from `benchmarks/families.py
    --explain`, whichever keeps its pooled step closer to the raw env's rate."""
    fields = {p.name: jax.Array for p in params}
    doc = f"One {family_name} physics variant: the value of each varied parameter."
    cls = struct.dataclass(type(f"{family_name}Level", (), {
        "__annotations__": fields, "__module__": module, "__doc__": doc,
        "gather_rows": gather_rows}))
    setattr(sys.modules[module], cls.__name__, cls)
    return cls


def make_range_space(params: Sequence[Param], config_cls: type) -> ConfigSpace:
    """The engineer's knobs: ``{p}_min`` and ``{p}_max`` per parameter, defaults pinning the
    standard value (see the module docstring)."""
    knobs = []
    for p in params:
        for end, word in (("min", "Lowest"), ("max", "Highest")):
            knobs.append(Knob(
                name=f"{p.name}_{end}", kind="float", low=p.low, high=p.high, step=p.step,
                default=p.nominal,
                description=(f"{word} {p.description[0].lower()}{p.description[1:].rstrip('.')}"
                             f" ({p.unit}) of the training distribution; each episode draws "
                             f"{p.name} uniformly between {p.name}_min and {p.name}_max "
                             f"(standard task: {p.nominal:g}).")))

    def build(enc: Mapping[str, Any]) -> Any:
        return config_cls(**{k: jnp.asarray(v, jnp.float32) for k, v in enc.items()})

    return ConfigSpace(knobs, build)


# --------------------------------------------------------------------------- the env


@struct.dataclass
class ControlState:
    """The raw env's state plus the episode's physics and what an evaluation reads at its end."""

    env: Any  # the raw gymnax state (float32 fields, int32 time)
    level: Any  # this episode's physics (the family's level)
    ret: jax.Array  # [] float32 return so far
    cause: jax.Array  # [] int32 index into `outcomes` once ended by the env, else RUNNING


def _canonical(tree: Any) -> Any:
    """Every leaf an array of float32 (floats) or int32 (ints), so carries never change type."""
    def fix(x: Any) -> jax.Array:
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.floating):
            return x.astype(jnp.float32)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return x.astype(jnp.int32)
        return x
    return jax.tree.map(fix, tree)


def _all_finite(*trees: Any) -> jax.Array:
    leaves = [x for t in trees for x in jax.tree.leaves(t)
              if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


class ControlEnv(environment.Environment):
    """One physics family as a jaxenv environment with levels (see the module docstring).

    Actions are ``[1]`` (an int for discrete tasks, a float torque for Pendulum; ``[D]`` floats
    for a family whose ``action_dim`` is D, e.g. brax's hopper), rewards ``[1]``: the one-agent
    case of `jaxenv.agents.MultiAgentEnv`.
    """

    num_agents = 1

    def __init__(self, family: Family, config_cls: type):
        super().__init__()
        self.family = family
        self.raw = family.raw()
        self.config_space = make_range_space(family.params, config_cls)
        self.outcomes = family.outcomes
        self.horizon = family.horizon
        self._auto_reset = AutoReset(self)
        self._time_limit = family.outcomes.index(TIME_LIMIT)
        self._nonfinite = len(family.outcomes) - 1
        self._finite_parts = getattr(self.raw, "finite_parts", lambda raw_state: raw_state)

    # ------------------------------------------------------------------ gymnax
    @property
    def name(self) -> str:
        return self.family.gym_id

    @property
    def num_actions(self) -> int:
        return self.raw.num_actions

    @property
    def continuous(self) -> bool:
        return self.family.continuous

    @property
    def action_dim(self) -> int:
        """Size of a continuous action (the trainee's Gaussian head); 0: discrete actions."""
        return self.family.action_dim if self.continuous else 0

    @property
    def default_params(self) -> Any:
        return self.config_space.to_config()

    def action_space(self, params: Any = None) -> spaces.Box:
        if self.continuous:
            b = self.family.action_bound
            return spaces.Box(-b, b, (self.action_dim,), jnp.float32)
        return spaces.Box(0, self.num_actions - 1, (1,), jnp.int32)

    def observation_space(self, params: Any = None) -> spaces.Box:
        return self.raw.observation_space(self.raw.default_params)

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: ControlState, action: jax.Array,
             params: Any = None):
        """gymnax's step; a finished episode restarts on a fresh variant of this config."""
        return self._auto_reset.step(key, state, action, params)

    # ------------------------------------------------------------------ levels
    def generate(self, key: jax.Array, cfg: Any) -> Any:
        """One physics variant: each parameter uniform between its ``_min`` and ``_max``."""
        u = jax.random.uniform(key, (len(self.family.params),), jnp.float32)
        vals = {}
        for i, p in enumerate(self.family.params):
            a, b = getattr(cfg, f"{p.name}_min"), getattr(cfg, f"{p.name}_max")
            lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
            vals[p.name] = lo + u[i] * (hi - lo)
        return self.family.level_cls(**vals)

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, ControlState]:
        k_gen, k_reset = jax.random.split(key)
        return self.reset_to_level(k_reset, self.generate(k_gen, params), params)

    def reset_to_level(self, key: jax.Array, level: Any,
                       params: Any = None) -> tuple[jax.Array, ControlState]:
        """Start an episode on one physics variant (the raw env's reset under its params)."""
        obs, raw_state = self.raw.reset_env(key, self.family.env_params(level))
        state = ControlState(env=_canonical(raw_state), level=level, ret=jnp.float32(0.0),
                             cause=jnp.int32(RUNNING))
        return jnp.asarray(obs, jnp.float32), state

    def step_env(self, key: jax.Array, state: ControlState, action: jax.Array,
                 params: Any) -> tuple[jax.Array, ControlState, jax.Array, jax.Array, dict]:
        """One raw step under the episode's physics, with the non-finite guard; reward [1]."""
        a = jnp.reshape(action, (-1,))
        a = a.astype(jnp.float32) if self.continuous else a[0].astype(jnp.int32)
        p = self.family.env_params(state.level)
        obs, raw_state, reward, term, _ = self.raw.step_env(key, state.env, a, p)
        raw_state = _canonical(raw_state)
        # The observation is a function of the state (`get_obs`): checking the state and the
        # reward covers it, and lets XLA drop the observation when only the next one is read.
        # A raw env may name the part of its state to check (`finite_parts`: brax's checks
        # q, qd and the observation, not every derived field of its pipeline state).
        finite = _all_finite(self._finite_parts(raw_state), reward)
        cause = jnp.where(finite, jnp.where(term, self.family.cause(raw_state, p),
                                            RUNNING), self._nonfinite).astype(jnp.int32)
        reward = jnp.where(finite, reward, self.family.worst_reward).astype(jnp.float32)
        obs = jnp.where(finite, obs, 0.0).astype(jnp.float32)
        raw_state = select(finite, raw_state, state.env.replace(time=raw_state.time))
        state = ControlState(env=raw_state, level=state.level, ret=state.ret + reward,
                             cause=cause)
        terminated = term | ~finite
        info = {"cause": cause, "nonfinite": ~finite}
        return obs, state, jnp.reshape(reward, (1,)), terminated, info

    def is_truncated(self, state: ControlState, params: Any) -> jax.Array:
        return (state.env.time >= self.horizon) & (state.cause == RUNNING)

    def is_terminated(self, state: ControlState, params: Any) -> jax.Array:
        return state.cause != RUNNING

    def get_obs(self, state: ControlState, params: Any = None, key: Any = None) -> jax.Array:
        return jnp.asarray(self.raw.get_obs(state.env), jnp.float32)

    # ----------------------------------------------------- multi-agent protocol
    def agent_obs(self, obs: jax.Array, state: ControlState,
                  with_global: bool = False) -> AgentObs:
        one = jnp.ones((1,), bool)
        return AgentObs(vec=jnp.reshape(obs, (1, -1)).astype(jnp.float32), agent_mask=one,
                        acting=one)

    def outcome(self, info: dict, terminated: jax.Array, truncated: jax.Array) -> jax.Array:
        """Index into `outcomes`: the env's cause if it ended the episode, else the time-out."""
        return jnp.where(terminated, info["cause"], self._time_limit).astype(jnp.int32)

    def episode_outcome(self, state: ControlState) -> jax.Array:
        """How an episode ended, read from its last state (RUNNING if it has not)."""
        timed_out = state.env.time >= self.horizon
        return jnp.where(state.cause != RUNNING, state.cause,
                         jnp.where(timed_out, self._time_limit, RUNNING)).astype(jnp.int32)

    def episode_metrics(self, state: ControlState) -> dict[str, jax.Array]:
        """Per-episode numbers read at its end: return, normalised return, success, length."""
        worst, best = self.family.return_range
        return {
            "return": state.ret,
            "normalized_return": jnp.clip((state.ret - worst) / (best - worst), 0.0, 1.0),
            "success": (state.ret >= self.family.success_threshold)
                       & (state.cause != self._nonfinite),
            "length": state.env.time,
            "nonfinite": state.cause == self._nonfinite,
        }

    def trace(self, state: ControlState) -> jax.Array:
        """What a recorded trajectory keeps per step: the raw observation."""
        return self.get_obs(state)
