"""Move targets and operations: what a move names and the values it moves a config to.

The targets are derived from a `ConfigSpace`'s editable knobs (a number, a per-key number,
a simplex, an `X_min`/`X_max` range pair, a bool or choice; with two ranges or more, also
`RANGES`, every range at once); `moved` turns one
(target, op, key, size) into the new values of its fields with the bound adjustments it made,
and `spellings` lists every move a target may name. The language built on them (grammar,
menu, replies) is `designer.engineer.moves`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jaxenv.config_space import Adjustment, ConfigSpace, Knob

STEPS = {"small": 1, "medium": 2, "large": 4}  # grid steps of a number
# A simplex moves this share of its mass; a range's ends move this share of the knob's span
# (at least one grid step): a range's grid is fine (tens of steps on a control family), so
# a few grid steps would take many stages to reach a width that matters.
SHARES = {"small": 0.1, "medium": 0.25, "large": 0.5}
ALL = "all"  # the key of a per-key move on every key
RANGES = "ranges"  # the target of a move on every range at once
Kind = Literal["number", "vector", "simplex", "range", "set"]
OPS: dict[str, tuple[str, ...]] = {
    "number": ("raise", "lower"), "vector": ("raise", "lower"),
    "simplex": ("focus", "spread", "down", "up"), "range": ("widen", "narrow", "up", "down"),
    "set": ("set",),
}
KEYED = {("vector", "raise"), ("vector", "lower"), ("simplex", "focus")}
_EPS = 1e-6


class MoveError(ValueError):
    """A move string that names no admitted move; the message says why."""


@dataclass(frozen=True)
class Target:
    """What a move names: one editable knob, a range pair (`fields` = its two knobs), or every
    range at once (`members`: the ranges, `fields` all of theirs)."""

    name: str
    kind: Kind
    fields: tuple[str, ...]
    knob: Knob  # the (first) knob: bounds, grid, keys, choices
    members: tuple[Target, ...] = ()


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
    ranges = [t for t in out if t.kind == "range"]
    if len(ranges) > 1:
        out.append(Target(RANGES, "range", tuple(f for t in ranges for f in t.fields),
                          ranges[0].knob, tuple(ranges)))
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


def moved(t: Target, op: str, key: str | None, size: str | None,
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
    if t.members:
        new: dict[str, Any] = {}
        for m in t.members:
            values, more = moved(m, op, key, size, cur)
            new.update(values)
            adj += more
        return new, adj
    sign = 1 if op in ("raise", "widen", "up") else -1
    if t.kind == "range":
        assert k.step is not None and k.low is not None and k.high is not None
        span = round((k.high - k.low) / k.step)  # grid steps across the knob's bounds
        n = sign * max(1, int(SHARES[size] * span + 0.5))
    else:
        n = sign * STEPS[size]
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
    # Either order of the two ends draws the same range (the env takes the lower as the
    # start), so a move reads the interval and writes it in order.
    lo, hi = sorted((float(cur[lo_name]), float(cur[hi_name])))
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
        room = k.high - hi if n > 0 else lo - k.low  # lo <= hi: read in order above
        d = max(0.0, min(abs(n) * k.step, room)) * (1 if n > 0 else -1)
        lo2, hi2 = lo + d, hi + d
    if not (differs(lo2, lo) or differs(hi2, hi)):  # the same interval: nothing to rewrite
        return {lo_name: cur[lo_name], hi_name: cur[hi_name]}, adj
    return {lo_name: _num(k, lo2), hi_name: _num(k, hi2)}, adj


def _num(k: Knob, x: float) -> float | int:
    return int(round(x)) if k.kind == "int" else round(x, 6)


def _word(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def differs(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return any(differs(x, y) for x, y in zip(a, b))
    if isinstance(a, bool | str):
        return a != b
    return abs(float(a) - float(b)) > _EPS


def spellings(t: Target) -> list[tuple[str, str | None, str | None]]:
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
