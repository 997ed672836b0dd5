"""Answers from a call log: a run repeated without any model.

`ReplayBackend(log_path)` answers each call with the logged replies of the same request
(messages, schema, n, max_tokens, seed: `request_key`). Calls with the same key are answered
in the order they were logged (the last one again once they run out), and a call that failed
in the logged run fails again with the same cause, so the engineer falls back exactly as it
did. A request the log does not hold is a `BackendError` naming its key. `count_tokens`
answers with the counts the run measured (logged with its calls), so the context builder
cuts the prompts as it did; a prompt it never measured gets the `approx_tokens` estimate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from designer.llm.base import (
    CONSTRAINED,
    BackendError,
    Messages,
    Reply,
    approx_tokens,
    messages_key,
    request_key,
)
from designer.llm.calllog import CallLog
from designer.llm.logged import replies_from


class ReplayBackend:
    """A call log's answers in place of a model (see the module docstring)."""

    name = "replay"

    def __init__(self, log_path: str | Path):
        path = Path(log_path)
        if not path.is_file():
            raise BackendError(f"replay: call log {path} not found")
        self.path = path
        calls = [r for r in CallLog(path).records() if r.get("key") and "ok" in r]
        if not calls:
            raise BackendError(f"replay: {path} holds no logged call")
        self._calls: dict[str, list[dict[str, Any]]] = {}
        self._counts: dict[str, int] = {}
        for r in calls:
            self._calls.setdefault(str(r["key"]), []).append(r)
            for k, v in (r.get("counts") or {}).items():
                if isinstance(v, int):
                    self._counts[k] = v
        self._served: dict[str, int] = {}
        last = calls[-1]
        self.model = str(last.get("model", "?"))
        self.constrained = bool(last.get("constrained", last.get("backend") in CONSTRAINED))

    def __repr__(self) -> str:
        return f"ReplayBackend({str(self.path)!r})"

    def count_tokens(self, messages: Messages) -> int:
        return self._counts.get(messages_key(messages), approx_tokens(messages))

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        key = request_key(messages, schema, n, max_tokens, seed)
        found = self._calls.get(key)
        if not found:
            raise BackendError(f"replay: {self.path.name} holds no call with request key "
                               f"{key[:16]} (messages, schema, n={n}, max_tokens={max_tokens}, "
                               f"seed={seed} differ from the logged run)")
        i = self._served.get(key, 0)
        self._served[key] = i + 1
        rec = found[min(i, len(found) - 1)]
        if not rec.get("ok"):
            raise BackendError(f"replayed failure: {rec.get('error', 'unknown')}")
        replies = replies_from(rec)
        for r in replies:
            r.backend = self.name  # answered by the replay; `model` still names the source
        return replies
