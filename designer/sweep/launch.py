"""Running a sweep's trials on Ray: resumable, fault tolerant, sharing an LLM server politely.

Trial `<name>` runs as `envengineer run` in `<out>/<name>/`, a run folder; the sweep's own files
for it are in `<out>/<name>/sweep/` (settings.json, attempts.jsonl, each attempt's stdout and
stderr).

**Ray tasks, not Ray Tune.** A trial is already a resumable unit (its run folder and
`envengineer run --resume`); the sweep needs placement with per-trial resources, retries that
resume from that folder, and a cap on trials that share an LLM server. Tune would add a second
copy of what the run folder does (its trial checkpoints and restore), search and scheduler
machinery that a grid and random draws do not need, its own experiment layout, and pyarrow and
tensorboardX to the install. One Ray task per attempt, with retries decided by the driver,
keeps the run folder the single source of truth: a rerun reads it to skip finished trials and
resume the others, whatever became of Ray's state.

**Fault tolerance.** A crashed attempt (non-zero exit, killed child, dead Ray worker or node) is
retried up to `retries` times, each retry resuming from the trial's run folder; the child
process dies with its Ray worker (`designer.sweep.child`), so a retry never meets a live
predecessor. A trial that runs out of retries is reported as failed with its last error line
and never stops the others.

**One LLM server for many trials.** The driver is the only submitter, so it caps the trials
that call a shared server (engineer `llm`, backend `openai`) with a counter in its scheduling
loop (`Queue`): at most `llm_concurrency` of them run at once, and since a run makes one
request at a time (the team's roles are sequential), at most that many requests are in
flight. A Ray custom resource would need every node of an existing cluster started with it, and
a semaphore actor would make a waiting trial hold its CPU/GPU reservation.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from designer.run.folder import RunFolder, RunLocked
from designer.settings import upgrade_saved
from designer.sweep.report import (
    ATTEMPTS,
    is_finished,
    read_attempts,
    result_row,
    write_sweep_report,
)
from designer.sweep.spec import SweepError, SweepSpec, one_line
from designer.sweep.trials import Trial, canonical

CHILD_MODULE = "designer.sweep.child"  # a trial's process: `envengineer run` dying with Ray's
FAULT_ENV = "ENVENGINEER_SWEEP_FAULT"  # which trials fail, where, how often (child.py)
FAULT_CHILD_ENV = "ENVENGINEER_SWEEP_FAULT_STAGE"  # one child's: the stage to die after
PASS_ENV = ("JAX_", "XLA_", "OPENAI_", "HF_")  # the driver's variables every trial gets


@dataclass(frozen=True)
class Options:
    """How the sweep runs (the `envengineer sweep` flags); bad values are a `SweepError`."""

    out: Path
    address: str | None = None  # None: Ray's embedded local cluster
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    retries: int = 2
    llm_concurrency: int = 4
    command: str | None = None

    def __post_init__(self) -> None:
        check_resources(cpus_per_trial=self.cpus_per_trial, gpus_per_trial=self.gpus_per_trial,
                        retries=self.retries, llm_concurrency=self.llm_concurrency)


def check_resources(**values: float) -> None:
    """Refuses a per-trial resource or limit that is not finite or out of its bounds."""
    bounds = {"cpus_per_trial": (1e-3, 1e6), "gpus_per_trial": (0, 1e6), "retries": (0, 1000),
              "llm_concurrency": (1, 10_000)}
    for name, v in values.items():
        (low, high), flag = bounds[name], "--" + name.replace("_", "-")
        if isinstance(v, float) and not math.isfinite(v):
            raise SweepError(f"{flag} must be a finite number, got {v}")
        if not low <= v <= high:
            raise SweepError(f"{flag} must be at least {low:g} and at most {high:g}, "
                             f"got {v if isinstance(v, int) else f'{v:g}'}")


# ------------------------------------------------------------------------------ attempts
@dataclass
class Attempt:
    """One launch of a trial's `envengineer run` (a line of its `sweep/attempts.jsonl`)."""

    trial: str
    attempt: int  # 1, 2, ... over every sweep invocation
    started: float  # epoch seconds
    wall_s: float
    returncode: int | None  # None: the Ray worker or its node died
    error: str | None  # the last error line of a failed attempt
    stages_before: int  # finished stages when it started (it resumed from there)
    host: str


