"""The GRPO LLM trainee behind the loop's trainee protocol (`policy.trainee.Trainee`).

One stage (`train_stage(state, config, key)`):

1. draw ``instances`` levels from the stage's generator config (the engineer's edit through
   the same `ConfigSpace`; the config's agent weights and the run's capacity decide agents and
   maps; the paper trains on 2-agent instances), rendered as the trainee's chat prompt
   (`designer.tasks.mapf.plans.prompt.plan_messages`, eval --llm's wording);
2. the first stage only, with ``sft_steps`` > 0: the warm start on solver-optimal plans;
3. ``steps`` GRPO updates (tunix, LoRA by default) on prompts drawn from those levels, the
   paper's reward from the verifier; the LoRA model carries over from stage to stage.

`evaluate_split(state, validator, key)`: a stratified subset of the split
(``validation_per_cell`` / ``heldout_per_cell`` instances per (agents, size) cell, in
`designer.tasks.mapf.plans.evaluate`'s order when the builder passes its ``select``), one
batched sampler call per ``eval_batch`` prompts (greedy by default), every reply scored in one
verifier call (`jaxenv.mapf.plans.verify_texts`, the scorer of `envengineer eval --llm`), and
the task's own table: the same `SplitEval` the PPO trainee returns, so F, the report and
`compare` read it
unchanged. Failure causes per instance come from the verifier's checks (conflict -> vertex,
hole, out of bounds, anything else -> timeout: the plan never got everyone home).

`play_candidates(state, cfgs, key, n_per_config)`: verification. ``verify_levels`` fresh levels
of each stacked candidate config, whole plans sampled for all of them in one batch, success =
valid.

Checkpoints (orbax, atomic like the PPO trainee's): the LoRA parameters, plus the base model's
parameters when they change (warm start, or a full fine-tune), plus the counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxenv.mapf.config import Capacity
from jaxenv.mapf.level import Level
from jaxenv.mapf.rules import CAUSES
from policy import checkpoint
from policy.evaluate import EvalResult
from policy.llm.settings import LLMTraineeSettings
from policy.split_eval import SplitEval

Select = Callable[..., np.ndarray]  # (meta, per_cell=k, limit=n) -> positions into the split


@dataclass
class LLMState:
    """The trainee's state: the model lives in place (nnx), the counters beside it."""

    base: Any  # the tunix model (the frozen reference under LoRA)
    tokenizer: Any
    folder: Path  # the model's source folder (tokenizer, config: what export_hf copies)
    actor: Any = None  # the trained model (LoRA on `base`); built at the first use
    samples: int = 0  # replies sampled in GRPO so far
    stages: int = 0  # stages trained


def causes_from_checks(valid: np.ndarray, checks: np.ndarray) -> np.ndarray:
    """[N] index into `jaxenv.mapf.rules.CAUSES` from the verifier's [N, 8] checks."""
    from jaxenv.mapf.plans.verify import CHECKS

    c = {name: checks[:, i] for i, name in enumerate(CHECKS)}
    return np.select([valid, ~c["parsable"], ~c["conflict_free"], ~c["no_hole"],
                      ~c["in_bounds"]],
                     [CAUSES.index("none"), CAUSES.index("timeout"), CAUSES.index("vertex"),
                      CAUSES.index("hole"), CAUSES.index("oob")],
                     CAUSES.index("timeout")).astype(np.int32)


def stratified(meta: dict[str, Any], per_cell: int, limit: int | None = None,
               seed: int = 0) -> np.ndarray:
    """The first ``per_cell`` positions of each (agents, size) cell in a seeded shuffle, at
    most ``limit`` (used when no ``select`` is given; the loop passes
    `designer.tasks.mapf.plans.evaluate.select`, the order of `envengineer eval --llm`)."""
    agents, size = np.asarray(meta["agents"]), np.asarray(meta["size"])
    out = []
    for a, s in sorted({(int(a), int(s)) for a, s in zip(agents, size, strict=True)}):
        idx = np.flatnonzero((agents == a) & (size == s))
        out.extend(idx[np.random.default_rng([seed, a, s]).permutation(len(idx))][:per_cell])
    return np.asarray(out[:limit], np.int64)


