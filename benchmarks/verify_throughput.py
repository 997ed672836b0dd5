"""Plans verified per second: the jitted verifier vs the plain-Python reference checker.

The same 4,096 plans go through both: held-out instances (3-5 agents, sizes 3-10) with their
stored optimal plans, half of them corrupted (a jump, a teleport, a dropped agent, a delay
that may cause conflicts, a truncation, or two agents' cells exchanged at one time step).
One timed run each (the jitted function is compiled and run once before timing); the
verdicts must agree on ``valid``. Prints both rates and their ratio (goal: >= 1,000x).

    python benchmarks/verify_throughput.py [--plans 4096] [--json PATH]
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from harness import command, positive_int, time_call, time_rounds, write_json

from jaxenv.mapf.benchmark.heldout import load_heldout
from jaxenv.mapf.plans import plan_arrays, verify_batch
from jaxenv.mapf.solvers.reference import ref_check_plan

CORRUPTIONS = ("none", "jump", "teleport", "drop_agent", "delay", "truncate", "exchange")


def _paths(cells: np.ndarray, length: np.ndarray) -> list[list[tuple[int, int]]]:
    return [[(int(r), int(c)) for r, c in cells[a, : length[a]]] for a in range(len(length))
            if length[a] > 0]


def corrupt(rng: np.random.Generator, paths, size: int):
    p = [list(x) for x in paths]
    kind = CORRUPTIONS[int(rng.integers(1, len(CORRUPTIONS)))] if rng.random() < 0.5 else "none"
    i = int(rng.integers(len(p)))
    if kind == "jump" and len(p[i]) >= 3:
        del p[i][int(rng.integers(1, len(p[i]) - 1))]
    elif kind == "teleport":
        p[i][int(rng.integers(len(p[i])))] = (int(rng.integers(-1, size + 1)),
                                              int(rng.integers(-1, size + 1)))
    elif kind == "drop_agent" and len(p) > 1:
        p.pop()
    elif kind == "delay":
        p[i].insert(0, p[i][0])
    elif kind == "truncate" and len(p[i]) >= 2:
        del p[i][-1]
    elif kind == "exchange" and len(p) > 1:
        j = (i + 1) % len(p)
        t = int(rng.integers(1, max(2, min(len(p[i]), len(p[j])))))
        if t < len(p[i]) and t < len(p[j]):
            p[i][t], p[j][t] = p[j][t], p[i][t]
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plans", type=positive_int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the numbers here")
    args = ap.parse_args(argv)

    levels, meta = load_heldout()
    rng = np.random.default_rng(args.seed)
    pick = rng.integers(0, len(meta["index"]), size=args.plans)
    holes = np.asarray(levels.holes)
    cases = []
    for j in pick:
        n = int(meta["size"][j])
        paths = corrupt(rng, _paths(meta["plan_cells"][j], meta["plan_len"][j]), n)
        starts = np.asarray(levels.starts[j][: meta["agents"][j]]).tolist()
        goals = np.asarray(levels.goals[j][: meta["agents"][j]]).tolist()
        cases.append(dict(size=n, holes=holes[j].tolist(), starts=[tuple(s) for s in starts],
                          goals=[tuple(g) for g in goals], plan=paths,
                          n_agents=int(meta["agents"][j])))
    horizon = max(len(p) for c in cases for p in c["plan"])
    horizon = -(-horizon // 8) * 8
    max_agents = levels.starts.shape[1]
    plans = [plan_arrays(c["plan"], max_agents, horizon) for c in cases]
    sub = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[pick]), levels)
    cells = jnp.asarray(np.stack([p.cells for p in plans]))
    lens = jnp.asarray(np.stack([p.length for p in plans]))
    oks = jnp.asarray(np.stack([p.parsed_ok for p in plans]))

    ref_out, t = time_call(lambda: [ref_check_plan(**c) for c in cases])
    t_ref = t.wall_s

    outs = {}  # lax.map over plans vs one vmap over the batch: one timed run each
    rounds = time_rounds({mode: (lambda r, mode=mode: verify_batch(sub, cells, lens, oks,
                                                                  mode=mode))
                          for mode in ("map", "vmap")}, 1, on_result=outs.__setitem__)
    per_mode = {mode: t.wall_s[0] for mode, t in rounds.items()}
    best = min(per_mode, key=per_mode.get)
    t_jax = per_mode[best]

    valid = np.asarray(outs["vmap"].valid)
    mismatches = int(sum(bool(v) != r["valid"] for v, r in zip(valid, ref_out, strict=True)))
    res = {
        "plans": args.plans,
        "horizon": horizon,
        "valid_share": float(valid.mean()),
        "ref_seconds": t_ref,
        "jax_seconds": t_jax,
        "ref_plans_per_s": args.plans / t_ref,
        "jax_plans_per_s": args.plans / t_jax,
        "ratio": t_ref / t_jax,
        "mismatches": mismatches,
        "seconds_per_mode": per_mode,
        "best_mode": best,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "cpu": platform.processor() or platform.machine(),
    }
    print(f"{args.plans} plans (T={horizon}, {100 * res['valid_share']:.1f}% valid) on "
          f"{res['backend']} ({res['device']})")
    print(f"  reference (plain Python): {t_ref * 1e3:9.2f} ms  {res['ref_plans_per_s']:>14,.0f} "
          "plans/s")
    for mode, t in per_mode.items():
        print(f"  jitted verifier ({mode:4s})  : {t * 1e3:9.2f} ms  {args.plans / t:>14,.0f} "
              "plans/s")
    print(f"  ratio (best, {best}): {res['ratio']:,.0f}x (goal >= 1,000x); "
          f"valid mismatches: {mismatches}")
    write_json(args.json, res, command=command(__file__, argv), seeds=[args.seed])
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
