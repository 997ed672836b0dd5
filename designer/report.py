"""The report of one or many runs: `report.md` and PNG plots a researcher can trust.

`write_report(run_dirs, out)` reads the finished run folders and hands them to their
environment family's report (`designer.tasks.<family>.report`, built on
`designer.tasks.report`).
"""

from __future__ import annotations

from pathlib import Path

from designer.tasks import DEFAULT_ENV, family_of
from designer.tasks.report import load_run


def write_report(run_dirs: list[str | Path], out: str | Path, *, title: str = "EnvEngineer",
                 command: str | None = None) -> Path:
    """`report.md` and its PNGs in `out` from the run folders (one family's runs)."""
    runs = [load_run(d) for d in run_dirs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = runs[0].settings.get("env", DEFAULT_ENV)  # run folders from before `env` existed
    return family_of(env).report(runs, out, title=title, command=command)
