"""The LLM call log: every call of every backend, one JSON line each, append-only.

Record kinds (field `kind`):
- `call`: the request key (a hash of messages, schema, n, max_tokens and seed), the messages,
  the schema's name and hash, n, max_tokens, seed, each reply's raw text, parsed edit or
  error, token counts and latency, the backend and model, the timestamp, `ok` and the
  backend's error when the call failed, `counts` (the prompts measured with `count_tokens`
  since the previous call, so a replay cuts its prompts exactly as the run did) and `extra`;
- `schema`: the full JSON schema, written once per schema hash, so the log stands alone;
- `note`: the caller's findings about an earlier call (`annotate(log_id, adjustments=...,
  rejection=...)`): the log is never rewritten, `calls()` merges notes into their call.

The file is a `designer.llm.jsonl.JsonlFile`: each record written, flushed and fsync'd on its
own line; reading skips any line that is not a JSON object (a torn last line from a crash
included), and the next append starts a fresh line first. Secrets never reach the file: every
registered secret, and any fragment of it of 8 or more characters, is replaced by `***` in the
line before it is written. One process writes a log at a time.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from designer.llm.jsonl import JsonlFile

VERSION = 1


FRAGMENT = 8  # characters of a secret that already count as the secret


def redact(text: str, secrets: tuple[str, ...] | list[str]) -> str:
    """`text` with every secret, and every fragment of `FRAGMENT` or more of its characters
    (a key cut at the end of an error message, say), replaced by `***`. Secrets shorter than
    4 characters are not secrets worth the name and would shred the text; those shorter than
    `FRAGMENT` are replaced whole only."""
    hits: list[tuple[int, int]] = []
    for s in secrets:
        if not s or len(s) < 4:
            continue
        width = min(len(s), FRAGMENT)
        for part in {s[i:i + width] for i in range(len(s) - width + 1)}:
            start = text.find(part)
            while start >= 0:
                hits.append((start, start + width))
                start = text.find(part, start + 1)
    if not hits:
        return text
    out, end = [], 0
    for a, b in sorted(hits):
        if a > end:
            out += [text[end:a], "***"]
        elif not out:
            out.append("***")
        end = max(end, b)
    return "".join(out) + text[end:]


class CallLog:
    """An append-only JSONL file of LLM calls (an in-memory list when `path` is None)."""

    def __init__(self, path: str | Path | None = None, secrets: tuple[str, ...] = ()):
        self.path = None if path is None else Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._lock = threading.Lock()
        self._file = JsonlFile(self.path)
        self._records = [rec for _, rec in self._file.read()]
        self.skipped = self._file.skipped  # torn or garbled lines
        self._schemas = {r.get("hash") for r in self._records if r.get("kind") == "schema"}

    # ------------------------------------------------------------------------- reading
    def records(self) -> list[dict[str, Any]]:
        """Every complete record, in order (`skipped` counts the torn or garbled lines)."""
        return list(self._records)

    def calls(self) -> list[dict[str, Any]]:
        """The call records, each with the notes that annotate it merged into `extra`."""
        notes: dict[str, list[dict[str, Any]]] = {}
        for r in self._records:
            if r.get("annotates") is not None:
                body = {k: v for k, v in r.items()
                        if k not in ("id", "time", "v", "kind", "annotates")}
                notes.setdefault(str(r["annotates"]), []).append(body)
        out = []
        for r in self._records:
            if r.get("key") is None or r.get("annotates") is not None:
                continue
            extra = dict(r.get("extra") or {})
            for body in notes.get(str(r.get("id")), []):
                extra.update(body)
            out.append({**r, "extra": extra})
        return out

    def schema(self, digest: str) -> dict[str, Any] | None:
        """The full schema logged under hash `digest`, or None."""
        for r in self._records:
            if r.get("kind") == "schema" and r.get("hash") == digest:
                return r.get("schema")
        return None

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The last successful call with this request key, or None."""
        for rec in reversed(self._records):
            if rec.get("key") == key and rec.get("ok"):
                return rec
        return None

    # ------------------------------------------------------------------------- writing
    def add_secret(self, secret: str | None) -> None:
        """Never write `secret` (an API key) to this log."""
        if secret and secret not in self._secrets:
            self._secrets += (secret,)

    def append(self, record: dict[str, Any]) -> str:
        """Write one record (an `id`, a timestamp and the format version are added); returns
        its id."""
        with self._lock:
            log_id = f"{len(self._records) + self.skipped + 1:06d}"
            rec = {"id": log_id, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "v": VERSION,
                   **record}
            line = redact(json.dumps(rec, ensure_ascii=False, default=str), self._secrets)
            self._file.write(line)
            self._records.append(json.loads(line))
            return log_id

    def log_schema(self, digest: str, schema: dict[str, Any]) -> None:
        """Write `schema` once per hash."""
        if digest not in self._schemas:
            self._schemas.add(digest)
            self.append({"kind": "schema", "hash": digest, "schema": schema})

    def annotate(self, log_id: str, **extra: Any) -> str:
        """Attach the caller's findings (e.g. `adjustments`, `rejection`) to record `log_id`."""
        return self.append({"kind": "note", "annotates": log_id, **extra})
