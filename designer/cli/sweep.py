"""`envengineer sweep`: many runs from a SPEC file (grid, random draws) on Ray.

The spec, its trials and the folders of earlier attempts are checked before the sweep folder
is created (`--dry-run` stops there and lists the trials).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import DEFAULT_OUT, CliError, command_line, writable_folder


def add_parser(sub: Any) -> None:
    sw = sub.add_parser("sweep", help="many runs from a SPEC file (grid, random draws) on Ray")
    sw.add_argument("spec", type=Path, help="a YAML or TOML sweep spec (docs/sweeps.md)")
    sw.add_argument("--out", type=Path, help="sweep folder (default: runs/sweeps/<spec name>)")
    sw.add_argument("--address", help="join this Ray cluster (default: a local one, no setup)")
    sw.add_argument("--cpus-per-trial", type=float, default=1.0, help="Ray CPUs per trial")
    sw.add_argument("--gpus-per-trial", type=float, default=0.0, help="Ray GPUs per trial")
    sw.add_argument("--retries", type=int, default=2, help="retries of a killed or crashed "
                    "trial (each resumes from its run folder)")
    sw.add_argument("--llm-concurrency", type=int, default=4, help="most trials calling the "
                    "shared LLM server (engineer llm, backend openai) at once")
    sw.add_argument("--backend", help="LLM backend for every trial, e.g. openai")
    sw.add_argument("--base-url", help="shared OpenAI-compatible server for every trial")
    sw.add_argument("--model", help="model name or path for every trial")
    sw.add_argument("--dry-run", action="store_true", help="validate, list the trials, exit")
    sw.set_defaults(check=check)


def check(args: argparse.Namespace) -> Callable[[], int]:
    """The sweep (or its listing), once the spec, its trials and the folder pass."""
    from designer import sweep

    flags = {k: v for k in ("backend", "base_url", "model")
             if (v := getattr(args, k)) is not None}
    try:
        sweep.check_resources(cpus_per_trial=args.cpus_per_trial,
                              gpus_per_trial=args.gpus_per_trial, retries=args.retries,
                              llm_concurrency=args.llm_concurrency)
        spec = sweep.load_spec(args.spec)
        name = sweep.sweep_name(spec, args.spec)
        out = writable_folder(args.out or DEFAULT_OUT / "sweeps" / name, "--out")
        opts = sweep.Options(out=out, address=args.address, cpus_per_trial=args.cpus_per_trial,
                             gpus_per_trial=args.gpus_per_trial, retries=args.retries,
                             llm_concurrency=args.llm_concurrency, command=command_line())
        try:
            trials = sweep.expand(spec, flags)
        except sweep.SweepError as e:
            raise CliError(f"spec {args.spec}: {e}") from None
        states = sweep.plan(trials, out)
    except sweep.SweepError as e:
        raise CliError(str(e)) from None
    if args.dry_run:
        return lambda: listing(trials, states, out)
    return lambda: execute(opts, spec, trials)


def listing(trials: list[Any], states: dict[str, str], out: Path) -> int:
    for t in trials:
        print(f"{t.name}\t{states[t.name]}\t{json.dumps(t.overrides)}")
    print(f"{len(trials)} trials in {out}")
    return 0


def execute(opts: Any, spec: Any, trials: list[Any]) -> int:
    from designer import sweep

    try:
        summary = sweep.run_sweep(spec, trials, opts)
    except sweep.SweepError as e:
        raise CliError(str(e)) from None
    print(f"{len(summary.rows) - len(summary.failed)}/{len(summary.rows)} trials finished in "
          f"{summary.wall_s:.0f}s; report: {summary.report}; results: {summary.results}")
    for r in summary.failed:
        print(f"failed: {r['trial']}: {r['error']}", file=sys.stderr)
    return 1 if summary.failed else 0
