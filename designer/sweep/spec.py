"""The sweep's SPEC file: read it within bounds, validate its shape, count its trials.

A SPEC (YAML or TOML, `SweepSpec`, format in docs/sweeps.md) holds `base` run settings, a
`grid` over `RunSettings` fields by dotted path and optional `random` draws. Everything here is
checked before a single trial is built: the file's size, YAML aliases that would expand past
`MAX_NODES` values (or refer to themselves), finite and representable random ranges, a folder
name that stays inside the sweep root, and the trial count (the grid's lengths multiplied by
the draws), computed from the lengths and capped by `max_trials`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DISTS = ("uniform", "loguniform", "randint", "choice")
MAX_BYTES = 1 << 20  # a spec is a few hundred bytes; a megabyte is no spec
MAX_NODES = 100_000  # YAML values with every alias expanded
MAX_TRIALS = 1_000  # the default cap (`max_trials` raises it)
TRIALS_LIMIT = 100_000  # the most `max_trials` may allow: listing that many takes seconds
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # one folder name, never a path
INT64 = 2**63 - 1
FLOAT_BOUND = 1e300  # random bounds beyond it overflow a draw (width or exp)

Bound = Annotated[float, Field(allow_inf_nan=False, ge=-FLOAT_BOUND, le=FLOAT_BOUND)]
IntBound = Annotated[int, Field(ge=-INT64 - 1, le=INT64)]


class SweepError(ValueError):
    """A user error (spec, folder, options, missing Ray): one line for the command line."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dist(Strict):
    """One random draw: exactly one of uniform, loguniform, randint (inclusive) or choice."""

    uniform: tuple[Bound, Bound] | None = None
    loguniform: tuple[Bound, Bound] | None = None
    randint: tuple[IntBound, IntBound] | None = None
    choice: list[Any] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> Dist:
        given = [k for k in DISTS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(DISTS)}")
        bounds = self.uniform or self.loguniform or self.randint
        if bounds is not None and not bounds[0] <= bounds[1]:
            raise ValueError(f"{given[0]} needs [low, high] with low <= high")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise ValueError("loguniform needs low > 0")
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        if self.uniform is not None:
            return float(f"{rng.uniform(*self.uniform):.4g}")
        if self.loguniform is not None:
            lo, hi = np.log(self.loguniform)
            return float(f"{math.exp(rng.uniform(lo, hi)):.4g}")
        if self.randint is not None:
            return int(rng.integers(self.randint[0], self.randint[1], endpoint=True))
        assert self.choice is not None
        return self.choice[int(rng.integers(len(self.choice)))]


def flatten(d: Mapping[str, Any], leaf: Callable[[Any], bool] = lambda v: False,
            prefix: str = "") -> dict[str, Any]:
    """{'trainee': {'lr': x}} -> {'trainee.lr': x} (TOML writes dotted keys as tables)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v and not leaf(v):
            out.update(flatten(v, leaf, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class RandomDraws(Strict):
    """`samples` draws of `params`; draw k is the same in every grid cell (seeds share it)."""

    samples: int = Field(ge=1, le=TRIALS_LIMIT)
    seed: int = Field(0, ge=0, le=INT64)
    params: dict[str, Dist] = Field(min_length=1)

    @field_validator("params", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        is_dist = lambda x: not all(isinstance(y, Mapping) for y in x.values())  # noqa: E731
        return flatten(v, is_dist) if isinstance(v, Mapping) else v


class SweepSpec(Strict):
    """The SPEC file: base settings, a grid over settings, optional random draws."""

    name: str | None = Field(None, min_length=1, max_length=100)
    base: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    random: RandomDraws | None = None
    max_trials: int = Field(MAX_TRIALS, ge=1, le=TRIALS_LIMIT)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, v: str | None) -> str | None:
        if v is not None:
            check_name(v, "name")
        return v

    @field_validator("base", "grid", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        return flatten(v) if isinstance(v, Mapping) else v

    @field_validator("grid")
    @classmethod
    def _lists(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"{k} lists no value")
            seen = [json.dumps(x, sort_keys=True) for x in vals]
            counts = Counter(seen)
            twice = next((x for x, s in zip(vals, seen) if counts[s] > 1), None)
            if twice is not None:
                raise ValueError(f"{k} lists {twice!r} twice")
        return v

    @model_validator(mode="after")
    def _capped(self) -> SweepSpec:
        n = trial_count(self)
        if n > self.max_trials:
            raise ValueError(f"the spec makes {n:,} trials, over max_trials = "
                             f"{self.max_trials:,}: shrink the grid, or raise max_trials "
                             f"(at most {TRIALS_LIMIT:,})")
        return self


def trial_count(spec: SweepSpec) -> int:
    """The number of trials the spec makes, from the grid's lengths (nothing is expanded)."""
    return math.prod(len(v) for v in spec.grid.values()) * (spec.random.samples
                                                             if spec.random else 1)


def check_name(name: str, where: str) -> str:
    """`name` as one folder inside the sweep root, else a ValueError naming `where`."""
    if not NAME.fullmatch(name):
        raise ValueError(f"{where} {name!r} must be one folder name (letters, digits and "
                         "._+-, starting with a letter or digit), not a path")
    return name


def sweep_name(spec: SweepSpec, path: Path) -> str:
    """The sweep's folder name: the spec's `name`, else its file's stem (both checked)."""
    try:
        return check_name(spec.name or path.stem, "name" if spec.name else "the spec's file "
                          "name")
    except ValueError as e:
        raise SweepError(f"spec {path}: {e}") from None


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _describe(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key {where}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def _yaml_nodes(root: Any) -> int:
    """Values in a composed YAML document with every alias expanded, without expanding it:
    a SweepError past `MAX_NODES` (an alias bomb) or on an alias inside its own anchor."""
    import yaml

    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise SweepError("an alias refers to the value that holds it (a recursive "
                             "structure)")
        open_.add(key)
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        n = 1 + sum(size(c) for c in children)
        if n > MAX_NODES:
            raise SweepError(f"its aliases expand to over {MAX_NODES:,} values; write the "
                             "values out or use fewer aliases")
        open_.discard(key)
        sizes[key] = n
        return n

    return size(root)


def _read_yaml(text: str) -> Any:
    """`yaml.safe_load` that sizes the document (aliases expanded) before building it."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _yaml_nodes(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a SPEC (.yaml, .yml or .toml); `SweepError` names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"spec {path} not found")
    kind = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}.get(path.suffix)
    if kind is None:
        raise SweepError(f"spec {path}: use a .yaml, .yml or .toml file")
    if path.stat().st_size > MAX_BYTES:
        raise SweepError(f"spec {path} is over {MAX_BYTES // 1024} KiB: not a sweep spec")
    try:
        text = path.read_text()
        if kind == "TOML":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = _read_yaml(text)
    except SweepError as e:
        raise SweepError(f"spec {path}: {e}") from None
    except Exception as e:  # any parser's error is the user's malformed file
        raise SweepError(f"spec {path} is not valid {kind}: {one_line(e)}") from None
    if not isinstance(data, dict):
        raise SweepError(f"spec {path} must be a mapping with keys name, base, grid, random, "
                         f"max_trials; got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SweepError(f"spec {path}: {_describe(e)}") from None
