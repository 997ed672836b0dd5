"""Which trainee change makes our PPO learn brax's inverted pendulum
(docs/experiments/families.md, "Against brax's own PPO").

    python benchmarks/brax_trainee_ablation.py 1474560 10 base norm norm_sep_std ...

Each named variant overrides the old trainee's Hparams / ActorCritic (256 envs x 64 steps,
lr 3e-4, gamma 0.97, shared torso, log-std parameter) and trains at the standard physics,
printing per stage: (env steps, greedy return over 32 episodes, training mean return,
value loss, entropy, wall s). Seed 0; a quick probe, not a benchmark with a JSON.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

import jax
import numpy as np

RS10 = {"reward_scale": 10.0}
NOCLIPV = {"clip_value": False}
NORM = {"obs_norm": True}
SEP = {"separate_critic": True}
STD = {"state_std": True}
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "base": ({}, {}),
    "norm": ({}, NORM),
    "norm_rs10": (RS10, NORM),
    "norm_rs10_noclipv": ({**RS10, **NOCLIPV}, NORM),
    "norm_rs10_noclipv_sep": ({**RS10, **NOCLIPV}, {**NORM, **SEP}),
    "noclipv": (NOCLIPV, {}),
    "sep": ({}, SEP),
    "std": ({}, STD),
    "norm_std": ({}, {**NORM, **STD}),
    "norm_sep_std": ({}, {**NORM, **SEP, **STD}),
}


def run(name: str, steps: int, stages: int, hp_over: dict, net_over: dict,
        seed: int = 0) -> list[tuple]:
    from jaxenv.control.registry import make
    from policy import ActorCritic, Hparams, check_finite, make_train

    env = make("brax:inverted_pendulum")
    hp = Hparams(num_envs=256, num_steps=64, num_updates=1, update_epochs=4,
                 num_minibatches=4, pool_size=256, lr=3e-4, ent_coef=0.0, gamma=0.97)
    hp = dataclasses.replace(hp, **hp_over)
    hp = dataclasses.replace(hp, num_updates=max(1, steps // stages // hp.steps_per_update))
    tr = make_train(env, ActorCritic(action_dim=env.action_dim, hidden=64, **net_over), hp)
    cfg = env.config_space.to_config()
    levels = env.config_space.as_batch(cfg)
    r = tr.init(jax.random.PRNGKey(seed))
    t0, pts = time.perf_counter(), []
    for k in range(stages):
        r, m = tr.train_stage(r, cfg, jax.random.PRNGKey(100 + k))
        check_finite(m)
        res = tr.evaluate(r.params, levels, jax.random.PRNGKey(7), n_per_config=32)
        s = tr.summarize(m)
        pts.append((int(r.env_steps), round(float(np.mean(np.asarray(res.metrics["return"]))), 1),
                    round(s["mean_return"], 1), round(s["v_loss"], 3), round(s["entropy"], 3),
                    round(time.perf_counter() - t0, 1)))
    print(name, json.dumps(pts), flush=True)
    return pts


if __name__ == "__main__":
    n_steps, n_stages = int(sys.argv[1]), int(sys.argv[2])
    for v in sys.argv[3:]:
        run(v, n_steps, n_stages, *VARIANTS[v])
