"""Every call of any backend into the call log, and replay-first for resumed runs.

`LoggedBackend(inner, log)` appends one record per call (successes and failures alike) and
sets each reply's `log_id`. With `replay_first=True` a call whose request key is already in
the log is answered from it without touching the model: a resumed run repeats its finished
stages' LLM calls exactly, and a run can be repeated from another run's log.
"""

from __future__ import annotations

import time
from typing import Any

from designer.backends.base import BackendError, Messages, Reply, request_key, schema_name
from designer.calllog import CallLog


def replies_from(record: dict[str, Any]) -> list[Reply]:
    """The replies stored in a call-log record."""
    out = []
    for r in record.get("replies", []):
        out.append(Reply(text=r.get("text", ""), edit=r.get("edit"), error=r.get("error"),
                         prompt_tokens=int(r.get("prompt_tokens", 0)),
                         completion_tokens=int(r.get("completion_tokens", 0)),
                         latency_s=float(r.get("latency_s", 0.0)),
                         backend=record.get("backend", "?"), model=record.get("model", "?"),
                         log_id=record.get("id")))
    return out


class LoggedBackend:
    """`inner` with every call logged (see the module docstring)."""

    def __init__(self, inner: Any, log: CallLog, *, replay_first: bool = False):
        self.inner, self.log, self.replay_first = inner, log, replay_first
        self.name, self.model = inner.name, inner.model
        self.constrained = inner.constrained
        self.log.add_secret(getattr(inner, "api_key", None))

    def count_tokens(self, messages: Messages) -> int:
        return self.inner.count_tokens(messages)

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        key = request_key(messages, schema, n, max_tokens, seed)
        if self.replay_first:
            found = self.log.lookup(key)
            if found is not None:
                return replies_from(found)
        base = {"key": key, "backend": self.name, "model": self.model, "messages": messages,
                "schema": schema_name(schema), "n": n, "max_tokens": max_tokens, "seed": seed}
        t = time.perf_counter()
        try:
            replies = self.inner.generate(messages, schema, n=n, max_tokens=max_tokens,
                                          seed=seed)
        except BackendError as e:
            self.log.append({**base, "ok": False, "error": str(e),
                             "latency_s": time.perf_counter() - t})
            raise
        log_id = self.log.append({**base, "ok": True, "latency_s": time.perf_counter() - t,
                                  "replies": [r.to_dict() for r in replies]})
        for r in replies:
            r.log_id = log_id
        return replies
