"""Every setting of a closed-loop run, validated, described and saved in `run.json`.

`RunSettings` is what `envengineer run` builds from its flags (and what a sweep's SPEC
overrides): the engineer and its LLM backend, the context modules, the preset of editable
knobs, the budget (stages x env steps per stage, the same for every engineer), the seed, the
trainee's capacity and hyperparameters, and the verification's size and choice rule.

One source per setting: a field here carries its default, bounds, description and (`flag`)
its command-line flag, which `designer.cli.flags` generates; `CapacitySettings.build` and
`TraineeSettings.hparams` / `.network` build the environment's capacity, the PPO
hyperparameters and the network from the fields they share by name. Unknown keys and
out-of-range values fail with a pydantic error naming the field; the bounds keep every seed,
budget and batch inside what the jitted programs count without overflow. Runs saved before an
option existed are read through `migrate`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from designer.engineer.context import parse_modules
from designer.engineer.engineers import NAMES as ENGINEERS
from designer.engineer.moves import EDITS, edit_language
from designer.llm import NAMES as BACKENDS
from designer.run.scoring import SIGNALS
from designer.run.selection import SELECT
from designer.trainees import NAMES as TRAINEES
from policy.llm.settings import LLMTraineeSettings

# The LLM trainee's CPU preset: maps of 3x3 and 4x4 (the first config is drawn over them).
LLM_CAPACITY = {"max_size": 4, "max_agents": 2}
SEED_LIMIT = 2**31  # seeds are below this: jax.random.PRNGKey and numpy take them as they are
INT32_MAX = 2**31 - 1  # counts the jitted programs hold (a batch, PPO updates in a run)


def flag(name: str, *, switch: bool = False) -> dict[str, Any]:
    """A field's metadata (`json_schema_extra`): `envengineer run --NAME` sets it; `switch`: a
    flag without a value that turns the field on."""
    return {"flag": name, "switch": switch}


# Options added after runs were saved, with the value those runs had: a saved run.json that
# lacks one ran without it (resuming, comparing or re-evaluating it must rebuild that trainee).
# A key of None is a top-level setting.
ADDED_SINCE: dict[tuple[str | None, str], Any] = {("capacity", "cost_to_go"): False,
                                                  ("capacity", "priority"): False,
                                                  ("capacity", "intent"): False,
                                                  ("trainee", "lr_schedule"): "constant",
                                                  ("trainee", "gae_lambda"): 0.95,
                                                  ("trainee", "clip_eps"): 0.2,
                                                  (None, "select"): "last",
                                                  (None, "edits"): "values"}


# The blocks only some runs carry: block -> (the setting that tags it, the value it needs).
# Elsewhere the block is None: a control run has no MAPF capacity or rules, a PPO run no LLM
# trainee's stage.
BLOCKS: dict[str, tuple[str, str]] = {"capacity": ("env", "mapf"), "task": ("env", "mapf"),
                                      "llm": ("trainee_kind", "llm")}


def upgrade_saved(settings: dict[str, Any]) -> dict[str, Any]:
    """A saved run's settings dict as a run saved today would hold them: the options added
    since filled in as that run had them (`ADDED_SINCE`), the blocks its family or trainee
    kind does not carry (`BLOCKS`; runs saved before held them all) set to None; a copy. The
    one migration of old run folders."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in settings.items()}
    tags = {"env": out.get("env", "mapf"), "trainee_kind": out.get("trainee_kind", "ppo")}
    for block, (tag, value) in BLOCKS.items():
        if tags[tag] != value:
            out[block] = None
    for (section, key), value in ADDED_SINCE.items():
        if section is None:
            out.setdefault(key, value)
        elif out.get(section, {}) is not None:
            out.setdefault(section, {}).setdefault(key, value)
    return out


def migrate(run_json: dict[str, Any]) -> RunSettings:
    """The settings a saved `run.json` holds, as that run had them (`upgrade_saved`)."""
    saved = run_json.get("settings") if isinstance(run_json, dict) else None
    if not isinstance(saved, dict):
        raise ValueError("run.json holds no settings mapping")
    return RunSettings.model_validate(upgrade_saved(saved))


def _exists(path: str, file: bool = False) -> bool:
    """Whether `path` names a file (or folder) here; False for a name no file system holds."""
    try:
        return Path(path).is_file() if file else Path(path).exists()
    except (OSError, ValueError):
        return False


