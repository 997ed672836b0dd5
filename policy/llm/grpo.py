"""The GRPO trainee: tunix's RLCluster (vanilla JAX rollout) + GRPOLearner on a task's prompts.

``GRPOTrainee(model, tokenizer, stage, settings)`` trains a tunix Llama or Qwen3 model on a
``policy.llm.stage.Stage``: each step takes ``prompts_per_step`` prompts, samples ``group``
replies each, scores them with the stage's reward (MAPF's: the paper's, from the verifier in
one jitted call) and takes one GRPO update (clip ``epsilon``, KL ``beta`` to the frozen
reference). LoRA (qwix, rank 16) by default, the base being the reference; ``lora_rank=0`` is a
full fine-tune with a reference copy. Every rollout gets its own key (``tunix_adapter``), so a
seed reproduces a run and consecutive steps sample differently. Checkpoints: tunix's orbax
CheckpointManager under ``checkpoint_dir`` (a restarted run resumes from the last one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from policy.llm import tunix_adapter as adapter
from policy.llm.stage import Stage


class GRPOSettings(BaseModel):
    """GRPO hyperparameters (defaults: the CPU preset)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: int = Field(30, ge=1, le=1_000_000, description="GRPO updates.")
    prompts_per_step: int = Field(1, ge=1, le=4096, description="Prompts per step.")
    group: int = Field(4, ge=2, le=64, description="Samples per prompt (GRPO's G).")
    max_new_tokens: int = Field(32, ge=1, le=8192, description="Reply length cap (tokens).")
    max_prompt_tokens: int = Field(320, ge=8, le=32_768, description="Prompt length cap.")
    temperature: float = Field(0.9, gt=0.0, le=5.0, description="Sampling temperature.")
    lora_rank: int = Field(16, ge=0, le=1024, description="LoRA rank (0: full fine-tune).")
    lora_alpha: float = Field(32.0, gt=0.0, le=4096.0, description="LoRA alpha.")
    learning_rate: float = Field(1e-4, gt=0.0, le=1.0, description="Adam learning rate.")
    beta: float = Field(0.04, ge=0.0, le=10.0, description="KL coefficient to the reference.")
    epsilon: float = Field(0.2, gt=0.0, le=1.0, description="PPO-style ratio clip.")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Data order and rollout keys.")
    checkpoint_dir: str | None = Field(None, description="orbax checkpoints (None: none).")
    checkpoint_every: int = Field(10, ge=1, le=1_000_000, description="Steps between saves.")


@dataclass
class StepLog:
    """What each step's reward call saw (the reward is called once per GRPO step)."""

    reward: list[float] = field(default_factory=list)  # mean total reward per step
    accuracy: list[float] = field(default_factory=list)  # mean accuracy reward per step
    valid: list[float] = field(default_factory=list)  # share of replies with reward > 0
    tokens: list[int] = field(default_factory=list)  # completion tokens per step
    clock: list[float] = field(default_factory=list)  # perf_counter at each reward call
    completions: list[list[str]] = field(default_factory=list)

    def step_seconds(self) -> list[float]:
        return list(np.diff(self.clock))


