"""The moves language: a reply names a diagnosis and one to three moves, never raw values.

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
  ends at one grid point in its middle);
- a bool or choice: ``set target value``, any value but the current one (no size).

Sizes: a number moves `STEPS` grid steps of its knob (small 1, medium 2, large 4) and stops
at its bound (recorded); a simplex moves `SHARES` of its mass (small 0.1, medium 0.25, large
0.5) toward the target weights. Each move compiles to an edit dict that `ConfigSpace.parse`
applies strictly, so values come from one place and every adjustment is an `Adjustment`.
Two moves on the same target: the later is dropped with a recorded adjustment. An
unconstrained reply (a server) has its unknown or no-op moves and extra keys dropped with a
reason; a reply without one usable move, or with a diagnosis outside its enums, is rejected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from designer.engineer.edits import (
    RATIONALE,
    EditOutcome,
    changed_knobs,
    clean_rationale,
    text_schema,
)
from jaxenv.config_space import Adjustment, ConfigError, ConfigSpace, Knob, load_json_object

STEPS = {"small": 1, "medium": 2, "large": 4}  # grid steps of a number
SHARES = {"small": 0.1, "medium": 0.25, "large": 0.5}  # share of a simplex's mass
TRAINING = ("too_easy", "about_right", "too_hard")
NO_CELL = "none"  # the weakest cell when there is no F
ALL = "all"  # the key of a per-key move on every key
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

Kind = Literal["number", "vector", "simplex", "range", "set"]
OPS: dict[str, tuple[str, ...]] = {
    "number": ("raise", "lower"), "vector": ("raise", "lower"),
    "simplex": ("focus", "spread", "down", "up"), "range": ("widen", "narrow", "up", "down"),
    "set": ("set",),
}
KEYED = {("vector", "raise"), ("vector", "lower"), ("simplex", "focus")}
_EPS = 1e-6


def edit_language(edits: str, backend: str) -> str:
    """The language a run's replies use: `edits` unless it is ``auto``, which picks moves for
    the embedded model and local decoders and raw values for servers (`SERVERS`)."""
    if edits not in EDITS:
        raise ValueError(f"unknown edit language {edits!r} (known: {', '.join(EDITS)})")
    if edits != "auto":
        return edits
    return "values" if backend in SERVERS else "moves"


class MoveError(ValueError):
    """A move string that names no admitted move; the message says why."""


class NoMoves(ValueError):
    """No move changes the current config (no editable knob can move)."""


@dataclass(frozen=True)
class Target:
    """What a move names: one editable knob, or a range pair (`fields` = its two knobs)."""

    name: str
    kind: Kind
    fields: tuple[str, ...]
    knob: Knob  # the (first) knob: bounds, grid, keys, choices


def targets(space: ConfigSpace) -> list[Target]:
    """The targets of `space`'s editable knobs, in the space's order (module docstring)."""
    editable = {k.name: k for k in space.knobs if k.editable}
    pairs: dict[str, str] = {}
    for name, k in editable.items():
        if name.endswith("_min") and k.kind in ("float", "int") and not k.is_vector:
            hi = editable.get(name[:-4] + "_max")
            if hi is not None and (hi.kind, hi.low, hi.high, hi.step, hi.is_vector) == (
                    k.kind, k.low, k.high, k.step, False):
                pairs[name] = hi.name
    paired = set(pairs) | set(pairs.values())
    out = []
    for name, k in editable.items():
        if name in pairs:
            out.append(Target(name[:-4], "range", (name, pairs[name]), k))
        elif name in paired:
            continue
        elif k.kind == "simplex":
            out.append(Target(name, "simplex", (name,), k))
        elif k.kind in ("bool", "choice"):
            out.append(Target(name, "set", (name,), k))
        else:
            out.append(Target(name, "vector" if k.is_vector else "number", (name,), k))
    names = [t.name for t in out]
    if len(set(names)) != len(names) or ALL in names:
        raise ValueError(f"move targets must have distinct names, got {names}")
    return out


# ---------------------------------------------------------------------------- operations


def _step(k: Knob, x: float, n: int) -> tuple[float, bool]:
    """`x` moved `n` grid steps (up if n > 0), and whether the bound stopped it early."""
    grid = k.grid()
    if n > 0:
        ahead = [g for g in grid if g > x + _EPS]
        return (ahead[min(n, len(ahead)) - 1] if ahead else x), len(ahead) < n
    behind = [g for g in grid if g < x - _EPS]
    return (behind[-min(-n, len(behind))] if behind else x), len(behind) < -n


def _mix(w: Sequence[float], t: Sequence[float], share: float) -> list[float]:
    out = [round((1 - share) * a + share * b, 6) for a, b in zip(w, t)]
    top = max(range(len(out)), key=out.__getitem__)
    out[top] = round(out[top] + 1.0 - sum(out), 6)  # rounding leaves the sum at 1
    return out


def _simplex_target(op: str, w: Sequence[float], i: int | None) -> list[float]:
    n = len(w)
    if op == "focus":
        return [1.0 if j == i else 0.0 for j in range(n)]
    if op == "spread":
        return [1.0 / n] * n
    if op == "down":  # each key's weight one key toward the first
        return [w[0] + (w[1] if n > 1 else 0.0), *w[2:], 0.0][:n]
    return [0.0, *w[:-2], w[-1] + (w[-2] if n > 1 else 0.0)][-n:]  # up


def _moved(t: Target, op: str, key: str | None, size: str | None,
           cur: Mapping[str, Any]) -> tuple[dict[str, Any], list[Adjustment]]:
    """The new values of `t`'s fields after one move (not yet checked by the space)."""
    k, adj = t.knob, []
    if t.kind == "set":
        options: tuple[Any, ...] = (True, False) if k.kind == "bool" else tuple(k.choices or ())
        value = {"true": True, "false": False}.get(str(key)) if k.kind == "bool" else key
        if value not in options:
            raise MoveError(f"{t.name} takes one of {', '.join(map(_word, options))}")
        return {t.name: value}, adj
    assert size is not None
    if t.kind == "simplex":
        w = [float(x) for x in cur[t.name]]
        i = None if key is None else list(k.keys or ()).index(key)
        return {t.name: _mix(w, _simplex_target(op, w, i), SHARES[size])}, adj
    n = STEPS[size] * (1 if op in ("raise", "widen", "up") else -1)
    if t.kind == "number":
        x, stopped = _step(k, float(cur[t.name]), n)
        if stopped:
            adj.append(Adjustment(field=t.name, before=cur[t.name], after=x,
                                  reason=f"{op} {size} stopped at the bound"))
        return {t.name: _num(k, x)}, adj
    if t.kind == "vector":
        keys = list(k.keys or ())
        vals = list(cur[t.name])
        for j in (range(len(keys)) if key == ALL else [keys.index(str(key))]):
            x, stopped = _step(k, float(vals[j]), n)
            if stopped and key != ALL:
                adj.append(Adjustment(field=f"{t.name}.{keys[j]}", before=vals[j], after=x,
                                      reason=f"{op} {size} stopped at the bound"))
            vals[j] = _num(k, x)
        return {t.name: vals}, adj
    lo_name, hi_name = t.fields
    lo, hi = float(cur[lo_name]), float(cur[hi_name])
    if op == "widen":
        lo2, hi2 = _step(k, lo, -n)[0], _step(k, hi, n)[0]
    elif op == "narrow":
        lo2, hi2 = _step(k, lo, -n)[0], _step(k, hi, n)[0]
        if lo2 > hi2 + _EPS:
            mid = 0.5 * (lo + hi)
            inside = [g for g in k.grid() if lo - _EPS <= g <= hi + _EPS]
            lo2 = hi2 = min(inside, key=lambda g: abs(g - mid)) if inside else mid
            adj.append(Adjustment(field=t.name, before=[lo, hi], after=[lo2, hi2],
                                  reason=f"narrow {size} stopped at one point"))
    else:  # up or down: both ends by the same amount, at most to the nearer bound
        assert k.step is not None and k.low is not None and k.high is not None
        room = k.high - max(lo, hi) if n > 0 else min(lo, hi) - k.low
        d = max(0.0, min(abs(n) * k.step, room)) * (1 if n > 0 else -1)
        lo2, hi2 = lo + d, hi + d
    return {lo_name: _num(k, lo2), hi_name: _num(k, hi2)}, adj