def shared(target: Any, source: BaseModel, **derived: Any) -> Any:
    """`target` (a dataclass) built from the fields of `source` it shares by name, and
    `derived` (the fields a run computes)."""
    names = {f.name for f in dataclasses.fields(target)}
    return target(**{k: getattr(source, k) for k in type(source).model_fields if k in names},
                  **derived)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
                             json_schema_extra=flag("cost-to-go"))
    priority: bool = Field(False, description="MAPF agents also observe which agents in their "
                           "view rank above them (a lower slot index), so that two agents "
                           "contending for a cell can learn who yields "
                           "(jaxenv.mapf.Capacity.priority).", json_schema_extra=flag("priority"))
    # On by default (where the cost-to-go is): it raised the loop's chosen-stage score on the
    # validation split (docs/experiments/trainee.md, "Agents that see where the others are
    # headed").
    intent: bool = Field(True, description="MAPF agents also observe where the other agents in "
                         "their view are headed (the cell of each one's distance-shortening "
                         "move; needs cost_to_go, and is off by default where that is off; "
                         "jaxenv.mapf.Capacity.intent).", json_schema_extra=flag("intent"))

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
    # 2.5e-4 against 5e-4 before: on the validation split (fixed engineer, loop default
    # budget, seeds 0-3) optimal % 43.2 / 21.3 / 12.5 against 39.7 / 17.9 / 9.7 at 3 / 4 / 5
    # agents, valid % the same: with the larger step the later stages slid on validation
    # while training success rose (docs/trainee.md, "The learning rate of the loop's stages").
    lr: float = Field(2.5e-4, gt=0, le=1, description="Adam learning rate.",
                      json_schema_extra=flag("lr"))
    lr_schedule: Literal["constant", "linear"] = Field(
        "constant", description="constant, or linear: the learning rate falls linearly to 0 "
        "over the run's planned stages (PureJaxRL's anneal_lr), so late stages refine the "
        "policy instead of moving it; a run resumed with more stages stays at 0 past the plan.",
                                                       json_schema_extra=flag("lr-schedule"))
    ent_coef: float = Field(0.01, ge=0, le=1, description="Entropy bonus.")
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
                              json_schema_extra=flag("gae-lambda"))
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
                            json_schema_extra=flag("clip-eps"))
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