class GRPOTrainee:
    """GRPO on one stage (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any, stage: Stage, settings: GRPOSettings,
                 mesh: Any = None, actor: Any = None):
        """``actor``: an already-built trainable model to keep training (the loop's LLM trainee
        carries its LoRA model over the stages); default: LoRA on ``model`` (or ``model``)."""
        import optax
        from tunix.rl import rl_cluster as rl
        from tunix.rl.grpo.grpo_learner import GRPOConfig, GRPOLearner
        from tunix.rl.rollout.base_rollout import RolloutConfig

        adapter.fix_rope()
        adapter.logits_where_read()
        self.settings, self.stage = settings, stage
        self.tokenizer = adapter.fix_tokenizer(tokenizer)
        self.mesh = adapter.make_mesh() if mesh is None else mesh
        self.log = StepLog()
        s = settings
        if s.lora_rank > 0:
            if actor is None:
                actor = adapter.apply_lora(model, self.mesh, s.lora_rank, s.lora_alpha)
            reference = model
        else:
            from flax import nnx

            actor = model if actor is None else actor
            reference = nnx.clone(actor) if s.beta > 0 else None
        self.actor = actor
        self.prompts = [adapter.chat_prompt(self.tokenizer, m) for m in stage.messages]
        self.prompt_tokens = self._prompt_length()
        opt = optax.adamw(s.learning_rate, b1=0.9, b2=0.99, weight_decay=0.0)
        ckpt = None
        if s.checkpoint_dir:
            import orbax.checkpoint as ocp

            ckpt = ocp.CheckpointManagerOptions(save_interval_steps=s.checkpoint_every,
                                                max_to_keep=2)
        training = rl.RLTrainingConfig(
            actor_optimizer=opt, eval_every_n_steps=10**9, max_steps=s.steps,
            mini_batch_size=s.prompts_per_step, train_micro_batch_size=s.prompts_per_step,
            checkpoint_root_directory=s.checkpoint_dir, checkpointing_options=ckpt,
            pbar_description=None)
        rollout = RolloutConfig(
            max_tokens_to_generate=s.max_new_tokens, max_prompt_length=self.prompt_tokens,
            kv_cache_size=self.prompt_tokens + s.max_new_tokens + 8,
            temperature=s.temperature, top_p=1.0, top_k=None,
            eos_tokens=[int(self.tokenizer.eos_token_id)])
        roles = {r: self.mesh for r in (rl.Role.ACTOR, rl.Role.REFERENCE, rl.Role.ROLLOUT)}
        cluster_cfg = rl.ClusterConfig(role_to_mesh=roles, rollout_engine="vanilla",
                                       offload_to_cpu=False, training_config=training,
                                       rollout_config=rollout)
        with self.mesh:
            self.cluster = rl.RLCluster(actor=actor, reference=reference,
                                        tokenizer=self.tokenizer, cluster_config=cluster_cfg)
        adapter.seed_each_rollout(self.cluster, s.seed)
        algo = GRPOConfig(num_generations=s.group, num_iterations=1, beta=s.beta,
                          epsilon=s.epsilon)
        self.learner = GRPOLearner(self.cluster, algo, reward_fns=[self._reward],
                                   data_shuffle_seed=s.seed)

    def _prompt_length(self) -> int:
        """The padded prompt length: the stage's longest prompt rounded up to 16 tokens.

        Every step pays for the padding three times (prefill, reference and policy passes),
        so a fixed ``max_prompt_tokens`` far above the stage's prompts wastes a sixth of a
        step on SmolLM2's CPU preset; one length per stage keeps one compiled shape."""
        longest = max(len(self.tokenizer(p, add_special_tokens=True)["input_ids"])
                      for p in self.prompts)
        if longest > self.settings.max_prompt_tokens:
            raise ValueError(f"the stage's prompts run to {longest} tokens, above "
                             f"max_prompt_tokens={self.settings.max_prompt_tokens}")
        return min(self.settings.max_prompt_tokens, -(-longest // 16) * 16)

    # ------------------------------------------------------------------------ reward
    def _reward(self, prompts: list[str], completions: list[str], level: Any = None,
                **_: Any) -> list[float]:
        """The stage's reward of each completion against its prompt."""
        idx = np.asarray(level, np.int64).reshape(-1)
        n_tokens = [len(self.tokenizer(c, add_special_tokens=False)["input_ids"])
                    for c in completions]
        progress = len(self.log.reward) / max(self.settings.steps - 1, 1)
        r = self.stage.reward(idx, list(completions), n_tokens, progress)
        self.log.reward.append(float(np.mean(r["total"])))
        self.log.accuracy.append(float(np.mean(r["accuracy"])))
        self.log.valid.append(float(np.mean(r["accuracy"] > 0)))
        self.log.tokens.append(int(sum(n_tokens)))
        self.log.clock.append(time.perf_counter())
        self.log.completions.append(list(completions))
        return [float(x) for x in r["total"]]

    # ------------------------------------------------------------------------ data
    def batches(self, steps: int):
        """``steps`` batches of ``prompts_per_step`` prompts, drawn with the run's seed."""
        rng = np.random.default_rng(self.settings.seed)
        n = len(self.prompts)
        for _ in range(steps):
            idx = rng.choice(n, self.settings.prompts_per_step, replace=n
                             < self.settings.prompts_per_step)
            yield adapter.prompt_batch([self.prompts[i] for i in idx], level=idx)

    def train(self, steps: int | None = None) -> StepLog:
        """Run GRPO for ``steps`` (default ``settings.steps``) updates; returns the log."""
        steps = self.settings.steps if steps is None else steps
        with self.mesh, adapter.prompt_groups(self.settings.group):
            self.learner.train(list(self.batches(steps)))
        return self.log
