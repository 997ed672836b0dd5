"""Every call of any backend into the call log, and replay-first for resumed runs.

`LoggedBackend(inner, log)` appends one `call` record per call, successes and failures alike
(a failure is re-raised after it is logged), and sets each reply's `log_id`. The prompts it
measures with `count_tokens` travel with the next call record, so a replay measures them
the same. With `replay_first=True` a call whose request key is already in the log is
answered from it without touching the model: a resumed run repeats its finished stages' LLM
calls exactly. The caller adds what it made of a reply with `log.annotate(reply.log_id, ...)`.
"""

from __future__ import annotations

import time
from typing import Any

from designer.llm.base import (
    BackendError,
    Messages,
    Reply,
    messages_key,
    request_key,
    schema_hash,
    schema_name,
)
from designer.llm.calllog import CallLog


def replies_from(record: dict[str, Any]) -> list[Reply]:
    """The replies stored in a call-log record."""
    out = []
    for r in record.get("replies") or []:
        out.append(Reply(text=str(r.get("text", "")), edit=r.get("edit"), error=r.get("error"),
                         prompt_tokens=int(r.get("prompt_tokens") or 0),
                         completion_tokens=int(r.get("completion_tokens") or 0),
                         latency_s=float(r.get("latency_s") or 0.0),
                         backend=str(record.get("backend", "?")),
                         model=str(record.get("model", "?")), log_id=record.get("id")))
    return out


class LoggedBackend:
    """`inner` with every call logged (see the module docstring)."""

    def __init__(self, inner: Any, log: CallLog, *, replay_first: bool = False):
        self.inner, self.log, self.replay_first = inner, log, replay_first
        self.log.add_secret(getattr(inner, "api_key", None))
        self._counts: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def constrained(self) -> bool:
        return bool(getattr(self.inner, "constrained", False))

    def __repr__(self) -> str:
        return f"LoggedBackend({self.inner!r}, log={self.log.path})"

    def count_tokens(self, messages: Messages) -> int:
        n = int(self.inner.count_tokens(messages))
        self._counts[messages_key(messages)] = n
        return n

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        key = request_key(messages, schema, n, max_tokens, seed)
        if self.replay_first:
            found = self.log.lookup(key)
            if found is not None:
                return replies_from(found)
        digest = schema_hash(schema)
        if digest is not None and schema is not None:
            self.log.log_schema(digest, schema)
        counts, self._counts = self._counts, {}
        base = {"kind": "call", "key": key, "constrained": self.constrained,
                "messages": messages,
                "schema": schema_name(schema), "schema_hash": digest, "n": n,
                "max_tokens": max_tokens, "seed": seed, "counts": counts}
        t = time.perf_counter()
        try:
            replies = self.inner.generate(messages, schema, n=n, max_tokens=max_tokens,
                                          seed=seed)
        except Exception as e:
            why = str(e) if isinstance(e, BackendError) else f"{type(e).__name__}: {e}"
            self.log.append({**base, "backend": self.name, "model": self.model, "ok": False,
                             "error": why[:2000], "latency_s": time.perf_counter() - t})
            raise
        log_id = self.log.append({**base, "backend": self.name, "model": self.model,
                                  "ok": True, "latency_s": time.perf_counter() - t,
                                  "replies": [_logged(r) for r in replies]})
        for r in replies:
            r.log_id = log_id
        return replies


def _logged(reply: Reply) -> dict[str, Any]:
    d = reply.to_dict()
    d.pop("log_id", None)
    return d
