"""The trainee protocol: what the closed loop calls, whatever learns (a jitted PPO policy, an LLM).

The loop (`designer.run.loop.ClosedLoop`), the engineers and the report never branch on the kind of
trainee; they call only this protocol:

- ``init(key) -> state``; ``train_stage(state, config, key) -> (state, metrics)``: one stage on
  one generator config (the engineer's edit through the `ConfigSpace`);
  ``summarize(metrics, where) -> dict``: the stage's plain numbers, at least ``success_rate``
  (F and the rules engineer read it), after the trainee's own checks (PPO's NaN guard);
- ``steps(state)``: the trainee's experience counter (env steps for PPO, sampled replies for
  the LLM), ``steps_per_stage`` its budget per stage (the context's T module shows both);
- ``evaluate_split(state, validator, key) -> policy.split_eval.SplitEval``: the task's table
  on a frozen split (valid / optimal per agents x size) and per-instance results, so F, the
  report and ``compare`` read every kind the same way;
- ``play_candidates(policy(state), cfgs, key, n_per_config=n)``: fresh levels of each stacked
  candidate config played by the current trainee (an `EvalResult` whose ``valid`` metric is
  success), the scorer `designer.run.scoring.CandidateScorer` turns into learnability;
  ``verify_episodes(requested)`` is how many levels per candidate it plays;
- ``save(directory, state, step)`` / ``restore(directory, state)``: orbax, atomic (a kill -9
  never leaves a checkpoint that a resume would read half-written).

The PPO trainee is what `policy.ppo.make_train` returns (`PPOTrainee`, pure functions); the
LLM trainee is `designer.tasks.mapf.plans.trainee.LLMTrainee`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import jax

from policy.split_eval import SplitEval


class Trainee(Protocol):
    """What the closed loop calls (see the module docstring)."""

    kind: str
    steps_per_stage: int
    play_candidates: Any

    def init(self, key: jax.Array) -> Any: ...

    def train_stage(self, state: Any, config: Any, key: jax.Array) -> tuple[Any, Any]: ...

    def summarize(self, metrics: Any, where: str = "train_stage") -> dict[str, Any]: ...

    def steps(self, state: Any) -> int: ...

    def policy(self, state: Any) -> Any: ...

    def evaluate_split(self, state: Any, validator: Any, key: jax.Array) -> SplitEval: ...

    def verify_episodes(self, requested: int) -> int: ...

    def save(self, directory: str | Path, state: Any, step: int) -> None: ...

    def restore(self, directory: str | Path, state: Any) -> Any: ...
