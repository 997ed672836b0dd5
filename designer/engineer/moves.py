"""The moves language: a reply names a diagnosis and one to three moves, never raw values.

(The targets and what each operation does to a value: `designer.engineer.move_ops`. A local
small model writes one move per reply, a server's up to three: `moves_per_reply`.)

A small model (SmolLM2-135M) writes one token per digit, so a reply of raw values is long and
often changes nothing. In this language a reply is short and every reply the grammar admits
changes the config:

    {"training": "too_easy", "weakest": "3 agents 9x9",
     "moves": ["raise hole_ratio 9 small", "up size_weights medium"], "rationale": "..."}

- `training` (too_easy | about_right | too_hard) and `weakest` (one label of the F table,
  `Failures.cell_labels`, or "none" without an F) are the diagnosis;
- `moves`: one to three strings "op target [key] [size]", each from an enum computed from
  the current config, so that only moves that change something are admitted;
- `rationale`: at most `RATIONALE_CHARS` printable characters, recorded, never acted on.

Targets and operations are derived from the `ConfigSpace` metadata of the editable knobs:
- a scalar number (e.g. ``slip_prob``): raise, lower;
- a per-key number (e.g. ``hole_ratio`` by map size): raise, lower on one key or on ``all``;
- a simplex (e.g. ``size_weights``): focus on a key, spread (toward uniform), down (weight
  toward the first keys: smaller maps, fewer agents), up (toward the last keys);
- a range, any pair ``X_min`` / ``X_max`` of numbers with the same bounds and grid, named
  ``X``: widen, narrow, up, down (the width kept; a narrowing that would invert the range
  ends at one grid point in its middle); with two ranges or more, ``ranges`` moves every
  range at once (the move a domain-randomisation curriculum makes);
- a bool or choice: ``set target value``, any value but the current one (no size).

Sizes: a number moves `STEPS` grid steps of its knob (small 1, medium 2, large 4) and stops
at its bound (recorded); a simplex moves `SHARES` of its mass (small 0.1, medium 0.25, large
0.5) toward the target weights; a range's ends move the same shares of the knob's span
(either order of a range's two ends is the same range). Each move compiles to an edit dict
that `ConfigSpace.parse` applies strictly, so values come from one place and every
adjustment is an `Adjustment`. Two moves on the same knob (a range and ``ranges``, say):
the later is dropped with a recorded adjustment. An unconstrained reply (a server) has its
unknown or no-op moves and extra keys dropped with a reason; a reply without one usable
move, or with a diagnosis outside its enums, is rejected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from designer.engineer.edits import (
    RATIONALE,
    EditOutcome,
    changed_knobs,
    clean_rationale,
    text_schema,
)
from designer.engineer.move_ops import (
    OPS,
    RANGES,
    SHARES,
    STEPS,
    MoveError,
    Target,
    differs,
    moved,
    spell,
    spellings,
    targets,
)
from jaxenv.config_space import Adjustment, ConfigError, ConfigSpace, load_json_object

TRAINING = ("too_easy", "about_right", "too_hard")
NO_CELL = "none"  # the weakest cell when there is no F
MAX_MOVES = 3
RATIONALE_CHARS = 40  # a few words: each character may cost a decoding step
DIAGNOSIS = ("training", "weakest")
MOVES = "moves"

EDITS = ("auto", "moves", "values")
SERVERS = ("openai", "vllm")  # strong models behind a server keep raw values under `auto`
# A reply's default token limit per language. In moves it holds the longest reply the grammar
# admits at one token per character (a constrained decoder may split words into characters),
# so no reply is ever cut.
MAX_TOKENS = {"values": 320, "moves": 288}
# A prompt's default token budget per language: a moves prompt is read by a small local model,
# for which the prompt's pass is most of a reply's time and a failure trajectory is noise (the
# context's cut order drops trajectories and old history first).
TOKEN_BUDGET = {"values": 1600, "moves": 1024}



def edit_language(edits: str, backend: str) -> str:
    """The language a run's replies use: `edits` unless it is ``auto``, which picks moves for
    the embedded model and local decoders and raw values for servers (`SERVERS`)."""
    if edits not in EDITS:
        raise ValueError(f"unknown edit language {edits!r} (known: {', '.join(EDITS)})")
    if edits != "auto":
        return edits
    return "values" if backend in SERVERS else "moves"


def moves_per_reply(backend: str) -> int:
    """How many moves one reply may hold: `MAX_MOVES` for a server's model, one for a local
    small model. A small model's second and third moves mostly repeat its first target (and
    are dropped), and every move costs it decoding steps; its candidates are its moves."""
    return MAX_MOVES if backend in SERVERS else 1


class NoMoves(ValueError):
    """No move changes the current config (no editable knob can move)."""


# ----------------------------------------------------------------------------- grammar


def admitted(space: ConfigSpace, current: Mapping[str, Any]) -> list[str]:
    """Every move that changes `current` (the moves enum of the reply grammar)."""
    out = []
    for t in targets(space):
        for op, key, size in spellings(t):
            new, _ = moved(t, op, key, size, current)
            if any(differs(v, current[f]) for f, v in new.items()):
                out.append(spell(op, t.name, key, size))
    return out


def read_move(space: ConfigSpace, current: Mapping[str, Any], move: Any
              ) -> tuple[Target, dict[str, Any], list[Adjustment]]:
    """One move string -> its target, the new values of its fields and their adjustments;
    `MoveError` saying why when it names no move or changes nothing."""
    if not isinstance(move, str) or not 0 < len(move) <= 80:
        raise MoveError("a move is a short string such as 'raise hole_ratio 9 small'")
    words = move.split()
    by_name = {t.name: t for t in targets(space)}
    if len(words) < 2 or words[1] not in by_name:
        raise MoveError(f"{move[:40]!r} names no target (known: {', '.join(by_name)})")
    t = by_name[words[1]]
    spelled = {spell(op, t.name, key, size): (op, key, size) for op, key, size in
               spellings(t)}
    if " ".join(words) not in spelled:
        raise MoveError(f"{move[:40]!r} is not a move on {t.name} (ops: "
                        f"{', '.join(OPS[t.kind])}; sizes: {', '.join(STEPS)})")
    op, key, size = spelled[" ".join(words)]
    new, adj = moved(t, op, key, size, current)
    if not any(differs(v, current[f]) for f, v in new.items()):
        raise MoveError(f"{move!r} changes nothing in the current config")
    return t, new, adj


def cells_enum(cells: Sequence[str] | None) -> list[str]:
    """The weakest-cell enum: F's labels, or the single "none" without an F."""
    labels = [str(c) for c in cells or ()]
    return labels or [NO_CELL]


