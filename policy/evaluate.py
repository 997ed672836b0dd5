"""Evaluation: one jitted call runs a policy on a whole batch of levels.

`evaluate(params, levels_or_cfgs, key, env=..., network=...)` takes either a batched `Level`
(e.g. the 3,150 held-out levels) or a batched `MAPFConfig` (then `n_per_config` fresh levels
are generated from each config inside the same jit) and returns an `EvalResult` with, per
instance: valid, optimal (by makespan, the default of `jaxenv.mapf.plans.verify_plan`, or by
sum of costs), ISR (share of agents on their goal at the end), makespan, sum of costs, the
failure cause (an index into `jaxenv.mapf.env.CAUSES`), and the compact trajectory (positions
and actions over time, int8) that `failure_samples` renders as text for a reader.

Episodes run without auto-reset in a `lax.while_loop` that stops when every episode is over,
so a batch of short levels costs its longest episode, not `max_steps`. Costs follow
docs/rules.md: an agent's cost is its arrival time on its goal (agents freeze there, so first
and last arrival coincide); makespan and SoC are -1 unless the episode is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxenv.mapf.config import MAPFConfig
from jaxenv.mapf.env import CAUSES, MAPFFrozenLake, MAPFState
from jaxenv.mapf.generator import generate_many
from jaxenv.mapf.level import Level
from jaxenv.mapf.rules import DELTAS
from policy.network import ActorCritic, agent_input

Mode = Literal["greedy", "sample"]
Cost = Literal["makespan", "soc"]
ACTION_NAMES = ("stay", "up", "down", "left", "right")
TIMEOUT = CAUSES.index("timeout")


@struct.dataclass
class EvalResult:
    """Per-instance outcomes, leading axis N (numpy or jax arrays)."""

    valid: jax.Array  # [N] bool: every agent on its goal, no violation
    optimal: jax.Array  # [N] bool: valid and the chosen cost equals the level's optimum
    optimal_makespan: jax.Array  # [N] bool
    optimal_soc: jax.Array  # [N] bool
    isr: jax.Array  # [N] float32: share of active agents on their goal at the end
    makespan: jax.Array  # [N] int32, -1 unless valid
    soc: jax.Array  # [N] int32, -1 unless valid
    cause: jax.Array  # [N] int32 index into CAUSES ("none" when valid)
    steps: jax.Array  # [N] int32 episode length
    n_agents: jax.Array  # [N] int32
    size: jax.Array  # [N] int32
    positions: jax.Array | None = None  # [N, T+1, A, 2] int8 (row, col) at each time
    actions: jax.Array | None = None  # [N, T, A] int8 chosen actions
    levels: Level | None = None  # [N] the levels played (generated ones in config mode)

    def numpy(self) -> EvalResult:
        return jax.tree.map(np.asarray, self)

    def rates(self) -> dict[str, float]:
        """Batch means: valid, optimal, ISR and the share of each failure cause."""
        r = self.numpy()
        out = {"valid": float(r.valid.mean()), "optimal": float(r.optimal.mean()),
               "isr": float(r.isr.mean())}
        out.update({c: float((r.cause == i).mean()) for i, c in enumerate(CAUSES) if i})
        return out


@struct.dataclass
class _Carry:
    t: jax.Array
    state: MAPFState  # [N]
    done: jax.Array  # [N] bool
    cause: jax.Array  # [N] int32
    steps: jax.Array  # [N] int32
    key: jax.Array
    positions: jax.Array | None
    actions: jax.Array | None


class Evaluator:
    """A jitted evaluator for one env capacity and network (see the module docstring)."""

    def __init__(self, env: MAPFFrozenLake, network: ActorCritic, *, cost: Cost = "makespan",
                 record: bool = True, rules: MAPFConfig | None = None):
        if cost not in ("makespan", "soc"):
            raise ValueError(f"cost must be 'makespan' or 'soc', got {cost!r}")
        self.env = env if type(env) is MAPFFrozenLake else MAPFFrozenLake(env.cap)
        self.network, self.cost, self.record = network, cost, record
        self.rules = self.env.default_params if rules is None else rules
        self._levels = jax.jit(self._run_levels, static_argnames=("mode",))
        self._cfgs = jax.jit(self._run_cfgs, static_argnames=("mode", "n"))

    def __call__(self, params, levels_or_cfgs: Level | MAPFConfig, key: jax.Array, *,
                 mode: Mode = "greedy", n_per_config: int = 1) -> EvalResult:
        if mode not in ("greedy", "sample"):
            raise ValueError(f"mode must be 'greedy' or 'sample', got {mode!r}")
        if isinstance(levels_or_cfgs, Level):
            levels_or_cfgs.check_shapes()
            chex.assert_rank(levels_or_cfgs.size, 1)
            if levels_or_cfgs.max_agents != self.env.cap.max_agents or \
                    levels_or_cfgs.max_size != self.env.cap.max_size:
                raise ValueError(f"levels are padded to {levels_or_cfgs.max_size}x"
                                 f"{levels_or_cfgs.max_size}, {levels_or_cfgs.max_agents} agents; "
                                 f"the evaluator's env has capacity {self.env.cap}")
            return self._levels(params, levels_or_cfgs, key, mode=mode)
        if isinstance(levels_or_cfgs, MAPFConfig):
            chex.assert_rank(levels_or_cfgs.slip_prob, 1)
            return self._cfgs(params, levels_or_cfgs, key, mode=mode, n=n_per_config)
        raise TypeError(f"evaluate takes a batched Level or MAPFConfig, got "
                        f"{type(levels_or_cfgs).__name__}")

    # ----------------------------------------------------------------- jitted
    def _run_cfgs(self, params, cfgs: MAPFConfig, key: jax.Array, *, mode: Mode, n: int):
        c = cfgs.slip_prob.shape[0]
        k_gen, k_run = jax.random.split(key)
        keys = jax.random.split(k_gen, c * n)
        per = jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), cfgs)
        levels = generate_many(keys, per, self.env.cap)
        return self._rollout(params, levels, per, k_run, mode)

    def _run_levels(self, params, levels: Level, key: jax.Array, *, mode: Mode):
        n = levels.size.shape[0]
        cfg = jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *jnp.shape(x))), self.rules)
        return self._rollout(params, levels, cfg, key, mode)

    def _rollout(self, params, levels: Level, cfg: MAPFConfig, key: jax.Array,
                 mode: Mode) -> EvalResult:
        env, net, cap = self.env, self.network, self.env.cap
        n, a, t_max = levels.size.shape[0], cap.max_agents, cap.max_steps
        _, state = jax.vmap(env.reset_to_level)(jax.random.split(key, n), levels, cfg)
        done0 = state.success  # e.g. every agent starts on its goal
        rec = self.record
        carry = _Carry(
            t=jnp.int32(0), state=state, done=done0,
            cause=jnp.zeros(n, jnp.int32), steps=jnp.zeros(n, jnp.int32), key=key,
            positions=(jnp.zeros((n, t_max + 1, a, 2), jnp.int8).at[:, 0].set(
                state.pos.astype(jnp.int8)) if rec else None),
            actions=jnp.zeros((n, t_max, a), jnp.int8) if rec else None)

        def cond(c: _Carry):
            return (c.t < t_max) & ~jnp.all(c.done)

        def body(c: _Carry) -> _Carry:
            key, k_act, k_env = jax.random.split(c.key, 3)
            obs = jax.vmap(env.get_obs)(c.state)
            inp = jax.vmap(lambda o, s: agent_input(env, o, s, net.uses_global))(obs, c.state)
            logits, _ = net.apply(params, inp)
            if mode == "greedy":
                act = jnp.argmax(logits, -1)
            else:
                act = distrax.Categorical(logits=logits).sample(seed=k_act)
            act = act.astype(jnp.int32)
            _, st, _, term, info = jax.vmap(env.step_env)(
                jax.random.split(k_env, n), c.state, act, cfg)
            trunc = jax.vmap(env.is_truncated)(st, cfg)
            live = ~c.done
            state = jax.vmap(lambda d, x, y: jax.tree.map(
                lambda u, v: jax.lax.select(d, u, v), x, y))(live, st, c.state)
            ended = live & (term | trunc)
            cause = jnp.where(ended, jnp.where(info["failed"], info["cause"],
                                               jnp.where(trunc, TIMEOUT, 0)), c.cause)
            out = c.replace(t=c.t + 1, state=state, done=c.done | ended, cause=cause,
                            steps=c.steps + live, key=key)
            if rec:
                out = out.replace(
                    positions=c.positions.at[:, c.t + 1].set(state.pos.astype(jnp.int8)),
                    actions=c.actions.at[:, c.t].set(jnp.where(live[:, None], act, 0)
                                                     .astype(jnp.int8)))
            return out

        c = jax.lax.while_loop(cond, body, carry)
        st = c.state
        active = levels.agent_mask()
        on_goal = jnp.all(st.pos == levels.goals, -1) & active
        # Episodes cut by max_steps (step_limit is clipped to it, so only if t ran out).
        cause = jnp.where(c.done, c.cause, TIMEOUT)
        valid = st.success & (st.violations.sum(-1) == 0) & c.done
        arrival = jnp.where(active, st.arrival, 0)
        makespan = jnp.where(valid, arrival.max(-1), -1).astype(jnp.int32)
        soc = jnp.where(valid, arrival.sum(-1), -1).astype(jnp.int32)
        opt_ms = valid & (levels.opt_makespan >= 0) & (makespan == levels.opt_makespan)
        opt_soc = valid & (levels.opt_soc >= 0) & (soc == levels.opt_soc)
        return EvalResult(
            valid=valid, optimal=opt_ms if self.cost == "makespan" else opt_soc,
            optimal_makespan=opt_ms, optimal_soc=opt_soc,
            isr=on_goal.sum(-1) / jnp.maximum(levels.n_agents, 1),
            makespan=makespan, soc=soc, cause=jnp.where(valid, 0, cause).astype(jnp.int32),
            steps=c.steps, n_agents=levels.n_agents, size=levels.size,
            positions=c.positions, actions=c.actions, levels=levels)


_CACHE: dict[tuple, Evaluator] = {}


def evaluate(params, levels_or_cfgs: Level | MAPFConfig, key: jax.Array, *,
             env: MAPFFrozenLake, network: ActorCritic, mode: Mode = "greedy",
             cost: Cost = "makespan", n_per_config: int = 1, record: bool = True) -> EvalResult:
    """One jitted evaluation (see the module docstring); evaluators are cached per setup."""
    k = (env.cap, network, cost, record)
    if k not in _CACHE:
        _CACHE[k] = Evaluator(env, network, cost=cost, record=record)
    return _CACHE[k](params, levels_or_cfgs, key, mode=mode, n_per_config=n_per_config)


@dataclass
class FailureSample:
    index: int
    cause: str
    size: int
    n_agents: int
    steps: int
    text: str


def trajectory_text(result: EvalResult, i: int) -> str:
    """Instance i as text: the start board (`render_text`), each agent's path, the ending."""
    from jaxenv.mapf.render import render_text

    r = jax.tree.map(np.asarray, result)
    lv = jax.tree.map(lambda x: x[i], r.levels)
    k, steps = int(lv.n_agents), int(r.steps[i])
    pos = r.positions[i, :steps + 1, :k].astype(int)
    act = r.actions[i, :steps, :k].astype(int)
    lines = [render_text(lv), f"Trajectory ({steps} steps, outcome: "
             f"{'valid' if r.valid[i] else CAUSES[int(r.cause[i])]}):"]
    for j in range(k):
        path = " -> ".join(f"({p[0]},{p[1]})" for p in pos[:, j])
        lines.append(f"A{j}: {path}")
    if steps and not r.valid[i] and CAUSES[int(r.cause[i])] != "timeout":
        last = act[-1]
        moves = []
        for j in range(k):
            tgt = pos[-2, j] + np.asarray(DELTAS)[last[j]]
            moves.append(f"A{j} {ACTION_NAMES[last[j]]} -> ({tgt[0]},{tgt[1]})")
        lines.append(f"Last joint move (step {steps}): " + ", ".join(moves))
    return "\n".join(lines)


def failure_samples(result: EvalResult, k: int = 5, seed: int = 0) -> list[FailureSample]:
    """Up to k random failed instances, each with its text trajectory (needs record=True)."""
    if result.positions is None:
        raise ValueError("failure_samples needs an EvalResult recorded with record=True")
    valid = np.asarray(result.valid)
    bad = np.flatnonzero(~valid)
    pick = np.random.default_rng(seed).permutation(bad)[:k]
    out = []
    for i in sorted(pick.tolist()):
        out.append(FailureSample(
            index=i, cause=CAUSES[int(np.asarray(result.cause)[i])],
            size=int(np.asarray(result.size)[i]), n_agents=int(np.asarray(result.n_agents)[i]),
            steps=int(np.asarray(result.steps)[i]), text=trajectory_text(result, i)))
    return out

