"""Whole plans as an LLM writes them: the text and JSON forms, a strict parser, arrays.

The format is specified in docs/plan_format.md. The parser never guesses: anything it cannot
read goes into `ParseReport.errors`. `plan_arrays` turns paths into the array form that
`jaxenv.mapf.plans.verify` checks.

Replies are untrusted, so parsing is bounded and linear: a reply longer than
`MAX_REPLY_CHARS` is an error (an LLM reply is a few thousand tokens), JSON goes through
`jaxenv.replies.loads_bounded` (depth bounded before decoding), numbers longer than
`MAX_NUMBER_DIGITS` digits and agent labels above `MAX_AGENT_LABEL` are errors, and the label
and fence patterns use possessive quantifiers so that no line can make them backtrack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from flax import struct

from jaxenv.replies import MAX_INT_DIGITS, loads_bounded

Cell = tuple[int, int]
_COORD_CLIP = 1 << 20
MAX_REPLY_CHARS = 64 * 1024
MAX_NUMBER_DIGITS = MAX_INT_DIGITS  # far beyond any grid; int() refuses 4,300 digits
MAX_AGENT_LABEL = 4095  # far beyond any capacity; ``as_list`` makes a list this long

# ------------------------------------------------------------------------------------- text


def format_plan(paths: Mapping[int, Sequence[Cell]] | Sequence[Sequence[Cell]]) -> str:
    """The text form, one line per agent: ``A0: (0,0) -> (0,1)``."""
    items = paths.items() if isinstance(paths, Mapping) else enumerate(paths)
    lines = []
    for i, path in sorted(items):
        cells = " -> ".join(f"({int(r)},{int(c)})" for r, c in path)
        lines.append(f"A{int(i)}: {cells}")
    return "\n".join(lines)


@dataclass
class ParseReport:
    """What the parser read. ``ok`` iff ``errors`` is empty; ``paths`` holds what was read."""

    ok: bool
    paths: dict[int, list[Cell]]
    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # non-empty prose lines (text form)
    form: str = "none"  # "text", "json" or "none"

    def as_list(self) -> list[list[Cell]] | None:
        """Paths in agent order 0..max index (missing agents as []), None if not ok."""
        if not self.ok:
            return None
        top = max(self.paths, default=-1)
        return [list(self.paths.get(i, [])) for i in range(top + 1)]

    def to_arrays(self, max_agents: int, horizon: int | None = None) -> Plan:
        """The array form (see ``plan_arrays``); an unparsable report gives parsed_ok False."""
        return plan_arrays(self.paths if self.ok else {}, max_agents, horizon,
                           parsed_ok=self.ok)


# Possessive quantifiers (*+, ?+): adjacent optional whitespace runs cannot trade characters,
# so a failing line costs linear time (with backtracking, "agent" + 40k spaces took 13 s).
# The bullet stays an ordinary optional: "**A1**" must be able to give its "*" back.
_LABEL = re.compile(
    r"""^\s*+(?:[-*•]\s*+)?(?:\*\*|`|")?+\s*+(?:agent\s*+a?+|a)\s*+(\d++)\s*+(?:\*\*|`|")?+"""
    r"""\s*+[:=]\s*+(.*)$""",
    re.IGNORECASE,
)
_CELL = re.compile(r"[(\[]\s*+([-+]?+\d++)\s*+,\s*+([-+]?+\d++)\s*+[)\]]")
_SEP = re.compile(r"->|→|=>|[,;\s\[\]()]")  # one token: a "[" may open the next cell
_FENCE = re.compile(r"```[a-zA-Z]*+\s*+(.*?)```", re.DOTALL)
_JSON_KEY = re.compile(r"\s*+(?:agent[\s_]*+a?+|a)?+\s*+(\d++)\s*+", re.IGNORECASE)


def _number(text: str) -> int | None:
    """An integer literal, or None when it has more than `MAX_NUMBER_DIGITS` digits."""
    return int(text) if len(text.lstrip("+-")) <= MAX_NUMBER_DIGITS else None


