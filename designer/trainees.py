"""The trainee a `RunSettings` names (`trainee_kind`): the one place that maps the name to a
`policy.trainee.Trainee`, like `make_engineer` for engineers; the loop only calls the protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policy.trainee import Trainee


def build_trainee(settings: Any, env: Any) -> tuple[Any, Any]:
    """The PPO hyperparameters and network a run's trainee settings describe (also used by
    `benchmarks/brax_ppo_compare.py`, so the benchmark measures the loop's trainee)."""
    t = settings.trainee
    hp = t.hparams(settings.num_updates, settings.stages)
    network = t.network(env.num_actions, getattr(env, "action_dim", 0))
    return hp, network


def _ppo(settings: Any, task: Any, processes: Any) -> Trainee:
    from policy.distributed import distribute
    from policy.ppo import make_train

    hp, network = build_trainee(settings, task.env)
    return distribute(make_train(task.env, network, hp, eval_cfg=task.eval_cfg), processes)


def _llm(settings: Any, task: Any, processes: Any) -> Trainee:
    from designer.tasks.mapf.plans.trainee import LLMTrainee

    if task.name != "mapf":
        raise ValueError(f"the llm trainee writes MAPF plans; env {task.name!r} has none")
    if processes is not None and processes.count > 1:
        raise ValueError("the llm trainee runs in one process (no --distributed)")
    from designer.tasks.mapf.plans.evaluate import select

    # the training env's capacity (the config space's), validation in eval --llm's order
    return LLMTrainee(settings.llm, task.env.cap, seed=settings.seed, select=select)


BUILDERS: dict[str, Callable[[Any, Any, Any], Trainee]] = {"ppo": _ppo, "llm": _llm}
NAMES = tuple(BUILDERS)


def make_trainee(settings: Any, task: Any, processes: Any = None) -> Trainee:
    """The trainee of `settings.trainee_kind` for `task` (a `designer.tasks.Task`)."""
    kind = getattr(settings, "trainee_kind", "ppo")
    if kind not in BUILDERS:
        raise ValueError(f"unknown trainee {kind!r} (known: {', '.join(NAMES)})")
    return BUILDERS[kind](settings, task, processes)