class RunSettings(Strict):
    env: str = Field("mapf", description="The environment family (designer.tasks.TASKS): mapf, "
                     "or a control task such as cartpole.", json_schema_extra=flag("env"))
    engineer: Literal[ENGINEERS] = Field("llm", description="Who proposes the next config.",
                                         json_schema_extra=flag("engineer"))
    backend: Literal[BACKENDS] = Field("transformers", description="LLM backend (llm only).",
                                       json_schema_extra=flag("backend"))
    model: str | None = Field(None, description="Model path or name (default: SmolLM2-135M).",
                              json_schema_extra=flag("model"))
    base_url: str | None = Field(None, description="OpenAI-compatible server (openai backend).",
                                 json_schema_extra=flag("base-url"))
    roles: Literal["single", "team"] = Field("single", description="One call or analyst, "
                                             "engineer and critic.",
                                             json_schema_extra=flag("roles"))
    context: str = Field("F,G,H,T", description="Context modules shown to the engineer, e.g. "
                         "F,G,H,T (add S for a self-summary).",
                         json_schema_extra=flag("context"))
    preset: Literal["paper", "open"] = Field("paper", description="Which knobs are editable.",
                                             json_schema_extra=flag("preset"))
    candidates: int = Field(4, ge=1, le=64, description="Candidates the engineer proposes.",
                            json_schema_extra=flag("candidates"))
    guidelines: str | None = Field(None, description="A guidelines file (G) replacing the "
                                   "shipped designer/prompts/guidelines.md.",
                                   json_schema_extra=flag("guidelines"))
    history_k: int = Field(3, ge=0, le=100, description="Stages of history (H) shown.")
    history_round0: bool = Field(False, description="Show round 0's config in H too (the "
                                 "paper's ablation V3; off: the model anchors on it).")
    token_budget: int = Field(1600, ge=200, le=1_000_000, description="Prompt token budget.",
                              json_schema_extra=flag("token-budget"))
    edits: Literal[EDITS] = Field("auto", description="The engineer's edit language "
                                  "(designer.engineer.moves): moves (a diagnosis and 1 to 3 "
                                  "moves), values (raw values), or auto: moves for the embedded "
                                  "model and local decoders, values for servers (openai, vllm).",
                                  json_schema_extra=flag("edits"))
    max_tokens: int | None = Field(None, ge=16, le=8192, description="Tokens per LLM reply "
                                   "(default: the edit language's, "
                                   "designer.engineer.moves.MAX_TOKENS).",
                                   json_schema_extra=flag("max-tokens"))
    stages: int = Field(6, ge=1, le=1000, description="Stages (round 0 included).",
                        json_schema_extra=flag("stages"))
    stage_steps: int = Field(4_096_000, ge=1, le=10**12,
                             description="Training env steps per stage.",
                             json_schema_extra=flag("stage-steps"))
    train_minutes: float | None = Field(None, gt=0, description="Also stop once training has "
                                        "taken this long (wall time, training only).")
    heldout_every: int = Field(1, ge=1, le=1000, description="Held-out evaluation every k "
                               "stages (and at the last).", json_schema_extra=flag("heldout-every"))
    select: Literal[SELECT] = Field("validation", description="Which stage's policy is the "
                                    "run's result: validation (the best validation score, "
                                    "designer.run.selection) or last. The held-out split "
                                    "never chooses.", json_schema_extra=flag("select"))
    seed: int = Field(0, ge=0, lt=SEED_LIMIT,
                      description="Seed of round 0's config, training and sampling.",
                      json_schema_extra=flag("seed"))
    capacity: CapacitySettings | None = Field(None, description="The MAPF environment's "
                                              "capacity (env mapf only).")
    trainee_kind: Literal[TRAINEES] = Field("ppo", description="Who learns: ppo (the jitted "
                                            "policy) or llm (whole plans, GRPO with tunix).",
                                            json_schema_extra=flag("trainee"))
    trainee: TraineeSettings = TraineeSettings()
    llm: LLMTraineeSettings | None = Field(None, description="The LLM trainee's stage "
                                           "(trainee_kind llm only).")
    task: TaskSettings | None = Field(None, description="MAPF's pinned rules and rewards (env "
                                      "mapf only).")
    verify: VerifySettings = VerifySettings()
    learn: LearnSettings = LearnSettings()

    @field_validator("context")
    @classmethod
    def _modules(cls, v: str) -> str:
        modules = parse_modules(v)
        if not modules:
            raise ValueError("name at least one context module, e.g. F,G,H,T")
        return ",".join(modules)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None:
            u = urlparse(v)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"not an http(s) URL: {v!r} (e.g. http://localhost:8000/v1)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RunSettings:
        """What no component can run: refused here, before anything is built or written."""
        t = self.trainee
        if t.num_steps % t.num_minibatches:
            raise ValueError("trainee.num_minibatches must divide trainee.num_steps")
        agents = self.capacity.max_agents if self.capacity is not None else 1
        if t.num_envs * t.num_steps * agents > INT32_MAX:
            raise ValueError("envs x rollout steps x agents exceeds 2^31 - 1 (a jitted int32)")
        if self.num_updates * self.stages > INT32_MAX:
            raise ValueError("stages x PPO updates per stage exceeds 2^31 - 1: fewer "
                             "stage_steps or more envs")
        if self.learn.enabled and self.engineer == "self":
            raise ValueError("--learn with the self engineer is not supported yet (it would "
                             "train the trainee's own weights on engineer rewards)")
        if self.learn.enabled and self.engineer != "llm":
            raise ValueError("--learn needs --engineer llm (it trains the engineer's model)")
        if self.learn.enabled and self.backend != "transformers":
            raise ValueError("--learn needs --backend transformers (tunix loads the "
                             "engineer's weights)")
        if self.trainee_kind == "llm" and self.env != "mapf":
            raise ValueError(f"the llm trainee writes MAPF plans; env {self.env!r} has none")
        if self.llm is not None and self.llm.model is not None and not _exists(self.llm.model):
            raise ValueError(f"no such LLM trainee model: {self.llm.model}")
        return self

    @field_validator("env")
    @classmethod
    def _known_env(cls, v: str) -> str:
        from designer.tasks import TASKS

        if v not in TASKS:
            raise ValueError(f"unknown environment {v!r} (known: {', '.join(TASKS)})")
        return v

    @model_validator(mode="before")
    @classmethod
    def _blocks(cls, data: Any) -> Any:
        """The blocks the run's family and trainee kind carry (`BLOCKS`; a block given where it
        does not apply is refused), with the family's trainee and verification defaults
        (``designer.tasks.TRAINEE_DEFAULTS``, ``VERIFY_DEFAULTS``: e.g. the graded signal) and
        the LLM trainee's CPU capacity preset filling the fields the run does not set."""
        if not isinstance(data, dict):
            return data
        from designer import tasks

        env, kind = data.get("env", "mapf"), data.get("trainee_kind", "ppo")
        data = dict(data)
        for block, (tag, value) in BLOCKS.items():
            given = data.get(block)
            if (env if tag == "env" else kind) == value:
                data[block] = {} if given is None else given
            elif given is not None:
                raise ValueError(f"{block} settings apply to {tag} {value} only (this run: "
                                 f"{tag} {env if tag == 'env' else kind})")
        presets = [("trainee", tasks.TRAINEE_DEFAULTS.get(env, {})),
                   ("verify", tasks.VERIFY_DEFAULTS.get(env, {}))]
        if kind == "llm" and data.get("capacity") is not None:
            presets.append(("capacity", LLM_CAPACITY))
        for block, defaults in presets:
            if not defaults:
                continue
            given = data.get(block, {})
            if isinstance(given, BaseModel):
                given = {k: getattr(given, k) for k in given.model_fields_set}
            data[block] = {**defaults, **dict(given)}
        return data

    @field_validator("guidelines")
    @classmethod
    def _guidelines_file(cls, v: str | None) -> str | None:
        if v is not None and not _exists(v, file=True):
            raise ValueError(f"no such guidelines file: {v}")
        return v

    @property
    def edit_language(self) -> str:
        """The language the engineer's replies use (`edits`, with ``auto`` resolved: the
        `self` engineer's checkpoint is a local decoder)."""
        return edit_language(self.edits, "self" if self.engineer == "self" else self.backend)

    @property
    def num_updates(self) -> int:
        """PPO updates per stage: the stage budget in whole updates (at least one)."""
        per = self.trainee.num_envs * self.trainee.num_steps
        return max(1, round(self.stage_steps / per))
