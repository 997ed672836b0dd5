"""`envengineer compare`: engineers x seeds at equal budget into one folder, then report.md.

Every run's settings are built and checked, and every folder that already holds a run is
compared with them, before the first run starts.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import DEFAULT_OUT, CliError, command_line, writable_folder
from designer.cli.flags import add_run_flags, build_settings, saved_settings, settings_from
from designer.cli.run import run_one
from designer.settings import ENGINEERS, RunSettings


def add_parser(sub: Any) -> None:
    c = sub.add_parser("compare", help="engineers x seeds at equal budget, then report.md")
    add_run_flags(c)
    c.add_argument("--engineers", default=",".join(e for e in ENGINEERS if e != "self"),
                   help="comma-separated (self needs --trainee llm)")
    c.add_argument("--seeds", default="0,1,2", help="comma-separated integers")
    c.add_argument("--out", type=Path, help="folder of the runs and the report")
    c.set_defaults(check=check)


def _names(text: str, what: str) -> list[str]:
    """A comma-separated list: at least one item, none twice."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise CliError(f"--{what} names none (comma-separated, e.g. --{what} a,b)")
    twice = sorted({x for x in items if items.count(x) > 1})
    if twice:
        raise CliError(f"--{what} names {', '.join(twice)} twice")
    return items


def check(args: argparse.Namespace) -> Callable[[], int]:
    """The runs, once every one's settings and folder pass (nothing is created before)."""
    runs, out = planned(args)
    return lambda: execute(runs, out)


def planned(args: argparse.Namespace) -> tuple[list[tuple[RunSettings, Path]], Path]:
    """Each run's settings and folder, and the compare's folder; nothing created."""
    engineers = _names(args.engineers, "engineers")
    bad = [e for e in engineers if e not in ENGINEERS]
    if bad:
        raise CliError(f"unknown engineer(s) {bad} (known: {', '.join(ENGINEERS)})")
    try:
        seeds = [int(x) for x in _names(args.seeds, "seeds")]
    except ValueError:
        raise CliError(f"--seeds must be integers separated by commas, got {args.seeds[:80]!r}") \
            from None
    if len(set(seeds)) < len(seeds):
        raise CliError(f"--seeds names one seed twice: {args.seeds[:80]}")
    out = writable_folder(args.out or DEFAULT_OUT / "compare", "--out")
    base = build_settings(args).model_dump()
    runs: list[tuple[RunSettings, Path]] = []
    for eng in engineers:
        for seed in seeds:
            one = {**base, "engineer": eng, "seed": seed}
            if eng != "llm":  # --learn and --adapter are the llm engineer's; the others have none
                one["learn"] = {**base["learn"], "enabled": False}
                one["adapter"] = "none"
            s = settings_from(one)
            d = out / eng / f"seed{seed}"
            if (d / "run.json").exists() and saved_settings(d / "run.json") != s:
                raise CliError(f"{d} holds a run with other settings; use another --out")
            runs.append((s, d))
    return runs, out


def execute(runs: list[tuple[RunSettings, Path]], out: Path) -> int:
    from designer.report import write_report

    t0 = time.perf_counter()
    for s, d in runs:
        run_one(s, d)
    report = write_report([d for _, d in runs], out, title="Engineers compared at equal budget",
                          command=command_line())
    print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f}s; report: {report}")
    return 0
