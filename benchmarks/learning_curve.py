"""Learning curve of the PPO trainee on the paper's "fixed config" baseline.

Trains on 2-agent levels from one fixed mixed-size config (sizes 3-10 in equal shares, the
config space's defaults: hole ratio 0.2, wait ratio 0.3, fail on any violation, the `plan`
goal rule; the reward is the run's: +1 to every agent on team success minus the verifier's
costs weighted by `--soc-cost` / `--makespan-cost`, plus `--shaping` per cell of progress), for a
stated budget of env steps or wall time; evaluates greedily on the whole frozen held-out set
(3, 4, 5 agents; 3,150 levels) every `--eval-every` stages; writes the paper-style table with
the paper's rows beside it, a JSON log and a PNG of held-out valid % against env steps and
against wall time.

    python benchmarks/learning_curve.py --minutes 12 --out runs/learning_curve

It is the closed loop (`designer.run.loop.ClosedLoop`) with the `fixed` engineer started from the
default config, so its run folder is an ordinary one (`envengineer report` reads it). Wall time
on the x axis counts training and pool generation only (evaluation excluded); the total is
printed too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import jax
import numpy as np
from harness import command, positive_int, write_json

from designer.run.loop import ClosedLoop
from designer.settings import (
    CapacitySettings,
    RunSettings,
    TaskSettings,
    TraineeSettings,
    VerifySettings,
)
from designer.tasks.mapf.report import PAPER
from jaxenv.mapf.benchmark.failures import failure_samples
from jaxenv.mapf.benchmark.report import format_markdown
from policy import checkpoint
from policy.split_eval import evaluate_split

TRAINEE = TraineeSettings()  # the loop's trainee defaults are this benchmark's


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=12.0, help="training wall-time budget")
    p.add_argument("--max-env-steps", type=float, default=float("inf"))
    p.add_argument("--envs", type=positive_int, default=TRAINEE.num_envs)
    p.add_argument("--steps", type=positive_int, default=TRAINEE.num_steps,
                   help="rollout length per update")
    p.add_argument("--updates", type=positive_int, default=25, help="PPO updates per stage")
    p.add_argument("--epochs", type=positive_int, default=TRAINEE.update_epochs)
    p.add_argument("--minibatches", type=positive_int, default=TRAINEE.num_minibatches)
    p.add_argument("--pool-size", type=positive_int, default=TRAINEE.pool_size,
                   help="levels generated per stage")
    p.add_argument("--lr", type=float, default=TRAINEE.lr)
    p.add_argument("--ent-coef", type=float, default=TRAINEE.ent_coef)
    p.add_argument("--hidden", type=positive_int, default=TRAINEE.hidden)
    p.add_argument("--critic", choices=("ippo", "mappo"), default=TRAINEE.critic)
    p.add_argument("--shaping", type=float, default=0.0)
    p.add_argument("--goal-rule", choices=("plan", "freeze"), default="plan")
    p.add_argument("--soc-cost", type=float, default=TaskSettings().soc_cost)
    p.add_argument("--makespan-cost", type=float, default=TaskSettings().makespan_cost)
    p.add_argument("--eval-every", type=int, default=4, help="stages between evaluations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/learning_curve"))
    return p.parse_args(argv)


def held_out_row(table) -> dict:
    return {str(k): {"valid": c.valid, "optimal": c.optimal}
            for k, c in table.mean_over_sizes.items()}


def plot(curve: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, xkey, xlabel in ((axes[0], "env_steps", "env steps"),
                             (axes[1], "train_s", "training wall time (s)")):
        for k in ("3", "4", "5"):
            ax.plot([c[xkey] for c in curve], [c["heldout"][k]["valid"] for c in curve],
                    marker="o", ms=3, label=f"{k} agents (held-out, valid %)")
        ax.plot([c[xkey] for c in curve], [100 * c["train_success"] for c in curve], "k--",
                lw=1, label="2 agents (training levels, success %)")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("valid % (mean over map sizes)")
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    t_start = time.time()
    stage_steps = a.updates * a.envs * a.steps
    stages = 10**6 if math.isinf(a.max_env_steps) else max(1, math.ceil(a.max_env_steps /
                                                                          stage_steps))
    settings = RunSettings(
        engineer="fixed", stages=stages, stage_steps=stage_steps, seed=a.seed,
        train_minutes=a.minutes, heldout_every=a.eval_every,
        capacity=CapacitySettings(max_size=10, max_agents=2),
        trainee=TraineeSettings(num_envs=a.envs, num_steps=a.steps, update_epochs=a.epochs,
                                num_minibatches=a.minibatches, pool_size=a.pool_size, lr=a.lr,
                                ent_coef=a.ent_coef, hidden=a.hidden, critic=a.critic),
        task=TaskSettings(goal_rule=a.goal_rule, shaping=a.shaping, soc_cost=a.soc_cost,
                          makespan_cost=a.makespan_cost),
        verify=VerifySettings(k=1, episodes=64))
    if a.out.exists() and any(a.out.iterdir()):
        sys.exit(f"{a.out} is not empty: choose another --out")
    loop = ClosedLoop(settings, a.out, first=None)
    loop.first = loop.space.default()  # sizes 3-10, 2 agents, the task's rules pinned
    net, hp = loop.trainee.network, loop.trainee.hparams
    print(f"config: {json.dumps(loop.first)}\nhparams: {hp}\nnetwork: {net}", flush=True)
    curve: list[dict] = []
    train_s = 0.0

    def on_phase(stage: int, phase: str, what: str) -> None:
        nonlocal train_s
        if not (phase == "stage" and what == "end"):
            return
        done = loop.folder.read_json(loop.folder.stage_rel(stage) / "done.json")
        t = loop.folder.read_json(loop.folder.stage_rel(stage) / "train.json")
        train_s += done["times"]["train"]
        print(f"stage {stage + 1}: {done['times']['train']:.1f}s, "
              f"{stage_steps / done['times']['train']:,.0f} steps/s, train success "
              f"{t['success_rate']:.3f}, ep len {t['mean_ep_len']:.1f}, entropy "
              f"{t['entropy']:.3f}, causes " +
              " ".join(f"{c[6:]} {t[c]:.2f}" for c in t if c.startswith("cause_")), flush=True)
        if done["heldout_by_agents"] is not None:
            row = done["heldout_by_agents"]
            curve.append({"stage": stage + 1, "env_steps": done["env_steps"], "train_s": train_s,
                          "eval_s": done["times"]["heldout"], "train_success": t["success_rate"],
                          "heldout": row, "overall_valid": done["heldout_overall"]["valid"]})
            print(f"[eval] stage {stage + 1} steps {done['env_steps']:,} train {train_s:.0f}s "
                  "held-out valid 3/4/5: " + " / ".join(f"{row[k]['valid']:.2f}" for k in "345")
                  + f" (eval {done['times']['heldout']:.1f}s)", flush=True)

    loop.on_phase = on_phase
    results = loop.run()
    stage = len(results)
    runner = checkpoint.restore(loop.folder.stage_dir(stage - 1) / "ckpt",
                                loop.trainee.init(jax.random.PRNGKey(a.seed)))
    final = evaluate_split(runner.params, net, jax.random.PRNGKey(1), loop.heldout,
                           cfg=loop.eval_cfg)
    sampled = evaluate_split(runner.params, net, jax.random.PRNGKey(2), loop.heldout,
                             mode="sample", cfg=loop.eval_cfg)
    total_s = time.time() - t_start
    title = (f"PPO ({a.critic}, hidden {a.hidden}) on the fixed config, 2-agent training; "
             f"{int(runner.env_steps):,} env steps, {train_s:.0f}s training")
    plot(curve, a.out / "learning_curve.png", title)
    rows = ["| model | 3 agents | 4 agents | 5 agents |", "|---|---|---|---|"]
    for name, cells in PAPER.items():
        rows.append(f"| {name} | " + " | ".join(f"{v:.2f} / {o:.2f}" for v, o in cells)
                    + " |")
    for tag, v in (("greedy", final), ("sampled", sampled)):
        ours = held_out_row(v.table)
        rows.append(f"| **ours: PPO {a.critic} (hidden {a.hidden}), fixed config, "
                    f"{int(runner.env_steps) / 1e6:.1f}M steps, {train_s / 60:.1f} min, {tag}** | "
                    + " | ".join(f"{ours[k]['valid']:.2f} / {ours[k]['optimal']:.2f}"
                                 for k in "345") + " |")
    samples = failure_samples(final.result, k=3, seed=a.seed)
    cmd = command(__file__, argv)
    report = "\n".join([
        f"# Learning curve: {title}", "",
        f"Command: {cmd}",
        f"Total wall time {total_s:.0f}s (training {train_s:.0f}s, the rest compile + "
        f"evaluation); {stage} stages.", "",
        "valid % / optimal % (optimal by makespan), mean over map sizes:", "", *rows, "",
        format_markdown(final.table, "Held-out table (greedy policy)"), "",
        format_markdown(sampled.table, "Held-out table (sampled actions)"), "",
        "## Sample failures", "", *[f"```\n{s.text}\n```" for s in samples]])
    (a.out / "report.md").write_text(report)
    log = {"args": {k: str(v) for k, v in vars(a).items()}, "hparams": hp.__dict__,
           "curve": curve, "final": final.table.to_dict(),
           "final_sampled": sampled.table.to_dict(), "train_s": train_s,
           "total_s": total_s, "env_steps": int(runner.env_steps)}
    write_json(a.out / "learning_curve.json", log, command=cmd, seeds=[a.seed])
    print("\n".join(rows))
    print(f"wrote {a.out}/report.md, learning_curve.png, learning_curve.json; total {total_s:.0f}s")
    return log


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
