"""The LLM call log: every call of every backend, one JSON line each, append-only.

A record holds the request key (a hash of messages, schema, n, max_tokens and seed), the
messages, the schema's name and hash, each reply's raw text, parsed edit or error, token counts
and latency, the backend and model, a timestamp, and the caller's annotations (adjustments and
rejections, added as separate `annotates` records: the log is never rewritten). Records are
flushed and fsync'd one by one; a torn last line after a crash is skipped when reading.

Replay (`designer.backends.replay`) and resume (`LoggedBackend(replay_first=True)`) look calls
up by their request key, so a run repeats without the model. Secrets never reach the log: the
backends put no headers in records, and every string equal to a registered secret is replaced
by `***` before writing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class CallLog:
    """An append-only JSONL file of LLM calls (or an in-memory list when `path` is None)."""

    def __init__(self, path: str | Path | None = None, secrets: tuple[str, ...] = ()):
        self.path = None if path is None else Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []
        self._count = len(self.records())

    def add_secret(self, secret: str | None) -> None:
        if secret:
            self._secrets += (secret,)

    def records(self) -> list[dict[str, Any]]:
        """Every complete record, in order (a torn or garbled line is skipped)."""
        if self.path is None:
            return list(self._memory)
        if not self.path.exists():
            return []
        out = []
        with self.path.open("rb") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
        return out

    def append(self, record: dict[str, Any]) -> str:
        """Write one record; returns its id."""
        with self._lock:
            self._count += 1
            log_id = f"{self._count:06d}"
            rec = {"id": log_id, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}
            line = self._redact(json.dumps(rec, ensure_ascii=False, default=str))
            if self.path is None:
                self._memory.append(json.loads(line))
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(line + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            return log_id

    def annotate(self, log_id: str, **extra: Any) -> str:
        """Attach the caller's findings (e.g. adjustments, rejection) to record `log_id`."""
        return self.append({"annotates": log_id, **extra})

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The last successful call with this request key, or None."""
        found = None
        for rec in self.records():
            if rec.get("key") == key and rec.get("ok"):
                found = rec
        return found

    def _redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text
