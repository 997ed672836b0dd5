"""Any OpenAI-compatible chat server: `vllm serve`, llama.cpp's server, hosted APIs.

Plain HTTP (urllib), no client library: `POST {base_url}/chat/completions`. The reply's JSON
schema is sent in the forms servers understand, tried in this order until one is accepted
(`response_format="auto"`, the default; the one that worked is kept for the rest of the run):

1. `response_format={"type": "json_schema", "json_schema": {"name", "schema"}}` plus vLLM's
   extra field `structured_outputs={"json": schema}` (vLLM >= 0.12 reads the latter);
2. the same without `structured_outputs` (hosted APIs refuse fields they do not know);
3. `response_format={"type": "json_object", "schema": schema}`: llama.cpp's server answers
   HTTP 500 to `json_schema` and takes this one.

The next form is tried when the first request of a form is refused with HTTP 400, 422, 500 or
501; `response_format="json_schema"` or `"json_object"` pins one form. Servers ignore numeric
bounds and fields they do not know, so a reply is parsed all the same and the caller projects
it onto the config space (`constrained = False`).

A timeout per socket read (`timeout_s`) and a deadline per call (`deadline_s`: the wall time
of one `generate`, retries and backoff included; a server that drips its answer a byte at a
time cannot hold a call past it: a watchdog shuts the connection's socket at the deadline),
bounded retries with exponential backoff on refused or reset connections, timeouts, HTTP 408,
429 and 5xx, then `BackendError`; a garbage answer (not JSON, no choices) and a missed
deadline are a `BackendError` at once. The API key is read from an environment variable
(`api_key_env`, default `OPENAI_API_KEY`) at each request and goes only into the
Authorization header: never into an attribute, a log, an error message or a repr (every text
from the server is scrubbed of it, and of any fragment of 8 or more of its characters, before
it is cut to length). `n` replies: one request with `n`, topped up with
further requests (seed + i) when a server returns fewer choices (llama.cpp returns one).
`count_tokens` is an estimate (`approx_tokens`): a server's tokenizer is not at hand.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from designer.llm.base import (
    BackendError,
    Messages,
    Reply,
    approx_tokens,
    make_reply,
    schema_name,
    with_retries,
)
from designer.llm.calllog import redact

FORMATS = ("auto", "json_schema", "json_object")
FORMS = ("json_schema+structured_outputs", "json_schema", "json_object")
REFUSED = (400, 422, 500, 501)  # a form the server does not take
TRANSIENT = (408, 429, 500, 502, 503, 504)
MAX_BODY = 4 * 1024 * 1024  # bytes read from an answer


class HTTPStatusError(Exception):
    """The server answered with an error status (`body`: the start of its answer)."""

    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status, self.body = status, body


class GarbageError(Exception):
    """The server answered 200 with something that is not a chat completion."""


class DeadlineError(TimeoutError):
    """The call's deadline passed (never retried: the call's time is spent)."""


class _Watchdog:
    """Shuts every socket the request opens once `seconds` have passed, so that no read,
    however slowly the server drips, outlives the deadline."""

    def __init__(self, seconds: float):
        self.socks: list[socket.socket] = []
        self.fired = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self.socks.append(sock)
            if self.fired:
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self.socks:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()


def _opener(dog: _Watchdog) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies and all) whose HTTP(S) connections register with `dog`."""
    def watched(base: type) -> type:
        class Conn(base):  # type: ignore[valid-type, misc]
            def connect(self) -> None:
                super().connect()
                dog.add(self.sock)
        return Conn

    class Http(urllib.request.HTTPHandler):
        def do_open(self, http_class: type, req: Any, **kw: Any) -> Any:
            return super().do_open(watched(http_class), req, **kw)

    class Https(urllib.request.HTTPSHandler):
        def do_open(self, http_class: type, req: Any, **kw: Any) -> Any:
            return super().do_open(watched(http_class), req, **kw)

    return urllib.request.build_opener(Http, Https)


