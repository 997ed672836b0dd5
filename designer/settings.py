"""Every setting of a closed-loop run, validated, described and saved in `run.json`.

`RunSettings` is what `envengineer run` builds from its flags (and what a sweep's SPEC
overrides): the engineer and its LLM backend, the context modules, the preset of editable
knobs, the budget (stages x env steps per stage, the same for every engineer), the seed, the
trainee's capacity and hyperparameters, and the verification's size and choice rule.
Unknown keys and out-of-range values fail with a pydantic error naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from designer.engineer.context import parse_modules
from designer.run.scoring import SIGNALS
from designer.run.selection import SELECT
from policy.llm.settings import LLMTraineeSettings

ENGINEERS = ("fixed", "dr", "learnability", "mutate", "rules", "llm", "self")
TRAINEES = ("ppo", "llm")
# The LLM trainee's CPU preset: maps of 3x3 and 4x4 (the first config is drawn over them).
LLM_CAPACITY = {"max_size": 4, "max_agents": 2}
BACKENDS = ("transformers", "llamacpp", "vllm", "openai", "replay")


# Options added after runs were saved, with the value those runs had: a saved run.json that
# lacks one ran without it (resuming, comparing or re-evaluating it must rebuild that trainee).
# A key of None is a top-level setting.
ADDED_SINCE: dict[tuple[str | None, str], Any] = {("capacity", "cost_to_go"): False,
                                                  ("capacity", "priority"): False,
                                                  ("capacity", "intent"): False,
                                                  ("trainee", "lr_schedule"): "constant",
                                                  ("trainee", "gae_lambda"): 0.95,
                                                  (None, "select"): "last"}


def upgrade_saved(settings: dict[str, Any]) -> dict[str, Any]:
    """A saved run's settings dict with the options added since filled in as that run had
    them (see `ADDED_SINCE`); a copy."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in settings.items()}
    for (section, key), value in ADDED_SINCE.items():
        (out if section is None else out.setdefault(section, {})).setdefault(key, value)
    return out


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapacitySettings(Strict):
    max_size: int = Field(10, ge=3, le=32, description="Largest map side (static).")
    max_agents: int = Field(2, ge=1, le=64, description="Agent slots in training (static).")
    view_radius: int = Field(3, ge=0, le=8, description="Radius of each agent's local view.")
    max_steps: int = Field(128, ge=1, le=4096, description="Longest episode (static).")
    # On by default: it won the trainee ablation on the validation split (docs/trainee.md).
    cost_to_go: bool = Field(True, description="MAPF agents also observe their shortest-path "
                             "distance to their goal and which moves shorten it (a BFS per "
                             "level, jaxenv.mapf.Capacity.cost_to_go).")
    priority: bool = Field(False, description="MAPF agents also observe which agents in their "
                           "view rank above them (a lower slot index), so that two agents "
                           "contending for a cell can learn who yields "
                           "(jaxenv.mapf.Capacity.priority).")
    # On by default (where the cost-to-go is): on the validation split it raised the loop's
    # chosen-stage score (valid % + optimal %) from 67.7 to 87.5 over seeds 0-4
    # (docs/trainee.md, "Agents that see where the others are headed").
    intent: bool = Field(True, description="MAPF agents also observe where the other agents in "
                         "their view are headed (the cell of each one's distance-shortening "
                         "move; needs cost_to_go, and is off by default where that is off; "
                         "jaxenv.mapf.Capacity.intent).")

    @model_validator(mode="before")
    @classmethod
    def _intent_follows_the_cost_to_go(cls, data: Any) -> Any:
        """Without the cost-to-go, intent defaults to off (it reads the same distances)."""
        if isinstance(data, dict) and "intent" not in data and data.get("cost_to_go") is False:
            return {**data, "intent": False}
        return data

    @model_validator(mode="after")
    def _intent_reads_the_cost_to_go(self) -> CapacitySettings:
        if self.intent and not self.cost_to_go:
            raise ValueError("intent needs cost_to_go on (it reads the same distances)")
        return self


