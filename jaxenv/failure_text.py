"""Text shared by every family's F (what the engineer reads about a stage's failures).

MAPF's F (`designer.engineer.context.Failures`) and a control family's (`jaxenv.control.validator.
ControlFailures`) word their tables differently but report two things the same way: the
training stage's own outcomes, from a trainer's stage summary (`policy.ppo.summarize_metrics`:
`success_rate`, the share of outcome 0, and `cause_<outcome>`, the share of every other
outcome), and the most common ways the failed episodes ended. This module sits below both
(jaxenv imports nothing from policy or designer).
"""

from __future__ import annotations

from collections.abc import Mapping


def training_lines(train: Mapping[str, float], *, episodes: str, ok: str,
                   others: str) -> list[str]:
    """The F line on the training stage, e.g. (`episodes="levels"`, `ok="success"`,
    `others="failures"`) "Training levels of this stage: success 40%; failures: hole 30%.";
    outcomes with a zero share are left out. No line for an empty summary."""
    if not train:
        return []
    causes = ", ".join(f"{c[6:]} {100 * v:.0f}%" for c, v in train.items()
                       if c.startswith("cause_") and v > 0)
    return [f"Training {episodes} of this stage: {ok} "
            f"{100 * train.get('success_rate', 0.0):.0f}%"
            + (f"; {others}: {causes}." if causes else ".")]


def top_shares(counts: Mapping[str, int], k: int = 2) -> str:
    """The `k` largest counts as shares of all, e.g. "hole 60%, timeout 40%" (for F's one-line
    summary in the history)."""
    n = max(sum(counts.values()), 1)
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
    return ", ".join(f"{c} {100 * v / n:.0f}%" for c, v in top)
