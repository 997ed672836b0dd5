"""The control validator: a family's frozen split, an env to play it, and the reading of results.

The same shape as MAPF's (`jaxenv.mapf.benchmark.validator`), so `policy.split_eval.evaluate_split`
plays either: `split`, `env`, `levels`, `meta` and `table(result)`. The table is the
robustness table: success % and mean normalised return over the split, how the
episodes ended, and the per-parameter breakdown (`jaxenv.control.sets.summarize`), plus the
per-variant results (so a report can bin any two parameters into a heatmap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from jaxenv.control.registry import family, make
from jaxenv.control.sets import HELDOUT, load_set, summarize


@dataclass
class ControlTable:
    """The robustness table of one split (`summary`: `jaxenv.control.sets.summarize`)."""

    summary: dict[str, Any]
    success: np.ndarray  # [N] bool per variant, in the set's order
    normalized_return: np.ndarray  # [N] float
    outcome: np.ndarray  # [N] int index into the family's outcomes

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        return {**s, "overall": {"n": s["n"], "success": s["success"],
                                 "normalized_return": s["normalized_return"]},
                "per_variant": {"success": self.success.astype(int).tolist(),
                                "normalized_return": np.round(self.normalized_return, 4)
                                .tolist(),
                                "outcome": self.outcome.astype(int).tolist()}}


@dataclass(frozen=True)
class ControlValidator:
    """A frozen split of one family, played by `policy.split_eval.evaluate_split`."""

    name: str
    split: str
    env: Any = field(repr=False)
    levels: Any = field(repr=False)
    meta: dict = field(repr=False)

    def table(self, result: Any) -> ControlTable:
        m = result.metrics
        succ = np.asarray(m["success"], bool)
        nret = np.asarray(m["normalized_return"], np.float64)
        outcome = np.asarray(result.outcome)
        return ControlTable(summarize(self.name, self.meta, succ, nret, outcome), succ, nret,
                            outcome)

    def __hash__(self) -> int:
        return hash((self.name, self.split))


@cache
def load_validator(name: str, split: str = HELDOUT) -> ControlValidator:
    """The validator of one family's split (cached)."""
    levels, meta = load_set(name, split)
    return ControlValidator(name=name, split=split, env=make(name), levels=levels, meta=meta)


def headline(table: dict[str, Any]) -> dict[str, float]:
    """Success % and mean normalised return over the split."""
    o = table["overall"]
    return {"success": float(o["success"]), "normalized_return": float(o["normalized_return"])}


def markdown(table: Any, title: str | None = None) -> str:
    """The robustness table: overall, endings, and success % per parameter bin."""
    t = table.to_dict() if hasattr(table, "to_dict") else table
    fam = family(t["family"])
    lines = [f"### {title}" if title else f"### {fam.gym_id}", "",
             f"{t['n']} variants: success {t['success']:.1f}%, mean normalised return "
             f"{t['normalized_return']:.3f}", ""]
    if "outcomes" in t:
        lines += ["Endings: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in t["outcomes"].items()),
                  ""]
    lines += ["| parameter | " + " | ".join(f"bin {b + 1}" for b in
                                             range(len(next(iter(t["by_param"].values())))))
              + " |", "|---|" + "---|" * len(next(iter(t["by_param"].values())))]
    units = {p.name: p.unit for p in fam.params}
    for name, rows in t["by_param"].items():
        cells = [f"{r['value_lo']:.3g}-{r['value_hi']:.3g}: {r['success']:.0f}%" for r in rows]
        lines.append(f"| {name} ({units[name]}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