class TraineeSettings(Strict):
    num_envs: int = Field(1024, ge=1, description="Environments per stage (vmapped).")
    num_steps: int = Field(32, ge=1, description="Rollout length per PPO update.")
    update_epochs: int = Field(1, ge=1, description="PPO epochs per update.")
    num_minibatches: int = Field(4, ge=1, description="Minibatches per epoch (divide num_steps).")
    pool_size: int = Field(512, ge=1, description="Levels in the pool episodes start from.")
    pool_every: int = Field(0, ge=0, description="A fresh pool of levels every this many PPO "
                            "updates (0: one pool per stage), so that a long stage does not "
                            "train on a few hundred levels only.")
    # 2.5e-4 against 5e-4 before: on the validation split (fixed engineer, loop default
    # budget, seeds 0-3) optimal % 43.2 / 21.3 / 12.5 against 39.7 / 17.9 / 9.7 at 3 / 4 / 5
    # agents, valid % the same: with the larger step the later stages slid on validation
    # while training success rose (docs/trainee.md, "The learning rate of the loop's stages").
    lr: float = Field(2.5e-4, gt=0, le=1, description="Adam learning rate.")
    lr_schedule: Literal["constant", "linear"] = Field(
        "constant", description="constant, or linear: the learning rate falls linearly to 0 "
        "over the run's planned stages (PureJaxRL's anneal_lr), so late stages refine the "
        "policy instead of moving it; a run resumed with more stages stays at 0 past the plan.")
    ent_coef: float = Field(0.01, ge=0, le=1, description="Entropy bonus.")
    hidden: int = Field(32, ge=4, le=4096, description="Width of the actor-critic.")
    critic: Literal["ippo", "mappo"] = Field("ippo", description="Independent or central critic.")
    mask_actions: bool = Field(False, description="Mask actions the environment marks "
                               "pointless (MAPF: moves off the grid).")
    mixer: Literal["none", "attention"] = Field(
        "none", description="Agents see each other: an attention layer across the agents of an "
        "episode (policy.mixer), or none (each agent decides from its own input).")
    mixer_radius: float | None = Field(
        None, gt=0, description="Attention only between agents at most this far apart (in the "
        "environment's position units); None: the whole episode.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount of the PPO returns.")
    # 0.99 against PPO's usual 0.95 (which the control families keep): MAPF pays the
    # verifier's cost once, on success, after up to 128 steps, and the longer look-ahead
    # raised the validation score (valid % + optimal %) from 66.6 to 67.7 over seeds 0-4,
    # valid % at 4 / 5 agents by 1.5 each; on the held-out split optimal % rose and valid %
    # stayed level (compare_v7; docs/trainee.md, "GAE's lambda and the batch").
    gae_lambda: float = Field(0.99, ge=0, le=1, description="GAE's lambda: how far the "
                              "advantage looks ahead before it trusts the critic (1: Monte "
                              "Carlo returns, 0: one-step TD).")
    reward_scale: float = Field(1.0, gt=0, le=1000, description="Rewards are multiplied by "
                                "this for learning only (brax's reward_scaling); reports read "
                                "the environment's own rewards.")
    obs_norm: bool = Field(False, description="Standardise the observation vector with running "
                           "mean and variance from the rollouts (policy.obs_norm); the "
                           "statistics are part of the checkpoint.")
    separate_critic: bool = Field(False, description="Give the value head its own torso "
                                  "instead of sharing the policy's (plain ippo critic only).")
    state_std: bool = Field(False, description="Continuous actions: the torso computes the "
                            "Gaussian's log standard deviation per state (brax's choice) "
                            "instead of one learnt parameter, which Adam narrows slowly.")
    clip_value: bool = Field(True, description="Clip the value update to clip_eps around the "
                             "rollout's value (off for returns far larger than 1).")


