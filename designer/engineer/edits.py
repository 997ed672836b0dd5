"""Edits of the next stage's config, valid by construction, and the presets of what is editable.

An engineer's reply is one JSON object: a partial edit of the editable knobs (a knob it does
not name keeps its current value) plus a short `rationale`. `edit_schema(space)` is its
grammar: numbers are enums over each knob's grid, a simplex edit names at least one positive
weight and the rationale is bounded printable ASCII, so every string a grammar-constrained
decoder can write applies to an in-bounds config. `apply_edit` applies a reply: a
constrained one strictly (`ConfigSpace.parse`: anything the grammar cannot write is a
rejection), an unconstrained one (a server that ignores parts of the schema) through
`ConfigSpace.project`. Either way the outcome records every adjustment and any rejection
with its reason, and never raises on the reply's content.

The rationale is data, never an instruction: it is recorded (bounded, printable) and never
changes a value. Whoever shows it to another model (the team's critic) quotes it as data.

Presets decide what the engineer may touch. `paper` (the default) gives it the paper's
generator knobs only (per map size: the data share, hole ratio and wait ratio) and keeps
training on two agents, deterministic and with the default step limit, as the paper does:
`agent_weights` is pinned at 2 agents, `slip_prob` at 0 and `step_limit_factor` at its
default. `open` lets the engineer edit agent counts, slipping and the step limit too.
Reward, rule and validation knobs are never editable in any preset (`ConfigSpace.with_editable`
only narrows).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxenv.config_space import Adjustment, ConfigError, ConfigSpace, load_json_object

PRESETS = ("paper", "open")
RATIONALE_CHARS = 160
RATIONALE = "rationale"
PAPER_AGENTS = 2
PAPER_PINNED_DEFAULT = ("slip_prob", "step_limit_factor")  # rules the paper never varies

_NOT_PRINTABLE = re.compile(r"[^ -~]")
_WHITESPACE = re.compile(r"[\t\n\r]")


def text_schema(max_chars: int, description: str = "") -> dict[str, Any]:
    """A JSON-schema string of at most `max_chars` printable ASCII characters, no `"` or `\\`.

    The bound lives in the pattern, not in `maxLength`: outlines-core (0.2) drops a
    `pattern` when `maxLength` is present and then admits any Unicode, while a pattern of all
    printable ASCII (`[ -~]`) would let the decoder write a `"` or `\\` that ends or escapes
    the JSON string early. Quotes and backslashes are left out so that every string the
    grammar admits is one plain JSON string.
    """
    schema = {"type": "string", "pattern": rf"^[ !#-\[\]-~]{{0,{int(max_chars)}}}$"}
    return {**schema, "description": description} if description else schema


def edit_schema(space: ConfigSpace) -> dict[str, Any]:
    """The reply grammar: the editable knobs of `space`, each optional, then a required
    rationale; nothing else. The edit comes first so that a small model's reply holds its
    edit before any rambling, and within `max_tokens`; the required rationale means a bare
    `{}` is never a reply."""
    base = space.json_schema()
    if RATIONALE in base["properties"]:
        raise ValueError(f"a knob may not be called {RATIONALE!r}")
    why = text_schema(RATIONALE_CHARS, "Why this edit, in one or two sentences.")
    return {"type": "object", "properties": {**base["properties"], RATIONALE: why},
            "required": [RATIONALE], "additionalProperties": False}


def preset_space(space: ConfigSpace, name: str = "paper") -> ConfigSpace:
    """`space` with the editable knobs of preset `name` (see the module docstring)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})")
    editable = list(space.editable_names())
    if name == "open":
        return space.with_editable(editable)
    pin: dict[str, Any] = {n: space[n].default for n in PAPER_PINNED_DEFAULT
                           if n in editable}
    if "agent_weights" in editable:
        keys = list(space["agent_weights"].keys or ())
        target = str(PAPER_AGENTS) if str(PAPER_AGENTS) in keys else keys[0]
        pin["agent_weights"] = [1.0 if key == target else 0.0 for key in keys]
    return space.with_editable([n for n in editable if n not in pin], pin=pin)


