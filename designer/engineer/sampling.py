"""Random configs and random edits of a `ConfigSpace`, on the grid the edit grammar uses.

`random_values(space, rng, base)`: every editable knob drawn uniformly (numbers from their grid,
simplex weights from a flat Dirichlet, choices and booleans uniformly); fixed knobs keep `base`.
It draws round 0's config (the same for every engineer at a seed, as in the paper) and domain
randomisation's configs. `mutate_values(space, rng, values)`: a small random edit (ACCEL's
"mutate"): one to `max_knobs` editable knobs, each moved a few grid steps (simplex: some weight
moved between two keys), so random edits are judged by the same verification as the LLM's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def _draw(knob: Any, rng: np.random.Generator) -> Any:
    if knob.kind == "bool":
        return bool(rng.integers(2))
    if knob.kind == "choice":
        return knob.choices[int(rng.integers(len(knob.choices)))]
    if knob.kind == "simplex":
        w = rng.dirichlet(np.ones(len(knob.keys)))
        return [float(x) for x in w]
    grid = knob.grid()
    n = len(knob.keys) if knob.is_vector else 1
    vals = [grid[int(i)] for i in rng.integers(len(grid), size=n)]
    return vals if knob.is_vector else vals[0]


def random_values(space: Any, rng: np.random.Generator,
                  base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A uniformly random config over the editable knobs (fixed knobs from `base`/default)."""
    out = dict(space.default() if base is None else base)
    for k in space.knobs:
        if k.editable:
            out[k.name] = _draw(k, rng)
    return space.validate(out)


def _nudge(knob: Any, value: Any, rng: np.random.Generator, max_steps: int) -> Any:
    if knob.kind in ("bool", "choice"):
        return _draw(knob, rng)
    if knob.kind == "simplex":
        w = np.asarray(value, float)
        i, j = rng.choice(len(w), size=2, replace=False)
        moved = min(w[i], float(rng.uniform(0.05, 0.25)))
        w[i] -= moved
        w[j] += moved
        return [float(x) for x in w / w.sum()]
    grid = np.asarray(knob.grid(), float)

    def step(x: float) -> Any:
        at = int(np.argmin(np.abs(grid - x)))
        to = int(np.clip(at + rng.integers(-max_steps, max_steps + 1), 0, len(grid) - 1))
        return int(grid[to]) if knob.kind == "int" else float(grid[to])

    if not knob.is_vector:
        return step(float(value))
    out = list(value)
    for i in rng.choice(len(out), size=int(rng.integers(1, len(out) + 1)), replace=False):
        out[int(i)] = step(float(out[int(i)]))
    return out


def mutate_values(space: Any, rng: np.random.Generator, values: Mapping[str, Any], *,
                  max_knobs: int = 2, max_steps: int = 3) -> dict[str, Any]:
    """A small random edit of `values` (see the module docstring); always a valid config."""
    editable = [k for k in space.knobs if k.editable]
    out = dict(values)
    if not editable:
        return space.validate(out)
    n = int(rng.integers(1, min(max_knobs, len(editable)) + 1))
    for i in rng.choice(len(editable), size=n, replace=False):
        k = editable[int(i)]
        out[k.name] = _nudge(k, out[k.name], rng, max_steps)
    return space.validate(out)
