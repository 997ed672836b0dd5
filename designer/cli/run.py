"""`envengineer run`: one closed-loop run into a run folder (or --resume one).

Everything is checked before the folder is created: the settings (flags, --settings FILE, or
the saved run's through the one migration), the folder's writability, the distributed flags.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import (
    DEFAULT_OUT,
    CliError,
    bounded,
    command_line,
    run_folder,
    writable_folder,
)
from designer.cli.flags import add_run_flags, build_settings, saved_settings
from designer.settings import RunSettings


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="one closed-loop run (train, validate, redesign, verify)")
    add_run_flags(r)
    r.add_argument("--out", type=Path, help="run folder (default: runs/<time>-<engineer>)")
    r.add_argument("--resume", type=Path, help="continue the run in this folder")
    r.add_argument("--distributed", action="store_true", help="one training job over many "
                   "processes (jax.distributed); start the command once per process")
    r.add_argument("--coordinator", help="coordinator host:port (or JAX_COORDINATOR_ADDRESS)")
    r.add_argument("--num-processes", type=bounded(int, 1, 4096), help="processes in the job "
                   "(or JAX_NUM_PROCESSES)")
    r.add_argument("--process-id", type=bounded(int, 0, 4095), help="this process (or "
                   "JAX_PROCESS_ID)")
    r.add_argument("--cpu-devices", type=bounded(int, 1, 4096), help="host CPU devices of this "
                   "process (to try a multi-device job on one machine)")
    r.set_defaults(check=check)


class StageProgress:
    """rich progress: a bar over the stages and one line naming the phase under way."""

    NAMES = {"train": "training", "validate": "validation split", "heldout": "held-out eval",
             "propose": "engineer (LLM calls)", "verify": "verification"}

    def __init__(self, stages: int, title: str):
        from rich import progress as rp

        self.progress = rp.Progress(rp.SpinnerColumn(), rp.TextColumn("{task.description}"),
                                    rp.BarColumn(), rp.TextColumn("{task.completed}/{task.total}"),
                                    rp.TimeElapsedColumn())
        self.bar = self.progress.add_task(title, total=stages)
        self.phase = self.progress.add_task("  starting", total=None)

    def __enter__(self) -> StageProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.update(self.phase, description="  done", total=1, completed=1)
        self.progress.__exit__(*exc)

    def __call__(self, stage: int, phase: str, what: str) -> None:
        if phase == "stage":
            self.progress.update(self.bar, completed=stage + 1)
        elif what == "start":
            self.progress.update(self.phase, description=f"  stage {stage}: {self.NAMES[phase]}")

    def stage_done(self, completed: int) -> None:
        self.progress.update(self.bar, completed=completed)


def print_table(results: list[Any], title: str, selection: dict[str, Any] | None = None
                ) -> None:
    """The run's held-out numbers: its result (the stage `selection` chose) and, where that
    is not the last stage, the last stage's too."""
    from rich.console import Console
    from rich.table import Table

    last = len(results) - 1
    final = next((r.heldout for r in reversed(results) if r.heldout), None)
    rows = [(f"final stage {last}", final)]
    if selection and selection["stage"] != last:
        rows.insert(0, (f"stage {selection['stage']}, chosen on validation",
                        selection["heldout"]))
    rows = [(what, table) for what, table in rows if table]
    t = Table(title=title)
    if final and "mean_over_sizes" not in final:  # a control family: the robustness numbers
        t.add_column("held-out set")
        t.add_column("success %")
        t.add_column("normalised return")
        for what, h in rows:
            t.add_row(f"{h['family']} ({h['n']} variants, {what})", f"{h['success']:.1f}",
                      f"{h['normalized_return']:.3f}")
        Console().print(t)
        return
    t.add_column("model")
    for k in ("3", "4", "5"):
        t.add_column(f"{k} agents (valid / optimal %)")
    from designer.tasks.mapf.report import PAPER

    for name, cells in PAPER.items():
        t.add_row(name, *[f"{v:.2f} / {o:.2f}" for v, o in cells])
    for what, h in rows:
        m = h["mean_over_sizes"]
        t.add_row(f"this run (held-out split, {what})",
                  *[f"{m[k]['valid']:.2f} / {m[k]['optimal']:.2f}" if k in m else "-"
                    for k in ("3", "4", "5")])
    Console().print(t)


def run_one(settings: RunSettings, out: Path, *, processes: Any = None) -> list[Any]:
    from designer.run.loop import ClosedLoop

    if settings.learn.enabled:
        from policy.llm.engineer_rl import prefer_memory_schedule

        prefer_memory_schedule()
    loop = ClosedLoop(settings, out, processes=processes)
    if not loop.main:
        return loop.run()
    done = len(loop.folder.finished_stages())
    with StageProgress(settings.stages, f"{settings.engineer} seed {settings.seed}") as prog:
        prog.stage_done(done)
        loop.on_phase = prog
        results = loop.run()
        prog.stage_done(len(results))
    return results


def check(args: argparse.Namespace) -> Callable[[], int]:
    """The run, once its settings and folder pass (nothing is created before)."""
    if args.resume:
        from designer.run.folder import RunFolder

        out = run_folder(args.resume, "--resume")
        settings = saved_settings(args.resume / "run.json")
        RunFolder(out).verify(selection=False)  # a damaged selected.json is recomputed
    else:
        settings = build_settings(args)
        out = args.out or DEFAULT_OUT / time.strftime(f"%Y%m%d-%H%M%S-{settings.engineer}")
    writable_folder(out, "--out" if args.out else "run folder")
    if not args.resume and (out / "run.json").exists():
        raise CliError(f"{out} already holds a run: use --resume {out} or another --out")
    if args.process_id is not None and args.num_processes is not None \
            and args.process_id >= args.num_processes:
        raise CliError(f"--process-id {args.process_id} must be below --num-processes "
                       f"{args.num_processes}")
    return lambda: execute(args, settings, out)


def execute(args: argparse.Namespace, settings: RunSettings, out: Path) -> int:
    from designer.report import write_report
    from designer.run.folder import RunFolder

    processes = None
    if args.distributed:
        from policy.distributed import initialize

        processes = initialize(args.coordinator, args.num_processes, args.process_id,
                               cpu_devices=args.cpu_devices)
    t0 = time.perf_counter()
    results = run_one(settings, out, processes=processes)
    if processes is not None and not processes.is_main:
        return 0
    report = write_report([out], out, title=f"Run {out}", command=command_line())
    print_table(results, f"{settings.engineer}: {len(results)} stages, "
                         f"{results[-1].env_steps:,} env steps, {time.perf_counter() - t0:.0f}s",
                RunFolder(out).selection())
    print(f"report: {report}")
    return 0