class TaskSettings(Strict):
    """The rules and reward every stage trains under: pinned, never editable by the engineer."""

    goal_rule: Literal["plan", "freeze"] = Field(
        "plan", description="plan: agents may leave their goal and come back, an episode is "
        "the whole plan the verifier checks (docs/rules.md); freeze: frozen on arrival.")
    success_reward: float = Field(1.0, ge=0, le=10, description="Team reward on success.")
    shaping: float = Field(0.0, ge=0, le=1, description="Reward per cell of progress.")
    # The cost weights' defaults won the ablation on the validation split
    # (benchmarks/results/trainee_ablation.json): optimal % up at 3 and 4 agents.
    soc_cost: float = Field(0.02, ge=0, le=1, description="Weight of the verifier's sum of "
                            "costs, paid on success (each agent its own cost).")
    makespan_cost: float = Field(0.02, ge=0, le=1, description="Weight of the verifier's "
                                 "makespan, paid on success by every agent.")
    conflict_penalty: float = Field(0.0, ge=0, le=10, description="Paid by an agent that "
                                    "breaks a rule (hole, off the grid, vertex or edge "
                                    "conflict), where the episode fails.")

    def pins(self) -> dict[str, object]:
        """The config-space values these settings fix (knob name -> value)."""
        return self.model_dump()


class VerifySettings(Strict):
    k: int = Field(4, ge=1, le=64, description="Candidates per verification call (padded).")
    episodes: int = Field(512, ge=8, le=65536, description="Fresh levels per candidate.")
    floor: float = Field(0.05, ge=0, le=1, description="Never choose a candidate whose p "
                         "(signal) is below this.")
    ceiling: float = Field(0.95, ge=0, le=1, description="Never choose a candidate whose p "
                           "(signal) is above this.")
    signal: Literal[SIGNALS] = Field(
        "success", description="What a candidate's p (floor, ceiling, learnability p(1-p)) is: "
        "success, the share of successful episodes; or return, the mean normalised return in "
        "[0, 1], graded where success is all-or-nothing per distribution (designer.run.scoring). "
        "Default: the family's (designer.tasks.VERIFY_DEFAULTS: return for the control "
        "families, success for MAPF).")


class LearnSettings(Strict):
    """The engineer that learns from verification (`designer.engineer.learning`): GRPO on a LoRA of
    the engineer's own model, its replies' verification scores as rewards."""

    enabled: bool = Field(False, description="Train the llm engineer's model on its "
                          "proposals' verification scores (transformers backend only).")
    source: str | None = Field(None, description="Start from this saved adapter "
                               "(<run>/engineer_lora/stage-XXX.safetensors of an earlier run).")
    rank: int = Field(16, ge=1, le=1024, description="LoRA rank.")
    alpha: float = Field(32.0, gt=0, le=4096, description="LoRA alpha (scale alpha/rank).")
    lr: float = Field(5e-5, gt=0, le=1.0, description="Adam learning rate of the LoRA.")
    beta: float = Field(0.0, ge=0, le=10.0, description="Weight of the KL to the base model.")
    steps: int = Field(1, ge=1, le=100, description="Gradient steps per stage's group.")


