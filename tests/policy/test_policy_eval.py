"""Evaluation: scripted policies on hand-made levels, and a differential check of every
per-instance outcome against the whole-plan verifier (`jaxenv.mapf.plans.verify_plan`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.mapf import CAUSES, Capacity, MAPFFrozenLake, make_level
from jaxenv.mapf.benchmark.failures import failure_samples
from policy.evaluate import Evaluator, evaluate
from policy.network import ActorCritic, init_params
from tests.helpers import mapf_policies

CAP = Capacity(max_size=4, max_agents=2, max_steps=16, label_waits=False)
STAY, UP, DOWN, LEFT, RIGHT = range(5)
NET = ActorCritic(hidden=8)


@pytest.fixture(scope="module")
def env():
    return MAPFFrozenLake(CAP)


@pytest.fixture(scope="module")
def evaluator(env):
    return Evaluator(env, NET)


def constant_policy(env, action: int):
    return mapf_policies.constant_policy(NET, env, action)


def toward_goal_policy(env):
    return mapf_policies.toward_goal_policy(NET, env)


def level(n, starts, goals, holes=(), ms=-1, soc=-1):
    h = np.zeros((n, n), bool)
    for r, c in holes:
        h[r, c] = True
    return make_level(h, starts, goals, max_size=CAP.max_size, max_agents=CAP.max_agents,
                      opt_makespan=ms, opt_soc=soc)


def stack(levels):
    return jax.tree.map(lambda *x: jnp.stack(x), *levels)


# name: (level, expected valid, optimal, makespan, soc, cause, steps, isr)
TOWARD = {
    "diagonal, optimal": (level(3, [(0, 0)], [(2, 2)], ms=4, soc=4),
                          True, True, 4, 4, "none", 4, 1.0),
    "two agents, soc != makespan": (level(3, [(0, 0), (2, 1)], [(0, 2), (2, 2)], ms=2, soc=3),
                                    True, True, 2, 3, "none", 2, 1.0),
    "known optimum beaten? no: longer": (level(3, [(0, 0)], [(0, 2)], ms=1, soc=1),
                                         True, False, 2, 2, "none", 2, 1.0),
    "unknown optimum": (level(3, [(0, 0)], [(0, 2)]), True, False, 2, 2, "none", 2, 1.0),
    "edge swap": (level(3, [(0, 0), (0, 1)], [(0, 1), (0, 0)]),
                  False, False, -1, -1, "edge", 1, 0.0),
    "vertex": (level(3, [(0, 0), (0, 2)], [(0, 2), (0, 0)]),
               False, False, -1, -1, "vertex", 1, 0.0),
    "hole": (level(3, [(0, 0)], [(0, 2)], holes=[(0, 1)]), False, False, -1, -1, "hole", 1, 0.0),
    "one home, one in a hole": (level(3, [(0, 0), (2, 0)], [(0, 1), (2, 2)], holes=[(2, 1)]),
                                False, False, -1, -1, "hole", 1, 0.5),
    "starts on goal": (level(4, [(1, 1)], [(1, 1)], ms=0, soc=0),
                       True, True, 0, 0, "none", 0, 1.0),
}


def _check(res, cases):
    r = res.numpy()
    for i, (name, (_, valid, opt, ms, soc, cause, steps, isr)) in enumerate(cases.items()):
        got = (bool(r.valid[i]), bool(r.optimal[i]), int(r.makespan[i]), int(r.soc[i]),
               CAUSES[int(r.outcome[i])], int(r.steps[i]), float(r.isr[i]))
        assert got == (valid, opt, ms, soc, cause, steps, isr), name


def test_scripted_policy_outcomes(env, evaluator):
    levels = stack([c[0] for c in TOWARD.values()])
    res = evaluator(toward_goal_policy(env), levels, jax.random.PRNGKey(0))
    _check(res, TOWARD)
    # Sampling from logits 100 apart is the greedy choice.
    _check(evaluator(toward_goal_policy(env), levels, jax.random.PRNGKey(1), mode="sample"),
           TOWARD)
    # The recorded trajectory of the diagonal case.
    pos = np.asarray(res.trace[0, :5, 0])
    assert pos.tolist() == [[0, 0], [1, 0], [1, 1], [2, 1], [2, 2]]
    assert np.asarray(res.actions[0, :4, 0]).tolist() == [DOWN, RIGHT, DOWN, RIGHT]


def test_timeout_and_oob(env, evaluator):
    cases = {
        "stay: timeout": (level(3, [(0, 0)], [(0, 2)]), False, False, -1, -1, "timeout",
                          10, 0.0),  # step limit ceil(2 * (2 + 3)) = 10
    }
    _check(evaluator(constant_policy(env, STAY), stack([c[0] for c in cases.values()]),
                     jax.random.PRNGKey(0)), cases)
    cases = {"up: out of bounds": (level(3, [(0, 0)], [(1, 0)]), False, False, -1, -1, "oob",
                                   1, 0.0)}
    _check(evaluator(constant_policy(env, UP), stack([c[0] for c in cases.values()]),
                     jax.random.PRNGKey(0)), cases)


@pytest.mark.slow
def test_outcomes_agree_with_the_plan_verifier(env):
    from jaxenv.mapf.plans import verify_plan

    cs = env.config_space
    vals = cs.default()
    vals.update(hole_ratio=[0.3] * CAP.n_sizes, agent_weights=[0.3, 0.7])
    cfgs = cs.stack([vals] * 4)
    # A random network sampling actions: a mix of successes and every kind of failure.
    params = jax.jit(lambda k: init_params(NET, env, k))(jax.random.PRNGKey(1))  # one compile
    res = evaluate(params, cfgs, jax.random.PRNGKey(2), env=env, network=NET, mode="sample",
                   n_per_config=128).numpy()
    valid = res.valid
    assert 0 < valid.sum() < len(valid)
    assert len(set(res.outcome[~valid].tolist())) >= 3

    t = res.trace.shape[1]
    cells = np.transpose(res.trace, (0, 2, 1, 3)).astype(np.int32)  # [N, A, T+1, 2]
    active = np.arange(CAP.max_agents)[None] < res.n_agents[:, None]
    length = np.where(active, res.steps[:, None] + 1, 0)
    verdict = jax.jit(jax.vmap(lambda lv, c, n: verify_plan(lv, c, n, jnp.bool_(True))))(
        res.levels, cells, length)
    np.testing.assert_array_equal(np.asarray(verdict.valid), valid)
    np.testing.assert_array_equal(np.asarray(verdict.makespan), res.makespan)
    np.testing.assert_array_equal(np.asarray(verdict.soc), res.soc)
    assert t == CAP.max_steps + 1

    samples = failure_samples(res, k=3)
    assert len(samples) == 3
    for s in samples:
        assert s.cause != "none"
        assert f"outcome: {s.cause}" in s.text and "A0:" in s.text and "Grid" in s.text


def test_levels_of_another_capacity_are_one_clear_error(env, evaluator):
    """The evaluator checks a batch of levels against its env's level shapes (traced once and
    kept): a batch made for another capacity fails at every call, before anything is played."""
    other = make_level(np.zeros((3, 3), bool), [(0, 0)], [(2, 2)], max_size=5,
                       max_agents=CAP.max_agents)
    params = toward_goal_policy(env)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"levels have shapes .*capacity"):
            evaluator(params, stack([other, other]), jax.random.PRNGKey(0))
    good = stack([c[0] for c in TOWARD.values()])
    assert evaluator(params, good, jax.random.PRNGKey(0)).valid.shape == (len(TOWARD),)
