"""What every LLM backend shares: the reply, the error type, bounded parsing, retries, keys.

`Backend.generate(messages, schema, n, max_tokens, seed) -> list[Reply]`: `schema` is the JSON
schema the reply must follow (None: free text). A `Reply` holds the raw text, the reply parsed
as a JSON object or the reason it could not be, token counts and latency. Content never
raises: a bad reply is a `Reply` with `error` set. A backend that cannot answer at all (no
model, dead server, timeouts after the retries) raises `BackendError`, which the engineer
catches to fall back to the `rules` engineer. LLM output is data, never code: it is only
ever read by a bounded JSON parser.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from jaxenv.replies import MAX_JSON_CHARS, loads_bounded

T = TypeVar("T")
Messages = list[dict[str, str]]

MAX_INT = 2**53  # beyond it a JSON integer is no longer an exact float: no knob needs one
CONSTRAINED = ("transformers", "llamacpp", "vllm")  # the grammar binds every value they write
_FENCE = re.compile(r"^```[a-zA-Z]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)


class BackendError(RuntimeError):
    """The backend could not answer (the cause is in the message); callers fall back.

    `cause` keeps the last underlying exception for callers that react to its kind.
    """

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


@dataclass
class Reply:
    """One reply of one call; `latency_s` is the wall time of the call that produced it."""

    text: str
    edit: dict[str, Any] | None
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    backend: str
    model: str
    log_id: str | None = None  # set by `LoggedBackend`: the call-log record of this reply

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Backend(Protocol):
    name: str
    model: str
    constrained: bool  # does the grammar bind the reply, numbers included?

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]: ...

    def count_tokens(self, messages: Messages) -> int: ...


def parse_reply(text: str, schema: dict | None) -> tuple[dict[str, Any] | None, str | None]:
    """The reply as a JSON object, or None and why not.

    Bounded: at most `MAX_JSON_CHARS` characters and `MAX_JSON_DEPTH` levels (checked before
    decoding), NaN, infinities and integers beyond 2^53 are refused. A Markdown code fence
    around the object (servers without a grammar like to add one) is taken off. Free text
    (`schema` None) that is not a JSON object is no error: (None, None).
    """
    if not isinstance(text, str):
        return None, f"expected text, got {type(text).__name__}"
    body = text.strip()
    fenced = _FENCE.match(body) if body.startswith("```") else None
    if fenced:
        body = fenced.group(1).strip()
    try:
        obj = loads_bounded(body, max_chars=MAX_JSON_CHARS)
    except (ValueError, TypeError, RecursionError) as e:
        return (None, None) if schema is None else (None, f"not JSON: {str(e)[:200]}")
    if not isinstance(obj, dict):
        if schema is None:
            return None, None
        return None, f"expected a JSON object, got {type(obj).__name__}"
    bad = _non_finite(obj)
    if bad:
        return None, bad
    return obj, None


def _non_finite(obj: Any) -> str | None:
    """Where a JSON value holds a number no knob can take (NaN, inf, |int| > 2^53), or None."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, bool):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            return f"non-finite number at {path or '<top>'}"
        if isinstance(v, int) and abs(v) > MAX_INT:
            return f"integer out of range at {path or '<top>'}"
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}" if path else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
    return None


def make_reply(text: str, schema: dict | None, *, prompt_tokens: int, completion_tokens: int,
               latency_s: float, backend: str, model: str, cut: str | None = None) -> Reply:
    """A `Reply` with its parse; `cut` says why decoding stopped early (max_tokens, timeout)
    and prefixes the parse error it usually explains."""
    edit, error = parse_reply(text, schema)
    if error and cut:
        error = f"{cut}: {error}"
    return Reply(text=text, edit=edit, error=error, prompt_tokens=int(prompt_tokens),
                 completion_tokens=int(completion_tokens), latency_s=float(latency_s),
                 backend=backend, model=model)


def canonical(obj: Any) -> str:
    """One JSON text per value (sorted keys, no spaces): what keys and hashes are made of."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def request_key(messages: Messages, schema: dict | None, n: int, max_tokens: int,
                seed: int) -> str:
    """A stable hash of everything that decides a call's answer (not the backend: a run can
    be replayed from another backend's log)."""
    blob = canonical({"messages": messages, "schema": schema, "n": n,
                      "max_tokens": max_tokens, "seed": seed})
    return hashlib.sha256(blob.encode()).hexdigest()


def schema_hash(schema: dict | None) -> str | None:
    return None if schema is None else hashlib.sha256(canonical(schema).encode()).hexdigest()


def schema_name(schema: dict | None) -> str | None:
    """A short name for logs and for OpenAI's `json_schema.name` (`[A-Za-z0-9_-]{1,64}`):
    the schema's `title` when it has a usable one, else `schema-` and its hash."""
    if schema is None:
        return None
    title = schema.get("title")
    if isinstance(title, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", title):
        return title
    return f"schema-{schema_hash(schema)[:12]}"


def messages_key(messages: Messages) -> str:
    """The hash under which a prompt's token count is logged and replayed."""
    return hashlib.sha256(canonical(messages).encode()).hexdigest()[:24]


def approx_tokens(messages: Messages) -> int:
    """For backends without a local tokenizer: about 3 characters per token (an overestimate
    for English and JSON, so a budget built on it holds)."""
    return sum(len(str(m.get("content", ""))) for m in messages) // 3 + 4 * len(messages)


def with_retries(call: Callable[[], T], *, attempts: int, backoff_s: float,
                 transient: Callable[[BaseException], bool], what: str,
                 max_backoff_s: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """`call()` with up to `attempts` tries and exponential backoff (`backoff_s`, doubling, at
    most `max_backoff_s`) on transient errors; the last error, or the first permanent one,
    becomes a `BackendError` naming `what` and the cause."""
    delay = backoff_s
    for i in range(max(1, attempts)):
        try:
            return call()
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 -- classified just below
            retry = transient(e)
            if not retry or i >= attempts - 1:
                tries = f" after {i + 1} tries" if retry else ""
                said = " ".join(str(e).split())  # one line, whatever the server sent
                raise BackendError(f"{what} failed{tries}: {type(e).__name__}: "
                                   f"{said[:300]}", cause=e) from None
            sleep(delay)
            delay = min(delay * 2, max_backoff_s)
    raise AssertionError("unreachable")


@contextmanager
def model_errors() -> Iterator[None]:
    """A model that cannot be found or loaded (`policy.llm.models.ModelUnavailable`) raised
    as the `BackendError` every engineer falls back on."""
    from policy.llm.models import ModelUnavailable

    try:
        yield
    except ModelUnavailable as e:
        raise BackendError(str(e)) from None
