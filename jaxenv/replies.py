"""Reading an LLM's reply as data: bounded JSON.

Replies come from language models and servers, so JSON text is read in time and memory linear
in a bounded input: at most `MAX_JSON_CHARS` characters and `MAX_JSON_DEPTH` levels deep
(checked before `json.loads`), and integer literals beyond float range read as +-inf. The
engineer's edits (`jaxenv.config_space`, `designer.llm.base.parse_reply`) and the trainee's
plans (`jaxenv.mapf.plans.parse`) are read with it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_JSON_CHARS = 64 * 1024  # an LLM reply is a few thousand tokens at most
MAX_JSON_DEPTH = 32  # an edit is 3 levels deep; a plan 4
MAX_INT_DIGITS = 400  # longer integer literals are beyond float range: read as +-inf

_JSON_TOKEN = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


def loads_bounded(text: str, *, max_chars: int = MAX_JSON_CHARS,
                  max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` for untrusted text, in time and memory linear in a bounded input.

    Raises `ValueError` with a one-line reason when the text is longer than `max_chars`,
    nests deeper than `max_depth` (a linear scan before decoding, so the decoder's recursion
    stays shallow), is not JSON or has an object naming a key twice. Integer literals of more
    than `MAX_INT_DIGITS` digits are read as +-inf: they are beyond float range, and Python's
    `int()` refuses them with a `ValueError` the caller would not expect.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise ValueError(f"longer than {max_chars} characters ({len(text)})")
    depth, in_string = 0, False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok == '"':
            in_string = not in_string
        elif in_string or tok[0] == "\\":
            continue
        elif tok in "[{":
            depth += 1
            if depth > max_depth:
                raise ValueError(f"nested deeper than {max_depth} levels")
        else:
            depth -= 1
    try:
        return json.loads(text, parse_int=_parse_int, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e})") from None


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s `object_pairs_hook` that refuses an object naming a key twice (plain
    `json.loads` keeps the last value without a word)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {key[:40]!r} in a JSON object")
        out[key] = value
    return out


def _parse_int(digits: str) -> int | float:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        return -math.inf if digits.startswith("-") else math.inf
    return int(digits)
