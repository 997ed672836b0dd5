"""Model selection: which stage's policy a run hands back, chosen on the validation split.

A run's last stage is not always its best. In the MAPF loop, validation optimal % at 4 and 5
agents peaks after two to four stages and then slides while training success keeps rising
(the 2-agent policy grows cautious, docs/trainee.md), and twice the budget makes the slide
longer, not shorter. The loop therefore hands back the stage whose **validation** score is
highest (`RunSettings.select = "validation"`, the default; `"last"` hands back the last stage
as runs did before). The held-out split takes no part in the choice: it only reports the chosen
policy. The score is the task's (`Task.score`): valid % + optimal % over the whole validation
split for MAPF, the mean normalised return for a control family.
"""

from __future__ import annotations

from collections.abc import Sequence

SELECT = ("validation", "last")


def select_stage(scores: Sequence[float], rule: str) -> int:
    """The index of the chosen stage: the last one under ``"last"``; under ``"validation"``
    the one with the highest score, the later one on a tie (it has trained longer)."""
    if not scores:
        raise ValueError("select_stage: no finished stage to choose from")
    if rule == "last":
        return len(scores) - 1
    if rule != "validation":
        raise ValueError(f"unknown selection rule {rule!r} (known: {', '.join(SELECT)})")
    best = max(scores)
    return max(i for i, s in enumerate(scores) if s == best)
