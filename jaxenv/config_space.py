"""Config spaces: typed, bounded, described knobs that an engineer (human or LLM) may edit.

A `ConfigSpace` is the single source of truth for what a config may hold. It turns plain
values (``dict[str, value]``) into the environment's config pytree, writes the JSON schema of
an *edit* whose grammar only admits in-bounds values (numbers are enums over a grid, because
constrained decoders such as outlines ignore ``minimum``/``maximum``), parses replies with a
`ConfigError` naming the bad field, and projects arbitrary values onto the valid set while
reporting every adjustment it made.

Replies come from language models and servers, so every entry point is bounded: JSON text is
at most `MAX_JSON_CHARS` characters and `MAX_JSON_DEPTH` levels deep (checked before
`json.loads`), a dict edit at most `MAX_EDIT_NODES` values, and huge or non-finite numbers
are bad values, never an `OverflowError` (the JSON reader: `jaxenv.replies.loads_bounded`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from jaxenv.replies import MAX_JSON_DEPTH, loads_bounded

KnobKind = Literal["float", "int", "bool", "choice", "simplex"]
Values = dict[str, Any]

MAX_EDIT_NODES = 4096  # values in a dict edit (JSON text is bounded by its length)


class ConfigError(ValueError):
    """A config or edit is malformed or out of bounds; `field` names the offending knob."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Knob(BaseModel):
    """One field of a config space.

    Vector knobs carry `keys` (e.g. map sizes "3".."10"): their value is a list aligned with
    the keys, and their edit is an object keyed by those labels. A ``simplex`` knob is always
    a vector of non-negative weights that `project` renormalises to sum to one.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Field name in values, in the config pytree and in edits.")
    kind: KnobKind = Field(description="Value type.")
    description: str = Field(description="One line the LLM reads.")
    default: Any = Field(description="Default value (a list for vector knobs).")
    low: float | None = Field(default=None, description="Inclusive lower bound (numbers).")
    high: float | None = Field(default=None, description="Inclusive upper bound (numbers).")
    step: float | None = Field(default=None, description="Grid of the edit grammar (numbers).")
    choices: tuple[str, ...] | None = Field(default=None, description="Labels of a choice knob.")
    keys: tuple[str, ...] | None = Field(default=None, description="Labels of a vector knob.")
    editable: bool = Field(default=True, description="May the engineer edit it?")
    pinned: bool = Field(default=False, description="Fixed at `default` (a preset's choice): "
                         "`validate` refuses any other value.")

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") in ("float", "int", "simplex"):
            data = dict(data)
            if data["kind"] == "simplex":
                data.setdefault("low", 0.0)
                data.setdefault("high", 1.0)
            data.setdefault("step", 1.0 if data["kind"] == "int" else 0.05)
        return data

    @model_validator(mode="after")
    def _check(self) -> Knob:
        if self.kind in ("float", "int", "simplex") and (
            self.low is None or self.high is None or self.low > self.high
        ):
            raise ValueError(f"knob {self.name}: numeric knobs need low <= high")
        if self.kind == "simplex" and not self.keys:
            raise ValueError(f"knob {self.name}: a simplex needs keys")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"knob {self.name}: a choice needs choices")
        if self.pinned and self.editable:
            raise ValueError(f"knob {self.name}: a pinned knob cannot be editable")
        return self

    @property
    def is_vector(self) -> bool:
        return self.keys is not None

    def grid(self) -> list[float] | list[int]:
        """The discrete values the edit grammar admits (bounds included)."""
        assert self.low is not None and self.high is not None and self.step is not None
        n = int(math.floor((self.high - self.low) / self.step + 1e-9))
        vals = [self.low + i * self.step for i in range(n + 1)]
        if self.kind == "int":
            return [int(round(v)) for v in vals]
        out = [round(v, 6) for v in vals]
        if out[-1] < self.high - 1e-9:
            out.append(round(self.high, 6))
        return out

    def on_grid(self, x: float) -> bool:
        """Whether number `x` is one of `grid()`'s values (what the edit grammar can write)."""
        return any(math.isclose(x, g, rel_tol=1e-9, abs_tol=1e-6) for g in self.grid())

    def describe(self) -> str:
        if self.kind == "choice":
            rng = " | ".join(self.choices or ())
        elif self.kind == "bool":
            rng = "true | false"
        elif self.kind == "simplex":
            rng = f"weights over {', '.join(self.keys or ())}, renormalised to sum to 1"
        else:
            rng = f"[{self.low}, {self.high}] in steps of {self.step}"
            if self.is_vector:
                rng = f"per {', '.join(self.keys or ())}: {rng}"
        tag = "" if self.editable else " (fixed: not editable)"
        if self.pinned:
            tag = " (fixed by the preset: not editable)"
        return f"- {self.name}{tag}: {self.description} Range: {rng}. Default: {self.default}."


