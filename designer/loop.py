"""The stage loop: train a stage, validate now and then, ask the engineer for the next config.

`run_loop(trainer, engineer, first, ...)` carries the trainee's state from stage to stage (a
new config of the same shapes never recompiles), stops at the first budget it meets (stages,
env steps or training wall time), and returns the trainee and one `StageRecord` per stage.
Validation runs on a task validator's frozen split (`policy.validation.validate`); wall time
counts training only (pool generation included), validation is timed apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from designer.engineers import Engineer
from policy.guard import check_finite
from policy.ppo import RunnerState, Trainer
from policy.validation import Validation, validate


@dataclass(frozen=True)
class Budget:
    """When the loop stops: whichever limit comes first."""

    stages: int | None = None
    env_steps: float = math.inf
    train_minutes: float = math.inf

    def spent(self, stage: int, env_steps: int, train_s: float) -> bool:
        return ((self.stages is not None and stage >= self.stages)
                or env_steps >= self.env_steps or train_s >= 60 * self.train_minutes)


@dataclass
class StageContext:
    """What the engineer is shown after a stage."""

    stage: int
    current: dict[str, Any]
    train: dict[str, float]
    validation: Validation | None
    env_steps: int


@dataclass
class StageRecord:
    stage: int
    values: dict[str, Any]
    train: dict[str, float]
    env_steps: int
    train_s: float
    validation: Validation | None = field(default=None, repr=False)
    eval_s: float = 0.0


def run_loop(trainer: Trainer, engineer: Engineer, first: dict[str, Any], *, budget: Budget,
             key: jax.Array, validator: Any = None, validate_every: int = 1,
             on_stage: Callable[[StageRecord], None] | None = None
             ) -> tuple[RunnerState, list[StageRecord]]:
    """Run stages until `budget` is spent (see the module docstring)."""
    space = trainer.env.config_space
    runner = trainer.init(key)
    values = space.validate(first)
    records: list[StageRecord] = []
    train_s = 0.0
    while not budget.spent(len(records), int(runner.env_steps), train_s):
        stage = len(records)
        t = time.perf_counter()
        runner, metrics = trainer.train_stage(runner, space.to_config(values),
                                              jax.random.fold_in(key, stage))
        jax.block_until_ready(runner)
        dt = time.perf_counter() - t
        train_s += dt
        check_finite(metrics, where=f"stage {stage}")
        rec = StageRecord(stage=stage, values=values, train=trainer.summarize(metrics),
                          env_steps=int(runner.env_steps), train_s=dt)
        if validator is not None and ((stage + 1) % validate_every == 0
                                      or budget.spent(stage + 1, rec.env_steps, train_s)):
            t = time.perf_counter()
            rec.validation = validate(runner.params, trainer.network, jax.random.PRNGKey(1),
                                      validator)
            rec.eval_s = time.perf_counter() - t
        records.append(rec)
        if on_stage is not None:
            on_stage(rec)
        proposals = engineer.propose(StageContext(stage=stage, current=values, train=rec.train,
                                                  validation=rec.validation,
                                                  env_steps=rec.env_steps))
        values = space.validate(proposals[0].values)
    return runner, records
