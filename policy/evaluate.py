"""Evaluation: one jitted call plays a policy on a whole batch of levels or configs.

`Evaluator(env, network)(params, levels_or_cfgs, key, mode=..., n_per_config=...)` takes either
a batch of levels (an environment with levels, e.g. the 3,150 held-out MAPF levels, played under
the env's default config or `cfg`) or a batch of configs (then `n_per_config` episodes per
config start from fresh levels generated inside the same jit, or from fresh resets for an env
without levels). It returns an `EvalResult`: per instance, the env's own end-of-episode metrics
(`env.episode_metrics`, e.g. MAPF's valid / optimal / makespan / sum of costs / ISR) plus the
team return, the outcome (index into `env.outcomes`), the episode length and, when recorded,
the trajectory (`env.trace` per time step and the chosen actions).

Episodes run without auto-reset in a `lax.while_loop` that stops when every episode is over,
so a batch of short episodes costs its longest one, not the env's `horizon`; an episode still
running at the horizon ends there as truncated.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxenv.batching import broadcast, select
from jaxenv.levels import generate_many
from jaxenv.wrappers import has_levels, multi_agent
from policy.network import ActorCritic
from policy.rollout import agent_inputs

Mode = Literal["greedy", "sample"]


@struct.dataclass
class EvalResult:
    """Per-instance outcomes, leading axis N (numpy or jax arrays).

    `metrics` holds the env's end-of-episode numbers plus `return`; they read as attributes
    too (`result.valid` is `result.metrics["valid"]`).
    """

    metrics: dict[str, jax.Array]
    outcome: jax.Array  # [N] int32 index into outcome_names
    steps: jax.Array  # [N] int32 episode length
    trace: Any = None  # [N, T+1, ...] env.trace of each time step, or None
    actions: jax.Array | None = None  # [N, T, A] int8 (or [N, T, A, D] float32) actions, or None
    levels: Any = None  # [N] the levels played (generated ones in config mode), or None
    outcome_names: tuple[str, ...] = struct.field(pytree_node=False, default=())

    def __getattr__(self, name: str) -> Any:
        metrics = self.__dict__.get("metrics")
        if metrics is not None and name in metrics:
            return metrics[name]
        raise AttributeError(name)

    def numpy(self) -> EvalResult:
        return jax.tree.map(np.asarray, self)

    def rates(self) -> dict[str, float]:
        """Batch means of every boolean or real metric, and the share of each outcome > 0."""
        r = self.numpy()
        out = {k: float(np.mean(v)) for k, v in r.metrics.items()
               if v.dtype == bool or np.issubdtype(v.dtype, np.floating)}
        out.update({c: float(np.mean(r.outcome == i))
                    for i, c in enumerate(self.outcome_names) if i})
        return out


@struct.dataclass
class _Carry:
    t: jax.Array
    state: Any  # [N]
    obs: Any  # [N]
    done: jax.Array  # [N] bool
    outcome: jax.Array  # [N] int32
    steps: jax.Array  # [N] int32
    ret: jax.Array  # [N] float32
    key: jax.Array
    trace: Any
    actions: jax.Array | None


class Evaluator:
    """A jitted evaluator for one environment and network (see the module docstring)."""

    def __init__(self, env: Any, network: ActorCritic, *, record: bool = True,
                 cfg: Any = None):
        self.env = multi_agent(env)
        self.network, self.record = network, record
        self.cfg = self.env.default_params if cfg is None else cfg
        self._levels = jax.jit(self._run_levels, static_argnames=("mode",))
        self._cfgs = jax.jit(self._run_cfgs, static_argnames=("mode", "n"))

    def __call__(self, params: Any, levels_or_cfgs: Any, key: jax.Array, *,
                 mode: Mode = "greedy", n_per_config: int = 1, cfg: Any = None) -> EvalResult:
        """Play a batch of levels (under `cfg`, default: the evaluator's) or of configs.

        `cfg` is one unbatched config (its rules and rewards apply to every level); a traced
        argument, so another value does not recompile.
        """
        if mode not in ("greedy", "sample"):
            raise ValueError(f"mode must be 'greedy' or 'sample', got {mode!r}")
        x = levels_or_cfgs
        if isinstance(x, type(self.env.default_params)):
            chex.assert_equal(self.env.config_space.batch_size(x) is not None, True)
            return self._cfgs(params, x, key, mode=mode, n=n_per_config)
        if not has_levels(self.env):
            raise TypeError(f"{self.env.name} has no levels: evaluate takes a batch of its "
                            f"configs, got {type(x).__name__}")
        if hasattr(self.env, "prepare_levels"):  # derived fields the env's observation needs
            x = self.env.prepare_levels(x)
        self._check_levels(x)
        return self._levels(params, x, key, self.cfg if cfg is None else cfg, mode=mode)

    @functools.cached_property
    def _level_shape(self) -> Any:
        """One level's shapes: tracing the generator costs as much as tracing a small jit, so
        once per evaluator, not at every call."""
        return jax.eval_shape(self.env.generate, jax.random.PRNGKey(0), self.env.default_params)

    def _check_levels(self, levels: Any) -> None:
        """A batch of levels with this env's shapes, or a clear error."""
        one = self._level_shape
        want = jax.tree.map(lambda s: s.shape, one)
        try:
            got = jax.tree.map(lambda x: jnp.shape(x)[1:], levels)
        except Exception as e:  # a structure that is not a level pytree
            raise TypeError(f"expected a batch of {type(one).__name__}, got "
                            f"{type(levels).__name__}") from e
        if jax.tree.structure(got) != jax.tree.structure(want) or got != want:
            raise ValueError(f"levels have shapes {got}; this env's levels have {want} "
                             f"(capacity {getattr(self.env, 'cap', '?')})")

    # ----------------------------------------------------------------- jitted
    def _run_cfgs(self, params: Any, cfgs: Any, key: jax.Array, *, mode: Mode, n: int):
        env = self.env
        c = env.config_space.batch_size(cfgs)
        k_gen, k_reset, k_run = jax.random.split(key, 3)
        per = jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), cfgs)
        resets = jax.random.split(k_reset, c * n)
        if has_levels(env):
            levels = generate_many(env.generate, jax.random.split(k_gen, c * n), per)
            obs, state = jax.vmap(env.reset_to_level)(resets, levels, per)
        else:
            levels = None
            obs, state = jax.vmap(env.reset)(resets, per)
        return self._rollout(params, obs, state, per, levels, k_run, mode)

    def _run_levels(self, params: Any, levels: Any, key: jax.Array, cfg: Any, *, mode: Mode):
        n = jax.tree.leaves(levels)[0].shape[0]
        cfg = broadcast(cfg, n)
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(self.env.reset_to_level)(jax.random.split(k_reset, n), levels, cfg)
        return self._rollout(params, obs, state, cfg, levels, k_run, mode)

    def _rollout(self, params: Any, obs: Any, state: Any, cfg: Any, levels: Any,
                 key: jax.Array, mode: Mode) -> EvalResult:
        env, net = self.env, self.network
        n, a, t_max = jax.tree.leaves(cfg)[0].shape[0], env.num_agents, env.horizon
        rec = self.record
        # recorded actions: int8 per agent (discrete), float32 [D] per agent (continuous)
        act_shape, act_dtype = ((net.action_dim,), jnp.float32) if net.action_dim else ((),
                                                                                      jnp.int8)

        def buffer(x: jax.Array) -> jax.Array:
            return jnp.zeros((n, t_max + 1, *x.shape[1:]), x.dtype).at[:, 0].set(x)

        carry = _Carry(
            t=jnp.int32(0), state=state, obs=obs,
            done=jax.vmap(env.is_terminated)(state, cfg), outcome=jnp.zeros(n, jnp.int32),
            steps=jnp.zeros(n, jnp.int32), ret=jnp.zeros(n, jnp.float32), key=key,
            trace=jax.tree.map(buffer, jax.vmap(env.trace)(state)) if rec else None,
            actions=jnp.zeros((n, t_max, a, *act_shape), act_dtype) if rec else None)

        def cond(c: _Carry) -> jax.Array:
            return (c.t < t_max) & ~jnp.all(c.done)

        def body(c: _Carry) -> _Carry:
            key, k_act, k_env = jax.random.split(c.key, 3)
            inp = agent_inputs(env, c.obs, c.state, net.uses_global)
            logits, _ = net.apply(params, inp)
            greedy = mode == "greedy"
            act = net.dist.mode(logits) if greedy else net.dist.sample(k_act, logits)
            obs, st, reward, term, info = jax.vmap(env.step_env)(
                jax.random.split(k_env, n), c.state, act, cfg)
            trunc = jax.vmap(env.is_truncated)(st, cfg) | (c.t + 1 >= t_max)
            live = ~c.done
            ended = live & (term | trunc)
            out = c.replace(
                t=c.t + 1, state=select(live, st, c.state), obs=select(live, obs, c.obs),
                done=c.done | ended,
                outcome=jnp.where(ended, jax.vmap(env.outcome)(info, term, trunc), c.outcome),
                steps=c.steps + live,
                ret=c.ret + jnp.where(live, jnp.sum(jnp.where(inp.agent_mask, reward, 0.0), -1),
                                      0.0),
                key=key)
            if rec:
                out = out.replace(
                    trace=jax.tree.map(lambda b, x: b.at[:, c.t + 1].set(x), c.trace,
                                       jax.vmap(env.trace)(out.state)),
                    actions=c.actions.at[:, c.t].set(
                        jnp.where(live.reshape(-1, *[1] * (act.ndim - 1)), act, 0)
                        .astype(act_dtype)))
            return out

        c = jax.lax.while_loop(cond, body, carry)
        metrics = {**jax.vmap(env.episode_metrics)(c.state), "return": c.ret}
        return EvalResult(metrics=metrics, outcome=c.outcome, steps=c.steps, trace=c.trace,
                          actions=c.actions, levels=levels, outcome_names=tuple(env.outcomes))


_CACHE: dict[tuple, Evaluator] = {}


def evaluator_for(env: Any, network: ActorCritic, record: bool = True) -> Evaluator:
    """One cached `Evaluator` per (env, network, record): its jit compiles once."""
    k = (env, network, record)
    if k not in _CACHE:
        _CACHE[k] = Evaluator(env, network, record=record)
    return _CACHE[k]


def evaluate(params: Any, levels_or_cfgs: Any, key: jax.Array, *, env: Any,
             network: ActorCritic, mode: Mode = "greedy", n_per_config: int = 1,
             record: bool = True, cfg: Any = None) -> EvalResult:
    """One jitted evaluation (see the module docstring) with a cached evaluator."""
    return evaluator_for(env, network, record)(params, levels_or_cfgs, key, mode=mode,
                                               n_per_config=n_per_config, cfg=cfg)
