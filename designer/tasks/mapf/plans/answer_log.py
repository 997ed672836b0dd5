"""The answers of a whole-plan evaluation, one JSON line each, append-only and kill -9 safe.

Line 1 is the header (``kind: "header"``): what decides the answers (split, mode, prompt
version, backend, model, max_tokens, seed). Every further line is one answer
(``kind: "answer"``): ``id`` (the instance's row in the split's file), ``split``, ``agents``,
``size``, ``subset``, ``text`` (the reply, verbatim), ``prompt_tokens``,
``completion_tokens``, ``seconds``, ``error`` (the backend's note on the reply, e.g. cut at
max_tokens) and ``backend`` / ``model``.

Each line is written, flushed and fsync'd on its own, so a stop at any moment loses at most
the answer being written. Reading tolerates a torn last line (a kill during the write) and
cuts it off before the next append; a malformed line anywhere else is an error naming the
line, since it means the file was edited. Resuming with a header that differs in anything
that decides the answers is refused: free-text and constrained answers, or two models, are
never mixed in one file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HEADER_KEYS = ("split", "mode", "prompt_version", "backend", "model", "max_tokens", "seed")


class AnswerLog:
    """The answer file at `path` (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.answers: dict[int, dict[str, Any]] = {}
        self.torn = False  # the file ended in a torn line (cut off before the next append)
        self._good_bytes = 0
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        pos = 0
        for i, raw in enumerate(lines):
            last = i == len(lines) - 1
            end = pos + len(raw) + (0 if last else 1)
            if not raw.strip():
                pos = end
                if not last:
                    self._good_bytes = end
                continue
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not an object")
            except ValueError:
                if last:  # a kill during the write: tolerated, cut before the next append
                    self.torn = True
                    break
                raise ValueError(f"{self.path}: line {i + 1} is not a JSON object (the file "
                                 f"was edited or damaged)") from None
            if last:  # a complete record without its newline: keep it, add the newline
                self.torn = True
            self._take(rec, i + 1)
            pos = end
            if not last:
                self._good_bytes = end

    def _take(self, rec: dict[str, Any], line: int) -> None:
        kind = rec.get("kind")
        if kind == "header":
            if self.header is not None:
                raise ValueError(f"{self.path}: a second header at line {line}")
            self.header = rec
        elif kind == "answer":
            if self.header is None:
                raise ValueError(f"{self.path}: an answer before the header (line {line})")
            try:
                key = int(rec["id"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{self.path}: line {line} has no integer id") from None
            self.answers[key] = rec
        else:
            raise ValueError(f"{self.path}: line {line} has unknown kind {kind!r}")

    def _pending_record(self) -> dict[str, Any] | None:
        """The complete record on the unterminated last line, if that is what it holds."""
        tail = self.path.read_bytes()[self._good_bytes:]
        try:
            rec = json.loads(tail)
        except ValueError:
            return None
        return rec if isinstance(rec, dict) else None

    def start(self, header: dict[str, Any]) -> None:
        """Write the header of a new file, or check it against the file's own."""
        want = {"kind": "header", **{k: header.get(k) for k in HEADER_KEYS}}
        if self.header is None:
            self.append(want)
            self.header = want
            return
        diff = {k: (self.header.get(k), want[k]) for k in HEADER_KEYS
                if self.header.get(k) != want[k]}
        if diff:
            what = ", ".join(f"{k}: file {a!r} vs now {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"{self.path} holds answers of another evaluation ({what}); "
                             f"use another answers file")

    def append(self, rec: dict[str, Any]) -> None:
        """Write one record on its own line (flushed and fsync'd)."""
        if self.torn:
            self._repair()
        line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        if rec.get("kind") == "answer":
            self.answers[int(rec["id"])] = rec

    def _repair(self) -> None:
        """Cut a torn last line off (or end a complete one with its newline)."""
        pending = self._pending_record()
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
