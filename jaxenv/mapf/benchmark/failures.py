"""Failed episodes as text, for a reader and for the environment engineer's context.

Works on any evaluation result with per-instance `valid`, `outcome` (index into `CAUSES`),
`steps`, `levels`, and a recorded trajectory (`trace`: positions [N, T+1, A, 2], `actions`
[N, T, A]), as `policy.evaluate.Evaluator` returns for MAPF-FrozenLake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from jaxenv.mapf.render import render_text
from jaxenv.mapf.rules import CAUSES, DELTAS

ACTION_NAMES = ("stay", "up", "down", "left", "right")


@dataclass
class FailureSample:
    index: int
    cause: str
    size: int
    n_agents: int
    steps: int
    text: str


def trajectory_text(result: Any, i: int) -> str:
    """Instance i as text: the start board (`render_text`), each agent's path, the ending."""
    r = result.numpy()
    lv = jax.tree.map(lambda x: x[i], r.levels)
    k, steps = int(lv.n_agents), int(r.steps[i])
    pos = r.trace[i, :steps + 1, :k].astype(int)
    act = r.actions[i, :steps, :k].astype(int)
    lines = [render_text(lv), f"Trajectory ({steps} steps, outcome: "
             f"{'valid' if r.valid[i] else CAUSES[int(r.outcome[i])]}):"]
    for j in range(k):
        path = " -> ".join(f"({p[0]},{p[1]})" for p in pos[:, j])
        lines.append(f"A{j}: {path}")
    if steps and not r.valid[i] and CAUSES[int(r.outcome[i])] != "timeout":
        last = act[-1]
        moves = []
        for j in range(k):
            tgt = pos[-2, j] + np.asarray(DELTAS)[last[j]]
            moves.append(f"A{j} {ACTION_NAMES[last[j]]} -> ({tgt[0]},{tgt[1]})")
        lines.append(f"Last joint move (step {steps}): " + ", ".join(moves))
    return "\n".join(lines)


def failure_samples(result: Any, k: int = 5, seed: int = 0,
                    distinct_causes: bool = False) -> list[FailureSample]:
    """Up to k failed instances with their text trajectories (needs a recorded result).

    Random among the failures; with `distinct_causes`, one per cause first (in `CAUSES`
    order), so a few samples show different ways of failing.
    """
    if result.trace is None or result.levels is None:
        raise ValueError("failure_samples needs an evaluation recorded with record=True")
    valid = np.asarray(result.valid)
    outcome = np.asarray(result.outcome)
    bad = np.random.default_rng(seed).permutation(np.flatnonzero(~valid))
    if distinct_causes:
        first = [bad[outcome[bad] == c][0] for c in range(1, len(CAUSES))
                 if np.any(outcome[bad] == c)]
        rest = [i for i in bad if i not in set(first)]
        bad = np.asarray(first + rest, dtype=np.int64)
    out = []
    for i in sorted(bad[:k].tolist()):
        out.append(FailureSample(
            index=i, cause=CAUSES[int(outcome[i])], size=int(np.asarray(result.size)[i]),
            n_agents=int(np.asarray(result.n_agents)[i]), steps=int(np.asarray(result.steps)[i]),
            text=trajectory_text(result, i)))
    return out
