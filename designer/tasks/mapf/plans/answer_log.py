"""The answers of a whole-plan evaluation, one JSON line each, append-only and kill -9 safe.

Line 1 is the header (``kind: "header"``): what decides the answers (split, mode, prompt
version, backend, model, max_tokens, seed). Every further line is one answer
(``kind: "answer"``): ``id`` (the instance's row in the split's file), ``split``, ``agents``,
``size``, ``subset``, ``text`` (the reply, verbatim), ``prompt_tokens``,
``completion_tokens``, ``seconds``, ``error`` (the backend's note on the reply, e.g. cut at
max_tokens) and ``backend`` / ``model``.

The file is a strict `designer.llm.jsonl.JsonlFile`: each line written, flushed and fsync'd on
its own, so a stop at any moment loses at most the answer being written; a torn last line (a
kill during the write) is tolerated and cut off before the next append; a malformed line
anywhere else is an error naming the line, since it means the file was edited. Resuming with a
header that differs in anything that decides the answers is refused: free-text and constrained
answers, or two models, are never mixed in one file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from designer.llm.jsonl import JsonlFile

HEADER_KEYS = ("split", "mode", "prompt_version", "backend", "model", "max_tokens", "seed")


class AnswerLog:
    """The answer file at `path` (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.answers: dict[int, dict[str, Any]] = {}
        self._file = JsonlFile(self.path, strict=True)
        for line, rec in self._file.read():
            self._take(rec, line)

    @property
    def torn(self) -> bool:
        """The file ends in a torn line (cut off before the next append)."""
        return self._file.torn

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
        self._file.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
        if rec.get("kind") == "answer":
            self.answers[int(rec["id"])] = rec
