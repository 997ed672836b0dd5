"""F for MAPF-FrozenLake: the training stage's own success and causes, then valid % and
optimal % overall and per agents x map size with the weakest cells named, per map size the
count of each failure cause and the whole-plan check each cause breaks, and a few failure
trajectories as text chosen to show different causes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from designer.tasks.failures import top_shares, training_lines
from jaxenv.mapf.benchmark.failures import failure_samples
from jaxenv.mapf.benchmark.validator import CAUSE_CHECK
from jaxenv.mapf.rules import CAUSES


@dataclass
class MAPFFailures:
    """F: the failure breakdown of one stage (see the module docstring)."""

    split: str
    n: int
    valid: float  # percent
    optimal: float  # percent
    by_cell: dict[int, dict[int, tuple[float, float]]]  # agents -> size -> (valid %, optimal %)
    causes_by_size: dict[int, dict[str, int]]  # size -> cause -> failed episodes
    train: dict[str, float]  # the training stage's success rate and cause shares
    trajectories: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the history (H): training success, validation, weakest cells, causes."""
        per_k = ", ".join(f"{k} agents {np.mean([v for v, _ in c.values()]):.0f}%"
                          for k, c in sorted(self.by_cell.items()))
        return (f"training success {100 * self.train.get('success_rate', 0.0):.0f}%; valid "
                f"{self.valid:.0f}% ({per_k}); weakest {self.weakest(2)}; main failures "
                + top_shares(self.cause_totals()))

    def weakest(self, k: int = 3) -> str:
        """The `k` cells of lowest valid %, by the table's labels ("5 agents 9x9 10%, ...")."""
        cells = sorted((c[0], a, s) for a, d in self.by_cell.items() for s, c in d.items())
        return ", ".join(f"{cell_label(a, s)} {v:.0f}%" for v, a, s in cells[:k])

    def cause_totals(self) -> dict[str, int]:
        """Failed validation episodes per cause, over all map sizes."""
        return {c: sum(d.get(c, 0) for d in self.causes_by_size.values()) for c in CAUSES[1:]}

    def failures_by_key(self, knob: str) -> dict[str, float] | None:
        """Failed validation episodes per key of a simplex knob (map sizes), else None."""
        if knob != "size_weights" or not self.causes_by_size:
            return None
        return {str(s): float(sum(d.values())) for s, d in self.causes_by_size.items()}

    def cell_labels(self) -> list[str]:
        """Every agents x size cell as "K agents NxN", lowest valid % first."""
        cells = [(c[0], k, s) for k, d in self.by_cell.items() for s, c in d.items()]
        return [f"{k} agents {s}x{s}" for _, k, s in sorted(cells)]

    def render(self, *, n_traj: int, sizes: int | None, cells: bool = True) -> str:
        """Training success first, then validation: overall, the agents x size table (rows and
        columns labelled), its weakest cells, the causes by map size, failure trajectories."""
        sz = sorted({s for d in self.by_cell.values() for s in d})
        lines = [f"## F: failures on the {self.split} split ({self.n} levels)"]
        lines += training_lines(self.train, episodes="levels", ok="success",
                                others="failures")
        lines.append(f"Validation: valid {self.valid:.0f}%, optimal {self.optimal:.0f}%.")
        if cells:
            lines += ["Valid % / optimal % (rows: agents; columns: map size NxN):",
                      "map size: " + " ".join(f"{s}x{s}" for s in sz)]
            for k, c in sorted(self.by_cell.items()):
                lines.append(f"{k} agents: " + " ".join(
                    f"{c[s][0]:.0f}/{c[s][1]:.0f}" if s in c else "-" for s in sz))
        else:
            lines.append("Valid % by agents (mean over map sizes): " + ", ".join(
                f"{k} agents {np.mean([v for v, _ in c.values()]):.0f}%"
                for k, c in sorted(self.by_cell.items())))
        lines.append(f"Weakest cells (valid %): {self.weakest()}.")
        if sizes != 0:
            worst = sorted(self.causes_by_size, key=lambda s: -sum(
                self.causes_by_size[s].values()))
            keep = sorted(worst if sizes is None else worst[:sizes])
            lines.append("Failed levels (rows: map size; columns: cause; " + ", ".join(
                f"{c} breaks {chk}" for c, chk in CAUSE_CHECK.items()) + "):")
            lines.append("cause: " + " ".join(CAUSES[1:]))
            for s in keep:
                d = self.causes_by_size[s]
                lines.append(f"{s}x{s}: " + " ".join(str(d.get(c, 0)) for c in CAUSES[1:]))
        for i, t in enumerate(self.trajectories[:n_traj]):
            lines += [f"Failure trajectory {i + 1}:", t]
        return "\n".join(lines)


def cell_label(agents: int, size: int) -> str:
    """A cell of F's agents x size table as F and a diagnosis name it, e.g. "3 agents 9x9"."""
    return f"{agents} agents {size}x{size}"


def mapf_failures(validation: Any, train: Mapping[str, float], *, n_traj: int = 3,
                  seed: int = 0) -> MAPFFailures:
    """F from a `policy.split_eval.SplitEval` (recorded) and a trainer's stage summary."""
    t, r = validation.table, validation.result
    by_cell = {k: {s: (c.valid, c.optimal) for s, c in d.items()}
               for k, d in t.by_size.items()}
    outcome, size = np.asarray(r.outcome), np.asarray(r.size)
    failed = ~np.asarray(r.valid)
    causes = {int(s): {c: int(np.sum(failed & (size == s) & (outcome == i)))
                       for i, c in enumerate(CAUSES) if i}
              for s in np.unique(size)}
    traj = []
    if r.trace is not None and failed.any():
        traj = [f.text for f in failure_samples(r, k=n_traj, seed=seed, distinct_causes=True)]
    return MAPFFailures(split=validation.split, n=int(t.overall.n), valid=t.overall.valid,
                    optimal=t.overall.optimal, by_cell=by_cell, causes_by_size=causes,
                    train=dict(train), trajectories=traj)
