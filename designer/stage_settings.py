"""The blocks of a run's settings (`designer.settings.RunSettings`) and the kit they are
written with.

A block is one part of a run: the MAPF environment's capacity (`CapacitySettings`), the PPO
trainee (`TraineeSettings`), MAPF's pinned rules (`TaskSettings`), candidate scoring
(`VerifySettings`) and the engineer that learns from it (`LearnSettings`). A field carries its
default, bounds and description, and its metadata (`flag`) the rest of what is known of it:
its command-line flag (`designer.cli.flags`), the setting it needs on (`needs`: checked here,
for every block alike) and the value a run saved before it existed had (`legacy`:
`designer.settings.migrate` reads it). `CapacitySettings.build` and `TraineeSettings.hparams`
/ `.network` build the environment's capacity, the PPO hyperparameters and the network from
the fields they share by name (`shared`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from designer.run.scoring import SIGNALS, TRIVIAL

SEED_LIMIT = 2**31  # seeds are below this: jax.random.PRNGKey and numpy take them as they are
INT32_MAX = 2**31 - 1  # counts the jitted programs hold (a batch, PPO updates in a run)
_NEW = object()  # `flag`'s legacy when the field is as old as the settings


def flag(name: str, *, switch: bool = False, needs: str | None = None,
         legacy: Any = _NEW) -> dict[str, Any]:
    """A field's metadata (`json_schema_extra`): `envengineer run --NAME` sets it; `switch`: a
    flag without a value that turns the field on; `needs`: a switch of the same block this one
    reads (refused on without it, off by default where it is set off); `legacy`: the value a
    run saved before the field existed ran with."""
    meta: dict[str, Any] = {"flag": name, "switch": switch}
    if needs is not None:
        meta["needs"] = needs
    if legacy is not _NEW:
        meta["legacy"] = legacy
    return meta


def metadata(model: type[BaseModel], key: str) -> dict[str, Any]:
    """Field name -> the `key` of its metadata (`flag`), for the fields of `model` that set it."""
    return {name: info.json_schema_extra[key] for name, info in model.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and key in info.json_schema_extra}


def shared(target: Any, source: BaseModel, **derived: Any) -> Any:
    """`target` (a dataclass) built from the fields of `source` it shares by name, and
    `derived` (the fields a run computes)."""
    names = {f.name for f in dataclasses.fields(target)}
    return target(**{k: getattr(source, k) for k in type(source).model_fields if k in names},
                  **derived)


class Strict(BaseModel):
    """A block: unknown keys, non-finite numbers and changes after building refused; every
    field's `needs` applied."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _off_without_what_it_needs(cls, data: Any) -> Any:
        """A field whose needed switch is set off defaults to off too."""
        if isinstance(data, dict):
            off = {name: False for name, needed in metadata(cls, "needs").items()
                   if name not in data and data.get(needed) is False}
            data = {**data, **off} if off else data
        return data

    @model_validator(mode="after")
    def _needs_on(self) -> Strict:
        for name, needed in metadata(type(self), "needs").items():
            if getattr(self, name) and not getattr(self, needed):
                raise ValueError(f"{name} needs {needed} on")
        return self


class CapacitySettings(Strict):
    max_size: int = Field(10, ge=3, le=32, description="Largest map side (static).",
                          json_schema_extra=flag("max-size"))
    max_agents: int = Field(2, ge=1, le=64, description="Agent slots in training (static).",
                            json_schema_extra=flag("max-agents"))
    view_radius: int = Field(3, ge=0, le=8, description="Radius of each agent's local view.",
                             json_schema_extra=flag("view-radius"))
    max_steps: int = Field(128, ge=1, le=4096, description="Longest episode (static).",
                           json_schema_extra=flag("max-steps"))
    # On by default: it won the trainee ablation on the validation split (docs/trainee.md).
    cost_to_go: bool = Field(True, description="MAPF agents also observe their shortest-path "
                             "distance to their goal and which moves shorten it (a BFS per "
                             "level, jaxenv.mapf.Capacity.cost_to_go).",
                             json_schema_extra=flag("cost-to-go", legacy=False))
    priority: bool = Field(False, description="MAPF agents also observe which agents in their "
                           "view rank above them (a lower slot index), so that two agents "
                           "contending for a cell can learn who yields "
                           "(jaxenv.mapf.Capacity.priority).",
                           json_schema_extra=flag("priority", legacy=False))
    # On by default (where the cost-to-go is): it raised the loop's chosen-stage score on the
    # validation split (docs/experiments/trainee.md, "Agents that see where the others are
    # headed").
    intent: bool = Field(True, description="MAPF agents also observe where the other agents in "
                         "their view are headed (the cell of each one's distance-shortening "
                         "move; needs cost_to_go, and is off by default where that is off; "
                         "jaxenv.mapf.Capacity.intent).",
                         json_schema_extra=flag("intent", needs="cost_to_go", legacy=False))

    def build(self, capacity: type) -> Any:
        """The MAPF environment's `capacity` (`jaxenv.mapf.Capacity`, handed in by the MAPF
        task) from the fields it shares by name."""
        return shared(capacity, self)