class Adjustment(BaseModel):
    """One change `project` (or `parse`, for a simplex) made to reach a valid config.

    `before` and `after` are kept as given when they are small plain JSON values; anything
    else (a huge integer, NaN, a 1 MB string, a deep structure) is stored as a short
    description, so adjustments stay small and JSON-serialisable in logs.
    """

    model_config = ConfigDict(frozen=True)
    field: str
    before: Any
    after: Any
    reason: str

    @field_validator("before", "after", mode="before")
    @classmethod
    def _plain(cls, v: Any) -> Any:
        return _record(v)


class ConfigSpace:
    """Ordered knobs plus a constructor for the config pytree they describe."""

    def __init__(self, knobs: Sequence[Knob], to_pytree: Callable[[Mapping[str, Any]], Any]):
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate knob names in {names}")
        self.knobs: tuple[Knob, ...] = tuple(knobs)
        self._by_name = {k.name: k for k in knobs}
        self._to_pytree = to_pytree
        for k in knobs:  # defaults must be valid
            self._check_value(k, k.default, k.name)

    # ----------------------------------------------------------------- access
    def __getitem__(self, name: str) -> Knob:
        return self._by_name[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def editable_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs if k.editable)

    def with_editable(self, editable: Iterable[str],
                      pin: Mapping[str, Any] | None = None) -> ConfigSpace:
        """A copy in which only `editable` may be edited and each knob of `pin` is fixed at the
        given value (its new default; `validate` then refuses any other value).

        Presets use it to decide what the engineer may touch. It only narrows: naming a knob
        that is not editable here (reward, rule, validation knobs) raises `ValueError`, so no
        preset can open them. Same pytree, so configs of both spaces batch together.
        """
        wanted, pins = set(editable), dict(pin or {})
        unknown = sorted((wanted | set(pins)) - set(self.names))
        if unknown:
            raise ValueError(f"unknown knobs {unknown} (known: {', '.join(self.names)})")
        opened = sorted(n for n in wanted if not self._by_name[n].editable)
        if opened:
            raise ValueError(f"{opened} are not editable in this space; no preset may open them")
        both = sorted(wanted & set(pins))
        if both:
            raise ValueError(f"{both} cannot be both editable and pinned")
        knobs = []
        for k in self.knobs:
            update: dict[str, Any] = {"editable": k.name in wanted}
            if k.name in pins:
                update.update(default=self._check_value(k, pins[k.name], k.name), pinned=True)
            knobs.append(k.model_copy(update=update))
        return ConfigSpace(knobs, self._to_pytree)

    def default(self) -> Values:
        return {k.name: _copy(k.default) for k in self.knobs}

    def describe(self, editable_only: bool = False) -> str:
        """The knob list as the LLM reads it."""
        return "\n".join(k.describe() for k in self.knobs if k.editable or not editable_only)

    # ------------------------------------------------------------------ values
    def to_config(self, values: Mapping[str, Any] | None = None) -> Any:
        """Validated values -> the environment's config pytree (one config)."""
        full = self.validate(self.default() if values is None else values)
        enc = {}
        for k in self.knobs:
            v = full[k.name]
            if k.kind == "choice":
                enc[k.name] = jnp.asarray((k.choices or ()).index(v), jnp.int32)
            elif k.kind == "bool":
                enc[k.name] = jnp.asarray(bool(v))
            elif k.kind == "int":
                enc[k.name] = jnp.asarray(v, jnp.int32)
            else:
                enc[k.name] = jnp.asarray(v, jnp.float32)
        return self._to_pytree(enc)

    def from_config(self, cfg: Any) -> Values:
        """A single (unbatched) config pytree -> plain values."""
        out: Values = {}
        for k in self.knobs:
            a = np.asarray(getattr(cfg, k.name))
            if k.kind == "choice":
                out[k.name] = (k.choices or ())[int(a)]
            elif k.kind == "bool":
                out[k.name] = bool(a)
            elif k.kind == "int":
                out[k.name] = [int(x) for x in a] if k.is_vector else int(a)
            else:
                out[k.name] = [_f32(x) for x in a] if k.is_vector else _f32(a)
        return out

    def stack(self, configs: Sequence[Any]) -> Any:
        """Many configs (values dicts or pytrees) -> one batched pytree, leading axis B."""
        trees = [c if not isinstance(c, Mapping) else self.to_config(c) for c in configs]
        if not trees:
            raise ValueError("stack needs at least one config")
        return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)

    def batch(self, values: Mapping[str, Any] | None, n: int) -> Any:
        """One config repeated n times as a batched pytree."""
        from jaxenv.batching import broadcast

        return broadcast(self.to_config(values), n)

    def batch_size(self, cfg: Any) -> int | None:
        """Leading axis of a batched config pytree, or None for a single config."""
        k = self.knobs[0]
        ndim = jnp.ndim(getattr(cfg, k.name))
        return int(jnp.shape(getattr(cfg, k.name))[0]) if ndim > int(k.is_vector) else None

    def as_batch(self, cfg: Any) -> Any:
        """A single config becomes a batch of one; a batch is returned as it is."""
        return cfg if self.batch_size(cfg) is not None else jax.tree.map(lambda x: x[None], cfg)

    # -------------------------------------------------------------- validation
    def validate(self, values: Mapping[str, Any]) -> Values:
        """Full values -> the same values, or ConfigError naming the first bad field."""
        out: Values = {}
        for name in values:
            if name not in self._by_name:
                raise ConfigError(_key_str(name),
                                  f"unknown field (known: {', '.join(self.names)})")
        for k in self.knobs:
            if k.name not in values:
                raise ConfigError(k.name, "missing")
            out[k.name] = self._check_value(k, values[k.name], k.name)
            if k.pinned and not _same(out[k.name], k.default):
                raise ConfigError(k.name, f"fixed at {k.default} by the preset")
        return out

    def parse(self, edit: str | Mapping[str, Any], base: Mapping[str, Any] | None = None,
              editable_only: bool = True,
              adjustments: list[Adjustment] | None = None, *,
              on_grid: bool = False) -> Values:
        """An edit (JSON text or dict) applied to `base` (default config) -> full values.

        Strict: unknown fields, fixed fields (when `editable_only`), wrong types, non-finite
        and out-of-bounds numbers raise `ConfigError` naming the field, and so does anything
        that is not a bounded JSON object (field ``"<edit>"``). Use `project` to repair.

        The one repair is the one the edit grammar needs: a simplex edited as an object
        (``{key: weight}``, naming all keys or some) is merged into the base weights and
        renormalised to sum to 1; each renormalisation is appended to `adjustments` when a
        list is given. An edit that leaves every weight zero raises (the grammar cannot write
        one); a simplex given as a full list must already sum to 1.

        `on_grid`: every number the edit names must also be a value of its knob's grid
        (`Knob.grid`), as it is in whatever the edit grammar writes; another one raises.
        """
        obj = _load(edit)
        full = dict(self.default() if base is None else self.validate(base))
        for name, val in obj.items():
            k = self._by_name.get(name)
            if k is None:
                raise ConfigError(_key_str(name),
                                  f"unknown field (known: {', '.join(self.names)})")
            if editable_only and not k.editable:
                raise ConfigError(name, "not editable by the engineer")
            if on_grid:
                _check_grid(k, val, name)
            full[name] = self._merge(k, full[name], val, adjustments)
        return self.validate(full)

    def project(self, edit: str | Mapping[str, Any], base: Mapping[str, Any] | None = None,
                editable_only: bool = True) -> tuple[Values, list[Adjustment]]:
        """Any edit -> (valid full values, adjustments). Never raises on content; idempotent.

        Clips numbers to bounds, rounds ints, reads numbers written as strings, keeps the
        current value for non-numbers (NaN, inf, integers beyond float range included) and
        unknown choices, renormalises simplices (all-zero falls back to the base weights),
        drops unknown or fixed fields and holds pinned knobs at their value. A `base` is
        repaired the same way, its repairs listed with the reason prefixed ``"base config: "``.
        Text that is not a bounded JSON object (malformed, longer than `MAX_JSON_CHARS`,
        deeper than `MAX_JSON_DEPTH`) and dicts over `MAX_EDIT_NODES` values raise
        `ConfigError("<edit>")`: nothing in them can be trusted to project.
        """
        obj = _load(edit)
        adj: list[Adjustment] = []
        if base is None:
            full = self.default()
        else:
            full, fixed = self.project(base, None, False)
            adj += [a.model_copy(update={"reason": f"base config: {a.reason}"}) for a in fixed]
        for name, val in obj.items():
            k = self._by_name.get(name)
            if k is None:
                adj.append(Adjustment(field=_key_str(name), before=val, after=None,
                                      reason="unknown field"))
                continue
            if editable_only and not k.editable:
                adj.append(Adjustment(field=name, before=val, after=full[name],
                                      reason="not editable"))
                continue
            if k.pinned:
                if not _same(val, k.default):
                    adj.append(Adjustment(field=name, before=val, after=k.default,
                                          reason="fixed by the preset"))
                full[name] = _copy(k.default)
                continue
            full[name] = self._project_value(k, full[name], val, adj)
        return full, adj

    # ----------------------------------------------------------------- schema
    def json_schema(self, editable_only: bool = True) -> dict[str, Any]:
        """JSON schema of an edit; every string it admits parses to an in-bounds config.

        Numbers are enums over each knob's grid. A simplex edit must name at least one key
        with a positive weight (an ``anyOf``: "key i is the first positive one"), so no edit
        the grammar admits can leave every weight zero, whatever the base.
        """
        props: dict[str, Any] = {}
        for k in self.knobs:
            if editable_only and not k.editable:
                continue
            if k.kind == "simplex":
                props[k.name] = {**_simplex_schema(k), "description": k.description}
            elif k.is_vector:
                scalar = _scalar_schema(k)
                props[k.name] = {
                    "type": "object",
                    "description": k.description,
                    "properties": {key: scalar for key in k.keys or ()},
                    "additionalProperties": False,
                }
            else:
                props[k.name] = {**_scalar_schema(k), "description": k.description}
        return {"type": "object", "properties": props, "additionalProperties": False}

    # ---------------------------------------------------------------- helpers
    def _merge(self, k: Knob, current: Any, val: Any,
               adjustments: list[Adjustment] | None) -> Any:
        """Edit value for one knob -> full value (vector edits may name a subset of keys)."""
        if not k.is_vector or not isinstance(val, Mapping):
            return val
        keys = list(k.keys or ())
        merged = list(current)
        for key, v in val.items():
            label = _key_str(key)
            if label not in keys:
                raise ConfigError(f"{k.name}.{label}", f"unknown key (known: {', '.join(keys)})")
            merged[keys.index(label)] = v
        if k.kind != "simplex":
            return merged
        weights = [self._check_scalar(k, x, f"{k.name}.{key}") for x, key in zip(merged, keys)]
        total = sum(weights)
        if total <= 0:
            raise ConfigError(k.name, "the edit leaves every weight zero; give at least one "
                                      "key a positive weight")
        if abs(total - 1.0) <= 1e-9:
            return weights
        normed = [x / total for x in weights]
        if adjustments is not None:
            adjustments.append(Adjustment(field=k.name, before=weights, after=normed,
                                          reason="renormalised to sum to 1"))
        return normed

    def _check_value(self, k: Knob, v: Any, field: str) -> Any:
        if k.is_vector:
            if isinstance(v, Mapping) or not isinstance(v, list | tuple | np.ndarray):
                raise ConfigError(field, f"expected a list of {len(k.keys or ())} values")
            v = list(v)
            if len(v) != len(k.keys or ()):
                raise ConfigError(field, f"expected {len(k.keys or ())} values, got {len(v)}")
            out = [self._check_scalar(k, x, f"{field}.{key}") for x, key in zip(v, k.keys or ())]
            if k.kind == "simplex" and not math.isclose(sum(out), 1.0, abs_tol=1e-4):
                raise ConfigError(field, f"weights must sum to 1 (sum is {sum(out):.4f})")
            return out
        return self._check_scalar(k, v, field)

    def _check_scalar(self, k: Knob, v: Any, field: str) -> Any:
        if k.kind == "bool":
            if not isinstance(v, bool | np.bool_):
                raise ConfigError(field, f"expected true/false, got {_brief(v)}")
            return bool(v)
        if k.kind == "choice":
            if not isinstance(v, str) or v not in (k.choices or ()):
                raise ConfigError(field,
                                  f"expected one of {list(k.choices or ())}, got {_brief(v)}")
            return v
        if not _is_number(v):
            raise ConfigError(field, f"expected a number, got {_brief(v)}")
        x = _finite(v)
        if x is None:
            raise ConfigError(field, f"expected a finite number, got {_brief(v)}")
        if k.kind == "int" and not x.is_integer():
            raise ConfigError(field, f"expected an integer, got {_brief(v)}")
        assert k.low is not None and k.high is not None
        if not (k.low - 1e-9 <= x <= k.high + 1e-9):
            raise ConfigError(field, f"{_brief(v)} is outside [{k.low}, {k.high}]")
        return int(round(x)) if k.kind == "int" else x

    def _project_value(self, k: Knob, current: Any, val: Any, adj: list[Adjustment]) -> Any:
        if k.is_vector:
            keys = list(k.keys or ())
            merged = list(current)
            if isinstance(val, Mapping):
                for key, v in val.items():
                    label = _key_str(key)
                    if label in keys:
                        merged[keys.index(label)] = v
                    else:
                        adj.append(Adjustment(field=f"{k.name}.{label}", before=v, after=None,
                                              reason="unknown key"))
            elif isinstance(val, list | tuple) and len(val) == len(keys):
                merged = list(val)
            else:
                adj.append(Adjustment(field=k.name, before=val, after=current,
                                      reason=f"expected {len(keys)} values or an object"))
                return current
            out = [self._project_scalar(k, x, c, f"{k.name}.{key}", adj)
                   for x, c, key in zip(merged, current, keys)]
            if k.kind == "simplex":
                total = sum(out)
                if total <= 0:
                    adj.append(Adjustment(field=k.name, before=out, after=current,
                                          reason="all weights zero; kept previous weights"))
                    return list(current)
                if abs(total - 1.0) > 1e-9:
                    normed = [x / total for x in out]
                    adj.append(Adjustment(field=k.name, before=out, after=normed,
                                          reason="renormalised to sum to 1"))
                    out = normed
            return out
        return self._project_scalar(k, val, current, k.name, adj)

    def _project_scalar(self, k: Knob, v: Any, current: Any, field: str,
                        adj: list[Adjustment]) -> Any:
        if k.kind == "bool":
            if isinstance(v, bool | np.bool_):
                return bool(v)
            adj.append(Adjustment(field=field, before=v, after=current, reason="not a boolean"))
            return current
        if k.kind == "choice":
            if isinstance(v, str) and v in (k.choices or ()):
                return v
            adj.append(Adjustment(field=field, before=v, after=current, reason="unknown choice"))
            return current
        x = _finite(v) if _is_number(v) else _number_in_text(v)
        if x is None:
            adj.append(Adjustment(field=field, before=v, after=current, reason="not a number"))
            return current
        assert k.low is not None and k.high is not None
        y: float | int = min(max(x, k.low), k.high)
        if k.kind == "int":
            y = int(round(y))
        if y != x:
            clipped = x < k.low or x > k.high
            adj.append(Adjustment(field=field, before=v, after=y,
                                  reason="clipped to bounds" if clipped else "rounded"))
        elif isinstance(v, str):
            adj.append(Adjustment(field=field, before=v, after=y,
                                  reason="number written as a string"))
        return y


