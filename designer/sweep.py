"""Sweeps: many `envengineer run` trials from one SPEC file, on Ray, resumable and fault tolerant.

A SPEC (YAML or TOML, `SweepSpec`, format in docs/sweeps.md) holds `base` run settings, a
`grid` over any `RunSettings` field by its dotted path (`engineer`, `seed`, `context`, `roles`,
`backend`, `model`, `preset`, `stages`, `stage_steps`, `trainee.lr`, ...) or `ablation` (the
paper's context variants V1-V6), and optional `random` draws. Every trial's settings are
validated before anything is launched. Trial `<name>` runs as `envengineer run` in
`<out>/<name>/`, a run folder; the sweep's own files for it are in `<out>/<name>/sweep/`
(settings.json, attempts.jsonl, each attempt's stdout and stderr).

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
process dies with its Ray worker (`PR_SET_PDEATHSIG`), so a retry never meets a live
predecessor. A trial that runs out of retries is reported as failed with its last error line
and never stops the others.

**One LLM server for many trials.** The driver is the only submitter, so it caps the trials
that call a shared server (engineer `llm`, backend `openai`) with a counter in its scheduling
loop (`Queue`): at most `llm_concurrency` of them run at once, and since a run makes one
request at a time (the team's roles are sequential), at most that many requests are in
flight. A Ray custom resource would need every node of an existing cluster started with it, and
a semaphore actor would make a waiting trial hold its CPU/GPU reservation.

Fault injection for tests and drills: `ENVENGINEER_SWEEP_FAULT="trial:stage[:attempts];..."`
SIGKILLs the named trial's child right after it finishes `stage` (`-1`: exits before the first
stage), on its first `attempts` attempts (default 1).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from designer.run.folder import RunFolder, RunLocked
from designer.settings import RunSettings, upgrade_saved
from designer.tasks.mapf.report import AGENTS

FAULT_ENV = "ENVENGINEER_SWEEP_FAULT"
FAULT_CHILD_ENV = "ENVENGINEER_SWEEP_FAULT_STAGE"
PASS_ENV = ("JAX_", "XLA_", "OPENAI_", "HF_")  # the driver's variables every trial gets
ROUND0_FIELD = "history_round0"  # the RunSettings field V3 needs: round 0's config in H
ABLATION: dict[str, tuple[str, bool, str]] = {  # variant: (modules, round 0 in H, the paper's)
    "V1": ("F", False, "F"), "V2": ("F,G", False, "F+G"),
    "V3": ("F,G,H", True, "F+G+H with round 0"), "V4": ("F,G,H", False, "F+G+H"),
    "V5": ("F,G,H,S", False, "F+G+H+S"), "V6": ("F,G,H,T", False, "F+G+H+T")}
DISTS = ("uniform", "loguniform", "randint", "choice")


class SweepError(ValueError):
    """A user error (spec, folder, missing Ray): one line for the command line."""


# ----------------------------------------------------------------------------------- spec
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dist(Strict):
    """One random draw: exactly one of uniform, loguniform, randint (inclusive) or choice."""

    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    randint: tuple[int, int] | None = None
    choice: list[Any] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> Dist:
        given = [k for k in DISTS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(DISTS)}")
        bounds = self.uniform or self.loguniform or self.randint
        if bounds is not None and not bounds[0] <= bounds[1]:
            raise ValueError(f"{given[0]} needs [low, high] with low <= high")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise ValueError("loguniform needs low > 0")
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        if self.uniform is not None:
            return float(f"{rng.uniform(*self.uniform):.4g}")
        if self.loguniform is not None:
            lo, hi = np.log(self.loguniform)
            return float(f"{math.exp(rng.uniform(lo, hi)):.4g}")
        if self.randint is not None:
            return int(rng.integers(self.randint[0], self.randint[1] + 1))
        assert self.choice is not None
        return self.choice[int(rng.integers(len(self.choice)))]


def _flatten(d: Mapping[str, Any], leaf: Callable[[Any], bool] = lambda v: False,
             prefix: str = "") -> dict[str, Any]:
    """{'trainee': {'lr': x}} -> {'trainee.lr': x} (TOML writes dotted keys as tables)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v and not leaf(v):
            out.update(_flatten(v, leaf, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class RandomDraws(Strict):
    """`samples` draws of `params`; draw k is the same in every grid cell (seeds share it)."""

    samples: int = Field(ge=1, le=10_000)
    seed: int = Field(0, ge=0)
    params: dict[str, Dist] = Field(min_length=1)

    @field_validator("params", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        is_dist = lambda x: not all(isinstance(y, Mapping) for y in x.values())  # noqa: E731
        return _flatten(v, is_dist) if isinstance(v, Mapping) else v


class SweepSpec(Strict):
    """The SPEC file: base settings, a grid over settings, optional random draws."""

    name: str | None = Field(None, min_length=1, max_length=100)
    base: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    random: RandomDraws | None = None

    @field_validator("base", "grid", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        return _flatten(v) if isinstance(v, Mapping) else v

    @field_validator("grid")
    @classmethod
    def _lists(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"{k} lists no value")
            seen = [json.dumps(x, sort_keys=True) for x in vals]
            twice = next((x for x, s in zip(vals, seen) if seen.count(s) > 1), None)
            if twice is not None:
                raise ValueError(f"{k} lists {twice!r} twice")
        return v


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _describe(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key {where}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a SPEC (.yaml, .yml or .toml); `SweepError` names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"spec {path} not found")
    kind = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}.get(path.suffix)
    if kind is None:
        raise SweepError(f"spec {path}: use a .yaml, .yml or .toml file")
    try:
        if kind == "TOML":
            import tomllib

            data = tomllib.loads(path.read_text())
        else:
            import yaml

            data = yaml.safe_load(path.read_text())
    except Exception as e:  # any parser's error is the user's malformed file
        raise SweepError(f"spec {path} is not valid {kind}: {_one_line(e)}") from None
    if not isinstance(data, dict):
        raise SweepError(f"spec {path} must be a mapping with keys name, base, grid, random; "
                         f"got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SweepError(f"spec {path}: {_describe(e)}") from None


# --------------------------------------------------------------------------------- trials
@dataclass(frozen=True)
class Trial:
    """One run of the sweep: its folder name, the spec's values for it and its settings."""

    name: str
    overrides: dict[str, Any]  # grid and random values by dotted path ('ablation': variant)
    settings: RunSettings

    @property
    def cell(self) -> str:
        """The grid cell: every override but the seed (mean ± std are over a cell's seeds)."""
        return ", ".join(f"{k}={v}" for k, v in self.overrides.items() if k != "seed") or "all"

    @property
    def shares_llm_server(self) -> bool:
        return self.settings.engineer == "llm" and self.settings.backend == "openai"


def _check_key(where: str, path: str) -> None:
    """`path` names one RunSettings field (or `ablation`), else SweepError naming `where`."""
    if path == "ablation" and not where.startswith("base"):
        return
    model: type[BaseModel] = RunSettings
    parts = path.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            known = ", ".join(model.model_fields) + (", ablation" if model is RunSettings
                                                     and not where.startswith("base") else "")
            raise SweepError(f"unknown run setting {where} (known here: {known})")
        sub = field.annotation
        nested = isinstance(sub, type) and issubclass(sub, BaseModel)
        if i < len(parts) - 1 and not nested:
            raise SweepError(f"unknown run setting {where}: {'.'.join(parts[:i + 1])} has no "
                             "sub-settings")
        if i == len(parts) - 1 and nested:
            raise SweepError(f"{where} is a group of settings; name one of its fields, e.g. "
                             f"{where}.{next(iter(sub.model_fields))}")
        if nested:
            model = sub


def _variant(v: Any, where: str) -> dict[str, Any]:
    if v not in ABLATION:
        names = ", ".join(f"{k} ({p})" for k, (_, _, p) in ABLATION.items())
        raise SweepError(f"{where}: unknown ablation variant {v!r} (known: {names})")
    modules, round0, _ = ABLATION[v]
    return {"context": modules, ROUND0_FIELD: round0}


def variant_of(settings: RunSettings) -> str | None:
    """The paper's ablation variant these settings are, if any."""
    round0 = bool(getattr(settings, ROUND0_FIELD))
    return next((k for k, (m, r, _) in ABLATION.items()
                 if m == settings.context and r == round0), None)


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, v in flat.items():
        *parents, leaf = path.split(".")
        d = out
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = v
    return out


def _get(settings: BaseModel, path: str) -> Any:
    v: Any = settings
    for part in path.split("."):
        v = getattr(v, part)
    return v


def _slug(v: Any) -> str:
    s = f"{v:g}" if isinstance(v, float) else str(v)
    return re.sub(r"[^A-Za-z0-9._+-]", "-", s.replace(",", "+"))


def expand(spec: SweepSpec, flags: Mapping[str, Any] | None = None) -> list[Trial]:
    """Every trial of the spec, each with validated settings (`flags` apply to all trials).

    Nothing is launched here: a bad key or value anywhere raises `SweepError` naming it.
    """
    flags = dict(flags or {})
    sources: dict[str, str] = {}
    for key in spec.grid:
        _check_key(f"grid.{key}", key)
        sources[key] = f"grid.{key}"
    params = spec.random.params if spec.random else {}
    for key in params:
        _check_key(f"random.params.{key}", key)
        if key in sources:
            raise SweepError(f"{key} is in both grid and random.params: vary it in one")
        sources[key] = f"random.params.{key}"
    base = _flatten(spec.base)
    for key in base:
        _check_key(f"base.{key}", key)
    for key in flags:
        if key in sources:
            raise SweepError(f"--{key.replace('_', '-')} conflicts with {sources[key]}: the "
                             "spec varies it")
    if "ablation" in sources:
        for key in ("context", ROUND0_FIELD):
            if key in sources or key in base:
                where = sources.get(key, f"base.{key}")
                raise SweepError(f"{where} conflicts with {sources['ablation']}: the ablation "
                                 "variant sets the context modules")
    base.update(flags)
    where_base = {k: (f"--{k.replace('_', '-')}" if k in flags else f"base.{k}") for k in base}
    _settings(base, {}, where_base)  # the base alone: errors name base keys, not a trial

    draws: list[dict[str, Any]] = [{}]
    if spec.random:
        rng = np.random.default_rng(spec.random.seed)
        draws = [{k: d.draw(rng) for k, d in params.items()} for _ in range(spec.random.samples)]
    trials: dict[str, Trial] = {}
    for combo in itertools.product(*spec.grid.values()):
        for k, draw in enumerate(draws):
            raw = {**dict(zip(spec.grid, combo)), **draw}
            settings = _settings(base, raw, {**where_base, **sources})
            over = {p: (v if p == "ablation" else _get(settings, p)) for p, v in raw.items()}
            parts = [str(v) if p == "ablation" else f"{p}-{_slug(v)}"
                     for p, v in over.items() if p in spec.grid]
            name = "_".join(parts + ([f"r{k}"] if spec.random else [])) or "base"
            if name in trials:
                raise SweepError(f"two trials would share the folder {name!r}: "
                                 f"{trials[name].overrides} and {over}")
            trials[name] = Trial(name, over, settings)
    return list(trials.values())


def _settings(base: Mapping[str, Any], raw: Mapping[str, Any],
              where: Mapping[str, str]) -> RunSettings:
    flat = dict(base)
    for path, v in raw.items():
        if path == "ablation":
            flat.update(_variant(v, f"{where[path]} = {v}"))
        else:
            flat[path] = v
    try:
        return RunSettings.model_validate(_nest(flat))
    except ValidationError as e:
        err = e.errors()[0]
        path = ".".join(str(x) for x in err["loc"])
        src = (where.get(path) or (where.get("ablation") if path in ("context", ROUND0_FIELD)
                                   else None) or path or "settings")
        value = f" = {raw[path]!r}" if path in raw else ""
        raise SweepError(f"bad value for {src}{value}: {err['msg']}") from None


def _canonical(settings: RunSettings) -> Any:
    return json.loads(settings.model_dump_json())


def is_finished(run_dir: Path, stages: int) -> bool:
    """All the run's stages are done (or its last one is: a `train_minutes` budget ran out)."""
    folder = RunFolder(run_dir)
    done = folder.finished_stages()
    if not done:
        return False
    return len(done) >= stages or bool(folder.read_json(folder.stage_rel(done[-1])
                                                        / "done.json").get("last"))


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
        if old != _canonical(t.settings):
            raise SweepError(f"{d} holds a run with other settings than trial {t.name} (was the "
                             "spec changed?); use another --out")
        states[t.name] = "finished" if is_finished(d, t.settings.stages) else "resume"
    return states


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
        rc = subprocess.run([sys.executable, "-m", "designer.sweep", *args], stdout=out,
                            stderr=err, env=child_env, stdin=subprocess.DEVNULL).returncode
    return Attempt(trial=trial, attempt=attempt, started=started,
                   wall_s=time.perf_counter() - t0, returncode=rc,
                   error=None if rc == 0 else last_error(rc, err_path), stages_before=before,
                   host=socket.gethostname())


def read_attempts(run_dir: Path) -> list[dict[str, Any]]:
    p = run_dir / "sweep" / "attempts.jsonl"
    if not p.is_file():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _record(run_dir: Path, a: Attempt) -> None:
    with open(run_dir / "sweep" / "attempts.jsonl", "a") as f:
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
@dataclass(frozen=True)
class Options:
    out: Path
    address: str | None = None  # None: Ray's embedded local cluster
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    retries: int = 2
    llm_concurrency: int = 4
    command: str | None = None


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


def run_sweep(spec: SweepSpec, trials: list[Trial], opts: Options) -> Summary:
    """Run every unfinished trial on Ray, then write results.jsonl and report.md in `opts.out`."""
    out = opts.out.resolve()
    t0 = time.perf_counter()
    states = plan(trials, out)
    hooks = faults()
    todo = [t for t in trials if states[t.name] != "finished"]
    with RunFolder(out):  # one sweep per folder at a time
        for t in todo:
            RunFolder(out / t.name).write_json("sweep/settings.json", _canonical(t.settings))
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
        report = write_sweep_report(rows, trials, out, spec, opts, wall)
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
            except OSError as e:
                raise SweepError(f"cannot reach the Ray cluster at {opts.address}: {e}") from None
        try:
            ray.init(address=opts.address, **common)
        except Exception as e:  # Ray's own errors (connection, authentication) as one line
            ray.shutdown()
            raise SweepError(f"cannot join the Ray cluster at {opts.address}: "
                             f"{_one_line(e)[:300]} (token authentication: docs/sweeps.md)"
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


# --------------------------------------------------------------------------------- results
def result_row(t: Trial, out: Path, state: str) -> dict[str, Any]:
    """One line of results.jsonl: the trial's overrides, status and the held-out figures of
    its result (the stage `designer.run.selection` chose; the last stage of older runs)."""
    d = out / t.name
    folder = RunFolder(d)
    done = folder.finished_stages()
    last = folder.read_json(folder.stage_rel(done[-1]) / "done.json") if done else {}
    attempts = read_attempts(d)
    ok = is_finished(d, t.settings.stages)
    result = last  # a run saved before `designer.run.selection`: its last stage
    sel = folder.selection() if ok else None
    if sel:
        result = {"stage": sel["stage"], "heldout_by_agents": sel["heldout"].get(
            "mean_over_sizes"), "heldout_overall": sel["heldout"].get("overall")}
    return {"trial": t.name, "run_dir": str(d), "overrides": t.overrides, "cell": t.cell,
            "status": "finished" if ok else "failed", "skipped": state == "finished",
            "stages_done": len(done), "stages": t.settings.stages,
            "result_stage": result.get("stage") if ok else None,
            "env_steps": last.get("env_steps"),
            "heldout_by_agents": result.get("heldout_by_agents") if ok else None,
            "heldout_overall": result.get("heldout_overall") if ok else None,
            "wall_s": round(sum(a["wall_s"] for a in attempts), 2),
            "attempts": len(attempts), "retries": max(0, len(attempts) - 1),
            "error": None if ok else (attempts[-1]["error"] if attempts else "never started")}


def _ms(xs: list[float]) -> str:
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{np.mean(xs):.2f} ± {np.std(xs, ddof=1):.2f}"


def _agent_values(rows: list[dict[str, Any]], k: str, metric: str) -> list[float]:
    return [r["heldout_by_agents"][k][metric] for r in rows
            if r["heldout_by_agents"] and k in r["heldout_by_agents"]]


def cell_table(rows: list[dict[str, Any]]) -> list[str]:
    """Mean ± std over each grid cell's finished trials (its seeds), held-out split."""
    cells: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault(r["cell"], []).append(r)
    out = ["| cell | finished | " + " | ".join(f"{k} agents valid / optimal %" for k in AGENTS)
           + " | wall time per trial |", "|---" * (len(AGENTS) + 3) + "|"]
    for cell, rs in cells.items():
        ok = [r for r in rs if r["status"] == "finished"]
        vals = [f"{_ms(_agent_values(ok, k, 'valid'))} / {_ms(_agent_values(ok, k, 'optimal'))}"
                for k in AGENTS]
        wall = _ms([r["wall_s"] for r in ok]).split(" ±")[0]
        out.append(f"| {cell} | {len(ok)}/{len(rs)} | " + " | ".join(vals)
                   + f" | {wall}{'s' if ok else ''} |")
    return out


def ablation_tables(rows: list[dict[str, Any]], trials: list[Trial]) -> list[str]:
    """The paper's ablation layout: rows V1..V6, held-out valid % per agent count, one table
    per combination of the other varied settings. Empty unless the sweep varies the context."""
    by_name = {t.name: t for t in trials}
    if not any({"ablation", "context"} & set(t.overrides) for t in trials):
        return []
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        t = by_name[r["trial"]]
        rest = ", ".join(f"{k}={v}" for k, v in t.overrides.items()
                         if k not in ("seed", "ablation", "context", ROUND0_FIELD))
        label = variant_of(t.settings) or f"context {t.settings.context}"
        groups.setdefault(rest, {}).setdefault(label, []).append(r)
    out = []
    for rest, variants in groups.items():
        out += [f"### Context ablation{': ' + rest if rest else ''}", "",
                "held-out valid % by agents (mean over map sizes; mean ± std over seeds)", "",
                "| variant | context | finished | " + " | ".join(f"{k} agents" for k in AGENTS)
                + " |", "|---" * (len(AGENTS) + 3) + "|"]
        labels = list(ABLATION) + sorted(v for v in variants if v not in ABLATION)
        for v in labels:
            rs = variants.get(v, [])
            ok = [r for r in rs if r["status"] == "finished"]
            ctx = ABLATION[v][2] if v in ABLATION else v.removeprefix("context ")
            cells = ([_ms(_agent_values(ok, k, "valid")) for k in AGENTS] if rs
                     else ["not in this sweep"] + ["-"] * (len(AGENTS) - 1))
            out.append(f"| {v if v in ABLATION else '-'} | {ctx} | {len(ok)}/{len(rs)} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return out


def write_sweep_report(rows: list[dict[str, Any]], trials: list[Trial], out: Path,
                       spec: SweepSpec, opts: Options, wall_s: float) -> Path:
    """report.md: the sweep's tables first, then `designer.report` over the finished trials."""
    from designer.report import write_report

    title = f"Sweep {spec.name or out.name}"
    ok = [r for r in rows if r["status"] == "finished"]
    failed = [r for r in rows if r["status"] != "finished"]
    sections = [
        "## Sweep", "",
        f"{len(rows)} trials: {len(ok)} finished ({sum(r['skipped'] for r in ok)} before this "
        f"invocation), {len(failed)} failed; this invocation took {wall_s:.0f}s; the trials' "
        f"attempts took {sum(r['wall_s'] for r in rows):.0f}s in all. "
        "One line per trial in `results.jsonl`.", "",
        "### Mean ± std per grid cell (held-out split, final stage, mean over map sizes)", "",
        *cell_table(rows), "", *ablation_tables(rows, trials)]
    if failed:
        sections += ["### Failed trials", "", "| trial | stages done | attempts | last error |",
                     "|---|---|---|---|"]
        sections += [f"| {r['trial']} | {r['stages_done']}/{r['stages']} | {r['attempts']} | "
                     f"{(r['error'] or '').replace('|', '/')} |" for r in failed]
        sections.append("")
    if ok:
        path = write_report([out / r["trial"] for r in ok], out, title=title,
                            command=opts.command)
        text = path.read_text()
    else:
        path = out / "report.md"
        text = f"# {title}\n\n" + (f"Command: `{opts.command}`\n" if opts.command else "")
    head, sep, tail = text.partition("\n## ")  # the sweep's sections before the runs' ones
    body = "\n".join(sections)
    path.write_text(f"{head}\n{body}\n## {tail}" if sep else f"{text}\n{body}")
    return path


# ------------------------------------------------------------------------- the trial's child
def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent (the Ray worker) dies."""
    with suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _inject_fault(stage: int) -> None:
    """The fault hook (module docstring): die right after `stage` is finished."""
    if stage < 0:
        print("error: injected fault before the first stage", file=sys.stderr)
        raise SystemExit(3)
    finish = RunFolder.finish_stage

    def finish_then_die(self: RunFolder, k: int, summary: dict[str, Any]) -> None:
        finish(self, k, summary)
        if k == stage:
            os.kill(os.getpid(), signal.SIGKILL)

    RunFolder.finish_stage = finish_then_die  # type: ignore[method-assign]


def child_main(argv: list[str]) -> int:
    """`python -m designer.sweep ARGS`: `envengineer ARGS` that dies with its Ray worker."""
    _die_with_parent()
    stage = os.environ.pop(FAULT_CHILD_ENV, None)
    if stage is not None:
        _inject_fault(int(stage))
    from designer.cli import main

    return main(argv)


if __name__ == "__main__":
    raise SystemExit(child_main(sys.argv[1:]))
