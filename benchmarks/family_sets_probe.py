"""Does a family's held-out set tell a robust policy from a brittle one? PPO trained on the
standard task (`fixed`) vs on domain randomisation over every knob's bounds (`dr`), same
budget and seed, evaluated greedily on the frozen held-out set (success %, normalised return,
per-parameter bins). Discrete-action families only.

    python benchmarks/family_sets_probe.py --families cartpole acrobot \\
        --json benchmarks/results/family_sets_probe_cpu2.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import jax
from harness import command, positive_int, write_json

from jaxenv.control import make
from jaxenv.control.sets import HELDOUT, load_set, summarize
from policy import ActorCritic, Hparams, check_finite, evaluate, make_train

HP = Hparams(num_envs=32, num_steps=128, num_updates=10, update_epochs=4, num_minibatches=4,
             lr=2.5e-3, ent_coef=0.0)


def probe(name: str, stages: int, seed: int) -> dict[str, Any]:
    env = make(name)
    if env.continuous:
        raise ValueError(f"{name} has continuous actions: not probed here")
    cs, net = env.config_space, ActorCritic(num_actions=env.num_actions)
    tr = make_train(env, net, HP)
    dr = {k.name: (k.low if k.name.endswith("_min") else k.high) for k in cs.knobs}
    levels, meta = load_set(name, HELDOUT)
    out: dict[str, Any] = {"steps": stages * HP.num_updates * HP.num_envs * HP.num_steps,
                           "seed": seed}
    for engineer, values in (("fixed", cs.default()), ("dr", dr)):
        cfgs = cs.stack([values] * 4)
        runner = tr.init(jax.random.PRNGKey(seed))
        t = time.perf_counter()
        for i in range(stages):
            runner, metrics = tr.train_stage(runner, cfgs, jax.random.PRNGKey(1000 * seed + i))
            check_finite(metrics)
        wall = time.perf_counter() - t
        res = evaluate(runner.params, levels, jax.random.PRNGKey(seed), env=env, network=net)
        s = summarize(name, meta, res.metrics["success"], res.metrics["normalized_return"],
                      res.outcome)
        out[engineer] = {**s, "train_wall_s": wall}
        print(f"{name} {engineer}: held-out success {s['success']:.1f} %, normalised return "
              f"{s['normalized_return']:.3f}, train {wall:.0f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", nargs="*", default=["cartpole"])
    ap.add_argument("--stages", type=positive_int, default=12, help="stages of 40,960 env steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    res = {name: probe(name, args.stages, args.seed) for name in args.families}
    write_json(args.json, res, command=command(__file__, argv), seeds=[args.seed])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
