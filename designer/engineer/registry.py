"""Every engineer by name, and the one a run's settings build.

`BUILDERS` maps each name of `RunSettings.engineer` to a builder
`(settings, *, folder, backend, task, trainee) -> Engineer`; `NAMES` (the settings' choices)
is derived from it. The model engineers (`llm`, `self`) are built here with their context
builder, their call log in the run folder and, with `--learn`, the learning wrapper; the
engineer classes themselves are `designer.engineer.engineers`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from designer.engineer.engineers import (
    SELF_NEEDS,
    FixedEngineer,
    LearnabilityEngineer,
    LLMEngineer,
    MutateEngineer,
    RandomEngineer,
    RulesEngineer,
    SelfEngineer,
)


def _model_engineer(s: Any, *, folder: Any, backend: Any, task: Any, trainee: Any) -> Any:
    """The `llm` engineer (its backend logged into the run folder) or the `self` engineer."""
    if s.engineer == "self" and (trainee is None
                                 or not callable(getattr(trainee, "export_hf", None))):
        raise ValueError(SELF_NEEDS)
    from designer.engineer.context import ContextBuilder

    learn = getattr(s, "learn", None)
    if learn is not None and learn.enabled:
        if s.engineer == "self":
            raise ValueError("--learn with the self engineer is not supported yet (it would "
                             "train the trainee's own weights on engineer rewards)")
        if s.backend != "transformers":
            raise ValueError("--learn needs --backend transformers (tunix loads the "
                             "engineer's weights)")
    if s.engineer == "self":
        return _self_engineer(s, folder, task, trainee)
    if backend is None:
        from designer.llm.open import open_backend

        backend = open_backend(s, None if folder is None else folder.path / "calls.jsonl")
    guidelines = s.guidelines or (None if task is None else task.guidelines)
    builder = ContextBuilder(s.context, guidelines=guidelines, history_k=s.history_k,
                             history_round0=s.history_round0, token_budget=s.prompt_budget,
                             count_tokens=getattr(backend, "count_tokens", None))
    eng = LLMEngineer(backend, builder, roles=s.roles, n=s.candidates,
                      max_tokens=s.max_tokens, seed=s.seed,
                      curriculum=None if task is None else task.curriculum,
                      edits=s.edit_language)
    if learn is None or not learn.enabled:
        return eng
    return _learning(eng, s, folder)


# Every engineer by name: a builder (settings, *, folder, backend, task, trainee) -> engineer.
BUILDERS: dict[str, Callable[..., Any]] = {
    "fixed": lambda s, **_: FixedEngineer(),
    "dr": lambda s, **_: RandomEngineer(s.seed),
    "learnability": lambda s, **_: LearnabilityEngineer(s.seed, samples=8 * s.candidates,
                                                        n=s.candidates),
    "mutate": lambda s, **_: MutateEngineer(s.seed, n=s.candidates),
    "rules": lambda s, *, task, **_: RulesEngineer(None if task is None else task.curriculum),
    "llm": _model_engineer,
    "self": _model_engineer,
}
NAMES = tuple(BUILDERS)


def make_engineer(settings: Any, folder: Any = None, backend: Any = None, *,
                  task: Any = None, trainee: Any = None) -> Any:
    """The engineer a `RunSettings` names (for `llm`: its backend, logged into the run folder).

    `task` (a `designer.tasks.Task`) gives the family's curriculum and guidelines; without it,
    the default environment's. `trainee`: the LLM trainee, the `self` engineer's model (its
    `export_hf`).
    """
    if settings.engineer not in BUILDERS:
        raise ValueError(f"unknown engineer {settings.engineer!r} (known: {', '.join(NAMES)})")
    return BUILDERS[settings.engineer](settings, folder=folder, backend=backend, task=task,
                                       trainee=trainee)


def _learning(eng: LLMEngineer, s: Any, folder: Any) -> Any:
    """The `llm` engineer wrapped by `designer.engineer.learning.LearningEngineer` (`--learn`)."""
    import tempfile
    from pathlib import Path

    from designer.engineer.learning import ADAPTERS, LearningEngineer

    l_ = s.learn

    def learner() -> Any:
        from policy.llm.engineer_rl import EngineerLearner

        return EngineerLearner(s.model, rank=l_.rank, alpha=l_.alpha, lr=l_.lr, beta=l_.beta,
                               steps=l_.steps)

    root = (Path(tempfile.mkdtemp(prefix="envengineer-learn-")) if folder is None
            else folder.path / ADAPTERS)
    return LearningEngineer(eng, learner, root, floor=s.verify.floor, ceiling=s.verify.ceiling,
                            learn_from=l_.source)


def _self_engineer(s: Any, folder: Any, task: Any, trainee: Any) -> SelfEngineer:
    """The `self` engineer of a run: calls logged into the run folder's `calls.jsonl`, the
    checkpoint exported into `<run>/self_engineer/model` (one folder, replaced each stage),
    with `--adapter`'s LoRA merged over it into `<run>/self_engineer/model+adapter`."""
    import tempfile
    from pathlib import Path

    from designer.engineer.context import ContextBuilder
    from designer.llm.calllog import CallLog

    root = (Path(tempfile.mkdtemp(prefix="envengineer-self-")) if folder is None
            else folder.path / "self_engineer")
    log = CallLog(None if folder is None else folder.path / "calls.jsonl")
    options = {}
    if getattr(s, "adapter", "none") != "none":  # the engineer's LoRA over each export
        from designer.engineer.adapters import announce

        options["adapter"] = announce(s.adapter)
    eng = SelfEngineer(trainee, None, export_dir=root / "model", log=log,
                       backend_options=options, roles=s.roles,
                       n=s.candidates, max_tokens=s.max_tokens, seed=s.seed,
                       curriculum=None if task is None else task.curriculum,
                       edits=s.edit_language)
    guidelines = s.guidelines or (None if task is None else task.guidelines)
    eng.builder = ContextBuilder(s.context, guidelines=guidelines, history_k=s.history_k,
                                 history_round0=s.history_round0, token_budget=s.prompt_budget,
                                 count_tokens=eng.backend.count_tokens)
    return eng
