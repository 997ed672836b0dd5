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
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

PHASES = ("train", "validate", "heldout", "propose", "verify")  # the timed parts of a stage
SELECTED = "selected.json"  # the run's result, once its last stage is done (designer.run.selection)


class RunLocked(RuntimeError):
    """Another process holds this run folder."""


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

    def read_json(self, rel: str | Path) -> Any:
        return json.loads((self.path / rel).read_text())

    def selection(self) -> dict[str, Any] | None:
        """The run's result (`designer.run.selection`, written after its last stage): rule,
        chosen stage, scores, held-out table. None before the run ends, and for runs saved
        before selection existed (their result is their last stage)."""
        return self.read_json(SELECTED) if (self.path / SELECTED).is_file() else None

    # ---------------------------------------------------------------- stages
    @staticmethod
    def stage_rel(stage: int) -> Path:
        return Path("stages") / f"{stage:03d}"

    def stage_dir(self, stage: int) -> Path:
        return self.path / self.stage_rel(stage)

    def finished_stages(self) -> list[int]:
        """Stages 0..n-1 that have `done.json`, stopping at the first gap."""
        out = []
        while (self.stage_dir(len(out)) / "done.json").exists():
            out.append(len(out))
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

    def finish_stage(self, stage: int, summary: dict[str, Any]) -> None:
        """Mark `stage` finished (its other files are written) and refresh metrics.jsonl."""
        self.write_json(self.stage_rel(stage) / "done.json", summary)
        lines = [json.dumps(self.read_json(self.stage_rel(k) / "done.json"), default=_plain)
                 for k in self.finished_stages()]
        self.write_text("metrics.jsonl", "\n".join(lines) + "\n")


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
