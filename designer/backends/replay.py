"""Answers from a call log: a run repeated without any model.

`ReplayBackend(log_path)` answers each call with the logged replies of the same request
(messages, schema, n, max_tokens, seed). A request the log does not hold is a `BackendError`
naming its key (the engineer then falls back to the rules engineer, and says so).
"""

from __future__ import annotations

from pathlib import Path

from designer.backends.base import BackendError, Messages, Reply, approx_tokens, request_key
from designer.backends.logged import replies_from
from designer.calllog import CallLog


class ReplayBackend:
    name = "replay"

    def __init__(self, log_path: str | Path):
        path = Path(log_path)
        if not path.is_file():
            raise BackendError(f"replay: call log {path} not found")
        self.log = CallLog(path)
        records = [r for r in self.log.records() if r.get("ok")]
        if not records:
            raise BackendError(f"replay: {path} holds no successful call")
        self.model = records[-1].get("model", "?")
        self.constrained = records[-1].get("backend") in ("transformers", "llamacpp", "vllm")

    def count_tokens(self, messages: Messages) -> int:
        return approx_tokens(messages)

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        key = request_key(messages, schema, n, max_tokens, seed)
        found = self.log.lookup(key)
        if found is None:
            raise BackendError(f"replay: no logged call with request key {key[:16]}")
        return replies_from(found)
