"""The trainee protocol: what the closed loop calls, whatever learns (a jitted PPO policy, an LLM).

The loop (`designer.run.loop.ClosedLoop`), the engineers and the report never branch on the kind of
trainee; they call only this protocol:

- ``init(key) -> state``; ``train_stage(state, config, key, stage=k) -> (state, summary)``:
  one stage on one generator config (the engineer's edit through the `ConfigSpace`); the
  summary holds at least ``success_rate`` (F and the rules engineer read it);
- ``steps(state)``: the trainee's experience counter (env steps for PPO, sampled replies for
  the LLM), ``steps_per_stage`` its budget per stage (the context's T module shows both);
- ``validate(state, validator, key) -> policy.validation.Validation``: the task's table
  (valid / optimal per agents x size) and per-instance results, so F, the report and
  ``compare`` read every kind the same way;
- ``evaluator(policy(state), cfgs, key, n_per_config=n)``: fresh levels of each stacked
  candidate config played by the current trainee (an `EvalResult` whose ``valid`` metric is
  success), the scorer `designer.run.scoring.CandidateScorer` turns into learnability;
  ``verify_episodes(requested)`` is how many levels per candidate it plays;
- ``save(directory, state, step)`` / ``restore(directory, state)``: orbax, atomic (a kill -9
  never leaves a checkpoint that a resume would read half-written).

`PPOTrainee` wraps `policy.ppo.make_train` unchanged (same numbers, same checkpoint layout);
the LLM trainee is `designer.tasks.mapf.plans.trainee.LLMTrainee`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import jax

from policy import checkpoint
from policy.evaluate import Evaluator
from policy.guard import check_finite
from policy.ppo import Hparams, make_train
from policy.validation import Validation, validate


class Trainee(Protocol):
    """What the closed loop calls (see the module docstring)."""

    kind: str
    steps_per_stage: int
    evaluator: Any

    def init(self, key: jax.Array) -> Any: ...

    def train_stage(self, state: Any, config: Any, key: jax.Array, *,
                    stage: int = 0) -> tuple[Any, dict[str, Any]]: ...

    def steps(self, state: Any) -> int: ...

    def policy(self, state: Any) -> Any: ...

    def validate(self, state: Any, validator: Any, key: jax.Array) -> Validation: ...

    def verify_episodes(self, requested: int) -> int: ...

    def save(self, directory: str | Path, state: Any, step: int) -> None: ...

    def restore(self, directory: str | Path, state: Any) -> Any: ...


class PPOTrainee:
    """The jitted PPO trainee (`policy.ppo`) behind the protocol, numbers unchanged.

    ``processes`` (`policy.distributed`): with more than one, a stage trains over every
    process's devices and its state comes back local (process 0 validates and saves it)."""

    kind = "ppo"

    def __init__(self, env: Any, network: Any, hp: Hparams, *, eval_cfg: Any = None,
                 processes: Any = None):
        self.env, self.network, self.hp, self.eval_cfg = env, network, hp, eval_cfg
        self.trainer = make_train(env, network, hp)
        self.multi = processes is not None and processes.count > 1
        self._stage = self.trainer.train_stage
        if self.multi:
            from policy.distributed import make_distributed_stage

            self._stage = make_distributed_stage(self.trainer)
        self.evaluator = Evaluator(env, network, record=False)

    @property
    def steps_per_stage(self) -> int:
        return self.hp.num_updates * self.hp.steps_per_update

    def init(self, key: jax.Array) -> Any:
        return self.trainer.init(key)

    def train_stage(self, state: Any, config: Any, key: jax.Array, *,
                    stage: int = 0) -> tuple[Any, dict[str, Any]]:
        state, metrics = self._stage(state, config, key)
        jax.block_until_ready(state)
        if self.multi:
            from policy.distributed import to_local

            state, metrics = to_local((state, metrics))
        check_finite(metrics, where=f"stage {stage}")
        return state, self.trainer.summarize(metrics)

    def steps(self, state: Any) -> int:
        return int(state.env_steps)

    def policy(self, state: Any) -> Any:
        return state.params

    def validate(self, state: Any, validator: Any, key: jax.Array) -> Validation:
        return validate(state.params, self.network, key, validator, cfg=self.eval_cfg)

    def verify_episodes(self, requested: int) -> int:
        return requested

    def save(self, directory: str | Path, state: Any, step: int) -> None:
        checkpoint.save(directory, state, step=step, max_to_keep=1)

    def restore(self, directory: str | Path, state: Any) -> Any:
        return checkpoint.restore(directory, state)
