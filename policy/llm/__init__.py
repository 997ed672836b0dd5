"""policy.llm: the paper's own trainee, an LLM trained with GRPO (tunix) on whole MAPF plans.

- `policy.llm.reward`: the paper's reward (accuracy from the jitted verifier + length term,
  weight schedule), batched in JAX; no tunix needed;
- `policy.llm.stages`: stage data from the generator config (prompts, levels, optimal plans),
  CPU and paper presets;
- `policy.llm.tunix_adapter`: the one place that knows tunix 0.1.7's traps (RoPE theta, GGUF
  tokenizer eos/pad, mesh axes, prompt arrays, rollout seeds);
- `policy.llm.grpo`: the GRPO trainer (RLCluster + GRPOLearner, LoRA by default), with an SFT
  warm start (`policy.llm.sft`).

Nothing here is imported by `import policy`; tunix, transformers and torch load lazily.
"""
