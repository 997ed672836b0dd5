"""The trainee a `RunSettings` names (`trainee_kind`): the one place that maps the name to a
`policy.trainee.Trainee`, like `make_engineer` for engineers; the loop only calls the protocol."""

from __future__ import annotations

from typing import Any

from policy.trainee import Trainee

TRAINEE_KINDS = ("ppo", "llm")


def build_trainee(settings: Any, env: Any) -> tuple[Any, Any]:
    """The PPO hyperparameters and network a run's trainee settings describe (also used by
    `benchmarks/brax_ppo_compare.py`, so the benchmark measures the loop's trainee)."""
    from policy.network import ActorCritic
    from policy.ppo import Hparams

    t = settings.trainee
    hp = Hparams(num_envs=t.num_envs, num_steps=t.num_steps, num_updates=settings.num_updates,
                 update_epochs=t.update_epochs, num_minibatches=t.num_minibatches,
                 pool_size=t.pool_size, pool_every=t.pool_every, lr=t.lr, ent_coef=t.ent_coef,
                 gamma=t.gamma, gae_lambda=t.gae_lambda, reward_scale=t.reward_scale,
                 clip_value=t.clip_value,
                 anneal_updates=settings.stages * settings.num_updates
                 if t.lr_schedule == "linear" else 0)
    network = ActorCritic(num_actions=env.num_actions, action_dim=getattr(env, "action_dim", 0),
                          hidden=t.hidden, critic=t.critic, mask_actions=t.mask_actions,
                          mixer=t.mixer, mixer_radius=t.mixer_radius, obs_norm=t.obs_norm,
                          separate_critic=t.separate_critic, state_std=t.state_std)
    return hp, network


def _ppo(settings: Any, task: Any, processes: Any) -> Trainee:
    from policy.ppo import make_train

    hp, network = build_trainee(settings, task.env)
    return make_train(task.env, network, hp, eval_cfg=task.eval_cfg, processes=processes)


def _llm(settings: Any, task: Any, processes: Any) -> Trainee:
    from policy.llm.trainee import LLMTrainee

    if task.name != "mapf":
        raise ValueError(f"the llm trainee writes MAPF plans; env {task.name!r} has none")
    if processes is not None and processes.count > 1:
        raise ValueError("the llm trainee runs in one process (no --distributed)")
    from designer.plan_eval import select

    # the training env's capacity (the config space's), validation in eval --llm's order
    return LLMTrainee(settings.llm, task.env.cap, seed=settings.seed, select=select)


BUILDERS = {"ppo": _ppo, "llm": _llm}


def make_trainee(settings: Any, task: Any, processes: Any = None) -> Trainee:
    """The trainee of `settings.trainee_kind` for `task` (a `designer.tasks.Task`)."""
    kind = getattr(settings, "trainee_kind", "ppo")
    if kind not in BUILDERS:
        raise ValueError(f"unknown trainee {kind!r} (known: {', '.join(BUILDERS)})")
    return BUILDERS[kind](settings, task, processes)