def last_error(returncode: int, stderr: Path) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    lines = [x.strip() for x in stderr.read_text(errors="replace").splitlines() if x.strip()]
    return f"exit status {returncode}" + (f": {lines[-1][:300]}" if lines else "")


def _wait_unlocked(run_dir: Path, timeout_s: float) -> None:
    """Give a dying predecessor (a killed worker's child) time to release the folder's lock."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            RunFolder(run_dir).lock().unlock()
            return
        except RunLocked:
            if time.monotonic() > deadline:
                return  # the child reports the lock as its error
            time.sleep(1.0)


def run_attempt(trial: str, run_dir: str, attempt: int, env: dict[str, str],
                fault_stage: int | None) -> Attempt:
    """The Ray task: one attempt of a trial as a child `envengineer run`, resuming if it can."""
    d = Path(run_dir)
    logs = d / "sweep"
    _wait_unlocked(d, 60)
    before = len(RunFolder(d).finished_stages())
    args = (["run", "--resume", str(d)] if (d / "run.json").is_file()
            else ["run", "--settings", str(logs / "settings.json"), "--out", str(d)])
    child_env = {k: v for k, v in os.environ.items() if k != FAULT_CHILD_ENV} | env
    if fault_stage is not None:
        child_env[FAULT_CHILD_ENV] = str(fault_stage)
    started, t0 = time.time(), time.perf_counter()
    err_path = logs / f"attempt-{attempt}.err"
    with open(logs / f"attempt-{attempt}.out", "w") as out, open(err_path, "w") as err:
        rc = subprocess.run([sys.executable, "-m", CHILD_MODULE, *args], stdout=out,
                            stderr=err, env=child_env, stdin=subprocess.DEVNULL).returncode
    return Attempt(trial=trial, attempt=attempt, started=started,
                   wall_s=time.perf_counter() - t0, returncode=rc,
                   error=None if rc == 0 else last_error(rc, err_path), stages_before=before,
                   host=socket.gethostname())


def _record(run_dir: Path, a: Attempt) -> None:
    with open(run_dir / ATTEMPTS, "a") as f:
        f.write(json.dumps(asdict(a)) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Queue:
    """Which attempts may start now, and what a finished attempt leads to (module docstring)."""

    def __init__(self, trials: Iterable[Trial], *, retries: int, llm_concurrency: int):
        self.waiting: deque[tuple[Trial, int]] = deque((t, 1) for t in trials)
        self.retries, self.cap = retries, llm_concurrency
        self.running = self.llm_running = 0

    def ready(self) -> list[tuple[Trial, int]]:
        """(trial, attempt of this invocation) pairs to launch now; the rest keep waiting."""
        out, held = [], deque()
        while self.waiting:
            t, n = self.waiting.popleft()
            if t.shares_llm_server:
                if self.llm_running >= self.cap:
                    held.append((t, n))
                    continue
                self.llm_running += 1
            out.append((t, n))
        self.waiting = held
        self.running += len(out)
        return out

    def done(self, trial: Trial, attempt: int, ok: bool) -> str:
        """'finished', 'retry' (queued again, to resume) or 'failed' (out of retries)."""
        self.running -= 1
        self.llm_running -= trial.shares_llm_server
        if ok:
            return "finished"
        if attempt <= self.retries:
            self.waiting.append((trial, attempt + 1))
            return "retry"
        return "failed"

    def __bool__(self) -> bool:
        return bool(self.waiting) or self.running > 0


def faults() -> dict[str, tuple[int, int]]:
    """The fault-injection hook: trial -> (stage, attempts), from `ENVENGINEER_SWEEP_FAULT`."""
    out = {}
    for item in filter(None, os.environ.get(FAULT_ENV, "").split(";")):
        parts = item.split(":")
        try:
            name, stage, times = parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else 1
        except (IndexError, ValueError):
            raise SweepError(f"{FAULT_ENV}: {item!r} is not trial:stage[:attempts]") from None
        out[name] = (stage, times)
    return out


# ---------------------------------------------------------------------------------- driver
@dataclass
class Summary:
    rows: list[dict[str, Any]]
    report: Path
    results: Path
    wall_s: float

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] != "finished"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def plan(trials: Iterable[Trial], out: Path) -> dict[str, str]:
    """Each trial's state in `out`: 'new', 'resume' or 'finished' (a rerun skips these).

    A folder holding a run with other settings (the spec changed) is a `SweepError`.
    """
    states = {}
    for t in trials:
        d = out / t.name
        if not (d / "run.json").is_file():
            states[t.name] = "new"
            continue
        old = upgrade_saved(json.loads((d / "run.json").read_text())["settings"])
        if old != canonical(t.settings):
            raise SweepError(f"{d} holds a run with other settings than trial {t.name} (was the "
                             "spec changed?); use another --out")
        states[t.name] = "finished" if is_finished(d, t.settings.stages) else "resume"
    return states


def run_sweep(spec: SweepSpec, trials: list[Trial], opts: Options) -> Summary:
    """Run every unfinished trial on Ray, then write results.jsonl and report.md in `opts.out`."""
    out = opts.out.resolve()
    t0 = time.perf_counter()
    states = plan(trials, out)
    hooks = faults()
    todo = [t for t in trials if states[t.name] != "finished"]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"cannot create the sweep folder {out}: {e.strerror or e}") from None
    with RunFolder(out):  # one sweep per folder at a time
        for t in todo:
            RunFolder(out / t.name).write_json("sweep/settings.json", canonical(t.settings))
        RunFolder(out).write_json("sweep.json", {
            "spec": spec.model_dump(), "command": opts.command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "options": {k: str(v) if isinstance(v, Path) else v
                        for k, v in asdict(opts).items()},
            "trials": [{"name": t.name, "overrides": t.overrides, "state": states[t.name]}
                       for t in trials]})
        skipped = len(trials) - len(todo)
        log(f"{len(trials)} trials: {skipped} finished before (skipped), "
            f"{sum(states[t.name] == 'resume' for t in todo)} to resume, "
            f"{sum(states[t.name] == 'new' for t in todo)} new")
        if todo:
            _launch(todo, out, opts, hooks)
        rows = [result_row(t, out, states[t.name]) for t in trials]
        wall = time.perf_counter() - t0
        results = RunFolder(out).write_text(
            "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        report = write_sweep_report(rows, trials, out, spec, opts.command, wall)
    return Summary(rows, report, results, wall)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError("envengineer sweep needs Ray: pip install 'envengineer[ray]'") from None
    return ray


def _start_ray(ray: Any, opts: Options) -> Path | None:
    """Join `opts.address`, or start the embedded local cluster (its temp dir, else None)."""
    import logging

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls home
    common = {"log_to_driver": False, "logging_level": logging.WARNING}
    if opts.address:
        host, _, port = opts.address.rpartition(":")
        if "://" not in opts.address and host and port.isdigit():  # Ray waits minutes on none
            try:
                socket.create_connection((host, int(port)), timeout=10).close()
            except (OSError, OverflowError) as e:
                raise SweepError(f"cannot reach the Ray cluster at {opts.address}: {e}") from None
        try:
            ray.init(address=opts.address, **common)
        except Exception as e:  # Ray's own errors (connection, authentication) as one line
            ray.shutdown()
            raise SweepError(f"cannot join the Ray cluster at {opts.address}: "
                             f"{one_line(e)[:300]} (token authentication: docs/sweeps.md)"
                             ) from None
        return None
    # Ray's unix sockets need a path under 107 bytes: a short temp dir, its logs kept at the end.
    tmp = Path(tempfile.mkdtemp(prefix="envengineer-ray-"))
    with warnings.catch_warnings():  # Ray forks then execs its daemons: JAX's warning is moot
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        ray.init(address="local", object_store_memory=80 * 1024**2, include_dashboard=False,
                 _temp_dir=str(tmp), **common)
    res = ray.cluster_resources()
    log(f"Ray: local cluster with {res.get('CPU', 0):g} CPUs and {res.get('GPU', 0):g} GPUs "
        f"(logs: {tmp}, kept in ray_logs/)")
    return tmp


def _check_resources(ray: Any, opts: Options) -> None:
    """A trial asking more than any node has would wait forever: fail (local) or warn."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    cpus = max((n.get("CPU", 0) for n in nodes), default=0)
    gpus = max((n.get("GPU", 0) for n in nodes), default=0)
    if cpus >= opts.cpus_per_trial and gpus >= opts.gpus_per_trial:
        return
    msg = (f"a trial asks {opts.cpus_per_trial:g} CPU(s) and {opts.gpus_per_trial:g} GPU(s); "
           f"the largest node has {cpus:g} and {gpus:g}")
    if opts.address is None:
        raise SweepError(msg + ": lower --cpus-per-trial / --gpus-per-trial")
    log(f"warning: {msg} (trials wait until the cluster grows)")


