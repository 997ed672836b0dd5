"""Env-steps per second of a whole PPO training stage against env-only stepping, one run.

    python benchmarks/train_throughput.py --envs 1024 --json runs/train_throughput.json
    python benchmarks/train_throughput.py --envs 1024 --case headline   # 64 agents, 32x32

How it measures: docs/benchmarks.md, "How `benchmarks/train_throughput.py` measures".
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import harness
import jax
from env_throughput import CASES, case_config

from jaxenv.levels import PoolParams, make_pool, stage_pool
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.wrappers import PoolReset
from policy.network import ActorCritic
from policy.ppo import Hparams, make_train
from policy.rollout import rollout, start


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=harness.positive_int, default=1024)
    p.add_argument("--agents", type=harness.positive_int, default=2,
                   help="capacity max_agents (config: 2)")
    p.add_argument("--case", default=None,
                   help="an env_throughput case whose name contains this (e.g. headline)")
    p.add_argument("--steps", type=harness.positive_int, default=32,
                   help="rollout length per update")
    p.add_argument("--updates", type=harness.positive_int, default=25, help="updates per stage")
    p.add_argument("--epochs", type=harness.positive_int, default=1)
    p.add_argument("--minibatches", type=harness.positive_int, default=4)
    p.add_argument("--pool-size", type=harness.positive_int, default=512)
    p.add_argument("--hidden", type=harness.positive_int, default=32)
    p.add_argument("--critic", choices=("ippo", "mappo"), default="ippo")
    p.add_argument("--repeats", type=harness.positive_int, default=3)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    if a.case:
        case = next((c for c in CASES if a.case in c.name), None)
        if case is None:
            raise SystemExit(f"--case: no env_throughput case contains {a.case!r} "
                             f"({', '.join(c.name for c in CASES)})")
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
    params = harness.batch_pool(pool, b)
    axes = PoolParams.in_axes()
    env_obs0, state0 = jax.jit(partial(harness.pool_reset, penv, params))(
        jax.random.split(jax.random.PRNGKey(1), b))

    @jax.jit
    def env_only(state, key):
        return harness.random_rollout(
            harness.pool_step(penv, params), env_obs0, state, key, n_steps // b,
            actions=harness.uniform_actions(b, cap.max_agents, env.num_actions),
            env_keys=partial(jax.random.split, num=b), read=jax.vmap(env.agent_obs))

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

    # Round r's keys, made before any timing (round 0 is the compile-and-warm-up call).
    keys = [[jax.random.PRNGKey(k) for k in (3, 4, 5, 6)]] + [
        [jax.random.PRNGKey(base + i) for base in (10, 20, 30, 40)] for i in range(a.repeats)]
    rounds = harness.time_rounds({
        "env": lambda r: env_only(state0, keys[r][0]),
        "train": lambda r: trainer.train_stage(runner, cfg, keys[r][1]),
        "pool_gen": lambda r: gen(keys[r][2]),
        "rollout": lambda r: rollout_only(keys[r][3])}, a.repeats)
    compile_s = sum(t.first.wall_s for t in rounds.values())
    best = lambda name, j: min(t[j] for t in rounds[name].runs)  # noqa: E731
    env_w, env_c = best("env", 0), best("env", 1)
    tr_w, tr_c = best("train", 0), best("train", 1)
    gen_w, roll_w = best("pool_gen", 0), best("rollout", 0)
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
        "all_times_wall_cpu": {name: t.runs for name, t in rounds.items()},
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
    harness.write_json(a.json, out, command=harness.command(__file__, argv), seeds=[0, 1, 2])
    return out


if __name__ == "__main__":
    main()
