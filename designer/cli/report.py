"""`envengineer report`: rebuild report.md and the plots from run folders."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import CliError, command_line, run_folder, writable_folder


def add_parser(sub: Any) -> None:
    rp = sub.add_parser("report", help="rebuild report.md and plots from run folders")
    rp.add_argument("runs", type=Path, nargs="+", help="run folders")
    rp.add_argument("--out", type=Path, help="where to write (default: the first run folder)")
    rp.set_defaults(check=check)


def check(args: argparse.Namespace) -> Callable[[], int]:
    """The report, once every run folder and the output folder pass."""
    seen: set[str] = set()
    for d in args.runs:
        run_folder(d, "report")
        real = os.path.realpath(d)
        if real in seen:
            raise CliError(f"report: {d} is named twice (one run is one seed)")
        seen.add(real)
    out = writable_folder(args.out or args.runs[0], "--out")
    return lambda: execute(args.runs, out)


def execute(runs: list[Path], out: Path) -> int:
    from designer.report import write_report

    print(f"report: {write_report(runs, out, command=command_line())}")
    return 0