def _agent(text: str) -> int | None:
    """An agent label's index, or None when it is above `MAX_AGENT_LABEL`."""
    n = _number(text)
    return n if n is not None and n <= MAX_AGENT_LABEL else None


def _parse_body(body: str) -> tuple[list[Cell], str | None]:
    """Cells of one agent's path, or an error naming the first text that is not a cell."""
    s = body.strip()
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1]
    cells: list[Cell] = []
    i = 0
    while i < len(s):
        m = _CELL.match(s, i)
        if m:
            r, c = _number(m.group(1)), _number(m.group(2))
            if r is None or c is None:
                return cells, f"number with more than {MAX_NUMBER_DIGITS} digits"
            cells.append((r, c))
            i = m.end()
            continue
        m = _SEP.match(s, i)
        if m:
            i = m.end()
            continue
        return cells, f"could not read {s[i:i + 24]!r}"
    if not cells:
        return cells, "no cells"
    return cells, None


def _parse_lines(text: str) -> ParseReport:
    paths: dict[int, list[Cell]] = {}
    errors: list[str] = []
    ignored: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```"):
            continue
        m = _LABEL.match(line)
        if not m:
            ignored.append(line)
            continue
        agent = _agent(m.group(1))
        if agent is None:
            errors.append(f"agent label above A{MAX_AGENT_LABEL}: {line[:40]!r}")
            continue
        cells, err = _parse_body(m.group(2))
        if err:
            errors.append(f"A{agent}: {err}")
        if agent in paths:
            errors.append(f"A{agent}: given twice")
            continue
        paths[agent] = cells
    if not paths and not errors:
        errors.append("no agent lines (expected e.g. 'A0: (0,0) -> (0,1)')")
    return ParseReport(ok=not errors, paths=paths, errors=errors, ignored=ignored, form="text")


def _json_key(key: str) -> int | None:
    m = _JSON_KEY.fullmatch(str(key))
    return _agent(m.group(1)) if m else None


def _json_cell(x: Any) -> Cell | None:
    if isinstance(x, list | tuple) and len(x) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in x):
        return (int(x[0]), int(x[1]))
    return None


def _json_path(agent: int, x: Any, errors: list[str]) -> list[Cell]:
    if isinstance(x, str):
        cells, err = _parse_body(x)
        if err:
            errors.append(f"A{agent}: {err}")
        return cells
    if not isinstance(x, list):
        errors.append(f"A{agent}: path must be a list of [row, col], got {type(x).__name__}")
        return []
    cells = []
    for k, c in enumerate(x):
        cell = _json_cell(c)
        if cell is None:
            errors.append(f"A{agent}: step {k} is not [row, col] integers: {c!r}"[:120])
            return cells
        cells.append(cell)
    if not cells:
        errors.append(f"A{agent}: no cells")
    return cells


def _parse_json(blob: str) -> ParseReport:
    errors: list[str] = []
    paths: dict[int, list[Cell]] = {}
    try:
        data = loads_bounded(blob, max_chars=MAX_REPLY_CHARS)
    except ValueError as e:
        return ParseReport(False, {}, [f"invalid JSON: {e}"], form="json")
    if isinstance(data, dict) and len(data) == 1:
        (k, v), = data.items()
        if str(k).lower() in ("plan", "paths", "solution"):
            data = v
    if isinstance(data, dict):
        for k, v in data.items():
            agent = _json_key(k)
            if agent is None:
                errors.append(f"unknown key {str(k)[:40]!r} (expected an agent label such as "
                              f"'A0', at most A{MAX_AGENT_LABEL})")
                continue
            if agent in paths:
                errors.append(f"A{agent}: given twice")
                continue
            paths[agent] = _json_path(agent, v, errors)
    elif isinstance(data, list):
        if len(data) > MAX_AGENT_LABEL + 1:
            errors.append(f"more than {MAX_AGENT_LABEL + 1} paths")
            data = []
        for agent, v in enumerate(data):
            paths[agent] = _json_path(agent, v, errors)
    else:
        errors.append(f"JSON plan must be an object or a list, got {type(data).__name__}")
    if not paths and not errors:
        errors.append("empty plan")
    return ParseReport(ok=not errors, paths=paths, errors=errors, form="json")


def parse_plan(text: str) -> ParseReport:
    """Parse an LLM-style reply into per-agent paths; see the module docstring for the forms.

    The JSON form is used when the reply (after stripping) or its first ```json fence starts
    with ``{`` or ``[``; otherwise the text form. Never guesses: see ``ParseReport.errors``.
    A reply longer than `MAX_REPLY_CHARS` characters is not read (an error says so).
    """
    if not isinstance(text, str):
        return ParseReport(False, {}, [f"expected a string, got {type(text).__name__}"])
    if len(text) > MAX_REPLY_CHARS:
        return ParseReport(False, {}, [f"reply longer than {MAX_REPLY_CHARS} characters "
                                       f"({len(text)}); not read"])
    stripped = text.strip()
    fence = _FENCE.search(text)
    if stripped[:1] in ("{", "["):
        return _parse_json(stripped)
    if fence and fence.group(1).strip()[:1] in ("{", "["):
        return _parse_json(fence.group(1).strip())
    return _parse_lines(text)


# ------------------------------------------------------------------------------------ arrays


@struct.dataclass
class Plan:
    """Array form of a plan: cells [P, T, 2] int32, length [P] int32, parsed_ok [] bool."""

    cells: jax.Array
    length: jax.Array
    parsed_ok: jax.Array


def plan_arrays(paths: Mapping[int, Sequence[Cell]] | Sequence[Sequence[Cell]] | None,
                max_agents: int, horizon: int | None = None, *, parsed_ok: bool = True) -> Plan:
    """Numpy-backed array form with ``P = max_agents + 1`` rows (the last is the overflow row).

    Coordinates are clipped to ±2**20 (far off the grid either way; keeps int32 differences
    exact), also those beyond int64. ``horizon`` (T) defaults to the longest path rounded up
    to a multiple of 8. A path longer than ``horizon`` cannot be represented: the plan gets
    ``parsed_ok = False`` (it is not truncated). A list ``paths`` maps position to agent
    index; an empty path is an absent agent (as in the text form, where it cannot be written).
    """
    if paths is None:
        paths, parsed_ok = {}, False
    items = dict(paths.items() if isinstance(paths, Mapping) else enumerate(paths))
    longest = max((len(p) for p in items.values()), default=1)
    t = horizon if horizon is not None else max(8, -(-longest // 8) * 8)
    cells = np.zeros((max_agents + 1, t, 2), np.int32)
    length = np.zeros(max_agents + 1, np.int32)
    ok = bool(parsed_ok)
    for i, path in items.items():
        if len(path) == 0:
            continue
        if len(path) > t:
            ok = False
            continue
        row = min(int(i), max_agents)
        if row == max_agents and length[row] > 0:
            continue
        try:
            arr = np.asarray(path, np.int64).reshape(-1, 2)
        except OverflowError:  # a Python int beyond int64: clip it before numpy sees it
            arr = np.asarray([[_clip(v) for v in cell] for cell in path], np.int64)
        cells[row, :len(arr)] = np.clip(arr, -_COORD_CLIP, _COORD_CLIP)
        cells[row, len(arr):] = cells[row, len(arr) - 1]
        length[row] = len(arr)
    return Plan(cells=cells, length=length, parsed_ok=np.bool_(ok))


def _clip(v: Any) -> int:
    return min(max(int(v), -_COORD_CLIP), _COORD_CLIP)


def stack_plans(plans: Sequence[Plan]) -> Plan:
    """Batch plans of equal shape into one Plan with a leading axis (numpy)."""
    return Plan(cells=np.stack([p.cells for p in plans]),
                length=np.stack([p.length for p in plans]),
                parsed_ok=np.stack([p.parsed_ok for p in plans]))
