"""An append-only file of JSON objects, one a line: what the LLM call log and the whole-plan
answer log are written as.

Each line is written, flushed and fsync'd on its own, so a stop at any moment loses at most the
line being written. A crash can leave a torn last line (`torn`). Reading skips a line that is
not a JSON object and counts it (`skipped`); a `strict` file instead refuses such a line
anywhere but at the end (it means the file was edited) with an error naming the line. Before
the next append a torn end is repaired: a strict file cuts the torn line off (a complete
record without its newline gets its newline); otherwise the torn line stays a line of its own
and the next record starts on a fresh line. `path=None` keeps nothing on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return rec if isinstance(rec, dict) else None


class JsonlFile:
    """The file at `path` (see the module docstring)."""

    def __init__(self, path: str | Path | None, *, strict: bool = False):
        self.path = None if path is None else Path(path)
        self.strict = strict
        self.skipped = 0  # lines that are not a JSON object (a torn last line included)
        self.torn = False  # the file ends in a line without its newline
        self._good_bytes = 0  # the length of the file up to its last complete line
        self._end_checked = False  # the file's end was checked before the first append

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        """(line number, record) of every JSON object in the file, in order."""
        if self.path is None or not self.path.exists():
            return []
        lines = self.path.read_bytes().split(b"\n")
        out, pos = [], 0
        for i, raw in enumerate(lines):
            last = i == len(lines) - 1
            end = pos + len(raw) + (0 if last else 1)
            if raw.strip():
                rec = _object(raw)
                if last:
                    self.torn = True  # a kill during the write (cut or ended before appending)
                if rec is not None:
                    out.append((i + 1, rec))
                elif last and self.strict:
                    break
                elif self.strict:
                    raise ValueError(f"{self.path}: line {i + 1} is not a JSON object (the file "
                                     f"was edited or damaged)")
                else:
                    self.skipped += 1
            pos = end
            if not last:
                self._good_bytes = end
        return out

    def write(self, line: str) -> None:
        """Append `line` (one JSON object's text) as a line of its own, flushed and fsync'd."""
        if self.path is None:
            return
        if self.torn and self.strict:
            self._cut_torn_end()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            if not self._end_checked and f.tell() > 0:
                with self.path.open("rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        f.write(b"\n")  # a torn line from a crash stays a line of its own
            self._end_checked = True
            f.write(line.encode("utf-8") + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def _cut_torn_end(self) -> None:
        """Cut a torn last line off (or end a complete record with its newline)."""
        assert self.path is not None
        tail = self.path.read_bytes()[self._good_bytes:]
        pending = _object(tail)
        with self.path.open("r+b") as f:
            f.truncate(self._good_bytes)
            if pending is not None:
                f.seek(self._good_bytes)
                f.write(json.dumps(pending, ensure_ascii=False,
                                   separators=(",", ":")).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        self._good_bytes = self.path.stat().st_size
        self.torn = False
