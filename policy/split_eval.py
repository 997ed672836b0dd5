"""Frozen-split evaluation: play a task validator's frozen levels in one jitted call, then read
its table.

`evaluate_split(params, network, key, validator)` plays the policy on every level of the
validator's split (e.g. `jaxenv.mapf.benchmark.validator.load_validator("heldout")`, 3,150
levels) with a cached `policy.evaluate.Evaluator`, and returns the per-instance results and the
task's own table (`validator.table`). What the levels are and how results read is the task's
knowledge; this module only plays them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax

from policy.evaluate import EvalResult, Mode, evaluator_for
from policy.network import ActorCritic


@dataclass
class SplitEval:
    split: str
    table: Any  # the validator's table (e.g. jaxenv.mapf.benchmark.report.Table)
    result: EvalResult  # per instance (numpy)
    meta: dict  # the split's metadata


def evaluate_split(params: Any, network: ActorCritic, key: jax.Array, validator: Any, *,
                   mode: Mode = "greedy", record: bool = True, cfg: Any = None) -> SplitEval:
    """Evaluate on the validator's whole split and build its table (see the module docstring).

    The policy's view radius (and, for MAPPO, grid size) must match the validator's env.
    `cfg` (one config of that env) sets the rules the levels are played under (e.g. MAPF's
    goal rule); default: the env's defaults.
    """
    res = evaluator_for(validator.env, network, record)(params, validator.levels, key,
                                                        mode=mode, cfg=cfg).numpy()
    if hasattr(validator, "read"):  # the task reads its episodes (MAPF: the verifier decides)
        res = validator.read(res)
    return SplitEval(split=validator.split, table=validator.table(res), result=res,
                      meta=validator.meta)
