"""designer: the environment engineer, the stage loop and the `envengineer` command.

What the engineer may touch: only the *editable knobs* of an environment's `ConfigSpace`
(`jaxenv.config_space`), e.g. MAPF's map-size shares, hole and wait ratios. Never the static
`Capacity` (shapes), the trainee's hyperparameters, the reward or rule knobs, or the
validation and held-out data. Every edit is parsed against the space's grammar.

Rooms (docs/architecture.md):
- `designer.engineer`: the engineers, their roles, edits, context and learning;
- `designer.llm`: the LLM backends, their call log and the run's opener;
- `designer.run`: the stage loop, candidate scoring, model selection and the run folder;
- `designer.tasks`: the `Task` seam and one folder per environment family;
- the app: `designer.cli`, `designer.sweep`, `designer.report` and the settings.
"""