def diagnosis_schema(cells: Sequence[str] | None) -> dict[str, Any]:
    """The diagnosis fields' schemas: training's verdict and the weakest cell."""
    return {"training": {"enum": list(TRAINING)}, "weakest": {"enum": cells_enum(cells)}}


def moves_schema(space: ConfigSpace, current: Mapping[str, Any],
                 cells: Sequence[str] | None, *, diagnosis: bool = True,
                 max_moves: int = MAX_MOVES) -> dict[str, Any]:
    """The reply grammar: the diagnosis (unless the analyst wrote it), 1 to `max_moves`
    (at most `MAX_MOVES`) admitted moves, a rationale of at most `RATIONALE_CHARS`
    characters; all required. One move per reply is the grammar of a scored move table
    (the engineer's training data), where a reply's score is its move's."""
    if not 1 <= max_moves <= MAX_MOVES:
        raise ValueError(f"max_moves must be in 1..{MAX_MOVES}, got {max_moves}")
    moves = admitted(space, current)
    if not moves:
        raise NoMoves("no move changes this config (no editable knob can move)")
    props: dict[str, Any] = diagnosis_schema(cells) if diagnosis else {}
    props[MOVES] = {"type": "array", "items": {"enum": moves}, "minItems": 1,
                    "maxItems": max_moves}
    props[RATIONALE] = text_schema(RATIONALE_CHARS, "Why, in a few words.")
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def analyst_schema(cells: Sequence[str] | None) -> dict[str, Any]:
    """The team analyst's reply in the moves language: the diagnosis enums only."""
    props = diagnosis_schema(cells)
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def menu(space: ConfigSpace, current: Mapping[str, Any]) -> str:
    """The admitted moves as the model reads them: one line per (op, target), keys joined."""
    every = targets(space)
    ranges = ", for ranges that share of the span" if any(t.kind == "range" for t in every) else ""
    lines = [f"Write each move as \"op target [key] size\"; size is {', '.join(STEPS)} "
             f"(grid steps {'/'.join(map(str, STEPS.values()))}; for weights a share of "
             f"{'/'.join(map(str, SHARES.values()))}{ranges})."]
    ok = set(admitted(space, current))
    for t in every:
        by_op: dict[str, list[str]] = {}
        for op, key, size in spellings(t):
            if spell(op, t.name, key, size) in ok:
                keys = by_op.setdefault(op, [])
                if key is not None and key not in keys:
                    keys.append(key)
        for op, keys in by_op.items():
            what = f" {'|'.join(keys)}" if keys else ""
            tail = "" if t.kind == "set" else " size"
            hint = _HINT.get(t.name if t.members else (t.kind, op), "")
            lines.append(f"- {op} {t.name}{what}{tail}{hint}")
    return "\n".join(lines)


_HINT = {("simplex", "down"): " (weight toward the first keys)",
         ("simplex", "up"): " (weight toward the last keys)",
         ("simplex", "spread"): " (toward equal weights)",
         ("range", "up"): " (both ends up)", ("range", "down"): " (both ends down)",
         RANGES: " (every range at once)"}


# ------------------------------------------------------------------------------ replies