class TraineeSettings(Strict):
    num_envs: int = Field(1024, ge=1, le=2**20, description="Environments per stage (vmapped).",
                          json_schema_extra=flag("envs"))
    num_steps: int = Field(32, ge=1, le=4096, description="Rollout length per PPO update.")
    update_epochs: int = Field(1, ge=1, le=1000, description="PPO epochs per update.")
    num_minibatches: int = Field(4, ge=1, le=4096,
                                 description="Minibatches per epoch (divide num_steps).")
    pool_size: int = Field(512, ge=1, le=2**20,
                           description="Levels in the pool episodes start from.")
    pool_every: int = Field(0, ge=0, le=INT32_MAX, description="A fresh pool of levels "
                            "every this many PPO updates (0: one pool per stage), so that a "
                            "long stage does not train on a few hundred levels only.",
                            json_schema_extra=flag("pool-every"))
    # Half the step it had: with the larger one the later stages slid on the validation split
    # while training success rose (docs/trainee.md, "The learning rate of the loop's stages").
    lr: float = Field(2.5e-4, gt=0, le=1, description="Adam learning rate.",
                      json_schema_extra=flag("lr"))
    lr_schedule: Literal["constant", "linear"] = Field(
        "constant", description="constant, or linear: the learning rate falls linearly to 0 "
        "over the run's planned stages (PureJaxRL's anneal_lr), so late stages refine the "
        "policy instead of moving it; a run resumed with more stages stays at 0 past the plan.",
        json_schema_extra=flag("lr-schedule", legacy="constant"))
    ent_coef: float = Field(0.01, ge=0, le=1, description="Entropy bonus.")
    vf_coef: float = Field(0.5, ge=0, le=10, description="Weight of the value loss in PPO's "
                           "loss.", json_schema_extra=flag("vf-coef", legacy=0.5))
    hidden: int = Field(32, ge=4, le=4096, description="Width of the actor-critic.",
                        json_schema_extra=flag("hidden"))
    critic: Literal["ippo", "mappo"] = Field("ippo", description="Independent or central critic.",
                                             json_schema_extra=flag("critic"))
    mask_actions: bool = Field(False, description="Mask actions the environment marks "
                               "pointless (MAPF: moves off the grid).")
    mixer: Literal["none", "attention"] = Field(
        "none", description="Agents see each other: an attention layer across the agents of an "
        "episode (policy.mixer), or none (each agent decides from its own input).",
                                                json_schema_extra=flag("mixer"))
    mixer_radius: float | None = Field(
        None, gt=0, description="Attention only between agents at most this far apart (in the "
        "environment's position units); None: the whole episode.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount of the PPO returns.",
                         json_schema_extra=flag("gamma"))
    # Longer than PPO's usual 0.95 (which the control families keep): MAPF pays the
    # verifier's cost once, on success, at the end of the episode, and the longer look-ahead
    # raised the validation score (docs/experiments/trainee.md, "GAE's lambda and the batch").
    gae_lambda: float = Field(0.99, ge=0, le=1, description="GAE's lambda: how far the "
                              "advantage looks ahead before it trusts the critic (1: Monte "
                              "Carlo returns, 0: one-step TD).",
                              json_schema_extra=flag("gae-lambda", legacy=0.95))
    reward_scale: float = Field(1.0, gt=0, le=1000, description="Rewards are multiplied by "
                                "this for learning only (brax's reward_scaling); reports read "
                                "the environment's own rewards.",
                                json_schema_extra=flag("reward-scale"))
    obs_norm: bool = Field(False, description="Standardise the observation vector with running "
                           "mean and variance from the rollouts (policy.obs_norm); the "
                           "statistics are part of the checkpoint.",
                           json_schema_extra=flag("obs-norm"))
    separate_critic: bool = Field(False, description="Give the value head its own torso "
                                  "instead of sharing the policy's (plain ippo critic only).")
    state_std: bool = Field(False, description="Continuous actions: the torso computes the "
                            "Gaussian's log standard deviation per state (brax's choice) "
                            "instead of one learnt parameter, which Adam narrows slowly.")
    clip_eps: float = Field(0.2, gt=0, le=10, description="PPO's clip of the probability "
                            "ratio (and of the value update, with clip_value).",
                            json_schema_extra=flag("clip-eps", legacy=0.2))
    clip_value: bool = Field(True, description="Clip the value update to clip_eps around the "
                             "rollout's value (off for returns far larger than 1).")

    def hparams(self, num_updates: int, stages: int) -> Any:
        """The `policy.ppo.Hparams` of a stage of `num_updates` PPO updates in a run of
        `stages` (the linear schedule anneals over all of them)."""
        from policy.ppo import Hparams

        anneal = stages * num_updates if self.lr_schedule == "linear" else 0
        return shared(Hparams, self, num_updates=num_updates, anneal_updates=anneal)

    def network(self, num_actions: int, action_dim: int = 0) -> Any:
        """The `policy.network.ActorCritic` for an environment's action space."""
        from policy.network import ActorCritic

        return shared(ActorCritic, self, num_actions=num_actions, action_dim=action_dim)


