"""The run folder: everything needed to understand, report and resume a run.

Layout::

    run.json                  every setting, versions, seed, git commit
    calls.jsonl               the LLM call log (append-only; replayed on resume)
    metrics.jsonl             one line per finished stage (rewritten from the stages)
    stages/NNN/               config, train, validation, heldout, context, candidates,
                              choice, times (JSON) and ckpt/ (orbax); done.json last
    tb/                       TensorBoard event files, when `tensorboard` is installed
    report.md, *.png          written by `designer.report`

Writes are atomic (a temporary file in the same folder, fsync, rename), and a stage counts as
finished only once its `done.json` exists, which is written last: a run killed at any moment
(kill -9 included) resumes from its last finished stage, and a half-written stage is discarded.
One process at a time: an exclusive lock on `.lock`; a second process gets `RunLocked`.

Integrity: a finished stage's `done.json` lists the sha256 of every other file of the stage
(the checkpoint's included) and of the call log's bytes so far; `done.json`, `run.json` and
`selected.json` carry the sha256 of their own bytes (`seal`). `resume`, `eval` and `report`
check them (`verify_stage`, `read`), so a file changed after it was written (one flipped bit
is enough) is refused with `RunCorrupt` naming it, never read. Every reader validates what it
reads against its schema (`designer.run.files`) and names the file and field it refuses. Runs
saved before digests existed carry none and are read on their schemas alone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from designer.run.files import STAGE_FILES, RunJson, Selected

PHASES = ("train", "validate", "heldout", "propose", "verify")  # the timed parts of a stage
SELECTED = "selected.json"  # the run's result, once its last stage is done (designer.run.selection)


DONE = "done.json"
CALLS = "calls.jsonl"
SEAL = "sha256"  # the last field of a sealed JSON file: the digest of its own bytes
_UNSEALED = "0" * 64  # the seal's value while the digest is computed
_SEAL_LINE = re.compile(rb'\n "([^"\n]*)": "([^"\n]*)"\n}\n\Z')
_HEX = re.compile(r"[0-9a-f]{64}")


class RunLocked(RuntimeError):
    """Another process holds this run folder."""


class RunCorrupt(ValueError):
    """A run folder file is missing, unreadable, changed since it was written, or does not
    hold what it should; the message names the file (and the field)."""


def sha256_file(path: Path, limit: int | None = None) -> str:
    """The sha256 of `path`'s bytes (its first `limit` bytes when given)."""
    h = hashlib.sha256()
    left = limit
    with path.open("rb") as f:
        while left is None or left > 0:
            chunk = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    return h.hexdigest()


def sealed_text(obj: dict[str, Any]) -> str:
    """`obj` as indented JSON whose last field `sha256` is the digest of the text's own bytes
    (computed with 64 zeros in its place)."""
    body = {k: v for k, v in obj.items() if k != SEAL}
    text = json.dumps({**body, SEAL: _UNSEALED}, indent=1, default=_plain) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return text[:text.rindex(_UNSEALED)] + digest + text[text.rindex(_UNSEALED) + 64:]


def check_seal(raw: bytes, name: str) -> bool:
    """Whether `raw` (the bytes of file `name`) is sealed (`sealed_text`); RunCorrupt when its
    seal does not match its bytes or is damaged. Unsealed files (runs saved before seals)
    give False."""
    m = _SEAL_LINE.search(raw)
    if m is None:
        return False
    key, value = m.group(1).decode(errors="replace"), m.group(2).decode(errors="replace")
    if key != SEAL:
        if _HEX.fullmatch(value):
            raise RunCorrupt(f"{name}: its seal is damaged (field {key!r} where {SEAL!r} "
                             "was written)")
        return False
    unsealed = raw[:m.start(2)] + _UNSEALED.encode() + raw[m.end(2):]
    if hashlib.sha256(unsealed).hexdigest() != value:
        raise RunCorrupt(f"{name}: its bytes changed after it was written (the sha256 it "
                         "carries does not match); restore the file or start the run again")
    return True


def parse_json(raw: bytes, name: str) -> Any:
    """JSON bytes of file `name`, or RunCorrupt naming it."""
    from jaxenv.replies import unique_keys

    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RunCorrupt(f"{name}: not valid JSON ({str(e).splitlines()[0][:160]})") from None


def validated(data: Any, schema: Any, name: str) -> Any:
    """`data` after checking it against `schema` (`designer.run.files`), or RunCorrupt
    naming the file and the first bad field."""
    try:
        TypeAdapter(schema).validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "the top level"
        raise RunCorrupt(f"{name}: {where}: {err['msg']} (got {_brief(err.get('input'))})"
                         ) from None
    return data