class OpenAIBackend:
    """An OpenAI-compatible server (see the module docstring)."""

    name = "openai"
    constrained = False

    def __init__(self, base_url: str | None = None, model: str | None = None, *,
                 api_key_env: str = "OPENAI_API_KEY", response_format: str = "auto",
                 timeout_s: float = 120.0, deadline_s: float = 600.0, attempts: int = 3,
                 backoff_s: float = 0.5, temperature: float = 0.7):
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise BackendError("the openai backend needs --base-url (e.g. "
                               "http://localhost:8000/v1) or $OPENAI_BASE_URL")
        if response_format not in FORMATS:
            raise ValueError(f"response_format must be one of {FORMATS}, "
                             f"got {response_format!r}")
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(f"--base-url must be an http(s) URL, got {_safe_url(base_url)}")
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.response_format = response_format
        self._forms = FORMS if response_format == "auto" else \
            (FORMS[0],) if response_format == "json_schema" else (FORMS[2],)
        self._settled = response_format != "auto"
        if not (0 < timeout_s < math.inf and 0 < deadline_s < math.inf):
            raise ValueError("timeout_s and deadline_s must be positive and finite")
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self.deadline_s = deadline_s
        self._end: float | None = None  # monotonic time of the running call's deadline
        self.temperature = temperature
        self._model = model

    def __repr__(self) -> str:
        return (f"OpenAIBackend(base_url={_safe_url(self.base_url)!r}, "
                f"model={self._model!r}, api_key_env={self.api_key_env!r})")

    @property
    def api_key(self) -> str | None:
        """The key (read from the environment now; `LoggedBackend` registers it as a secret)."""
        return os.environ.get(self.api_key_env) or None

    @property
    def model(self) -> str:
        """The model named by the caller, else the server's first (GET /models), else
        "default" (servers that serve one model take any name)."""
        if self._model is None:
            self._model = self._served_model() or "default"
        return self._model

    def count_tokens(self, messages: Messages) -> int:
        return approx_tokens(messages)

    # --------------------------------------------------------------------------- HTTP
    def _scrub(self, text: str) -> str:
        return redact(text, [k for k in (self.api_key,) if k])

    def _open(self, path: str, body: dict[str, Any] | None,
              timeout_s: float | None = None) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.api_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, headers=headers,
                                     method="GET" if body is None else "POST")
        timeout = timeout_s or self.timeout_s
        left = timeout if self._end is None else self._end - time.monotonic()
        if left <= 0:
            raise DeadlineError(self._missed())
        with _Watchdog(left) as dog:
            try:
                with _opener(dog).open(req, timeout=min(timeout, left)) as resp:
                    raw = resp.read(MAX_BODY + 1)
            except urllib.error.HTTPError as e:
                if dog.fired:
                    raise DeadlineError(self._missed()) from None
                try:
                    text = e.read(2000).decode("utf-8", errors="replace")
                except (OSError, http.client.HTTPException):
                    text = ""
                raise HTTPStatusError(e.code, self._scrub(text)) from None
            except urllib.error.URLError as e:
                if dog.fired:
                    raise DeadlineError(self._missed()) from None
                kind = next((k for k in (ConnectionRefusedError, ConnectionResetError,
                                         ConnectionError, TimeoutError)
                             if isinstance(e.reason, k)), OSError)
                raise kind(self._scrub(str(e.reason))) from None
            except (OSError, http.client.HTTPException):
                if dog.fired:
                    raise DeadlineError(self._missed()) from None
                raise
            if dog.fired:
                raise DeadlineError(self._missed())
        if len(raw) > MAX_BODY:
            raise GarbageError(f"answer longer than {MAX_BODY} bytes")
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise GarbageError(f"the answer is not JSON: "
                               f"{self._scrub(repr(raw[:120]))}") from None

    def _missed(self) -> str:
        return f"no complete answer within the call's deadline of {self.deadline_s:g}s"

    def _served_model(self) -> str | None:
        try:
            out = self._open("/models", None, timeout_s=min(self.timeout_s, 10.0))
            return str(out["data"][0]["id"])
        except Exception:  # noqa: BLE001 -- optional: any failure means "no name"
            return None

    @staticmethod
    def _transient(e: BaseException) -> bool:
        if isinstance(e, DeadlineError):
            return False
        if isinstance(e, HTTPStatusError):
            return e.status in TRANSIENT
        return isinstance(e, TimeoutError | socket.timeout | ConnectionError |
                          http.client.RemoteDisconnected | http.client.IncompleteRead)

    def _post(self, body: dict[str, Any], *, discovering: bool = False) -> dict[str, Any]:
        """One completion with retries; while `discovering` a form, a refusal of it (HTTP
        400, 422, 500, 501) is not retried: the next form is tried instead."""
        def transient(e: BaseException) -> bool:
            if discovering and isinstance(e, HTTPStatusError) and e.status in REFUSED:
                return False
            return self._transient(e)

        def once() -> dict[str, Any]:
            out = self._open("/chat/completions", body)
            if not isinstance(out, dict) or not isinstance(out.get("choices"), list):
                raise GarbageError(f"the answer has no choices: "
                                   f"{self._scrub(json.dumps(out)[:160])}")
            return out

        def sleep(seconds: float) -> None:  # a backoff never outlasts the deadline
            left = math.inf if self._end is None else self._end - time.monotonic()
            time.sleep(max(0.0, min(seconds, left)))

        return with_retries(once, attempts=self.attempts, backoff_s=self.backoff_s,
                            transient=transient, sleep=sleep,
                            what=f"POST {_safe_url(self.base_url)}/chat/completions")

    # ------------------------------------------------------------------------- request
    @staticmethod
    def _form_fields(schema: dict | None, form: str) -> dict[str, Any]:
        if schema is None:
            return {}
        if form == "json_object":
            return {"response_format": {"type": "json_object", "schema": schema}}
        fields: dict[str, Any] = {"response_format": {"type": "json_schema", "json_schema": {
            "name": schema_name(schema), "schema": schema}}}
        if form == "json_schema+structured_outputs":
            fields["structured_outputs"] = {"json": schema}
        return fields

    def _complete(self, base: dict[str, Any], schema: dict | None) -> dict[str, Any]:
        """One completion; while the schema's form is unsettled, walks the forms."""
        if schema is None or self._settled:
            return self._post({**base, **self._form_fields(schema, self._forms[0])})
        refusals = []
        for form in self._forms:
            try:
                out = self._post({**base, **self._form_fields(schema, form)},
                                 discovering=True)
            except BackendError as e:
                if isinstance(e.cause, HTTPStatusError) and e.cause.status in REFUSED:
                    refusals.append(f"{form}: {e.cause}")
                    continue
                raise
            self._forms, self._settled = (form,), True
            return out
        raise BackendError(f"the server refused every response format: "
                           f"{' | '.join(r[:200] for r in refusals)}")

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        model = self.model  # before the deadline starts (GET /models has its own bound)
        self._end = time.monotonic() + self.deadline_s
        try:
            return self._generate(messages, schema, n, max_tokens, seed, model)
        finally:
            self._end = None

    def _generate(self, messages: Messages, schema: dict | None, n: int, max_tokens: int,
                  seed: int, model: str) -> list[Reply]:
        replies: list[Reply] = []
        for i in range(n):  # at most n requests: each brings at least one reply
            want = n - len(replies)
            if want <= 0:
                break
            base = {"model": model, "messages": messages, "n": want,
                    "max_tokens": max_tokens, "seed": seed + i,
                    "temperature": self.temperature}
            t = time.perf_counter()
            out = self._complete(base, schema)
            dt = time.perf_counter() - t
            choices = [c for c in out["choices"] if isinstance(c, dict)][:want]
            if not choices:
                raise BackendError("the server answered with no choices")
            usage = out.get("usage") if isinstance(out.get("usage"), dict) else {}
            prompt = _int(usage.get("prompt_tokens"))
            completion = _int(usage.get("completion_tokens")) // len(choices)
            for c in choices:
                msg = c.get("message") if isinstance(c.get("message"), dict) else {}
                text = msg.get("content") if isinstance(msg.get("content"), str) else ""
                cut = f"cut at max_tokens={max_tokens}" if c.get("finish_reason") == "length" \
                    else None
                replies.append(make_reply(self._scrub(text), schema, prompt_tokens=prompt,
                                          completion_tokens=completion, latency_s=dt,
                                          backend=self.name, model=model, cut=cut))
        return replies


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 else 0


def _safe_url(url: str) -> str:
    """`url` without user:password (a key may hide there too)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        parts = parts._replace(netloc=f"***@{netloc}")
    return urllib.parse.urlunsplit(parts)