@dataclass(frozen=True)
class EditOutcome:
    """What one reply did: the full values (None when rejected), its rationale, every
    adjustment with its reason, and why it was rejected (None when it applied)."""

    values: dict[str, Any] | None
    rationale: str
    adjustments: list[Adjustment] = field(default_factory=list)
    rejection: str | None = None
    constrained: bool = True
    changed: list[str] = field(default_factory=list)  # knobs whose value the edit changed
    diagnosis: dict[str, str] | None = None  # the moves language's diagnosis
    moves: list[str] = field(default_factory=list)  # the moves that applied, in order

    @property
    def ok(self) -> bool:
        return self.rejection is None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (no NaN, no huge values): what a call log stores."""
        return {"values": self.values, "rationale": self.rationale,
                "adjustments": [a.model_dump() for a in self.adjustments],
                "rejection": self.rejection, "constrained": self.constrained,
                "changed": list(self.changed),
                **({"diagnosis": self.diagnosis, "moves": list(self.moves)}
                   if self.diagnosis is not None or self.moves else {})}


def apply_edit(space: ConfigSpace, reply: str | Mapping[str, Any],
               base: Mapping[str, Any] | None, *, constrained: bool) -> EditOutcome:
    """Apply one reply (a dict or JSON text) to `base` (default: the space's default).

    `constrained`: the reply came through the grammar of `edit_schema`, so it is parsed
    strictly and anything the grammar cannot write (a fixed knob, an out-of-grid number, an
    unknown field) rejects it. Otherwise it is projected: repaired and every repair listed.
    Text that is not a bounded JSON object (an object naming a key twice included) is
    rejected in both modes. `base` is the
    caller's current config, not content: an invalid one raises `ConfigError`.
    """
    full_base = space.validate(space.default() if base is None else base)
    try:
        obj = reply if isinstance(reply, Mapping) else load_json_object(reply)
    except ConfigError as e:
        return EditOutcome(None, "", [], f"unusable reply: {e.message}", constrained)
    obj = dict(obj)
    adjustments: list[Adjustment] = []
    rationale = clean_rationale(obj.pop(RATIONALE, ""), adjustments)
    try:
        if constrained:
            values = space.parse(obj, full_base, adjustments=adjustments, on_grid=True)
        else:
            values, repairs = space.project(obj, full_base)
            adjustments += repairs
    except ConfigError as e:
        why = f"unusable reply: {e.message}" if e.field == "<edit>" else str(e)
        return EditOutcome(None, rationale, adjustments, why, constrained)
    return EditOutcome(values, rationale, adjustments, None, constrained,
                       changed_knobs(space, values, full_base))


def changed_knobs(space: ConfigSpace, values: Mapping[str, Any],
                  base: Mapping[str, Any]) -> list[str]:
    """The knobs whose value differs between `values` and `base`, in the space's order."""
    return [k.name for k in space.knobs if not _close(values[k.name], base[k.name])]


def clean_rationale(raw: Any, adjustments: list[Adjustment],
                    max_chars: int = RATIONALE_CHARS) -> str:
    """The rationale as bounded printable ASCII; any change to it is recorded."""
    if not isinstance(raw, str):
        adjustments.append(Adjustment(field=RATIONALE, before=raw, after="",
                                      reason="not a string; dropped"))
        return ""
    cut = raw[:max_chars]
    clean = _NOT_PRINTABLE.sub("?", _WHITESPACE.sub(" ", cut))
    reasons = []
    if len(raw) > max_chars:
        reasons.append(f"cut to {max_chars} characters")
    if clean != cut:
        reasons.append("non-printable characters replaced")
    if reasons:
        adjustments.append(Adjustment(field=RATIONALE, before=raw, after=clean,
                                      reason="; ".join(reasons)))
    return clean


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_close, a, b))
    if isinstance(a, float) and isinstance(b, int | float) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b

