"""F for a control family, what the engineer reads: the training stage's own success, then
where validation success is lost by parameter bin (the weakest bins named), how episodes end,
and a few failed variants summarised as text (their physics, return, length and ending).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from designer.tasks.failures import top_shares, training_lines
from jaxenv.control.registry import family
from jaxenv.control.validator import ControlTable


def bin_label(param: str, row: dict[str, float]) -> str:
    """A parameter bin as F and a diagnosis name it, e.g. "gravity 4-5.6"."""
    return f"{param} {row['value_lo']:.3g}-{row['value_hi']:.3g}"


@dataclass
class ControlFailures:
    """F of one stage for a control family (module docstring)."""

    split: str
    family: str
    n: int
    success: float  # percent
    normalized_return: float
    endings: dict[str, float]  # outcome -> share of the split's episodes
    failed_endings: dict[str, int]  # outcome -> failed episodes that ended so
    by_param: dict[str, list[dict[str, float]]]
    train: dict[str, float]
    trajectories: list[str] = field(default_factory=list)

    def worst_bins(self, k: int = 2) -> list[tuple[str, dict[str, float]]]:
        rows = [(p, r) for p, rs in self.by_param.items() for r in rs if r["n"]]
        return sorted(rows, key=lambda pr: pr[1]["success"])[:k]

    def summary(self) -> str:
        """One line for the history (H): training success, validation, weakest bins, endings."""
        worst = ", ".join(f"{bin_label(p, r)} {r['success']:.0f}%" for p, r in self.worst_bins())
        return (f"training success {100 * self.train.get('success_rate', 0.0):.0f}%; success "
                f"{self.success:.0f}% (worst bins: {worst}); failures end by "
                + top_shares(self.failed_endings))

    def render(self, *, n_traj: int, sizes: int | None, cells: bool = True) -> str:
        """Training success first, then validation. `sizes`: how many parameters' bin rows to
        show (worst first; None all, 0 none); `cells`: also the normalised return per bin."""
        lines = [f"## F: failures on the {self.split} set ({self.n} physics variants)"]
        lines += training_lines(self.train, episodes="episodes", ok="normal end",
                                others="other endings")
        lines += [f"Validation: success {self.success:.0f}%, mean normalised return "
                  f"{self.normalized_return:.2f}.",
                  "How validation episodes ended: " + ", ".join(
                      f"{k} {100 * v:.0f}%" for k, v in self.endings.items()
                      if round(100 * v)) + "."]
        order = sorted(self.by_param, key=lambda p: min(
            (r["success"] for r in self.by_param[p] if r["n"]), default=100.0))
        keep = order if sizes is None else order[:sizes]
        if keep:
            lines.append("Success % by parameter bin (rows: parameter; entries: value range, "
                         "success %" + (" (normalised return)" if cells else "") + "):")
            for p in keep:
                lines.append(f"{p}: " + ", ".join(
                    f"{r['value_lo']:.3g}-{r['value_hi']:.3g} {r['success']:.0f}%"
                    + (f" ({r['normalized_return']:.2f})" if cells else "")
                    for r in self.by_param[p] if r["n"]))
        lines.append("Weakest bins (success %): " + ", ".join(
            f"{bin_label(p, r)} {r['success']:.0f}%" for p, r in self.worst_bins(3)) + ".")
        for i, t in enumerate(self.trajectories[:n_traj]):
            lines += [f"Failed variant {i + 1}: {t}"]
        return "\n".join(lines)

    def cause_totals(self) -> dict[str, int]:
        return dict(self.failed_endings)

    def failures_by_key(self, knob: str) -> dict[str, float] | None:
        return None  # no simplex knob in a control family

    def cell_labels(self) -> list[str]:
        """Every parameter bin with episodes as "param lo-hi", lowest success first."""
        return list(dict.fromkeys(
            f"{p} {r['value_lo']:.3g}-{r['value_hi']:.3g}"
            for p, r in self.worst_bins(k=sum(map(len, self.by_param.values())))))


def control_failures(validation: Any, train: dict[str, float], *, n_traj: int = 3,
                     seed: int = 0) -> ControlFailures:
    """F from a `policy.split_eval.SplitEval` of a `ControlValidator`."""
    t: ControlTable = validation.table
    s, r = t.summary, validation.result
    fam = family(s["family"])
    failed = ~t.success
    endings = s.get("outcomes", {})
    failed_endings = {o: int(np.sum(failed & (t.outcome == i)))
                      for i, o in enumerate(fam.outcomes)}
    values = np.asarray(validation.meta["values"])
    rng = np.random.default_rng(seed)
    traj = []
    bad = np.flatnonzero(failed)
    if bad.size:
        # different endings first, then random failed variants
        picks: list[int] = []
        for i in range(len(fam.outcomes)):
            cand = bad[t.outcome[bad] == i]
            if cand.size:
                picks.append(int(rng.choice(cand)))
        rest = [int(i) for i in rng.permutation(bad) if int(i) not in picks]
        for i in (picks + rest)[:n_traj]:
            phys = ", ".join(f"{p.name} {values[i, k]:.3g} {p.unit}"
                             for k, p in enumerate(fam.params))
            steps = int(np.asarray(r.steps)[i])
            ret = float(np.asarray(r.metrics["return"])[i])
            traj.append(f"{phys}: ended by {fam.outcomes[int(t.outcome[i])]} after {steps} "
                        f"steps, return {ret:.1f}.")
    return ControlFailures(split=validation.split, family=fam.name, n=s["n"],
                           success=s["success"], normalized_return=s["normalized_return"],
                           endings=endings, failed_endings=failed_endings,
                           by_param=s["by_param"], train=dict(train), trajectories=traj)
