"""A spec's trials: every grid cell x random draw as validated `RunSettings` and a folder name.

Each trial's values pass `RunSettings`' own validation (the one the command line uses), so a
spec accepts exactly what `envengineer run` accepts; a bad key or value names where it came
from (`grid.trainee.lr = 2.0`, `random.params.seed`, `--backend`). `ablation` sets the paper's
context variants V1-V6.
"""

from __future__ import annotations

import itertools
import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from designer.settings import RunSettings
from designer.sweep.spec import SweepError, SweepSpec, flatten, one_line

ROUND0_FIELD = "history_round0"  # the RunSettings field V3 needs: round 0's config in H
ABLATION: dict[str, tuple[str, bool, str]] = {  # variant: (modules, round 0 in H, the paper's)
    "V1": ("F", False, "F"), "V2": ("F,G", False, "F+G"),
    "V3": ("F,G,H", True, "F+G+H with round 0"), "V4": ("F,G,H", False, "F+G+H"),
    "V5": ("F,G,H,S", False, "F+G+H+S"), "V6": ("F,G,H,T", False, "F+G+H+T")}
MAX_NAME_BYTES = 200  # a trial's folder name (file systems allow 255)


@dataclass(frozen=True)
class Trial:
    """One run of the sweep: its folder name, the spec's values for it and its settings."""

    name: str
    overrides: dict[str, Any]  # grid and random values by dotted path ('ablation': variant)
    settings: RunSettings

    @property
    def cell(self) -> str:
        """The grid cell: every override but the seed (mean ± std are over a cell's seeds)."""
        return ", ".join(f"{k}={v}" for k, v in self.overrides.items() if k != "seed") or "all"

    @property
    def shares_llm_server(self) -> bool:
        return self.settings.engineer == "llm" and self.settings.backend == "openai"


def _check_key(where: str, path: str) -> None:
    """`path` names one RunSettings field (or `ablation`), else SweepError naming `where`."""
    if path == "ablation" and not where.startswith("base"):
        return
    model: type[BaseModel] = RunSettings
    parts = path.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            known = ", ".join(model.model_fields) + (", ablation" if model is RunSettings
                                                     and not where.startswith("base") else "")
            raise SweepError(f"unknown run setting {where} (known here: {known})")
        sub = next((a for a in (field.annotation, *typing.get_args(field.annotation))
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
        nested = sub is not None
        if i < len(parts) - 1 and not nested:
            raise SweepError(f"unknown run setting {where}: {'.'.join(parts[:i + 1])} has no "
                             "sub-settings")
        if i == len(parts) - 1 and nested:
            raise SweepError(f"{where} is a group of settings; name one of its fields, e.g. "
                             f"{where}.{next(iter(sub.model_fields))}")
        if nested:
            model = sub


def _variant(v: Any, where: str) -> dict[str, Any]:
    if v not in ABLATION:
        names = ", ".join(f"{k} ({p})" for k, (_, _, p) in ABLATION.items())
        raise SweepError(f"{where}: unknown ablation variant {v!r} (known: {names})")
    modules, round0, _ = ABLATION[v]
    return {"context": modules, ROUND0_FIELD: round0}


def variant_of(settings: RunSettings) -> str | None:
    """The paper's ablation variant these settings are, if any."""
    round0 = bool(getattr(settings, ROUND0_FIELD))
    return next((k for k, (m, r, _) in ABLATION.items()
                 if m == settings.context and r == round0), None)


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, v in flat.items():
        *parents, leaf = path.split(".")
        d = out
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = v
    return out


def _get(settings: BaseModel, path: str) -> Any:
    v: Any = settings
    for part in path.split("."):
        v = getattr(v, part)
    return v


def _slug(v: Any) -> str:
    s = f"{v:g}" if isinstance(v, float) else str(v)
    return re.sub(r"[^A-Za-z0-9._+-]", "-", s.replace(",", "+"))


def expand(spec: SweepSpec, flags: Mapping[str, Any] | None = None) -> list[Trial]:
    """Every trial of the spec, each with validated settings (`flags` apply to all trials).

    Nothing is launched here: a bad key or value anywhere raises `SweepError` naming it.
    """
    flags = dict(flags or {})
    sources: dict[str, str] = {}
    for key in spec.grid:
        _check_key(f"grid.{key}", key)
        sources[key] = f"grid.{key}"
    params = spec.random.params if spec.random else {}
    for key in params:
        _check_key(f"random.params.{key}", key)
        if key in sources:
            raise SweepError(f"{key} is in both grid and random.params: vary it in one")
        sources[key] = f"random.params.{key}"
    base = flatten(spec.base)
    for key in base:
        _check_key(f"base.{key}", key)
    for key in flags:
        if key in sources:
            raise SweepError(f"--{key.replace('_', '-')} conflicts with {sources[key]}: the "
                             "spec varies it")
    if "ablation" in sources:
        for key in ("context", ROUND0_FIELD):
            if key in sources or key in base:
                where = sources.get(key, f"base.{key}")
                raise SweepError(f"{where} conflicts with {sources['ablation']}: the ablation "
                                 "variant sets the context modules")
    base.update(flags)
    where_base = {k: (f"--{k.replace('_', '-')}" if k in flags else f"base.{k}") for k in base}
    _settings(base, {}, where_base)  # the base alone: errors name base keys, not a trial

    draws: list[dict[str, Any]] = [{}]
    if spec.random:
        rng = np.random.default_rng(spec.random.seed)
        draws = [{k: d.draw(rng) for k, d in params.items()} for _ in range(spec.random.samples)]
    trials: dict[str, Trial] = {}
    for combo in itertools.product(*spec.grid.values()):
        for k, draw in enumerate(draws):
            raw = {**dict(zip(spec.grid, combo)), **draw}
            settings = _settings(base, raw, {**where_base, **sources})
            over = {p: (v if p == "ablation" else _get(settings, p)) for p, v in raw.items()}
            parts = [str(v) if p == "ablation" else f"{p}-{_slug(v)}"
                     for p, v in over.items() if p in spec.grid]
            name = "_".join(parts + ([f"r{k}"] if spec.random else [])) or "base"
            if len(name.encode()) > MAX_NAME_BYTES:
                raise SweepError(f"trial folder name {name[:60]}... is over {MAX_NAME_BYTES} "
                                 "bytes: vary fewer settings or shorter values")
            if name in trials:
                raise SweepError(f"two trials would share the folder {name!r}: "
                                 f"{trials[name].overrides} and {over}")
            trials[name] = Trial(name, over, settings)
    return list(trials.values())


def _settings(base: Mapping[str, Any], raw: Mapping[str, Any],
              where: Mapping[str, str]) -> RunSettings:
    flat = dict(base)
    for path, v in raw.items():
        if path == "ablation":
            flat.update(_variant(v, f"{where[path]} = {v}"))
        else:
            flat[path] = v
    try:
        return RunSettings.model_validate(_nest(flat))
    except ValidationError as e:
        err = e.errors()[0]
        path = ".".join(str(x) for x in err["loc"])
        src = (where.get(path) or (where.get("ablation") if path in ("context", ROUND0_FIELD)
                                   else None) or path or "settings")
        value = f" = {_short(raw[path])}" if path in raw else ""
        raise SweepError(one_line(f"bad value for {src}{value}: {err['msg']}")) from None


def _short(v: Any, limit: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= limit else f"{r[:limit - 3]}..."


def canonical(settings: RunSettings) -> Any:
    """The settings as run.json saves them (plain JSON values)."""
    return json.loads(settings.model_dump_json())