class LLMTrainee:
    """GRPO on whole plans as a loop trainee (see the module docstring)."""

    kind = "llm"

    def __init__(self, settings: LLMTraineeSettings, cap: Capacity, *, seed: int = 0,
                 select: Select | None = None, loader: Callable[[], tuple] | None = None):
        """``loader``: () -> (tunix model, tokenizer, folder); default
        `tunix_adapter.load_model(settings.model)` (tests pass a tiny model's folder)."""
        self.s, self.cap, self.seed = settings, cap, seed
        self.select = select or stratified
        self.loader = loader
        self.state: LLMState | None = None  # the last state seen (export_hf's default)
        self._sampler: Any = None
        self._mesh: Any = None

    # ---------------------------------------------------------------- protocol: counters
    @property
    def steps_per_stage(self) -> int:
        """Replies sampled by GRPO per stage (the LLM's 'env steps')."""
        return self.s.steps * self.s.prompts_per_step * self.s.group

    def steps(self, state: LLMState) -> int:
        return int(state.samples)

    def policy(self, state: LLMState) -> LLMState:
        return state

    def verify_episodes(self, requested: int) -> int:
        return self.s.verify_levels

    # ---------------------------------------------------------------- model
    @property
    def mesh(self) -> Any:
        if self._mesh is None:
            from policy.llm import tunix_adapter as adapter

            self._mesh = adapter.make_mesh()
        return self._mesh

    def init(self, key: jax.Array) -> LLMState:
        from policy.llm import tunix_adapter as adapter

        if self.loader is not None:
            lm, tok, folder = self.loader()
        else:
            lm, tok, folder = adapter.load_model(self.s.model, mesh=self.mesh)
        adapter.fix_rope()
        adapter.logits_where_read()
        self._sampler = None
        self.state = LLMState(base=lm, tokenizer=adapter.fix_tokenizer(tok), folder=Path(folder))
        return self.state

    def actor(self, state: LLMState) -> Any:
        """The trained model: LoRA on the base (rank > 0) or the base itself (built once)."""
        if state.actor is None:
            from policy.llm import tunix_adapter as adapter

            state.actor = (adapter.apply_lora(state.base, self.mesh, self.s.lora_rank,
                                              self.s.lora_alpha)
                           if self.s.lora_rank > 0 else state.base)
        return state.actor

    def _saves_base(self) -> bool:
        return self.s.lora_rank == 0 or self.s.sft_steps > 0

    # ---------------------------------------------------------------- data
    def _levels(self, key: jax.Array, config: Any, n: int) -> Level:
        from jaxenv.mapf.generator import generate_batch

        return generate_batch(key, config, self.cap, n)

    def _prompts(self, state: LLMState, levels: Level) -> list[str]:
        from designer.tasks.mapf.plans.prompt import plan_messages
        from designer.tasks.mapf.plans.stages import index
        from policy.llm import tunix_adapter as adapter

        n = int(np.asarray(levels.size).shape[0])
        return [adapter.chat_prompt(state.tokenizer, plan_messages(index(levels, i)))
                for i in range(n)]

    def _sample(self, state: LLMState, prompts: list[str], key: jax.Array) -> list[str]:
        """Whole replies for ``prompts`` (validation and verification: one compiled shape)."""
        from policy.llm import tunix_adapter as adapter

        s = self.s
        longest = max(len(state.tokenizer(p, add_special_tokens=False)["input_ids"])
                      for p in prompts)
        if longest > s.eval_max_prompt_tokens:
            raise ValueError(f"a prompt of {longest} tokens exceeds llm.eval_max_prompt_tokens "
                             f"= {s.eval_max_prompt_tokens}; raise it")
        actor = self.actor(state)
        if self._sampler is None or self._sampler[0] is not actor:
            self._sampler = (actor, adapter.PlanSampler(
                actor, state.base.config, state.tokenizer, max_prompt=s.eval_max_prompt_tokens,
                max_new=s.eval_max_new_tokens, batch=min(s.eval_batch, 4096)))
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        with self.mesh:
            return self._sampler[1](prompts, temperature=s.eval_temperature, seed=seed,
                                    prompt_len=longest)

    # ---------------------------------------------------------------- protocol: training
    def train_stage(self, state: LLMState, config: Any, key: jax.Array, *,
                    stage: int = 0) -> tuple[LLMState, dict[str, Any]]:
        from designer.tasks.mapf.plans.prompt import plan_messages
        from designer.tasks.mapf.plans.stages import Stage, index, optimal_plan
        from policy.llm import sft
        from policy.llm.grpo import GRPOSettings, GRPOTrainee

        s = self.s
        k_data, k_seed = jax.random.split(key)
        levels = self._levels(k_data, config, s.instances)
        one = [index(levels, i) for i in range(s.instances)]
        warm = state.stages == 0 and state.actor is None and s.sft_steps > 0
        data = Stage(levels=levels, messages=[plan_messages(lv) for lv in one],
                     answers=[optimal_plan(lv) for lv in one] if warm else [""] * len(one))
        out: dict[str, Any] = {}
        if warm:  # before LoRA: the warm start moves the base (the reference) itself
            losses = sft.warm_start(state.base, state.tokenizer, data, sft.SFTSettings(
                steps=s.sft_steps, learning_rate=s.sft_learning_rate,
                max_len=s.max_prompt_tokens + s.max_new_tokens, seed=self.seed))
            out.update(sft_loss_first=float(losses[0]), sft_loss_last=float(losses[-1]))
        seed = int(jax.random.randint(k_seed, (), 0, 2**31 - 1))
        g = GRPOSettings(steps=s.steps, prompts_per_step=s.prompts_per_step, group=s.group,
                         max_new_tokens=s.max_new_tokens, max_prompt_tokens=s.max_prompt_tokens,
                         temperature=s.temperature, lora_rank=s.lora_rank,
                         lora_alpha=s.lora_alpha, learning_rate=s.learning_rate, beta=s.beta,
                         seed=seed)
        trainer = GRPOTrainee(state.base, state.tokenizer, data, g, mesh=self.mesh,
                              actor=self.actor(state))
        log = trainer.train()
        state.samples += self.steps_per_stage
        state.stages += 1
        self.state = state
        r = np.asarray(log.reward, float)
        out.update({
            "episodes": self.steps_per_stage,  # replies sampled (the PPO summary's episodes)
            "success_rate": float(np.mean(log.valid)) if log.valid else 0.0,
            "mean_reward": float(r.mean()) if r.size else 0.0,
            "reward_first": float(r[0]) if r.size else 0.0,
            "reward_last": float(r[-1]) if r.size else 0.0,
            "mean_accuracy": float(np.mean(log.accuracy)) if log.accuracy else 0.0,
            "mean_reply_tokens": float(np.sum(log.tokens) / max(self.steps_per_stage, 1)),
            "grpo_steps": s.steps,
            "samples": int(state.samples)})
        return state, out

    def summarize(self, metrics: dict[str, Any], where: str = "train_stage") -> dict[str, Any]:
        """`train_stage`'s numbers are already plain: returned as they are."""
        return metrics

    # ---------------------------------------------------------------- protocol: frozen splits
    def evaluate_split(self, state: LLMState, validator: Any, key: jax.Array) -> SplitEval:
        per_cell = (self.s.validation_per_cell if validator.split == "validation"
                    else self.s.heldout_per_cell)
        pos = np.asarray(self.select(validator.meta, per_cell=per_cell,
                                     limit=self.s.eval_limit), np.int64)
        levels = jax.tree.map(lambda x: np.asarray(x)[pos], validator.levels)
        meta = {k: np.asarray(v)[pos] for k, v in validator.meta.items()
                if np.ndim(v) and len(v) == len(validator.meta["agents"])}
        texts = self._sample(state, self._prompts(state, levels), key)
        return self.evaluate_replies(validator, levels, meta, texts)

    @staticmethod
    def evaluate_replies(validator: Any, levels: Level, meta: dict[str, Any],
                         texts: list[Any]) -> SplitEval:
        """The `SplitEval` of replies ``texts`` to ``levels`` (rows ``meta`` of the split)."""
        from jaxenv.mapf.benchmark.report import make_table
        from jaxenv.mapf.plans.verify import verify_texts

        cost = getattr(validator, "cost", "makespan")
        v = verify_texts(levels, texts, cost)
        valid, optimal, checks = (np.asarray(v.valid), np.asarray(v.optimal),
                                  np.asarray(v.checks))
        table = make_table(valid, optimal, meta["agents"], meta["size"], meta["subset"], checks,
                           split=validator.split)
        result = EvalResult(
            metrics={"valid": valid, "optimal": optimal, f"optimal_{cost}": optimal,
                     "size": np.asarray(meta["size"]), "agents": np.asarray(meta["agents"])},
            outcome=causes_from_checks(valid, checks), steps=np.zeros(len(texts), np.int32),
            outcome_names=CAUSES)
        return SplitEval(split=validator.split, table=table, result=result, meta=meta)

    # ---------------------------------------------------------------- protocol: verification
    def play_candidates(self, state: LLMState, cfgs: Any, key: jax.Array, *,
                        n_per_config: int) -> EvalResult:
        """``n_per_config`` fresh levels of each stacked config [k], planned by the trainee
        (config-major order, like `policy.evaluate.Evaluator`); ``valid`` is success."""
        from jaxenv.mapf.generator import generate_many
        from jaxenv.mapf.plans.verify import verify_texts

        k = int(np.asarray(jax.tree.leaves(cfgs)[0]).shape[0])
        rows = jax.tree.map(lambda x: np.repeat(np.asarray(x), n_per_config, axis=0), cfgs)
        k_lv, k_sample = jax.random.split(key)
        levels = jax.device_get(generate_many(jax.random.split(k_lv, k * n_per_config), rows,
                                              self.cap))
        texts = self._sample(state, self._prompts(state, levels), k_sample)
        v = verify_texts(levels, texts)
        valid, checks = np.asarray(v.valid), np.asarray(v.checks)
        return EvalResult(metrics={"valid": valid}, outcome=causes_from_checks(valid, checks),
                          steps=np.zeros(len(texts), np.int32), outcome_names=CAUSES)

    # ---------------------------------------------------------------- protocol: checkpoints
    def _tree(self, state: LLMState) -> dict[str, Any]:
        from flax import nnx

        tree: dict[str, Any] = {"counters": np.asarray([state.samples, state.stages], np.int64)}
        if self._saves_base():
            tree["base"] = nnx.to_pure_dict(nnx.state(state.base, nnx.Param))
        if self.s.lora_rank > 0:
            tree["lora"] = nnx.to_pure_dict(nnx.state(self.actor(state), nnx.LoRAParam))
        return tree

    def save(self, directory: str | Path, state: LLMState, step: int) -> None:
        checkpoint.save(directory, self._tree(state), step=step, max_to_keep=1)

    def restore(self, directory: str | Path, state: LLMState) -> LLMState:
        from flax import nnx

        def put(model: Any, kind: Any, values: Any) -> None:
            st = nnx.state(model, kind)
            nnx.replace_by_pure_dict(st, values)
            nnx.update(model, st)

        got = checkpoint.restore(directory, self._tree(state))
        if "base" in got:
            put(state.base, nnx.Param, got["base"])
            if self.s.lora_rank > 0:
                state.actor = None  # LoRA again, over the restored base
        if "lora" in got:
            put(self.actor(state), nnx.LoRAParam, got["lora"])
        self._sampler = None
        state.samples, state.stages = (int(x) for x in np.asarray(got["counters"]))
        self.state = state
        return state

    # ---------------------------------------------------------------- export
    def export_hf(self, folder: str | Path, state: LLMState | None = None) -> Path:
        """The current model (LoRA merged) as a transformers safetensors folder (for the
        engineer backends); `policy.llm.export` does the writing."""
        from policy.llm.export import export_hf

        state = state or self.state
        if state is None:
            raise ValueError("no trainee state yet: init, train or restore first")
        return Path(export_hf(self.actor(state), state.tokenizer, state.folder, Path(folder)))
