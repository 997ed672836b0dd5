"""designer: the environment engineer, the stage loop and the `envengineer` command.

What the engineer may touch: only the *editable knobs* of an environment's `ConfigSpace`
(`jaxenv.config_space`), e.g. MAPF's map-size shares, hole and wait ratios. Never the static
`Capacity` (shapes), the trainee's hyperparameters, the reward or rule knobs, or the
validation and held-out data. Every edit is parsed against the space's grammar, and what it
proposes is what the next stage trains on.

Modules:
- `designer.engineers`: `Engineer.propose(context) -> list[Proposal]`, and the engineers;
- `designer.backends`: `Backend.generate(messages, schema, n, ...) -> list[Reply]` (LLMs);
- `designer.loop`: the stage loop (train, validate, ask the engineer, continue);
- `designer.cli`: the `envengineer` command.
"""
