"""Multi-agent PPO as one jitted stage: `make_train(env, network, hparams)`.

`Trainer.train_stage(runner_state, cfg_batch, key) -> (runner_state, metrics)` runs, in one
`jit`, a stage of `num_updates` PPO updates over `num_envs` vmapped environments:

- levels: a stage pool (`policy.pools`) of `pool_size` levels is generated at the start of the
  stage from the C configs of `cfg_batch` (C divides `num_envs`; env b runs config
  `b // (num_envs // C)` and resets to a random level of that config's pool slice). A new
  `cfg_batch` of the same shapes reuses the compiled stage;
- environments restart from the new pool at the start of every stage; only the learner state
  (params, optimiser, counters) is carried in `RunnerState`;
- each update: a `num_steps` rollout (`lax.scan`), GAE (rlax), then `update_epochs` epochs
  of `num_minibatches` minibatches (nested `lax.scan`). A minibatch is a random subset of the
  rollout's *time steps* over all envs: envs are independent, so samples stay decorrelated,
  and every device of a sharded run holds its part of every minibatch without moving data.
  Time-limit truncation is treated as termination (the limit is part of the task: a
  timeout is a failure the paper counts);
- loss: clipped PPO (`policy.loss`) with agent masks; Optax Adam behind
  `clip_by_global_norm`, wrapped in `apply_if_finite` (the NaN guard, `policy.guard`).

Sharding: `_stage` takes an optional mesh axis; every per-env random draw comes from a per-env
key derived from the global env index and every mean divides local sums by psum'd global
counts, so the sharded stage (`policy.sharding`) computes the one-device update, up to float
summation order. Seeds: `Trainer.train_seeds` vmaps the stage over runner states and keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxenv.mapf.config import MAPFConfig
from jaxenv.mapf.env import CAUSES, MAPFFrozenLake, MAPFObs, MAPFState
from policy.gae import gae
from policy.guard import all_finite, poison_if
from policy.loss import LossBatch, ppo_loss
from policy.network import ActorCritic, AgentInput, agent_input, init_params
from policy.pools import num_configs, stage_pool

TIMEOUT = CAUSES.index("timeout")


@dataclass(frozen=True)
class Hparams:
    """Static training hyperparameters (changing one recompiles)."""

    num_envs: int = 256
    num_steps: int = 32  # rollout length per update
    num_updates: int = 10  # PPO updates per stage
    update_epochs: int = 2
    num_minibatches: int = 4  # over time steps; divides num_steps
    pool_size: int = 1024  # levels generated per stage, split evenly over the C configs
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    clip_value: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    lr: float = 3e-4
    max_grad_norm: float = 0.5
    adam_eps: float = 1e-5

    def check(self, n_configs: int, n_shards: int = 1) -> None:
        if self.num_steps % self.num_minibatches:
            raise ValueError("num_minibatches must divide num_steps")
        if self.num_envs % n_configs or self.pool_size % n_configs:
            raise ValueError(f"the {n_configs} configs must divide num_envs ({self.num_envs}) "
                             f"and pool_size ({self.pool_size})")
        if self.num_envs % n_shards or self.pool_size % n_shards:
            raise ValueError(f"{n_shards} devices must divide num_envs and pool_size")

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


@struct.dataclass
class EnvCarry:
    state: MAPFState  # [B]
    obs: MAPFObs  # [B]
    key: jax.Array  # [B, 2] per-env key stream
    cfg_idx: jax.Array  # [B] int32 index into the stage's configs


@struct.dataclass
class Transition:
    inp: AgentInput  # [B, A, ...]
    action: jax.Array  # [B, A]
    logp: jax.Array  # [B, A]
    value: jax.Array  # [B, A]
    reward: jax.Array  # [B, A]
    done: jax.Array  # [B]
    pi_mask: jax.Array  # [B, A]
    v_mask: jax.Array  # [B, A]


def make_optimizer(hp: Hparams) -> optax.GradientTransformation:
    """Adam behind global-norm clipping; non-finite steps are skipped (never applied)."""
    inner = optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                        optax.adam(hp.lr, eps=hp.adam_eps))
    return optax.apply_if_finite(inner, max_consecutive_errors=2**30)


def batch_configs(cfg: MAPFConfig) -> MAPFConfig:
    """Accept one config or a batch: a single config becomes a batch of one."""
    return jax.tree.map(lambda x: x[None], cfg) if jnp.ndim(cfg.slip_prob) == 0 else cfg


class Trainer:
    """Jitted multi-agent PPO on MAPF-FrozenLake (build it with `make_train`)."""

    def __init__(self, env: MAPFFrozenLake, network: ActorCritic, hp: Hparams):
        # Resets are done here from the stage pool, so a LevelPoolEnv is used as its base env.
        self.env = env if type(env) is MAPFFrozenLake else MAPFFrozenLake(env.cap)
        self.cap = env.cap
        self.network = network
        self.hp = hp
        self.tx = make_optimizer(hp)
        self.init = jax.jit(self.init_fn)
        self.train_stage = jax.jit(self.stage_fn)
        self.train_seeds = jax.jit(jax.vmap(self.stage_fn, in_axes=(0, None, 0)))

    def __call__(self, runner: RunnerState, cfgs: MAPFConfig, key: jax.Array):
        return self.train_stage(runner, cfgs, key)

    def init_fn(self, key: jax.Array) -> RunnerState:
        """Fresh parameters and optimiser state (`init` is its jit; vmap it for seeds)."""
        params = init_params(self.network, self.env, key)
        z = jnp.int32(0)
        return RunnerState(params=params, opt_state=self.tx.init(params), update=z,
                           env_steps=z, stage=z)

    def stage_fn(self, runner: RunnerState, cfgs: MAPFConfig, key: jax.Array):
        """One stage on one device (unjitted: jit, vmap or shard it)."""
        return self._stage(runner, cfgs, key)

    # ------------------------------------------------------------------ stage
    def _stage(self, runner: RunnerState, cfgs: MAPFConfig, key: jax.Array, *,
               axis: str | None = None, n_shards: int = 1):
        hp, env, net = self.hp, self.env, self.network
        cfgs = batch_configs(cfgs)
        n_cfg = num_configs(cfgs)
        hp.check(n_cfg, n_shards)
        b_all, t_len = hp.num_envs, hp.num_steps
        b = b_all // n_shards
        per_cfg = hp.pool_size // n_cfg
        glob = net.uses_global
        psum = (lambda x: jax.lax.psum(x, axis)) if axis else (lambda x: x)
        shard = jax.lax.axis_index(axis) if axis else 0

        k_pool, k_env, k_upd = jax.random.split(key, 3)
        pool = stage_pool(k_pool, cfgs, self.cap, hp.pool_size, shard=shard,
                          n_shards=n_shards, axis=axis)
        gid = shard * b + jnp.arange(b)
        cfg_idx = (gid // (b_all // n_cfg)).astype(jnp.int32)
        cfg_env = jax.tree.map(lambda x: x[cfg_idx], cfgs)
        ekeys = jax.lax.dynamic_slice_in_dim(jax.random.split(k_env, b_all), shard * b, b)

        def reset_one(k: jax.Array, ci: jax.Array, cfg: MAPFConfig) -> MAPFState:
            j = ci * per_cfg + jax.random.randint(k, (), 0, per_cfg)
            level = jax.tree.map(lambda x: x[j], pool)
            return env.reset_to_level(k, level, cfg)[1]

        def inputs(obs: MAPFObs, state: MAPFState) -> AgentInput:
            return jax.vmap(lambda o, s: agent_input(env, o, s, glob))(obs, state)

        k_first = jax.vmap(jax.random.fold_in, in_axes=(0, None))(ekeys, 0x5EED)
        state0 = jax.vmap(reset_one)(k_first, cfg_idx, cfg_env)
        envc = EnvCarry(state=state0, obs=jax.vmap(env.get_obs)(state0), key=ekeys,
                        cfg_idx=cfg_idx)

        def env_step(params, envc: EnvCarry, _):
            inp = inputs(envc.obs, envc.state)
            logits, value = net.apply(params, inp)
            ks = jax.vmap(lambda k: jax.random.split(k, 4))(envc.key)
            action = jax.vmap(lambda k, lg: distrax.Categorical(logits=lg).sample(seed=k))(
                ks[:, 1], logits)
            logp = distrax.Categorical(logits=logits).log_prob(action)
            _, st, reward, term, info = jax.vmap(env.step_env)(ks[:, 2], envc.state, action,
                                                               cfg_env)
            trunc = jax.vmap(env.is_truncated)(st, cfg_env)
            done = term | trunc
            st_reset = jax.vmap(reset_one)(ks[:, 3], envc.cfg_idx, cfg_env)
            st_next = jax.vmap(lambda d, x, y: jax.tree.map(
                lambda u, v: jax.lax.select(d, u, v), x, y))(done, st_reset, st)
            obs = envc.obs
            tr = Transition(inp=inp, action=action, logp=logp, value=value,
                            reward=reward, done=done,
                            pi_mask=obs.agent_mask & ~obs.at_goal, v_mask=obs.agent_mask)
            cause = jnp.where(trunc, TIMEOUT, info["cause"])
            stats = {
                "episodes": done.sum(),
                "successes": (done & info["success"]).sum(),
                "causes": jnp.sum(jax.nn.one_hot(cause, len(CAUSES), dtype=jnp.int32)
                                  * done[:, None], 0),
                "ep_len_sum": jnp.sum(jnp.where(done, st.time, 0)),
            }
            envc = envc.replace(state=st_next, obs=jax.vmap(env.get_obs)(st_next),
                                key=ks[:, 0])
            return envc, (tr, stats)

        def minibatch(carry, idx, data):
            params, opt_state = carry
            tr, adv, target = jax.tree.map(lambda x: x[idx], data)
            lb = LossBatch(action=tr.action, old_logp=tr.logp, old_value=tr.value, adv=adv,
                           target=target, pi_mask=tr.pi_mask, v_mask=tr.v_mask)
            n_pi = psum(tr.pi_mask.sum().astype(jnp.float32))
            n_v = psum(tr.v_mask.sum().astype(jnp.float32))

            def loss_fn(p):
                logits, value = net.apply(p, tr.inp)
                return ppo_loss(logits, value, lb, n_pi=n_pi, n_v=n_v, clip_eps=hp.clip_eps,
                                vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                                clip_value=hp.clip_value)

            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            loss, aux, grads = psum(loss), psum(aux), psum(grads)
            finite = jnp.isfinite(loss) & all_finite(grads)
            grads = poison_if(~finite, grads)
            updates, opt_state = self.tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            m = {"loss": loss, **aux, "grad_norm": optax.global_norm(grads),
                 "nonfinite": (~finite).astype(jnp.int32)}
            return (params, opt_state), m

        def update(carry, k):
            runner, envc = carry
            k_ep = jax.random.split(k, hp.update_epochs)
            envc, (traj, stats) = jax.lax.scan(partial(env_step, runner.params), envc, None,
                                               t_len)
            _, last_v = net.apply(runner.params, inputs(envc.obs, envc.state))
            adv, target = gae(traj.reward, traj.value, traj.done, last_v, hp.gamma,
                              hp.gae_lambda)
            m = traj.pi_mask.astype(jnp.float32)
            n = jnp.maximum(psum(m.sum()), 1.0)
            mean = psum((adv * m).sum()) / n
            std = jnp.sqrt(psum((jnp.square(adv - mean) * m).sum()) / n)
            adv = (adv - mean) / (std + 1e-8)
            data = (traj, adv, target)

            def epoch(c, ke):
                perm = jax.random.permutation(ke, t_len).reshape(hp.num_minibatches, -1)
                return jax.lax.scan(partial(minibatch, data=data), c, perm)

            (params, opt_state), mets = jax.lax.scan(
                epoch, (runner.params, runner.opt_state), k_ep)
            nonfinite = mets.pop("nonfinite").sum()
            mets = {**jax.tree.map(jnp.mean, mets), "nonfinite": nonfinite}
            stats = psum(jax.tree.map(lambda x: x.sum(0), stats))
            runner = runner.replace(params=params, opt_state=opt_state,
                                    update=runner.update + 1,
                                    env_steps=runner.env_steps + hp.steps_per_update)
            return (runner, envc), {**mets, **stats}

        (runner, _), metrics = jax.lax.scan(update, (runner, envc),
                                            jax.random.split(k_upd, hp.num_updates))
        metrics["params_finite"] = all_finite(runner.params)
        runner = runner.replace(stage=runner.stage + 1)
        return runner, metrics


def make_train(env: MAPFFrozenLake, network: ActorCritic, hparams: Hparams) -> Trainer:
    """A `Trainer`: `.init(key)`, `.train_stage(runner, cfg_batch, key)` (jitted), ..."""
    chex.assert_equal(network.num_actions, env.num_actions)
    return Trainer(env, network, hparams)


def summarize(metrics: dict[str, Any]) -> dict[str, float]:
    """Plain floats for logging: last-update losses and the stage's episode outcomes."""
    m = {k: np.asarray(v) for k, v in metrics.items()}
    eps = max(int(m["episodes"].sum()), 1)
    causes = m["causes"].reshape(-1, len(CAUSES)).sum(0)
    out = {"episodes": int(m["episodes"].sum()),
           "success_rate": float(m["successes"].sum() / eps),
           "mean_ep_len": float(m["ep_len_sum"].sum() / eps)}
    out.update({f"cause_{c}": float(causes[i] / eps) for i, c in enumerate(CAUSES) if i})
    for k in ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clip_frac", "grad_norm"):
        out[k] = float(m[k].reshape(-1)[-1])
    out["nonfinite"] = int(m["nonfinite"].sum())
    return out


__all__ = ["EnvCarry", "Hparams", "RunnerState", "Trainer", "Transition",
           "batch_configs", "make_optimizer", "make_train", "summarize"]
