"""The report of one or many runs: `report.md` and PNG plots a researcher can trust.

`write_report(run_dirs, out)` reads the finished run folders and hands them to their
environment family's report (`designer.tasks.<family>.report`, built on
`designer.tasks.report`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from designer.tasks import DEFAULT_ENV, family_of
from designer.tasks.report import check_distinct, distinct_runs, load_run


def write_report(run_dirs: list[str | Path], out: str | Path, *, title: str = "EnvEngineer",
                 command: str | None = None) -> Path:
    """`report.md` and its PNGs in `out` from the run folders (one family's runs). A folder
    given twice is reported once (a note on stderr says so); two copies of one run are
    refused."""
    runs = [load_run(d) for d in distinct_runs(run_dirs, note=_note)]
    check_distinct(runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = runs[0].settings.get("env", DEFAULT_ENV)  # run folders from before `env` existed
    return family_of(env).report(runs, out, title=title, command=command)


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)
