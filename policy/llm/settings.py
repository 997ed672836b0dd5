"""Settings of the LLM trainee in the closed loop (`envengineer run --trainee llm`).

Pydantic only (no jax, no tunix), so `designer.settings` can hold them in every run's
`run.json`. Defaults are the CPU preset: SmolLM2-135M (embedded), LoRA rank 16, a few GRPO
steps of 1 prompt x 4 samples per stage, short replies, one validation instance per
(agents, size) cell; `GPU_PRESET` is the paper-sized stage for an accelerator.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LLMTraineeSettings(BaseModel):
    """What one stage of the LLM trainee does (see docs/llm_trainee.md, "In the loop")."""

    # json_schema_extra's "flag": the `envengineer run` flag that sets the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: str | None = Field(None, description="A Llama-family safetensors folder or GGUF file "
                              "(default: the embedded SmolLM2-135M-Instruct).",
                              json_schema_extra={"flag": "llm-model"})
    steps: int = Field(3, ge=1, le=1_000_000, description="GRPO updates per stage.",
                       json_schema_extra={"flag": "llm-steps"})
    prompts_per_step: int = Field(1, ge=1, le=4096, description="Prompts per GRPO update.",
                                  json_schema_extra={"flag": "llm-prompts"})
    group: int = Field(4, ge=2, le=64, description="Samples per prompt (GRPO's G).",
                       json_schema_extra={"flag": "llm-group"})
    instances: int = Field(16, ge=1, le=100_000, description="Levels drawn from the stage's "
                           "config per stage (the GRPO prompts are drawn from them).")
    max_new_tokens: int = Field(96, ge=4, le=8192, description="Reply length cap in training.",
                                json_schema_extra={"flag": "llm-tokens"})
    max_prompt_tokens: int = Field(320, ge=16, le=32_768, description="Prompt length cap in "
                                   "training (the stage's maps must fit).")
    temperature: float = Field(0.9, gt=0.0, le=5.0, description="GRPO sampling temperature.")
    lora_rank: int = Field(16, ge=0, le=1024, description="LoRA rank (0: full fine-tune).",
                           json_schema_extra={"flag": "llm-lora-rank"})
    lora_alpha: float = Field(32.0, gt=0.0, le=4096.0, description="LoRA alpha.")
    learning_rate: float = Field(1e-4, gt=0.0, le=1.0, description="Adam learning rate (GRPO).")
    beta: float = Field(0.04, ge=0.0, le=10.0, description="KL coefficient to the reference.")
    sft_steps: int = Field(0, ge=0, le=1_000_000, description="Warm start: supervised steps on "
                           "solver-optimal plans before the first stage's GRPO (0 = off).",
                           json_schema_extra={"flag": "llm-sft-steps"})
    sft_learning_rate: float = Field(5e-5, gt=0.0, le=1.0, description="Warm-start Adam rate.")
    validation_per_cell: int = Field(1, ge=1, le=1000, description="Validation instances per "
                                     "(agents, size) cell (a stratified subset of the split).",
                                     json_schema_extra={"flag": "llm-val-per-cell"})
    heldout_per_cell: int = Field(1, ge=1, le=1000, description="Held-out instances per cell "
                                  "(the full split is 150 per cell; a subset on a CPU).",
                                  json_schema_extra={"flag": "llm-heldout-per-cell"})
    eval_limit: int | None = Field(None, ge=1, le=100_000, description="At most this many "
                                   "validation (and held-out) instances: a prefix of the "
                                   "stratified order (None: per_cell decides alone).")
    eval_max_new_tokens: int = Field(96, ge=4, le=8192, description="Reply length cap when "
                                     "validating (plans of 5 agents on 10x10 need ~300).",
                                     json_schema_extra={"flag": "llm-eval-tokens"})
    eval_max_prompt_tokens: int = Field(640, ge=16, le=32_768, description="Prompt length cap "
                                        "when validating and verifying (10x10 maps fit).")
    eval_temperature: float = Field(0.0, ge=0.0, le=5.0, description="Sampling temperature of "
                                    "validation and verification (0: greedy).")
    eval_batch: int = Field(32, ge=1, le=4096, description="Prompts per sampler call.")
    verify_levels: int = Field(4, ge=1, le=4096, description="Fresh levels per candidate "
                               "config in verification (its success p).",
                               json_schema_extra={"flag": "llm-verify-levels"})


GPU_PRESET = dict(steps=50, prompts_per_step=8, group=8, instances=4000, max_new_tokens=1024,
                  max_prompt_tokens=1024, validation_per_cell=10, heldout_per_cell=150,
                  eval_max_new_tokens=1024, eval_max_prompt_tokens=1024, eval_batch=256,
                  verify_levels=64)
"""The paper-sized stage (a GPU): the whole held-out split, 4,000 instances per round."""