# ------------------------------------------------------------------------ schema pieces


def _scalar_schema(k: Knob) -> dict[str, Any]:
    if k.kind == "bool":
        return {"type": "boolean"}
    if k.kind == "choice":
        return {"type": "string", "enum": list(k.choices or ())}
    return {"enum": k.grid()}


def _simplex_schema(k: Knob) -> dict[str, Any]:
    """An object of weights over the grid that names at least one key with a positive weight.

    Branch i admits keys before i only at zero, key i (required) positive, keys after it at
    any grid weight: the branches together admit exactly the objects with some positive
    weight, and each is one regular language, which constrained decoders compile cheaply.
    """
    keys, grid = list(k.keys or ()), k.grid()
    zero, positive = [g for g in grid if g <= 0], [g for g in grid if g > 0]
    if not zero:
        return {"type": "object", "properties": {key: {"enum": grid} for key in keys},
                "additionalProperties": False}
    branches = []
    for i, first in enumerate(keys):
        props = {key: {"enum": zero if j < i else positive if j == i else grid}
                 for j, key in enumerate(keys)}
        branches.append({"type": "object", "properties": props, "required": [first],
                         "additionalProperties": False})
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _load(edit: Any) -> dict[str, Any]:
    """An edit as a dict, or ConfigError("<edit>") if it is not a bounded JSON object."""
    if isinstance(edit, Mapping):
        obj = dict(edit)
        too_big = _oversize(obj)
        if too_big:
            raise ConfigError("<edit>", too_big)
        return obj
    return load_json_object(edit)


