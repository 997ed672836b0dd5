"""What every LLM backend shares: the reply, the error type, retries, the request key.

`Backend.generate(messages, schema, n, max_tokens, seed) -> list[Reply]`: `schema` is a JSON
schema the reply must follow (None: free text). A `Reply` holds the raw text, the reply parsed
as a JSON object (bounded: size, depth and huge numbers are refused, see
`jaxenv.config_space.loads_bounded`) or the reason it could not be, token counts and latency.
Content never raises: a bad reply is a `Reply` with `error` set. A backend that cannot answer
at all (no model, dead server, timeouts after the retries) raises `BackendError`, which the
engineer catches to fall back to the `rules` engineer. LLM output is data, never code.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from jaxenv.config_space import loads_bounded

T = TypeVar("T")
Messages = list[dict[str, str]]


class BackendError(RuntimeError):
    """The backend could not answer (the cause is in the message); callers fall back.

    `cause` keeps the last underlying exception for callers that react to its kind.
    """

    def __init__(self, message: str, cause: Exception | None = None):
        super().__init__(message)
        self.cause = cause


@dataclass
class Reply:
    text: str
    edit: dict[str, Any] | None
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    backend: str
    model: str
    log_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Backend(Protocol):
    name: str
    model: str
    constrained: bool  # does the grammar bind the reply (numbers included)?

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]: ...

    def count_tokens(self, messages: Messages) -> int: ...


def parse_reply(text: str, schema: dict | None) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) for a bounded JSON object when a schema was asked for, else the error;
    (None, None) for free text."""
    if schema is None:
        return None, None
    try:
        obj = loads_bounded(text)
    except (ValueError, TypeError) as e:
        return None, f"not a JSON object: {str(e)[:200]}"
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    return obj, None


def make_reply(text: str, schema: dict | None, *, prompt_tokens: int, completion_tokens: int,
               latency_s: float, backend: str, model: str) -> Reply:
    edit, error = parse_reply(text, schema)
    return Reply(text=text, edit=edit, error=error, prompt_tokens=prompt_tokens,
                 completion_tokens=completion_tokens, latency_s=latency_s, backend=backend,
                 model=model)


def request_key(messages: Messages, schema: dict | None, n: int, max_tokens: int,
                seed: int) -> str:
    """A stable hash of everything that decides a call's answer."""
    blob = json.dumps({"messages": messages, "schema": schema, "n": n,
                       "max_tokens": max_tokens, "seed": seed}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def schema_name(schema: dict | None) -> str | None:
    if schema is None:
        return None
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:12]


def approx_tokens(messages: Messages) -> int:
    """For backends without a local tokenizer: about 3 characters per token (an overestimate
    for English and JSON, so a budget built on it holds)."""
    return sum(len(m.get("content", "")) for m in messages) // 3 + 4 * len(messages)


def with_retries(call: Callable[[], T], *, attempts: int, backoff_s: float,
                 transient: Callable[[Exception], bool], what: str) -> T:
    """`call()` with up to `attempts` tries and exponential backoff on transient errors; the
    last error (or a permanent one) becomes a `BackendError` naming `what` and the cause."""
    delay = backoff_s
    for i in range(attempts):
        try:
            return call()
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 -- classified just below
            if not transient(e) or i == attempts - 1:
                tries = f" after {i + 1} tries" if transient(e) else ""
                raise BackendError(f"{what} failed{tries}: {type(e).__name__}: "
                                   f"{str(e)[:300]}", cause=e) from None
            time.sleep(delay)
            delay *= 2
    raise BackendError(f"{what}: no attempt made")
