"""The paper's results table from per-instance evaluation results.

``make_table(valid, optimal, agents, size, subset, split=...)`` aggregates per-instance flags
into:

- valid % and optimal % per agent count × map size, and their **mean over sizes** (the
  unweighted mean of the per-size percentages, as the paper reports "mean over map sizes");
- valid % and optimal % per agent count × wait-ratio subset (pooled over sizes), and overall;
- optionally (``checks`` [N, 8], order ``jaxenv.mapf.plans.CHECKS``) the number of instances
  failing each check per agent count × size: the failure breakdown the engineer reads.

``format_markdown(table)`` / ``format_text(table)`` print it; ``Table.to_dict()`` logs it.

Every table carries the name of the split it was computed on (``validation``: tuning;
``heldout``: the published numbers) and prints it in its first line, so a tuning number is
never mistaken for a reported one. A caller that does not say gets ``UNKNOWN_SPLIT``, which is
printed as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from jaxenv.mapf.plans import CHECKS

UNKNOWN_SPLIT = "unknown"
_SPLIT_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


@dataclass(frozen=True)
class Cell:
    n: int
    valid: float  # percent
    optimal: float  # percent, at the table's cost (the optimum of makespan by default)
    optimal_soc: float | None = None  # percent optimal by sum of costs, where given


@dataclass
class Table:
    by_size: dict[int, dict[int, Cell]]  # agents -> size -> cell
    mean_over_sizes: dict[int, Cell]  # agents -> unweighted mean of the by_size percentages
    by_subset: dict[int, dict[float, Cell]]  # agents -> wait ratio -> cell (pooled)
    subset_all: dict[float, Cell]  # wait ratio -> cell, all agents pooled
    overall: Cell
    failures: dict[int, dict[int, dict[str, int]]] = field(default_factory=dict)
    split: str = UNKNOWN_SPLIT  # the frozen split the results come from (module docstring)

    def to_dict(self) -> dict:
        def c(x: Cell) -> dict:
            d = {"n": x.n, "valid": x.valid, "optimal": x.optimal}
            return d if x.optimal_soc is None else {**d, "optimal_soc": x.optimal_soc}
        return {
            "split": self.split,
            "by_size": {str(k): {str(s): c(v) for s, v in d.items()} for k, d in
                        self.by_size.items()},
            "mean_over_sizes": {str(k): c(v) for k, v in self.mean_over_sizes.items()},
            "by_subset": {str(k): {f"{r:.2f}": c(v) for r, v in d.items()} for k, d in
                          self.by_subset.items()},
            "subset_all": {f"{r:.2f}": c(v) for r, v in self.subset_all.items()},
            "overall": c(self.overall),
            "failures": {str(k): {str(s): dict(v) for s, v in d.items()} for k, d in
                         self.failures.items()},
        }


def _cell(valid: np.ndarray, optimal: np.ndarray, soc: np.ndarray | None = None) -> Cell:
    n = int(valid.size)
    nan = float("nan")
    if n == 0:
        return Cell(0, nan, nan, None if soc is None else nan)
    return Cell(n, 100.0 * float(valid.mean()), 100.0 * float(optimal.mean()),
                None if soc is None else 100.0 * float(soc.mean()))


def make_table(valid, optimal, agents, size, subset, checks=None, *,
               split: str = UNKNOWN_SPLIT, optimal_soc=None) -> Table:
    """Aggregate per-instance results (1-D arrays of equal length; ``checks`` [N, 8] bool).

    ``optimal_soc``: optimal by sum of costs as well, where ``optimal`` counts by makespan
    (each cell then carries both).

    ``split``: the name of the split the instances come from (e.g. ``meta["split"]`` of
    ``load_split``); it is printed with the table. A name only (letters, digits, ``_.-``).
    """
    if not isinstance(split, str) or not _SPLIT_NAME.fullmatch(split):
        raise ValueError(f"split must be a short name such as 'validation', got {split!r}")
    valid = np.asarray(valid, bool).reshape(-1)
    optimal = np.asarray(optimal, bool).reshape(-1)
    agents = np.asarray(agents, np.int64).reshape(-1)
    size = np.asarray(size, np.int64).reshape(-1)
    subset = np.round(np.asarray(subset, np.float64).reshape(-1), 4)
    n = valid.size
    if not (optimal.size == agents.size == size.size == subset.size == n):
        raise ValueError("valid, optimal, agents, size and subset must have equal lengths")
    soc = None if optimal_soc is None else np.asarray(optimal_soc, bool).reshape(-1)
    if soc is not None and soc.size != n:
        raise ValueError("optimal_soc must have the length of valid")
    if np.any(optimal & ~valid) or (soc is not None and np.any(soc & ~valid)):
        raise ValueError("an instance is optimal but not valid")

    def cell(mask: np.ndarray) -> Cell:
        return _cell(valid[mask], optimal[mask], None if soc is None else soc[mask])
    if checks is not None:
        checks = np.asarray(checks, bool).reshape(n, len(CHECKS))
    by_size: dict[int, dict[int, Cell]] = {}
    mean: dict[int, Cell] = {}
    by_subset: dict[int, dict[float, Cell]] = {}
    failures: dict[int, dict[int, dict[str, int]]] = {}
    for k in np.unique(agents).tolist():
        mk = agents == k
        by_size[k] = {s: cell(mk & (size == s)) for s in np.unique(size[mk]).tolist()}
        cells = list(by_size[k].values())
        mean[k] = Cell(int(mk.sum()), float(np.mean([c.valid for c in cells])),
                       float(np.mean([c.optimal for c in cells])),
                       None if soc is None else float(np.mean([c.optimal_soc for c in cells])))
        by_subset[k] = {r: cell(mk & (subset == r)) for r in np.unique(subset[mk]).tolist()}
        if checks is not None:
            failures[k] = {s: {name: int((~checks[mk & (size == s), i]).sum())
                               for i, name in enumerate(CHECKS)}
                           for s in by_size[k]}
    subset_all = {r: cell(subset == r) for r in np.unique(subset).tolist()}
    return Table(by_size, mean, by_subset, subset_all, cell(np.ones(n, bool)), failures, split)


def _fmt(c: Cell) -> str:
    if c.n == 0:
        return "-"
    return f"{c.valid:.2f} / {c.optimal:.2f}"


def split_line(table: Table) -> str:
    """How a table names its split: ``split: validation (630 instances)``."""
    return f"split: {table.split} ({table.overall.n} instances)"


def format_markdown(table: Table, title: str | None = None) -> str:
    """Markdown: a heading naming the split (after the title, if any), agents × size (+ mean
    over sizes), agents × subset, failure counts."""
    out: list[str] = [f"### {title} · {split_line(table)}" if title
                      else f"### {split_line(table)}", ""]
    sizes = sorted({s for d in table.by_size.values() for s in d})
    out.append("valid % / optimal % by map size")
    out.append("")
    out.append("| agents | " + " | ".join(f"{s}×{s}" for s in sizes) + " | mean over sizes |")
    out.append("|---" * (len(sizes) + 2) + "|")
    for k in sorted(table.by_size):
        row = [_fmt(table.by_size[k][s]) if s in table.by_size[k] else "-" for s in sizes]
        out.append(f"| {k} | " + " | ".join(row) + f" | **{_fmt(table.mean_over_sizes[k])}** |")
    subsets = sorted(table.subset_all)
    out += ["", "valid % / optimal % by wait-ratio subset", ""]
    out.append("| agents | " + " | ".join(f"wr {r:.2f}" for r in subsets) + " |")
    out.append("|---" * (len(subsets) + 1) + "|")
    for k in sorted(table.by_subset):
        row = [_fmt(table.by_subset[k][r]) if r in table.by_subset[k] else "-" for r in subsets]
        out.append(f"| {k} | " + " | ".join(row) + " |")
    out.append("| all | " + " | ".join(_fmt(table.subset_all[r]) for r in subsets) + " |")
    out += ["", f"overall ({table.overall.n} instances): {_fmt(table.overall)}"]
    if table.failures:
        out += ["", "failed checks (instances) by map size", ""]
        names = [c for c in CHECKS]
        out.append("| agents | size | " + " | ".join(names) + " |")
        out.append("|---" * (len(names) + 2) + "|")
        for k in sorted(table.failures):
            for s in sorted(table.failures[k]):
                f = table.failures[k][s]
                out.append(f"| {k} | {s} | " + " | ".join(str(f[c]) for c in names) + " |")
    return "\n".join(out)


def format_text(table: Table) -> str:
    """Plain fixed-width text (for logs and LLM prompts); the first line names the split."""
    sizes = sorted({s for d in table.by_size.values() for s in d})
    lines = [split_line(table), "valid% / optimal% by agents x size (mean over sizes last)"]
    w = 15
    lines.append("agents " + "".join(f"{s}x{s}".rjust(w) for s in sizes) + "mean".rjust(w))
    for k in sorted(table.by_size):
        row = "".join((_fmt(table.by_size[k][s]) if s in table.by_size[k] else "-").rjust(w)
                      for s in sizes)
        lines.append(f"{k:<7d}" + row + _fmt(table.mean_over_sizes[k]).rjust(w))
    subsets = sorted(table.subset_all)
    lines.append("by wait-ratio subset")
    lines.append("agents " + "".join(f"wr {r:.2f}".rjust(w) for r in subsets))
    for k in sorted(table.by_subset):
        lines.append(f"{k:<7d}" + "".join(
            (_fmt(table.by_subset[k][r]) if r in table.by_subset[k] else "-").rjust(w)
            for r in subsets))
    lines.append("all    " + "".join(_fmt(table.subset_all[r]).rjust(w) for r in subsets))
    lines.append(f"overall ({table.overall.n}): {_fmt(table.overall)}")
    return "\n".join(lines)
