"""`envengineer demo` (the environment layer on its own) and `envengineer bench` (the
throughput benchmarks of a source checkout)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import CliError, bounded
from designer.stage_settings import SEED_LIMIT

BENCHMARKS = {"env": "env_throughput.py", "train": "train_throughput.py",
              "verify": "verify_throughput.py", "engineer": "engineer_latency.py"}


def add_parsers(sub: Any) -> None:
    d = sub.add_parser("demo", help="environment demo on the embedded default config")
    # envs x steps stays far below 2^31 (the jitted step counters are int32)
    d.add_argument("--levels", type=bounded(int, 1, 2**20), default=512,
                   help="levels to generate")
    d.add_argument("--envs", type=bounded(int, 1, 2**16), default=1024,
                   help="parallel environments")
    d.add_argument("--steps", type=bounded(int, 1, 4096), default=64,
                   help="steps per environment")
    d.add_argument("--seed", type=bounded(int, 0, SEED_LIMIT - 1), default=0)
    d.set_defaults(check=lambda args: lambda: demo(args))
    b = sub.add_parser("bench", help="throughput benchmarks (source checkout)")
    b.add_argument("--which", default="env,train,verify", help="comma-separated: "
                   + ", ".join(BENCHMARKS))
    b.add_argument("--quick", action="store_true")
    b.set_defaults(check=check_bench)


def demo(args: argparse.Namespace) -> int:
    from designer.tasks.mapf.demo import demo

    demo(args.levels, args.envs, args.steps, args.seed)
    return 0


def check_bench(args: argparse.Namespace) -> Callable[[], int]:
    root = Path(__file__).resolve().parents[2] / "benchmarks"
    if not root.is_dir():
        raise CliError("the benchmarks live in the source checkout (benchmarks/); run this "
                       "from a clone of the repository")
    names = [n.strip() for n in args.which.split(",") if n.strip()]
    bad = [n for n in names if n not in BENCHMARKS]
    if bad or not names:
        raise CliError(f"unknown benchmark(s) {bad} (known: {', '.join(BENCHMARKS)})")
    return lambda: bench(root, names, args.quick)


def bench(root: Path, names: list[str], quick: bool) -> int:
    for name in names:
        cmd = [sys.executable, str(root / BENCHMARKS[name])] + (["--quick"] if quick else [])
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=dict(os.environ)).returncode
        if rc:
            return rc
    return 0
