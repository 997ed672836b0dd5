"""policy.llm: the tunix runtime of the LLMs that learn: the paper's trainee (GRPO on whole
plans) and the learning engineer. It knows no environment family: a task hands it prompts, their
answers and a reward (`policy.llm.stage.Stage`; MAPF's: `designer.tasks.mapf.plans`).

- `policy.llm.models`: where the models are (the embedded default, the converted-model cache);
- `policy.llm.tunix_adapter`: the one place that knows tunix 0.1.7's traps (RoPE theta, GGUF
  tokenizer eos/pad, mesh axes, prompt arrays, rollout seeds);
- `policy.llm.grpo`: the GRPO trainer (RLCluster + GRPOLearner, LoRA by default), with an SFT
  warm start (`policy.llm.sft`); `policy.llm.export`: a trained model as a transformers folder;
- `policy.llm.engineer_rl`: the learning engineer's policy-gradient learner.

Nothing here is imported by `import policy`; tunix, transformers and torch load lazily.
"""
