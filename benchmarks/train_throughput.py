"""Env-steps per second of a whole PPO training stage against env-only stepping, one run.

Both sides run B environments of the same capacity and config in one jitted `lax.scan`:

- env only: gymnax `step` with auto-reset from a pre-generated level pool (`PoolReset`),
  uniformly random joint actions, as many steps as the stage, and `agent_obs` (what the
  policy reads, carried in the scan so that every step writes it, as the rollout does);
- training: `PPOTrainee.train_stage`, everything included: stage pool generation (the
  generator with exact two-agent wait labels), network forward passes, sampling, GAE, PPO
  epochs, optimiser.

The two are timed alternately (`--repeats` rounds, best of each) because the CPU is shared;
the ratio uses the best times. Process CPU time is reported too (less sensitive to other
load). Also printed: the stage's pool generation alone and the ratio without it, and the
rollout phase alone (the stage's updates x `--steps` policy steps with the initial parameters,
on the env-only side's pool). What remains of the stage is GAE and the PPO epochs, so the
three phases say where a stage's time goes on whatever device runs it.

    python benchmarks/train_throughput.py --envs 1024 --json runs/train_throughput.json
    python benchmarks/train_throughput.py --envs 1024 --case headline   # 64 agents, 32x32

`--case` takes a case of `benchmarks/env_throughput.py` (its capacity and config: every level
at full size and agent count); without it, capacity 10x10 with `--agents` slots and the
default config (2 agents, sizes 3-10).

Defaults are those of `benchmarks/learning_curve.py` (hidden 32, 1 epoch, 512 levels and 25
updates per stage): the trainer whose learning curve is reported.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
from bench_json import write_json
from env_throughput import CASES, case_config

from jaxenv.batching import broadcast
from jaxenv.levels import PoolParams, make_pool, stage_pool
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.wrappers import PoolReset
from policy.network import ActorCritic
from policy.ppo import Hparams, make_train
from policy.rollout import rollout, start


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--agents", type=int, default=2, help="capacity max_agents (config: 2)")
    p.add_argument("--case", default=None,
                   help="an env_throughput case whose name contains this (e.g. headline)")
    p.add_argument("--steps", type=int, default=32, help="rollout length per update")
    p.add_argument("--updates", type=int, default=25, help="updates per stage")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--pool-size", type=int, default=512)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--critic", choices=("ippo", "mappo"), default="ippo")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def timed(fn, *args) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t, time.process_time() - c


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    if a.case:
        case = next(c for c in CASES if a.case in c.name)
        env, cfg = case_config(case)
        cap = env.cap
    else:
        cap = Capacity(max_agents=a.agents)
        env = MAPFFrozenLake(cap)
        cfg = env.config_space.to_config()  # 2 agents, sizes 3-10, holes 0.2, wait 0.3
    hp = Hparams(num_envs=a.envs, num_steps=a.steps, num_updates=a.updates,
                 update_epochs=a.epochs, num_minibatches=a.minibatches, pool_size=a.pool_size)
    n_steps = hp.num_updates * hp.steps_per_update
    b = a.envs

    # Env only: the same number of steps as a stage, random actions, pool resets.
    penv = PoolReset(env)
    pool = jax.jit(lambda k: make_pool(env, k, cfg, a.pool_size))(jax.random.PRNGKey(0))
    params = pool.replace(cfg=broadcast(pool.cfg, b), lo=broadcast(pool.lo, b),
                          count=broadcast(pool.count, b))
    axes = PoolParams.in_axes()
    env_obs0, state0 = jax.jit(jax.vmap(penv.reset, (0, axes)))(
        jax.random.split(jax.random.PRNGKey(1), b), params)

    @jax.jit
    def env_only(state, key):
        def step(carry, k):
            st, _ = carry
            ka, ks = jax.random.split(k)
            act = jax.random.randint(ka, (b, cap.max_agents), 0, env.num_actions)
            obs, st, r, term, trunc, _ = jax.vmap(penv.step, (0, 0, 0, axes))(
                jax.random.split(ks, b), st, act, params)
            return (st, jax.vmap(env.agent_obs)(obs, st)), r.sum() + term.sum()
        inp0 = jax.vmap(env.agent_obs)(env_obs0, state)
        return jax.lax.scan(step, (state, inp0), jax.random.split(key, n_steps // b))

    network = ActorCritic(hidden=a.hidden, critic=a.critic)
    trainer = make_train(env, network, hp)
    runner = trainer.init(jax.random.PRNGKey(2))

    @jax.jit
    def rollout_only(key):  # the stage's rollout phase, on the env-only side's pool
        def one(envc):
            return rollout(penv, network, runner.params, envc, params, axes, hp.num_steps)[:2]
        # The last update's transitions stay in the carry, so every update writes its own.
        carry = one(start(penv, params, axes, jax.random.split(key, b)))
        carry = jax.lax.scan(lambda c, _: (one(c[0]), None), carry, None, hp.num_updates - 1)[0]
        return carry[1].reward.sum()

    gen = jax.jit(lambda k: stage_pool(env, k, jax.tree.map(lambda x: x[None], cfg), 1,
                                       a.pool_size))

    t0 = time.perf_counter()
    jax.block_until_ready(env_only(state0, jax.random.PRNGKey(3)))
    jax.block_until_ready(trainer.train_stage(runner, cfg, jax.random.PRNGKey(4)))
    jax.block_until_ready(gen(jax.random.PRNGKey(5)))
    jax.block_until_ready(rollout_only(jax.random.PRNGKey(6)))
    compile_s = time.perf_counter() - t0

    env_t, train_t, gen_t, roll_t = [], [], [], []
    for i in range(a.repeats):
        env_t.append(timed(env_only, state0, jax.random.PRNGKey(10 + i)))
        train_t.append(timed(trainer.train_stage, runner, cfg, jax.random.PRNGKey(20 + i)))
        gen_t.append(timed(gen, jax.random.PRNGKey(30 + i)))
        roll_t.append(timed(rollout_only, jax.random.PRNGKey(40 + i)))
    best = lambda ts, j: min(t[j] for t in ts)  # noqa: E731
    env_w, env_c = best(env_t, 0), best(env_t, 1)
    tr_w, tr_c = best(train_t, 0), best(train_t, 1)
    gen_w, roll_w = best(gen_t, 0), best(roll_t, 0)
    out = {
        "envs": b, "case": a.case, "capacity": cap.__dict__, "hparams": hp.__dict__,
        "hidden": a.hidden,
        "critic": a.critic, "steps_per_stage": n_steps, "repeats": a.repeats,
        "compile_s": compile_s,
        "env_only_steps_per_s": n_steps / env_w,
        "train_steps_per_s": n_steps / tr_w,
        "ratio": env_w / tr_w,
        "ratio_cpu_time": env_c / tr_c,
        "pool_gen_s": gen_w, "stage_s": tr_w,
        "ratio_without_pool_gen": env_w / max(tr_w - gen_w, 1e-9),
        "rollout_s": roll_w, "update_s": tr_w - gen_w - roll_w,
        "all_times_wall_cpu": {"env": env_t, "train": train_t, "pool_gen": gen_t,
                               "rollout": roll_t},
    }
    print(f"B={b}, capacity {cap.max_size}x{cap.max_size}/{cap.max_agents} agents, "
          f"{n_steps:,} env steps per stage ({hp.num_updates} updates x {hp.num_steps} steps), "
          f"{hp.update_epochs} epochs x {hp.num_minibatches} minibatches, hidden {a.hidden}")
    print(f"env only : {out['env_only_steps_per_s']:>12,.0f} env-steps/s")
    print(f"training : {out['train_steps_per_s']:>12,.0f} env-steps/s (stage {tr_w:.2f}s, of "
          f"which pool generation of {a.pool_size} levels {gen_w:.2f}s)")
    print(f"ratio    : {out['ratio']:.3f} (wall), {out['ratio_cpu_time']:.3f} (CPU time), "
          f"{out['ratio_without_pool_gen']:.3f} (wall, pool generation excluded); goal >= 0.3")
    print(f"stage    : pool generation {gen_w:.2f}s, rollout {roll_w:.2f}s, GAE and PPO epochs "
          f"{out['update_s']:.2f}s (the rest); env only {env_w:.2f}s")
    write_json(a.json, out)
    return out


if __name__ == "__main__":
    main()
