"""Held-out census: replay every stored optimal plan step by step under both goal rules.

    python benchmarks/heldout_census.py --json benchmarks/results/heldout_census.json

Writes {"instances": 3150, "solvable": N, "stored_optimum_matched": M, ...} for the default
`plan` rule (goal: N = M = 3,150) and the same counts for `freeze` beside it under
"rules" (see `jaxenv.mapf.benchmark.census` for the definitions).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import command, time_call, write_json

from jaxenv.mapf.benchmark.census import census
from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.config import GOAL_RULES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the result here")
    ap.add_argument("--split", default="heldout", choices=("heldout", "validation"))
    args = ap.parse_args(argv)
    levels, meta = load_split(args.split)
    rules = {}
    for rule in GOAL_RULES:
        r, t = time_call(census, levels, meta, rule)
        r.pop("per_instance")
        r["seconds"] = round(t.wall_s, 2)
        rules[rule] = r
        print(f"{args.split} {rule:>6}: {r['solvable']}/{r['instances']} solvable, "
              f"{r['stored_optimum_matched']} matched the stored optimum, "
              f"{r['makespan_equal']} at the optimal makespan ({r['seconds']} s)")
    main_rule = rules[GOAL_RULES[0]]
    out = {"split": args.split, "instances": main_rule["instances"],
           "solvable": main_rule["solvable"],
           "stored_optimum_matched": main_rule["stored_optimum_matched"], "rules": rules}
    write_json(args.json, out, command=command(__file__, argv), seeds=[])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
