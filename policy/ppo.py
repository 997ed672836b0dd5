"""Multi-agent PPO as one jitted stage, for any jaxenv environment: `make_train(env, net, hp)`.

`make_train` returns the `PPOTrainee`, a named tuple of pure functions (optax's shape) that is
also the closed loop's trainee (`policy.trainee.Trainee`):

- `init(key) -> RunnerState`: parameters, optimiser state and counters;
- `train_stage(runner, cfg_batch, key) -> (runner, metrics)`: one stage of `num_updates` PPO
  updates over `num_envs` vmapped environments, in one `jit`; `train_seeds` vmaps it over
  runner states and keys; `stage` is the unjitted function (with `axis`/`n_shards` for
  `policy.sharding`);
- `summarize(metrics)`: the NaN guard, then plain floats for logs;
- `evaluate(params, levels_or_cfgs, key, ...)`: greedy or sampled episodes (`policy.evaluate`);
- the loop's calls: `evaluate_split` (a frozen split), `play_candidates` (fresh levels of
  candidate configs, no trajectories recorded), `steps`, `policy`, `save` / `restore` (orbax).

A stage: the config batch holds C configs for B envs (C divides B; env b runs config
`b // (B // C)`; C comes from the env's config space). For an environment with levels a stage
pool of `pool_size` levels is generated first (`jaxenv.levels.stage_pool`, `pool_size // C`
per config) and every episode starts on a random level of its config's slice
(`jaxenv.wrappers.PoolReset`); other environments reset from their own config. A new config
batch of the same shapes reuses the compiled stage. Environments restart at the start of every
stage; only the learner state (params, optimiser, counters) carries over in `RunnerState`.

Each update runs three named phases, each reusable by another trainee: `policy.rollout.rollout`
(`num_steps` steps, `lax.scan`), advantages (`policy.gae`: GAE, then normalisation over acting
agents), `policy.update.ppo_epochs` (clipped PPO, Adam behind global-norm clipping, the NaN
guard). With `network.obs_norm` the rollout's observations join the running statistics
(`policy.obs_norm`, a variable collection beside the parameters, with zero gradient) before the
epochs, as brax's PPO does; `reward_scale` multiplies the rewards the update learns from
(brax's `reward_scaling`). Time-limit truncation is treated as termination (the limit is part
of the task: a timeout is a failure the paper counts).

Sharding: `stage(..., axis=name, n_shards=D)` runs inside `shard_map`; every per-env random draw
comes from a per-env key derived from the global env index and every mean divides local sums by
psum'd global counts, so the sharded stage computes the one-device update, up to float
summation order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxenv.batching import take
from jaxenv.levels import PoolParams, env_pool_params, stage_pool
from jaxenv.wrappers import PoolReset, has_levels, multi_agent
from policy import checkpoint, obs_norm
from policy.evaluate import Evaluator
from policy.gae import gae, normalize
from policy.guard import all_finite, check_finite
from policy.network import ActorCritic, init_params
from policy.rollout import agent_inputs, rollout, start
from policy.split_eval import SplitEval, evaluate_split
from policy.update import make_optimizer, ppo_epochs


@dataclass(frozen=True)
class Hparams:
    """Static training hyperparameters (changing one recompiles)."""

    num_envs: int = 256
    num_steps: int = 32  # rollout length per update
    num_updates: int = 10  # PPO updates per stage
    update_epochs: int = 2
    num_minibatches: int = 4  # over time steps; divides num_steps
    pool_size: int = 1024  # levels generated per stage, split evenly over the C configs
    pool_every: int = 0  # a fresh pool every this many updates (0: one pool per stage)
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    clip_value: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    lr: float = 3e-4
    # > 0: lr decays linearly to 0 over this many PPO updates, counted across stages (a
    # whole run's schedule); 0: constant
    anneal_updates: int = 0
    max_grad_norm: float = 0.5
    adam_eps: float = 1e-5
    reward_scale: float = 1.0  # rewards are multiplied by this for learning (not for reporting)

    def check(self, n_configs: int, n_shards: int = 1, levels: bool = True) -> None:
        if self.pool_every < 0:
            raise ValueError("pool_every must be >= 0 (0: one pool per stage)")
        if self.num_steps % self.num_minibatches:
            raise ValueError("num_minibatches must divide num_steps")
        if self.num_envs % n_configs or (levels and self.pool_size % n_configs):
            raise ValueError(f"the {n_configs} configs must divide num_envs ({self.num_envs})"
                             + (f" and pool_size ({self.pool_size})" if levels else ""))
        if self.num_envs % n_shards or (levels and self.pool_size % n_shards):
            raise ValueError(f"{n_shards} devices must divide num_envs"
                             + (" and pool_size" if levels else ""))

    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps


@struct.dataclass
class RunnerState:
    """What carries from stage to stage (and what a checkpoint holds)."""

    params: Any
    opt_state: Any
    update: jax.Array  # [] int32 updates done
    env_steps: jax.Array  # [] int32 env steps done (int32: fine up to 2.1e9)
    stage: jax.Array  # [] int32 stages done


class PPOTrainee(NamedTuple):
    """What `make_train` returns (see the module docstring)."""

    init: Callable[[jax.Array], RunnerState]
    train_stage: Callable[..., tuple[RunnerState, dict]]
    train_seeds: Callable[..., tuple[RunnerState, dict]]
    stage: Callable[..., tuple[RunnerState, dict]]
    summarize: Callable[..., dict[str, float]]
    evaluate: Evaluator
    play_candidates: Evaluator
    evaluate_split: Callable[[RunnerState, Any, jax.Array], SplitEval]
    env: Any
    network: ActorCritic
    hparams: Hparams
    kind: str = "ppo"

    @property
    def steps_per_stage(self) -> int:
        return self.hparams.num_updates * self.hparams.steps_per_update

    def steps(self, runner: RunnerState) -> int:
        return int(runner.env_steps)

    def policy(self, runner: RunnerState) -> Any:
        return runner.params

    def verify_episodes(self, requested: int) -> int:
        return requested

    def save(self, directory: str | Path, runner: RunnerState, step: int) -> None:
        checkpoint.save(directory, runner, step=step, max_to_keep=1)

    def restore(self, directory: str | Path, runner: RunnerState) -> RunnerState:
        return checkpoint.restore(directory, runner)


def make_train(env: Any, network: ActorCritic, hparams: Hparams, *,
               eval_cfg: Any = None) -> PPOTrainee:
    """The `PPOTrainee` for `env` (a jaxenv env, or any gymnax env, discrete or continuous).

    `eval_cfg`: the config `evaluate_split` plays frozen splits under (default: the env's).
    One job over many processes: `policy.distributed.distribute(trainee, processes)`."""
    env = multi_agent(env)
    action_dim = getattr(env, "action_dim", 0)
    if network.action_dim != action_dim:
        raise ValueError(f"the network's action_dim {network.action_dim} is not the env's "
                         f"{action_dim} (0: discrete actions)")
    if not action_dim:
        chex.assert_equal(network.num_actions, env.num_actions)
    hp = hparams
    tx = make_optimizer(hp.lr, hp.max_grad_norm, hp.adam_eps,
                        hp.anneal_updates * hp.update_epochs * hp.num_minibatches)
    space = env.config_space
    levels = has_levels(env)
    step_env = PoolReset(env) if levels else env

    def init(key: jax.Array) -> RunnerState:
        params = init_params(network, env, key)
        z = jnp.int32(0)
        return RunnerState(params=params, opt_state=tx.init(params), update=z, env_steps=z,
                           stage=z)

    def stage(runner: RunnerState, cfgs: Any, key: jax.Array, *, axis: str | None = None,
              n_shards: int = 1) -> tuple[RunnerState, dict]:
        cfgs = space.as_batch(cfgs)
        n_cfg = space.batch_size(cfgs)
        hp.check(n_cfg, n_shards, levels)
        b_all = hp.num_envs
        b = b_all // n_shards
        psum = (lambda x: jax.lax.psum(x, axis)) if axis else (lambda x: x)
        shard = jax.lax.axis_index(axis) if axis else 0

        k_pool, k_env, k_upd = jax.random.split(key, 3)
        gid = shard * b + jnp.arange(b)
        cfg_idx = (gid // (b_all // n_cfg)).astype(jnp.int32)

        def make_params(k: jax.Array) -> Any:
            if not levels:
                return take(cfgs, cfg_idx)
            pool = stage_pool(env, k, cfgs, n_cfg, hp.pool_size, shard=shard,
                              n_shards=n_shards, axis=axis)
            return env_pool_params(cfgs, pool, cfg_idx, n_cfg, hp.pool_size)

        axes: Any = PoolParams.in_axes() if levels else 0
        env_params = make_params(k_pool)
        ekeys = jax.lax.dynamic_slice_in_dim(jax.random.split(k_env, b_all), shard * b, b)
        envc = start(step_env, env_params, axes, ekeys)

        # With `pool_every`, every that many updates the envs' pool is replaced by a fresh one,
        # so a stage's data stay diverse however long the stage is. Running episodes keep
        # their own level (it is in their state); only new episodes draw from the new pool.
        # The flag is not batched (train_seeds, shard_map), so the cond stays a cond.
        refreshing = levels and 0 < hp.pool_every < hp.num_updates  # static
        idx = jnp.arange(hp.num_updates)
        refresh = (idx % max(hp.pool_every, 1) == 0) & (idx > 0)
        pkeys = jax.random.split(jax.random.fold_in(k_pool, 1), hp.num_updates)

        def update(carry, xs):  # one PPO update, on a fresh pool where `fresh`
            runner, envc, pool = carry  # pool: the current params if refreshing, else None
            k, fresh, pk = xs
            if refreshing:
                pool = jax.lax.cond(fresh, lambda: make_params(pk), lambda: pool)
            ep = pool if refreshing else env_params  # else a constant of the loop, as before
            envc, traj, stats = rollout(step_env, network, runner.params, envc, ep, axes,
                                        hp.num_steps)
            _, last_v = network.apply(runner.params, agent_inputs(
                env, envc.obs, envc.state, network.uses_global))
            reward = traj.reward if hp.reward_scale == 1.0 else traj.reward * hp.reward_scale
            adv, target = gae(reward, traj.value, traj.done, last_v, hp.gamma, hp.gae_lambda)
            adv = normalize(adv, traj.inp.acting, psum)
            params = runner.params
            if network.obs_norm:  # brax's order: this rollout's data joins the statistics first
                params = {**params, obs_norm.OBS_NORM: obs_norm.update(
                    params[obs_norm.OBS_NORM], traj.inp.vec, traj.inp.agent_mask, psum)}
            params, opt_state, mets = ppo_epochs(network, tx, hp, params,
                                                 runner.opt_state, traj, adv, target, k, psum)
            stats = psum(jax.tree.map(lambda x: x.sum(0), stats))
            runner = runner.replace(params=params, opt_state=opt_state,
                                    update=runner.update + 1,
                                    env_steps=runner.env_steps + hp.steps_per_update)
            return (runner, envc, pool), {**mets, **stats}

        (runner, _, _), metrics = jax.lax.scan(
            update, (runner, envc, env_params if refreshing else None),
            (jax.random.split(k_upd, hp.num_updates), refresh, pkeys))
        metrics["params_finite"] = all_finite(runner.params)
        return runner.replace(stage=runner.stage + 1), metrics

    def summarize(metrics: dict, where: str = "train_stage") -> dict[str, float]:
        check_finite(metrics, where=where)
        return summarize_metrics(metrics, env.outcomes)

    def split(runner: RunnerState, validator: Any, key: jax.Array) -> SplitEval:
        return evaluate_split(runner.params, network, key, validator, cfg=eval_cfg)

    return PPOTrainee(
        init=jax.jit(init), train_stage=jax.jit(stage),
        train_seeds=jax.jit(jax.vmap(stage, in_axes=(0, None, 0))), stage=stage,
        summarize=summarize, evaluate=Evaluator(env, network),
        play_candidates=Evaluator(env, network, record=False), evaluate_split=split, env=env,
        network=network, hparams=hp)


def summarize_metrics(metrics: dict[str, Any], outcomes: tuple[str, ...]) -> dict[str, float]:
    """Plain floats for logging: last-update losses and the stage's episode outcomes.

    `success_rate` is the share of episodes with outcome 0 (the env's success or normal end);
    `cause_<name>` the share of every other outcome.
    """
    m = {k: np.asarray(v) for k, v in metrics.items()}
    n = int(m["episodes"].sum())
    eps = max(n, 1)
    counts = m["outcomes"].reshape(-1, len(outcomes)).sum(0)
    out = {"episodes": n, "success_rate": float(m["successes"].sum() / eps),
           "mean_ep_len": float(m["ep_len_sum"].sum() / eps),
           "mean_return": float(m["return_sum"].sum() / eps)}
    out.update({f"cause_{c}": float(counts[i] / eps) for i, c in enumerate(outcomes) if i})
    for k in ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clip_frac", "grad_norm"):
        out[k] = float(m[k].reshape(-1)[-1])
    out["nonfinite"] = int(m["nonfinite"].sum())
    return out


__all__ = ["Hparams", "PPOTrainee", "RunnerState", "make_optimizer", "make_train",
           "summarize_metrics"]
