"""Our PPO trainee against brax's own PPO on the same Brax env and budget, side by side.

    python benchmarks/brax_ppo_compare.py --env-steps 1474560 --before \
        --json benchmarks/results/brax_ppo_compare.json

Both train on brax's inverted_pendulum (generalized backend, standard physics) for the same
number of env steps (brax's, which it rounds up to whole training steps); each reports its
evaluation return (deterministic policy, fresh episodes of 1,000 steps) against env steps and
wall time, in one process, one after the other. Ours is `policy.make_train` on the physics
family `brax:inverted_pendulum` (`jaxenv.control`) pinned at the standard physics, with the
trainee `envengineer run --env brax:inverted_pendulum` builds (`designer.trainees.build_trainee`
over the family's defaults: observation normalisation, separate critic, state-dependent
Gaussian spread; `--before` adds a run without those three); theirs is
`brax.training.agents.ppo.train` with the hyperparameters of brax's own inverted_pendulum
example, run inside `jaxenv.control.brax_compat.brax_training()` (what brax's trainer needs
from jax and jax no longer has).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from harness import command, positive_int, write_json

from jaxenv.control.brax_compat import brax_training

FAMILY = "brax:inverted_pendulum"


def run_brax(env_steps: int, seed: int) -> dict[str, Any]:
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    env = envs.get_environment("inverted_pendulum", backend="generalized")
    points: list[tuple[int, float, float]] = []
    t0 = time.perf_counter()

    def progress(step: int, metrics: dict) -> None:
        points.append((int(step), float(metrics["eval/episode_reward"]),
                       time.perf_counter() - t0))

    # brax's example config for inverted_pendulum (brax/training/learner notebook)
    with brax_training():
        ppo.train(environment=env, num_timesteps=env_steps, num_evals=10, reward_scaling=10.0,
                  episode_length=1000, normalize_observations=True, action_repeat=1,
                  unroll_length=5, num_minibatches=32, num_updates_per_batch=4,
                  discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2, num_envs=2048,
                  batch_size=1024, seed=seed, progress_fn=progress)
    return {"curve": [{"env_steps": s, "return": r, "wall_s": w} for s, r, w in points],
            "wall_s": time.perf_counter() - t0}


def run_ours(env_steps: int, seed: int, stages: int,
             trainee: dict[str, Any] | None = None) -> dict[str, Any]:
    """`policy.make_train` with the trainee an `envengineer run --env brax:inverted_pendulum`
    builds (the family's defaults, `designer.tasks.control.BRAX_DEFAULTS`, plus `trainee`)."""
    from designer.settings import RunSettings
    from designer.trainees import build_trainee
    from jaxenv.control.registry import make
    from policy import check_finite, make_train

    env = make(FAMILY)
    per_stage = env_steps // stages
    s = RunSettings(env=FAMILY, engineer="fixed", stage_steps=per_stage,
                    trainee=trainee or {})
    hp, net = build_trainee(s, env)
    tr = make_train(env, net, hp)
    cfg = env.config_space.to_config()  # the standard physics, pinned
    levels = env.config_space.as_batch(cfg)
    runner = tr.init(jax.random.PRNGKey(seed))
    points = []
    t0 = time.perf_counter()
    for k in range(stages):
        runner, metrics = tr.train_stage(runner, cfg, jax.random.PRNGKey(100 + k))
        check_finite(metrics)
        res = tr.evaluate(runner.params, levels, jax.random.PRNGKey(7), n_per_config=32)
        points.append({"env_steps": int(runner.env_steps),
                       "return": float(np.mean(np.asarray(res.metrics["return"]))),
                       "wall_s": time.perf_counter() - t0})
    return {"curve": points, "wall_s": time.perf_counter() - t0,
            "trainee": s.trainee.model_dump(), "num_updates_per_stage": hp.num_updates}


def plot(rows: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for name, r in rows.items():
        c = r["curve"]
        for ax, x in zip(axes, ("env_steps", "wall_s")):
            ax.plot([p[x] for p in c], [p["return"] for p in c], marker="o", ms=3, label=name)
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("wall time (s, compile included)")
    axes[0].set_ylabel("evaluation return (max 1,000)")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(rows),
               fontsize=8, frameon=False)
    fig.suptitle("brax inverted_pendulum: our PPO vs brax PPO, same env steps", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-steps", type=positive_int, default=300_000)
    p.add_argument("--stages", type=positive_int, default=10, help="evaluation points of ours")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    p.add_argument("--before", action="store_true",
                   help="also run our trainee without the Brax defaults' three changes")
    a = p.parse_args(argv)
    brax_row = run_brax(a.env_steps, a.seed)
    # brax rounds its budget up to whole training steps (2,048 envs x 5 x 16 per step, a
    # multiple per evaluation): ours gets the env steps brax actually took
    steps = max(a.env_steps, brax_row["curve"][-1]["env_steps"])
    rows = {"ours (policy.make_train)": run_ours(steps, a.seed, a.stages),
            "brax PPO": brax_row}
    if a.before:  # the trainee before the Brax defaults (shared torso, one log-std parameter)
        rows["ours, before (no obs norm, shared torso, log-std parameter)"] = run_ours(
            steps, a.seed, a.stages, {"obs_norm": False, "separate_critic": False,
                                      "state_std": False})
    out = {"env": FAMILY, "env_steps": steps, "seed": a.seed,
           "devices": str(jax.devices()), "rows": rows}
    for name, r in rows.items():
        c = r["curve"]
        print(f"{name}: final return {c[-1]['return']:.1f} at {c[-1]['env_steps']:,} steps, "
              f"{r['wall_s']:.0f} s")
    write_json(a.json, out, command=command(__file__, argv), seeds=[a.seed])
    if a.json:
        plot(rows, a.json.with_suffix(".png"))
    return out


if __name__ == "__main__":
    main()