def load_json_object(text: Any) -> dict[str, Any]:
    """Bounded JSON text -> a dict, or `ConfigError("<edit>")` saying why not."""
    if not isinstance(text, str):
        raise ConfigError("<edit>", f"expected JSON text or an object, got "
                                    f"{type(text).__name__}")
    try:
        obj = loads_bounded(text)
    except ValueError as e:
        raise ConfigError("<edit>", str(e)) from None
    if not isinstance(obj, dict):
        raise ConfigError("<edit>", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_grid(k: Knob, val: Any, field: str) -> None:
    """ConfigError unless every number of an edit's value for `k` lies on `k`'s grid."""
    if k.kind not in ("float", "int", "simplex"):
        return
    items = val.items() if isinstance(val, Mapping) else \
        zip(k.keys or (), val) if isinstance(val, list | tuple) else [(None, val)]
    for key, x in items:
        where = field if key is None else f"{field}.{_key_str(key)}"
        v = _finite(x) if _is_number(x) else None
        if v is not None and not k.on_grid(v):
            raise ConfigError(where, f"{_brief(x)} is not on the grid ({k.low} to {k.high} in "
                                     f"steps of {k.step})")


def _oversize(obj: Any) -> str | None:
    """Why a dict edit is too large to read (values, depth; cycles count as depth), or None."""
    stack, seen = [(obj, 1)], 0
    while stack:
        v, depth = stack.pop()
        seen += 1
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        children = v.values() if isinstance(v, Mapping) else v \
            if isinstance(v, list | tuple) else ()
        if seen + len(stack) + len(children) > MAX_EDIT_NODES:
            return f"more than {MAX_EDIT_NODES} values"
        stack.extend((x, depth + 1) for x in children)
    return None


# ------------------------------------------------------------------------------ values


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def _finite(v: Any) -> float | None:
    """A number as a finite float, or None (NaN, inf, integers beyond float range)."""
    try:
        x = float(v)
    except (OverflowError, TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _number_in_text(v: Any) -> float | None:
    """A number written as a (short) string, e.g. "0.3" from a server that quotes numbers."""
    if not isinstance(v, str) or len(v) > 64:
        return None
    return _finite(v.strip()) if v.strip() else None


def _same(a: Any, b: Any) -> bool:
    """Is `a` the value `b` (numbers compared with a float tolerance)?"""
    if isinstance(b, list):
        return isinstance(a, list | tuple) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    if _is_number(b):
        x = _finite(a) if _is_number(a) else None
        return x is not None and math.isclose(x, float(b), rel_tol=1e-6, abs_tol=1e-6)
    return type(a) is type(b) and a == b


def _key_str(key: Any) -> str:
    """A field or key label for messages and lookups (dict edits may use any key type)."""
    if isinstance(key, str):
        return key if len(key) <= 80 else _brief(key)
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() <= 64:
        return str(key)
    return _brief(key)


def _brief(v: Any, limit: int = 60) -> str:
    """A short description of any value, for messages: never huge, never raises."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"<an integer of about {int(v.bit_length() * math.log10(2)) + 1} digits>"
    if isinstance(v, str):
        return repr(v[:limit]) + (f"... ({len(v)} characters)" if len(v) > limit else "")
    if isinstance(v, Mapping | list | tuple):
        return f"<{type(v).__name__} of {len(v)} items>"
    try:
        text = repr(v)
    except Exception:  # an object whose repr fails is still only described
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _record(v: Any, depth: int = 0) -> Any:
    """`v` if it is a small plain JSON value, else a short description (see `Adjustment`)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, np.bool_ | np.integer | np.floating):
        v = v.item()
    if isinstance(v, int):
        return v if v.bit_length() <= 63 else _brief(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, str):
        short = v if len(v) <= 200 else f"{v[:200]}... ({len(v)} characters)"
        return short.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(v, list | tuple) and len(v) <= 32 and depth < 3:
        return [_record(x, depth + 1) for x in v]
    if isinstance(v, Mapping) and len(v) <= 32 and depth < 3:
        return {_key_str(key): _record(x, depth + 1) for key, x in v.items()}
    return _brief(v)


def _f32(x: Any) -> float:
    """A float32 as the shortest decimal that round-trips (0.2, not 0.20000000298...)."""
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def _copy(v: Any) -> Any:
    return list(v) if isinstance(v, list | tuple) else v
