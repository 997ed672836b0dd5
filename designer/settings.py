"""Every setting of a closed-loop run, validated, described and saved in `run.json`.

`RunSettings` is what `envengineer run` builds from its flags (and what a sweep's SPEC
overrides): the engineer and its LLM backend, the context modules, the preset of editable
knobs, the budget (stages x env steps per stage, the same for every engineer), the seed, and
the blocks of `designer.stage_settings` (the trainee's capacity and hyperparameters, MAPF's
pinned rules, the verification's size and choice rule, the engineer's learning).

One source per setting: a field carries its default, bounds, description and metadata
(`designer.stage_settings.flag`: its flag, what it needs, the value runs saved before it had).
Unknown keys and out-of-range values fail with a pydantic error naming the field; the bounds
keep every seed, budget and batch inside what the jitted programs count without overflow.
Runs saved before an option existed are read through `migrate`.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field, field_validator, model_validator

from designer.engineer.context import parse_modules
from designer.engineer.moves import EDITS, TOKEN_BUDGET, edit_language
from designer.engineer.registry import NAMES as ENGINEERS
from designer.llm import NAMES as BACKENDS
from designer.run.selection import SELECT
from designer.stage_settings import (
    INT32_MAX,
    SEED_LIMIT,
    CapacitySettings,
    LearnSettings,
    Strict,
    TaskSettings,
    TraineeSettings,
    VerifySettings,
    flag,
    metadata,
)
from designer.trainees import NAMES as TRAINEES
from policy.llm.settings import LLMTraineeSettings

# The LLM trainee's CPU preset: maps of 3x3 and 4x4 (the first config is drawn over them).
LLM_CAPACITY = {"max_size": 4, "max_agents": 2}

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


class RunSettings(Strict):
    env: str = Field("mapf", description="The environment family (designer.tasks.TASKS): mapf, "
                     "or a control task such as cartpole.", json_schema_extra=flag("env"))
    engineer: Literal[ENGINEERS] = Field("llm", description="Who proposes the next config.",
                                         json_schema_extra=flag("engineer"))
    backend: Literal[BACKENDS] = Field("transformers", description="LLM backend (llm only).",
                                       json_schema_extra=flag("backend"))
    model: str | None = Field(None, description="Model path or name (default: SmolLM2-135M).",
                              json_schema_extra=flag("model"))
    adapter: str = Field("auto", description="The engineer's LoRA adapter (llm engineer "
                         "on transformers, or self, over the trainee's checkpoint): none (the "
                         "base model), shipped (the one in "
                         "the package, designer/engineer/adapters), a shipped name, a "
                         ".safetensors file, or auto: the shipped one where the engineer is the "
                         "embedded model (llm, transformers, no --model, no --learn), else "
                         "none.", json_schema_extra=flag("adapter", legacy="none"))
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
    token_budget: int | None = Field(None, ge=200, le=1_000_000, description="Prompt token "
                                     "budget (default: the edit language's, "
                                     "designer.engineer.moves.TOKEN_BUDGET).",
                                     json_schema_extra=flag("token-budget"))
    edits: Literal[EDITS] = Field("auto", description="The engineer's edit language "
                                  "(designer.engineer.moves): moves (a diagnosis and 1 to 3 "
                                  "moves), values (raw values), or auto: moves for the embedded "
                                  "model and local decoders, values for servers (openai, vllm).",
                                  json_schema_extra=flag("edits", legacy="values"))
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
                                    "never chooses.",
                                    json_schema_extra=flag("select", legacy="last"))
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
        if self.adapter != "none" and self.learn.enabled:
            raise ValueError("--adapter with --learn: start the learning from the adapter "
                             "with --learn-from FILE instead (the learner owns the LoRA)")
        merged = self.engineer == "self" or (self.engineer == "llm"
                                             and self.backend == "transformers")
        if self.adapter != "none" and not merged:
            raise ValueError("--adapter needs --engineer llm and --backend transformers, or "
                             "--engineer self (the adapter is merged into the model's weights)")
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
    def _adapter_auto(cls, data: Any) -> Any:
        """``adapter: auto`` (the default) resolved, so that a saved run names the adapter it
        used: the shipped adapter's name where the engineer is the embedded model it was
        trained on, ``none`` elsewhere (another engineer, backend or model, or a run whose
        learner starts from the base)."""
        if not isinstance(data, dict) or data.get("adapter", "auto") != "auto":
            return data
        from designer.engineer import adapters

        learn = data.get("learn") or {}
        learning = learn.get("enabled", False) if isinstance(learn, dict) \
            else getattr(learn, "enabled", False)
        embedded = (data.get("engineer", "llm") == "llm"
                    and data.get("backend", "transformers") == "transformers"
                    and data.get("model") is None and not learning)
        name = adapters.SHIPPED if embedded and adapters.SHIPPED in adapters.shipped() \
            else adapters.NONE
        return {**data, "adapter": name}

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

    @field_validator("adapter")
    @classmethod
    def _adapter(cls, v: str) -> str:
        from designer.engineer.adapters import resolve

        resolve(v)  # a ValueError naming what exists
        return v

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
    def prompt_budget(self) -> int:
        """The prompt's token budget: `token_budget`, or the edit language's default."""
        return TOKEN_BUDGET[self.edit_language] if self.token_budget is None \
            else self.token_budget

    @property
    def num_updates(self) -> int:
        """PPO updates per stage: the stage budget in whole updates (at least one)."""
        per = self.trainee.num_envs * self.trainee.num_steps
        return max(1, round(self.stage_steps / per))


def _blocks_of(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Field name -> block model, for the fields of `model` that hold a block (or None)."""
    return {name: kind for name, info in model.model_fields.items()
            for kind in (info.annotation, *typing.get_args(info.annotation))
            if isinstance(kind, type) and issubclass(kind, BaseModel)}


# Options added after runs were saved, with the value those runs had (the fields' `legacy`
# metadata): a saved run.json that lacks one ran without it (resuming, comparing or
# re-evaluating it must rebuild that trainee). A section of None is a top-level setting.
ADDED_SINCE: dict[tuple[str | None, str], Any] = {
    **{(None, k): v for k, v in metadata(RunSettings, "legacy").items()},
    **{(block, k): v for block, model in _blocks_of(RunSettings).items()
       for k, v in metadata(model, "legacy").items()}}