class RunSettings(Strict):
    env: str = Field("mapf", description="The environment family (designer.tasks.TASKS): mapf, "
                     "or a control task such as cartpole.")
    engineer: Literal[ENGINEERS] = Field("llm", description="Who proposes the next config.")
    backend: Literal[BACKENDS] = Field("transformers", description="LLM backend (llm only).")
    model: str | None = Field(None, description="Model path or name (default: SmolLM2-135M).")
    base_url: str | None = Field(None, description="OpenAI-compatible server (openai backend).")
    roles: Literal["single", "team"] = Field("single", description="One call or analyst, "
                                             "engineer and critic.")
    context: str = Field("F,G,H,T", description="Context modules shown to the engineer.")
    preset: Literal["paper", "open"] = Field("paper", description="Which knobs are editable.")
    candidates: int = Field(4, ge=1, le=64, description="Candidates the engineer proposes.")
    guidelines: str | None = Field(None, description="A guidelines file (G) replacing the "
                                   "shipped designer/prompts/guidelines.md.")
    history_k: int = Field(3, ge=0, le=100, description="Stages of history (H) shown.")
    history_round0: bool = Field(False, description="Show round 0's config in H too (the "
                                 "paper's ablation V3; off: the model anchors on it).")
    token_budget: int = Field(1600, ge=200, le=1_000_000, description="Prompt token budget.")
    max_tokens: int = Field(320, ge=16, le=8192, description="Tokens per LLM reply.")
    stages: int = Field(6, ge=1, le=1000, description="Stages (round 0 included).")
    stage_steps: int = Field(4_096_000, ge=1, description="Training env steps per stage.")
    train_minutes: float | None = Field(None, gt=0, description="Also stop once training has "
                                        "taken this long (wall time, training only).")
    heldout_every: int = Field(1, ge=1, description="Held-out evaluation every k stages (and "
                               "at the last).")
    select: Literal[SELECT] = Field("validation", description="Which stage's policy is the "
                                    "run's result: validation (the best validation score, "
                                    "designer.run.selection) or last. The held-out split never "
                                    "chooses.")
    seed: int = Field(0, ge=0, description="Seed of round 0's config, training and sampling.")
    capacity: CapacitySettings = CapacitySettings()
    trainee_kind: Literal[TRAINEES] = Field("ppo", description="Who learns: ppo (the jitted "
                                            "policy) or llm (whole plans, GRPO with tunix).")
    trainee: TraineeSettings = TraineeSettings()
    llm: LLMTraineeSettings = Field(default_factory=LLMTraineeSettings,
                                    description="The LLM trainee's stage (trainee_kind llm).")
    task: TaskSettings = TaskSettings()
    verify: VerifySettings = VerifySettings()
    learn: LearnSettings = LearnSettings()

    @field_validator("context")
    @classmethod
    def _modules(cls, v: str) -> str:
        return ",".join(parse_modules(v))

    @field_validator("env")
    @classmethod
    def _known_env(cls, v: str) -> str:
        from designer.tasks import TASKS

        if v not in TASKS:
            raise ValueError(f"unknown environment {v!r} (known: {', '.join(TASKS)})")
        return v

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: Any) -> Any:
        """A family's trainee and verification defaults (``designer.tasks.TRAINEE_DEFAULTS``,
        ``VERIFY_DEFAULTS``: e.g. the graded signal) fill the fields the run does not set."""
        if not isinstance(data, dict):
            return data
        from designer import tasks

        env = data.get("env", "mapf")
        for block, table, model in (("trainee", tasks.TRAINEE_DEFAULTS, TraineeSettings),
                                    ("verify", tasks.VERIFY_DEFAULTS, VerifySettings)):
            defaults = table.get(env, {})
            if not defaults:
                continue
            given = data.get(block, {})
            if isinstance(given, model):
                given = {k: getattr(given, k) for k in given.model_fields_set}
            data = {**data, block: {**defaults, **dict(given)}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _llm_capacity(cls, data: Any) -> Any:
        """The LLM trainee's CPU preset fills the capacity fields the run does not set."""
        if not isinstance(data, dict) or data.get("trainee_kind") != "llm":
            return data
        c = data.get("capacity", {})
        if isinstance(c, CapacitySettings):
            c = {k: getattr(c, k) for k in c.model_fields_set}
        return {**data, "capacity": {**LLM_CAPACITY, **dict(c)}}

    @field_validator("guidelines")
    @classmethod
    def _guidelines_file(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"no such guidelines file: {v}")
        return v

    @property
    def num_updates(self) -> int:
        """PPO updates per stage: the stage budget in whole updates (at least one)."""
        per = self.trainee.num_envs * self.trainee.num_steps
        return max(1, round(self.stage_steps / per))