def reply(diagnosis: Mapping[str, str] | None, moves: Sequence[str], rationale: str = ""
          ) -> dict[str, Any]:
    """The reply object the grammar writes for a diagnosis and moves (a training target, a
    replayed answer): `apply_moves` reads it back to the same edit."""
    out: dict[str, Any] = dict(diagnosis or {})
    out[MOVES] = [" ".join(m.split()) for m in moves]
    out[RATIONALE] = rationale
    return out


def reply_text(diagnosis: Mapping[str, str] | None, moves: Sequence[str],
               rationale: str = "") -> str:
    """`reply` as the compact JSON text a constrained decoder writes (no whitespace)."""
    return json.dumps(reply(diagnosis, moves, rationale), separators=(",", ":"))


def apply_moves(space: ConfigSpace, reply: str | Mapping[str, Any],
                base: Mapping[str, Any] | None, cells: Sequence[str] | None, *,
                constrained: bool, diagnosis: Mapping[str, Any] | None = None) -> EditOutcome:
    """Apply one reply of the moves language to `base` (module docstring).

    `diagnosis`: the analyst's, when the reply holds moves only (team roles). `constrained`:
    the reply came through `moves_schema`'s grammar, so anything it cannot write (an unknown
    move, a no-op, an extra key) rejects it; otherwise those are dropped with a reason. The
    outcome's `values` come from `ConfigSpace.parse`; never raises on the reply's content.
    """
    full = space.validate(space.default() if base is None else base)
    try:
        obj = dict(reply) if isinstance(reply, Mapping) else load_json_object(reply)
    except ConfigError as e:
        return EditOutcome(None, "", [], f"unusable reply: {e.message}", constrained)
    adj: list[Adjustment] = []
    rationale = clean_rationale(obj.pop(RATIONALE, ""), adj, RATIONALE_CHARS)
    diag, why = _diagnosis(obj, cells, diagnosis)
    if why:
        return EditOutcome(None, rationale, adj, why, constrained)
    raw = obj.pop(MOVES, None)
    extra = sorted(map(str, obj))
    if extra and constrained:
        return _reject(rationale, adj, f"unknown keys {extra}", diag, constrained)
    adj += [Adjustment(field=str(x)[:80], before=obj[x], after=None, reason="unknown key")
            for x in obj]
    if not isinstance(raw, list) or not raw or len(raw) > 16 * MAX_MOVES:
        return _reject(rationale, adj, f"{MOVES} must be a list of 1 to {MAX_MOVES} moves",
                       diag, constrained)
    edit: dict[str, Any] = {}
    done: list[str] = []
    seen: set[str] = set()  # the fields moved so far
    for i, move in enumerate(raw):
        if i >= MAX_MOVES:
            adj.append(Adjustment(field=MOVES, before=move, after=None,
                                  reason=f"more than {MAX_MOVES} moves; dropped"))
            continue
        try:
            t, new, moved = read_move(space, full, move)
        except MoveError as e:
            if constrained:
                return _reject(rationale, adj, f"move {i + 1}: {e}", diag, constrained)
            adj.append(Adjustment(field=MOVES, before=move, after=None, reason=f"{e}; dropped"))
            continue
        if seen.intersection(t.fields):
            adj.append(Adjustment(field=MOVES, before=move, after=None,
                                  reason=f"a second move on {t.name}; dropped"))
            continue
        seen.update(t.fields)
        edit.update(new)
        adj += moved
        done.append(" ".join(move.split()))
    if not done:
        return _reject(rationale, adj, "no usable move", diag, constrained)
    try:
        values = space.parse(edit, full, adjustments=adj)
    except ConfigError as e:  # a move compiles in bounds by construction; kept as a reason
        return _reject(rationale, adj, str(e), diag, constrained)
    return EditOutcome(values, rationale, adj, None, constrained, changed_knobs(space, values,
                                                                               full),
                       diagnosis=diag, moves=done)


def _diagnosis(obj: dict[str, Any], cells: Sequence[str] | None,
               given: Mapping[str, Any] | None) -> tuple[dict[str, str] | None, str | None]:
    """The reply's diagnosis (or the analyst's) and why it is unusable (None if it is)."""
    if given is not None:
        return {k: str(v) for k, v in given.items()}, None
    out = {}
    for name, schema in diagnosis_schema(cells).items():
        v = obj.pop(name, None)
        if not isinstance(v, str) or v not in schema["enum"]:
            shown = v[:40] if isinstance(v, str) else type(v).__name__
            return None, (f"diagnosis {name} {shown!r} is not one of "
                          f"{', '.join(schema['enum'][:12])}")
        out[name] = v
    return out, None


def _reject(rationale: str, adj: list[Adjustment], why: str, diag: dict | None,
            constrained: bool) -> EditOutcome:
    return EditOutcome(None, rationale, adj, why, constrained, diagnosis=diag)


def read_diagnosis(reply: Any, cells: Sequence[str] | None) -> dict[str, str] | None:
    """The analyst's diagnosis from its reply's object, or None when it is unusable."""
    if not isinstance(reply, Mapping):
        return None
    diag, why = _diagnosis(dict(reply), cells, None)
    return None if why else diag
