"""Any OpenAI-compatible chat server: `vllm serve`, llama.cpp's server, hosted APIs.

Plain HTTP (urllib), no client library. The reply's JSON schema is sent twice: as
`response_format` and as vLLM's `structured_outputs` extra field. `response_format` is
`{"type": "json_schema", ...}` (vLLM, OpenAI) or `{"type": "json_object", "schema": ...}`
(llama.cpp's server, which answers HTTP 500 to `json_schema`): `response_format="auto"` tries
the first and, on that error, switches to the second for the rest of the run. Servers ignore
what they do not know (llama.cpp ignores numeric bounds), so replies are never trusted: the
caller projects them onto the config space (`constrained = False`).

A timeout per request, bounded retries with exponential backoff on connection errors,
timeouts, HTTP 429 and 5xx, then `BackendError`. The API key is read from an environment
variable (default `OPENAI_API_KEY`) and goes only into the Authorization header: never into a
log, an error message or a repr. `n` replies: one request with `n`, topped up with further
requests (seed + i) when a server returns fewer choices.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from designer.backends.base import (
    BackendError,
    Messages,
    Reply,
    approx_tokens,
    make_reply,
    with_retries,
)

FORMATS = ("auto", "json_schema", "json_object")


class HTTPError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status, self.body = status, body


class OpenAIBackend:
    name = "openai"
    constrained = False

    def __init__(self, base_url: str, model: str | None = None, *,
                 api_key_env: str = "OPENAI_API_KEY", response_format: str = "auto",
                 timeout_s: float = 120.0, attempts: int = 3, backoff_s: float = 0.5,
                 temperature: float = 0.7):
        if not base_url:
            raise BackendError("the openai backend needs --base-url (e.g. "
                               "http://localhost:8000/v1)")
        if response_format not in FORMATS:
            raise ValueError(f"response_format must be one of {FORMATS}")
        self.base_url = base_url.rstrip("/")
        self.model = model or "default"
        self.api_key_env = api_key_env
        self._format = response_format
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self.temperature = temperature

    def __repr__(self) -> str:
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def count_tokens(self, messages: Messages) -> int:
        return approx_tokens(messages)

    def _format_body(self, schema: dict | None, fmt: str) -> dict[str, Any]:
        if schema is None:
            return {}
        if fmt == "json_object":
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "edit", "schema": schema, "strict": True}},
            "structured_outputs": {"json": schema}}

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=data,
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read(4 * 1024 * 1024)
        except urllib.error.HTTPError as e:
            raise HTTPError(e.code, e.read(2000).decode(errors="replace")) from None
        try:
            out = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"the server's answer is not JSON: {raw[:120]!r}") from None
        if not isinstance(out, dict) or not isinstance(out.get("choices"), list):
            raise ValueError(f"the server's answer has no choices: {str(out)[:120]}")
        return out

    @staticmethod
    def _transient(e: Exception) -> bool:
        if isinstance(e, HTTPError):
            return e.status == 429 or e.status >= 500
        return isinstance(e, urllib.error.URLError | socket.timeout | TimeoutError |
                          ConnectionError)

    def _request(self, messages: Messages, schema: dict | None, n: int, max_tokens: int,
                 seed: int) -> dict[str, Any]:
        base = {"model": self.model, "messages": messages, "n": n, "max_tokens": max_tokens,
                "seed": seed, "temperature": self.temperature}
        auto = self._format == "auto" and schema is not None
        fmt = "json_schema" if self._format == "auto" else self._format

        def send(fmt: str) -> dict[str, Any]:
            body = {**base, **self._format_body(schema, fmt)}
            return with_retries(lambda: self._post(body), attempts=self.attempts,
                                backoff_s=self.backoff_s, transient=self._transient,
                                what=f"POST {self.base_url}/chat/completions")

        try:
            return send(fmt)
        except BackendError as e:
            refused = isinstance(e.cause, HTTPError) and e.cause.status == 500
            if not (auto and refused):
                raise
        # llama.cpp's server answers json_schema with HTTP 500: json_object from now on.
        self._format = "json_object"
        return send("json_object")

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        replies: list[Reply] = []
        i = 0
        while len(replies) < n:
            t = time.perf_counter()
            out = self._request(messages, schema, n - len(replies), max_tokens, seed + i)
            dt = time.perf_counter() - t
            usage = out.get("usage") or {}
            choices = out["choices"][:n - len(replies)]
            if not choices:
                raise BackendError("the server returned no choices")
            for c in choices:
                msg = c.get("message") if isinstance(c, dict) else None
                text = msg.get("content") if isinstance(msg, dict) else None
                text = text if isinstance(text, str) else ""
                replies.append(make_reply(
                    text, schema, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0) // len(choices),
                    latency_s=dt / len(choices), backend=self.name, model=self.model))
            i += 1
        return replies
