"""What GRPO and the SFT warm start train on, from any task: chat prompts, one reference answer
each (the warm start's labels) and the reward of sampled replies. A task builds it (MAPF's:
`designer.tasks.mapf.plans.stages.Stage`); the runtime here knows no task.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Stage(Protocol):
    """One round's prompts, answers and reward."""

    messages: list[list[dict[str, str]]]  # the chat messages of each prompt
    answers: list[str]  # one reference reply per prompt

    def reward(self, idx: np.ndarray, completions: list[str], n_tokens: list[int],
               progress: float) -> dict[str, np.ndarray]:
        """The reward of each completion against prompt `idx[i]` at training progress in
        [0, 1]: at least `total` (what GRPO maximises) and `accuracy` (its task part)."""
        ...
