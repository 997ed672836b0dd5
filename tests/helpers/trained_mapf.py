"""A briefly trained MAPF PPO trainee and its validation split: the real context the engineer
tests build their `Context` from.

One setup (capacity, paper preset, network, trainer, keys) for every test file that needs one,
so that the session's persistent compilation cache compiles its training and validation
programs once for all of them.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace


@cache
def trained_mapf() -> SimpleNamespace:
    """env, space (the paper preset), net, params, val (the validation split's result) and
    train (the stage's training summary) of one stage of 1,024 env steps at capacity 10 x 2."""
    import jax

    from designer.engineer.edits import preset_space
    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from jaxenv.mapf.benchmark.validator import load_validator
    from policy import ActorCritic, Hparams, evaluate_split, make_train

    env = MAPFFrozenLake(Capacity(max_size=10, max_agents=2))
    space = preset_space(env.config_space, "paper")
    net = ActorCritic(hidden=16)
    tr = make_train(env, net, Hparams(num_envs=32, num_steps=16, num_updates=2,
                                      num_minibatches=2, pool_size=32))
    runner, metrics = tr.train_stage(tr.init(jax.random.PRNGKey(0)),
                                     space.to_config(space.default()), jax.random.PRNGKey(1))
    val = evaluate_split(runner.params, net, jax.random.PRNGKey(2), load_validator("validation"))
    return SimpleNamespace(env=env, space=space, net=net, params=runner.params, val=val,
                           train=tr.summarize(metrics))