def _num(k: Knob, x: float) -> float | int:
    return int(round(x)) if k.kind == "int" else round(x, 6)


def _word(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return any(_differs(x, y) for x, y in zip(a, b))
    if isinstance(a, bool | str):
        return a != b
    return abs(float(a) - float(b)) > _EPS


# ----------------------------------------------------------------------------- grammar


def _spellings(t: Target) -> list[tuple[str, str | None, str | None]]:
    """Every (op, key, size) a move on `t` may name, admitted or not."""
    k = t.knob
    if t.kind == "set":
        options = ("true", "false") if k.kind == "bool" else tuple(k.choices or ())
        return [("set", v, None) for v in options]
    out: list[tuple[str, str | None, str | None]] = []
    for op in OPS[t.kind]:
        keys: Sequence[str | None] = [None]
        if (t.kind, op) in KEYED:
            keys = [*(k.keys or ()), *([ALL] if t.kind == "vector" else [])]
        out += [(op, key, size) for key in keys for size in STEPS]
    return out


def spell(op: str, target: str, key: str | None, size: str | None) -> str:
    return " ".join(w for w in (op, target, key, size) if w is not None)


def admitted(space: ConfigSpace, current: Mapping[str, Any]) -> list[str]:
    """Every move that changes `current` (the moves enum of the reply grammar)."""
    out = []
    for t in targets(space):
        for op, key, size in _spellings(t):
            new, _ = _moved(t, op, key, size, current)
            if any(_differs(v, current[f]) for f, v in new.items()):
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
               _spellings(t)}
    if " ".join(words) not in spelled:
        raise MoveError(f"{move[:40]!r} is not a move on {t.name} (ops: "
                        f"{', '.join(OPS[t.kind])}; sizes: {', '.join(STEPS)})")
    op, key, size = spelled[" ".join(words)]
    new, adj = _moved(t, op, key, size, current)
    if not any(_differs(v, current[f]) for f, v in new.items()):
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
    lines = [f"Write each move as \"op target [key] size\"; size is {', '.join(STEPS)} "
             f"(grid steps {'/'.join(map(str, STEPS.values()))}; for weights a share of "
             f"{'/'.join(map(str, SHARES.values()))})."]
    ok = set(admitted(space, current))
    for t in targets(space):
        by_op: dict[str, list[str]] = {}
        for op, key, size in _spellings(t):
            if spell(op, t.name, key, size) in ok:
                keys = by_op.setdefault(op, [])
                if key is not None and key not in keys:
                    keys.append(key)
        for op, keys in by_op.items():
            what = f" {'|'.join(keys)}" if keys else ""
            tail = "" if t.kind == "set" else " size"
            lines.append(f"- {op} {t.name}{what}{tail}{_HINT.get((t.kind, op), '')}")
    return "\n".join(lines)


_HINT = {("simplex", "down"): " (weight toward the first keys)",
         ("simplex", "up"): " (weight toward the last keys)",
         ("simplex", "spread"): " (toward equal weights)",
         ("range", "up"): " (both ends up)", ("range", "down"): " (both ends down)"}


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
    seen: set[str] = set()
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
        if t.name in seen:
            adj.append(Adjustment(field=MOVES, before=move, after=None,
                                  reason=f"a second move on {t.name}; dropped"))
            continue
        seen.add(t.name)
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