class TaskSettings(Strict):
    """The rules and reward every stage trains under: pinned, never editable by the engineer."""

    goal_rule: Literal["plan", "freeze"] = Field(
        "plan", description="plan: agents may leave their goal and come back, an episode is "
        "the whole plan the verifier checks (docs/rules.md); freeze: frozen on arrival.",
                                                 json_schema_extra=flag("goal-rule"))
    success_reward: float = Field(1.0, ge=0, le=10, description="Team reward on success.")
    shaping: float = Field(0.0, ge=0, le=1, description="Reward per cell of progress.")
    # The cost weights' defaults won the ablation on the validation split
    # (docs/experiments/trainee.md, "Ablation").
    soc_cost: float = Field(0.02, ge=0, le=1, description="Weight of the verifier's sum of "
                            "costs, paid on success (each agent its own cost).",
                            json_schema_extra=flag("soc-cost"))
    makespan_cost: float = Field(0.02, ge=0, le=1, description="Weight of the verifier's "
                                 "makespan, paid on success by every agent.",
                                 json_schema_extra=flag("makespan-cost"))
    conflict_penalty: float = Field(0.0, ge=0, le=10, description="Paid by an agent that "
                                    "breaks a rule (hole, off the grid, vertex or edge "
                                    "conflict), where the episode fails.",
                                    json_schema_extra=flag("conflict-penalty"))

    def pins(self) -> dict[str, object]:
        """The config-space values these settings fix (knob name -> value)."""
        return self.model_dump()


class VerifySettings(Strict):
    k: int = Field(4, ge=1, le=64, description="Candidates per verification call (padded).",
                   json_schema_extra=flag("verify-k"))
    episodes: int = Field(512, ge=8, le=65536, description="Fresh levels per candidate.",
                          json_schema_extra=flag("verify-episodes"))
    floor: float = Field(0.05, ge=0, le=1, description="Never choose a candidate whose p "
                         "(signal) is below this.")
    ceiling: float = Field(0.95, ge=0, le=1, description="Never choose a candidate whose p "
                           "(signal) is above this.")
    tie: float = Field(0.01, ge=0, le=1, description="Learnabilities (or, under the hardest "
                       "rule, p's) within this of the best count as equal; the proposer's "
                       "order decides among them.", json_schema_extra=flag("verify-tie"))
    trivial: Literal[TRIVIAL] = Field(
        "keep", description="When every candidate's p is above the ceiling (all trivial): keep "
        "the current config (keep), or take the candidate of lowest p, ties within the tie to "
        "the proposer's order (hardest): a policy that finds every neighbour of its config "
        "trivial found its own config trivial too, and keeping it repeats a stage that teaches "
        "little.", json_schema_extra=flag("verify-trivial"))
    signal: Literal[SIGNALS] = Field(
        "success", description="What a candidate's p (floor, ceiling, learnability p(1-p)) is: "
        "success, the share of successful episodes; or return, the mean normalised return in "
        "[0, 1], graded where success is all-or-nothing per distribution (designer.run.scoring). "
        "Default: the family's (designer.tasks.VERIFY_DEFAULTS: return for the control "
        "families, success for MAPF).", json_schema_extra=flag("verify-signal"))


class LearnSettings(Strict):
    """The engineer that learns from verification (`designer.engineer.learning`): GRPO on a LoRA of
    the engineer's own model, its replies' verification scores as rewards."""

    enabled: bool = Field(False, description="Train the llm engineer's model on its "
                          "proposals' verification scores (transformers backend only).",
                          json_schema_extra=flag("learn", switch=True))
    source: str | None = Field(None, description="Start from this saved adapter "
                               "(<run>/engineer_lora/stage-XXX.safetensors of an earlier run).",
                               json_schema_extra=flag("learn-from"))
    rank: int = Field(16, ge=1, le=1024, description="LoRA rank.")
    alpha: float = Field(32.0, gt=0, le=4096, description="LoRA alpha (scale alpha/rank).")
    lr: float = Field(5e-5, gt=0, le=1.0, description="Adam learning rate of the LoRA.",
                      json_schema_extra=flag("learn-lr"))
    beta: float = Field(0.0, ge=0, le=10.0, description="Weight of the KL to the base model.")
    steps: int = Field(1, ge=1, le=100, description="Gradient steps per stage's group.")
