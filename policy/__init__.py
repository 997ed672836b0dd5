"""policy: trainees for jaxenv environments (one-jit multi-agent PPO, evaluation, checkpoints).

- `policy.network`: the shared actor-critic (IPPO or MAPPO critic);
- `policy.ppo`: `make_train(env, network, hparams)` -> `Trainer` (`init`, `train_stage`,
  `train_seeds`); `policy.sharding.sharded_stage` for many devices;
- `policy.evaluate`: `evaluate` / `Evaluator` (per-instance valid, optimal, ISR, costs,
  failure causes, trajectories) and `failure_samples`; `policy.validation.validate` for the
  held-out table;
- `policy.checkpoint`: orbax save / restore; `policy.guard`: the NaN guard.

Imports only `jaxenv` (see /work/shared/design.md).
"""

from policy.evaluate import EvalResult, Evaluator, evaluate, failure_samples
from policy.guard import NonFiniteError, check_finite
from policy.network import ActorCritic, AgentInput, agent_input, init_params
from policy.ppo import Hparams, RunnerState, Trainer, make_train, summarize

__all__ = [
    "ActorCritic", "AgentInput", "EvalResult", "Evaluator", "Hparams", "NonFiniteError",
    "RunnerState", "Trainer", "agent_input", "check_finite", "evaluate", "failure_samples",
    "init_params", "make_train", "summarize",
]
