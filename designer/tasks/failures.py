"""F, the failure report of one stage that the engineer reads: what every family's F offers
(`Failures`) and the text all of them share.

Each family words its tables in its own F (`designer.tasks.<family>.failures`) but reports two
things the same way: the training stage's own outcomes, from a trainer's stage summary
(`success_rate`, the share of outcome 0, and `cause_<outcome>`, the share of every other
outcome), and the most common ways the failed episodes ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Failures(Protocol):
    """F of one stage, as the context builder, the history and the rules engineer read it."""

    split: str
    train: dict[str, float]
    trajectories: list[str]

    def summary(self) -> str: ...

    def render(self, *, n_traj: int, sizes: int | None, cells: bool = True) -> str: ...

    def cause_totals(self) -> dict[str, int]: ...

    def failures_by_key(self, knob: str) -> dict[str, float] | None: ...

    def cell_labels(self) -> list[str]:
        """The labels of F's table cells (agents x size, parameter bins), weakest first: what
        a diagnosis of the moves language may name as the weakest."""
        ...


def training_lines(train: Mapping[str, float], *, episodes: str, ok: str,
                   others: str) -> list[str]:
    """The F line on the training stage, e.g. (`episodes="levels"`, `ok="success"`,
    `others="failures"`) "Training levels of this stage: success 40%; failures: hole 30%.";
    outcomes with a share that rounds to 0% are left out. No line for an empty summary."""
    if not train:
        return []
    causes = ", ".join(f"{c[6:]} {100 * v:.0f}%" for c, v in train.items()
                       if c.startswith("cause_") and round(100 * v) > 0)
    return [f"Training {episodes} of this stage: {ok} "
            f"{100 * train.get('success_rate', 0.0):.0f}%"
            + (f"; {others}: {causes}." if causes else ".")]


def top_shares(counts: Mapping[str, int], k: int = 2) -> str:
    """The `k` largest counts as shares of all, e.g. "hole 60%, timeout 40%" (for F's one-line
    summary in the history)."""
    n = max(sum(counts.values()), 1)
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
    return ", ".join(f"{c} {100 * v / n:.0f}%" for c, v in top)