def _brief(v: Any) -> str:
    text = repr(v) if not isinstance(v, dict | list) else f"a {type(v).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


class RunFolder:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock_fd: int | None = None

    # ------------------------------------------------------------------ lock
    def lock(self) -> RunFolder:
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunLocked(f"{self.path} is in use by another process (pid {owner}); wait for "
                            "it to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        return self

    def unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunFolder:
        return self.lock()

    def __exit__(self, *exc: Any) -> None:
        self.unlock()

    # ---------------------------------------------------------------- writes
    def write_text(self, rel: str | Path, text: str) -> Path:
        """Atomically write `text` to `rel` (inside the run folder)."""
        dest = self.path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return dest

    def write_json(self, rel: str | Path, obj: Any) -> Path:
        return self.write_text(rel, json.dumps(obj, indent=1, default=_plain) + "\n")

    def write_sealed(self, rel: str | Path, obj: dict[str, Any]) -> Path:
        """`obj` as JSON carrying the digest of its own bytes (`sealed_text`)."""
        return self.write_text(rel, sealed_text(obj))

    def name(self, rel: str | Path) -> str:
        """How errors name `rel`: its path under the run folder's path."""
        return str(self.path / rel)

    def read_json(self, rel: str | Path) -> Any:
        """The JSON of `rel` (no schema, no seal check: what the writer reads back)."""
        return parse_json(self._bytes(rel), self.name(rel))

    def read(self, rel: str | Path, schema: Any = None) -> Any:
        """The JSON of `rel`, its seal checked when it carries one and its content validated
        against `schema` (default: the stage file's, `designer.run.files.STAGE_FILES`);
        RunCorrupt naming the file (and field) otherwise. The seal is left out of the
        result."""
        raw = self._bytes(rel)
        name = self.name(rel)
        sealed = check_seal(raw, name)
        data = parse_json(raw, name)
        if sealed and isinstance(data, dict):
            data.pop(SEAL, None)
        schema = schema if schema is not None else STAGE_FILES.get(Path(rel).name, Any)
        return validated(data, schema, name)

    def _bytes(self, rel: str | Path) -> bytes:
        p = self.path / rel
        if not p.is_file():
            what = "is not a file" if p.exists() else "is missing"
            raise RunCorrupt(f"{self.name(rel)} {what}")
        try:
            return p.read_bytes()
        except OSError as e:
            raise RunCorrupt(f"{self.name(rel)}: cannot be read ({e.strerror})") from None

    def run_json(self) -> dict[str, Any]:
        """`run.json` (settings, versions, seed), checked."""
        if not (self.path / "run.json").exists():
            raise RunCorrupt(f"{self.path} is not a run folder (no run.json)")
        return self.read("run.json", RunJson)

    def selection(self) -> dict[str, Any] | None:
        """The run's result (`designer.run.selection`, written after its last stage): rule,
        chosen stage, scores, held-out table. None before the run ends, and for runs saved
        before selection existed (their result is their last stage). RunCorrupt when it is
        damaged or names a stage the run does not have."""
        if not (self.path / SELECTED).exists():
            return None
        sel = self.read(SELECTED, Selected)
        done = self.finished_stages()
        if sel["last_stage"] != len(done) - 1 or sel["stage"] > sel["last_stage"]:
            raise RunCorrupt(f"{self.name(SELECTED)}: names stage {sel['stage']} of "
                             f"{sel['last_stage'] + 1} stages, but the run has "
                             f"{len(done)} finished stage(s)")
        if len(sel["scores"]) != len(done):
            raise RunCorrupt(f"{self.name(SELECTED)}: scores: {len(sel['scores'])} scores "
                             f"for {len(done)} finished stage(s)")
        return sel

    # ---------------------------------------------------------------- stages
    @staticmethod
    def stage_rel(stage: int) -> Path:
        return Path("stages") / f"{stage:03d}"

    def stage_dir(self, stage: int) -> Path:
        return self.path / self.stage_rel(stage)

    def finished_stages(self) -> list[int]:
        """Stages 0..n-1 that have `done.json`. RunCorrupt where a stage folder is a file,
        or a finished stage follows a missing one (a stage folder removed by hand)."""
        out = []
        while (self.stage_dir(len(out)) / DONE).is_file():
            out.append(len(out))
        if (self.path / "stages").is_dir():
            for d in sorted((self.path / "stages").glob("[0-9][0-9][0-9]")):
                if not d.is_dir():
                    raise RunCorrupt(f"{d} is not a folder (a stage folder was replaced by a "
                                     "file)")
                if int(d.name) > len(out) and (d / DONE).exists():
                    raise RunCorrupt(f"{d} is a finished stage, but "
                                     f"{self.stage_dir(len(out))} is missing or unfinished")
        return out

    def discard_partial(self) -> list[int]:
        """Remove stage folders without `done.json` (a stage killed half-way); their indices."""
        done = set(self.finished_stages())
        gone = []
        for d in sorted((self.path / "stages").glob("[0-9][0-9][0-9]")):
            k = int(d.name)
            if k not in done:
                shutil.rmtree(d)
                gone.append(k)
        return gone

    def stage_digests(self, stage: int) -> dict[str, Any]:
        """The sha256 of every file of `stage` but `done.json` (paths relative to the stage
        folder), and of the call log's bytes so far (`calls.jsonl`: bytes and sha256)."""
        d = self.stage_dir(stage)
        files = {p.relative_to(d).as_posix(): sha256_file(p)
                 for p in sorted(d.rglob("*")) if p.is_file() and p.name != DONE}
        calls = self.path / CALLS
        if calls.is_file():
            n = calls.stat().st_size
            files[f"../../{CALLS}"] = {"bytes": n, "sha256": sha256_file(calls, n)}
        return files

    def finish_stage(self, stage: int, summary: dict[str, Any]) -> None:
        """Mark `stage` finished (its other files are written): `done.json` with the digests
        of the stage's files, sealed; then refresh metrics.jsonl."""
        self.write_sealed(self.stage_rel(stage) / DONE,
                          {**summary, "digests": self.stage_digests(stage)})
        self.write_metrics()

    def write_metrics(self) -> bool:
        """`metrics.jsonl`: each finished stage's summary, one line each (derived from the
        stages' `done.json`, so it is rewritten, never read back); whether it changed."""
        lines = []
        for k in self.finished_stages():
            done = self.read_json(self.stage_rel(k) / DONE)
            lines.append(json.dumps({k: v for k, v in done.items()
                                     if k not in ("digests", SEAL)}, default=_plain))
        text = "\n".join(lines) + "\n"
        path = self.path / "metrics.jsonl"
        try:
            if path.is_file() and path.read_bytes() == text.encode():
                return False
        except OSError:
            pass
        if path.is_dir():
            raise RunCorrupt(f"{path} is a folder; remove it (it is rewritten from the stages)")
        self.write_text("metrics.jsonl", text)
        return True

    def verify_stage(self, stage: int) -> dict[str, Any]:
        """Stage `stage`'s `done.json` once its seal and every digest it lists match the
        files; RunCorrupt naming the first file that differs, is missing or was added
        (unsealed stages of older runs: every file checked on its schema only)."""
        rel = self.stage_rel(stage)
        done = self.read(rel / DONE)
        digests = done.get("digests")
        if digests is None:
            for name in STAGE_FILES:
                self.read(rel / name)
            return done
        d = self.stage_dir(stage)
        hint = (f"restore it, or remove {d} and the later stages to train them again "
                "(`run --resume`)")
        for name, want in digests.items():
            p = (d / name) if not name.startswith("../../") else self.path / name[6:]
            if not p.is_file():
                raise RunCorrupt(f"{p} is missing (listed in {self.name(rel / DONE)}); {hint}")
            size = want.get("bytes") if isinstance(want, dict) else None
            digest = want.get("sha256") if isinstance(want, dict) else want
            if size is not None and p.stat().st_size < size:
                raise RunCorrupt(f"{p} is shorter than when stage {stage} finished; {hint}")
            if sha256_file(p, size) != digest:
                raise RunCorrupt(f"{p} changed after stage {stage} finished (its sha256 "
                                 f"differs from {self.name(rel / DONE)}); {hint}")
        extra = [p for p in sorted(d.rglob("*")) if p.is_file() and p.name != DONE
                 and p.relative_to(d).as_posix() not in digests]
        if extra:
            raise RunCorrupt(f"{extra[0]} was added after stage {stage} finished; remove it")
        return done

    def verify(self, *, selection: bool = True) -> list[int]:
        """Every finished stage verified (`verify_stage`), `run.json` and (with `selection`)
        `selected.json` checked; the finished stages."""
        self.run_json()
        done = self.finished_stages()
        for k in done:
            self.verify_stage(k)
        if selection:
            self.selection()
        return done


def _plain(x: Any) -> Any:
    """JSON for numpy scalars/arrays and other simple objects."""
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if hasattr(x, "model_dump"):
        return x.model_dump()
    if hasattr(x, "to_dict"):
        return x.to_dict()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
