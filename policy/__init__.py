"""policy: trainees for jaxenv environments (one-jit multi-agent PPO, evaluation, checkpoints).

- `policy.ppo`: `make_train(env, network, hparams)` -> `PPOTrainee` (`init`, `train_stage`,
  `train_seeds`, `stage`, `summarize`, `evaluate`, and the loop's calls of
  `policy.trainee.Trainee`), built from three reusable phases: `policy.rollout`, `policy.gae`,
  `policy.update`; `policy.sharding.sharded_stage` for many devices;
- `policy.network`: the shared actor-critic (IPPO or MAPPO critic) over `jaxenv.agents.AgentObs`;
  `policy.categorical` / `policy.gaussian`: the action distributions (discrete / continuous);
  `policy.mixer`: attention across the agents of an episode;
- `policy.evaluate`: `Evaluator` / `evaluate` (per-instance metrics, outcomes, trajectories);
  `policy.split_eval.evaluate_split` plays a task validator's frozen split;
- `policy.checkpoint`: orbax save / restore; `policy.guard`: the NaN guard;
- `policy.obs_norm`: running observation statistics (a variable collection of the network).

Works for any environment of the `jaxenv.agents.MultiAgentEnv` protocol (and any gymnax env,
discrete or continuous, as one agent); imports only `jaxenv`'s generic modules.
"""

from policy import categorical, gaussian
from policy.evaluate import EvalResult, Evaluator, evaluate
from policy.guard import NonFiniteError, check_finite
from policy.network import ActorCritic, init_params
from policy.ppo import Hparams, PPOTrainee, RunnerState, make_train, summarize_metrics
from policy.split_eval import SplitEval, evaluate_split

__all__ = [
    "ActorCritic", "EvalResult", "Evaluator", "Hparams", "NonFiniteError", "PPOTrainee",
    "RunnerState", "SplitEval", "categorical", "check_finite", "evaluate", "evaluate_split",
    "gaussian", "init_params", "make_train", "summarize_metrics",
]