def _keep_logs(tmp: Path | None, out: Path) -> None:
    if tmp is None:
        return
    with suppress(OSError):
        session = (tmp / "session_latest").resolve()
        shutil.copytree(session / "logs", out / "ray_logs" / session.name, dirs_exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)


def _ray_error(e: BaseException) -> str:
    cause = getattr(e, "cause", None) or e
    lines = [x for x in str(cause).strip().splitlines() if x.strip()]
    return f"{type(cause).__name__}: {lines[-1].strip()[:300] if lines else ''}"


def _launch(todo: list[Trial], out: Path, opts: Options,
            hooks: Mapping[str, tuple[int, int]]) -> None:
    ray = _import_ray()
    tmp = _start_ray(ray, opts)
    try:
        _check_resources(ray, opts)
        task = ray.remote(run_attempt).options(num_cpus=opts.cpus_per_trial,
                                               num_gpus=opts.gpus_per_trial, max_retries=0)
        env = {k: v for k, v in os.environ.items() if k.startswith(PASS_ENV)}
        if 0 < opts.gpus_per_trial < 1:  # JAX takes 75% of a GPU: trials sharing one must not
            env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 * opts.gpus_per_trial:.2f}")
        first = {t.name: len(read_attempts(out / t.name)) for t in todo}
        queue = Queue(todo, retries=opts.retries, llm_concurrency=opts.llm_concurrency)
        running: dict[Any, tuple[Trial, int, float, int]] = {}
        finished = 0
        while queue:
            for t, n in queue.ready():
                stage, times = hooks.get(t.name, (None, 0))
                ref = task.remote(t.name, str(out / t.name), first[t.name] + n, env,
                                  stage if n <= times else None)
                running[ref] = (t, n, time.time(), len(RunFolder(out / t.name)
                                                       .finished_stages()))
            [ref], _ = ray.wait(list(running), num_returns=1)
            t, n, submitted, before = running.pop(ref)
            try:
                a: Attempt = ray.get(ref)
            except ray.exceptions.RayError as e:  # the worker or its node died, or the task
                a = Attempt(t.name, first[t.name] + n, submitted, time.time() - submitted,
                            None, _ray_error(e), before, "?")
            ok = a.returncode == 0 and is_finished(out / t.name, t.settings.stages)
            if a.returncode == 0 and not ok:
                a.error = "exit status 0 before its last stage"
            _record(out / t.name, a)
            what = queue.done(t, n, ok)
            finished += what == "finished"
            resumed = f", resumed from stage {a.stages_before}" if a.stages_before else ""
            log(f"{t.name}: attempt {a.attempt} {'finished' if ok else 'failed'} in "
                f"{a.wall_s:.0f}s{resumed}" + ("" if ok else f" ({a.error})")
                + {"finished": f" [{finished}/{len(todo)} done]",
                   "retry": f"; retry {n} of {opts.retries}, resuming",
                   "failed": "; out of retries"}[what])
    finally:
        ray.shutdown()
        _keep_logs(tmp, out)
