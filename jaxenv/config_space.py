"""Config spaces: typed, bounded, described knobs that an engineer (human or LLM) may edit.

A `ConfigSpace` is the single source of truth for what a config may hold. It turns plain
values (``dict[str, value]``) into the environment's config pytree, writes the JSON schema of
an *edit* whose grammar only admits in-bounds values (numbers are enums over a grid, because
constrained decoders such as outlines ignore ``minimum``/``maximum``), parses replies with a
`ConfigError` naming the bad field, and projects arbitrary values onto the valid set while
reporting every adjustment it made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

KnobKind = Literal["float", "int", "bool", "choice", "simplex"]
Values = dict[str, Any]


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
        return f"- {self.name}{tag}: {self.description} Range: {rng}. Default: {self.default}."


class Adjustment(BaseModel):
    """One change `project` made to reach a valid config."""

    model_config = ConfigDict(frozen=True)
    field: str
    before: Any
    after: Any
    reason: str


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
                raise ConfigError(name, f"unknown field (known: {', '.join(self.names)})")
        for k in self.knobs:
            if k.name not in values:
                raise ConfigError(k.name, "missing")
            out[k.name] = self._check_value(k, values[k.name], k.name)
        return out

    def parse(self, edit: str | Mapping[str, Any], base: Mapping[str, Any] | None = None,
              editable_only: bool = True) -> Values:
        """An edit (JSON text or dict) applied to `base` (default config) -> full values.

        Strict: unknown fields, fixed fields (when `editable_only`), wrong types and
        out-of-bounds numbers raise `ConfigError` naming the field. Use `project` to repair.
        """
        obj = _load(edit)
        full = dict(self.default() if base is None else self.validate(base))
        for name, val in obj.items():
            k = self._by_name.get(name)
            if k is None:
                raise ConfigError(name, f"unknown field (known: {', '.join(self.names)})")
            if editable_only and not k.editable:
                raise ConfigError(name, "not editable by the engineer")
            full[name] = self._merge(k, full[name], val)
        return self.validate(full)

    def project(self, edit: str | Mapping[str, Any], base: Mapping[str, Any] | None = None,
                editable_only: bool = True) -> tuple[Values, list[Adjustment]]:
        """Any edit -> (valid full values, adjustments). Never raises on content; idempotent.

        Clips numbers to bounds, rounds ints, maps unknown choices to the current value,
        renormalises simplices (all-zero falls back to the base weights), and drops unknown
        or fixed fields. Malformed JSON raises `ConfigError("<edit>")`.
        """
        obj = _load(edit)
        full = dict(self.default() if base is None else self.project(base, None, False)[0])
        adj: list[Adjustment] = []
        for name, val in obj.items():
            k = self._by_name.get(name)
            if k is None:
                adj.append(Adjustment(field=name, before=val, after=None, reason="unknown field"))
                continue
            if editable_only and not k.editable:
                adj.append(Adjustment(field=name, before=val, after=full[name],
                                      reason="not editable"))
                continue
            full[name] = self._project_value(k, full[name], val, adj)
        return full, adj

    # ----------------------------------------------------------------- schema
    def json_schema(self, editable_only: bool = True) -> dict[str, Any]:
        """JSON schema of an edit; every string it admits parses to an in-bounds config."""
        props: dict[str, Any] = {}
        for k in self.knobs:
            if editable_only and not k.editable:
                continue
            scalar = _scalar_schema(k)
            if k.is_vector:
                props[k.name] = {
                    "type": "object",
                    "description": k.description,
                    "properties": {key: scalar for key in k.keys or ()},
                    "additionalProperties": False,
                }
            else:
                props[k.name] = {**scalar, "description": k.description}
        return {"type": "object", "properties": props, "additionalProperties": False}

    # ---------------------------------------------------------------- helpers
    def _merge(self, k: Knob, current: Any, val: Any) -> Any:
        """Edit value for one knob -> full value (vector edits may name a subset of keys)."""
        if not k.is_vector:
            return val
        keys = list(k.keys or ())
        if isinstance(val, Mapping):
            merged = list(current)
            for key, v in val.items():
                if str(key) not in keys:
                    raise ConfigError(f"{k.name}.{key}", f"unknown key (known: {', '.join(keys)})")
                merged[keys.index(str(key))] = v
            return merged
        return val

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
                raise ConfigError(field, f"expected true/false, got {v!r}")
            return bool(v)
        if k.kind == "choice":
            if v not in (k.choices or ()):
                raise ConfigError(field, f"expected one of {list(k.choices or ())}, got {v!r}")
            return v
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise ConfigError(field, f"expected a number, got {v!r}")
        if not math.isfinite(float(v)):
            raise ConfigError(field, f"expected a finite number, got {v!r}")
        if k.kind == "int" and float(v) != int(v):
            raise ConfigError(field, f"expected an integer, got {v!r}")
        assert k.low is not None and k.high is not None
        if not (k.low - 1e-9 <= float(v) <= k.high + 1e-9):
            raise ConfigError(field, f"{v!r} is outside [{k.low}, {k.high}]")
        return int(v) if k.kind == "int" else float(v)

    def _project_value(self, k: Knob, current: Any, val: Any, adj: list[Adjustment]) -> Any:
        if k.is_vector:
            keys = list(k.keys or ())
            merged = list(current)
            if isinstance(val, Mapping):
                for key, v in val.items():
                    if str(key) in keys:
                        merged[keys.index(str(key))] = v
                    else:
                        adj.append(Adjustment(field=f"{k.name}.{key}", before=v, after=None,
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
            if v in (k.choices or ()):
                return v
            adj.append(Adjustment(field=field, before=v, after=current, reason="unknown choice"))
            return current
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(v, bool) or not math.isfinite(x):
            adj.append(Adjustment(field=field, before=v, after=current, reason="not a number"))
            return current
        assert k.low is not None and k.high is not None
        y = min(max(x, k.low), k.high)
        if k.kind == "int":
            y = int(round(y))
        if y != x:
            clipped = x < k.low or x > k.high
            adj.append(Adjustment(field=field, before=v, after=y,
                                  reason="clipped to bounds" if clipped else "rounded"))
        return y


def _scalar_schema(k: Knob) -> dict[str, Any]:
    if k.kind == "bool":
        return {"type": "boolean"}
    if k.kind == "choice":
        return {"type": "string", "enum": list(k.choices or ())}
    return {"enum": k.grid()}


def _load(edit: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(edit, Mapping):
        return dict(edit)
    try:
        obj = json.loads(edit)
    except (json.JSONDecodeError, TypeError) as e:
        raise ConfigError("<edit>", f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ConfigError("<edit>", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _f32(x: Any) -> float:
    """A float32 as the shortest decimal that round-trips (0.2, not 0.20000000298...)."""
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def _copy(v: Any) -> Any:
    return list(v) if isinstance(v, list | tuple) else v
