"""The environment plays the verifier's task: episodes are whole plans, plans replay as episodes.

- census on a stratified sample of the held-out set: every stored optimal plan replays under
  the `plan` rule and the verifier calls the traced plan optimal (the full census is
  `benchmarks/heldout_census.py`); under `freeze` the plans that pass through a goal fail;
- property: for perturbed optimal plans (random policies near the optimum, so that both
  successes and failures occur), the verifier's verdict on the traced plan equals the
  environment's own, with the same costs, under both goal rules;
- the validator's reading: valid / optimal come from the verifier, with no disagreement.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.batching import broadcast, take
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.benchmark.census import census
from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.validator import load_validator
from jaxenv.mapf.plans.verify import verify_episodes
from jaxenv.mapf.replay import plan_actions, replay
from policy.evaluate import evaluator_for
from policy.network import ActorCritic, init_params
from policy.split_eval import evaluate_split

ENV = MAPFFrozenLake(Capacity(max_size=10, max_agents=5, max_steps=128))


@pytest.fixture(scope="module")
def sample():
    """Every 10th held-out instance: all agent counts, sizes and wait subsets (315 levels)."""
    levels, meta = load_split("heldout")
    idx = np.arange(0, int(levels.size.shape[0]), 10)
    sub = {k: (v[idx] if isinstance(v, np.ndarray) else v) for k, v in meta.items()}
    return take(levels, jnp.asarray(idx)), sub


def test_census_every_stored_plan_replays_under_the_plan_rule(sample):
    levels, meta = sample
    assert set(np.unique(meta["agents"])) == {3, 4, 5} and len(np.unique(meta["size"])) == 8
    plan = census(levels, meta, "plan", ENV)
    assert plan["solvable"] == plan["stored_optimum_matched"] == plan["instances"] == 315
    freeze = census(levels, meta, "freeze", ENV)
    assert freeze["stored_optimum_matched"] == freeze["solvable"] < 315


def _perturbed(levels, meta, key, p):
    """Optimal actions with a share p replaced by random ones, padded to 40 steps."""
    actions, _ = jax.vmap(plan_actions)(jnp.asarray(meta["plan_cells"]),
                                        jnp.asarray(meta["plan_len"]))
    actions = jnp.pad(actions, ((0, 0), (0, 40 - actions.shape[1]), (0, 0)))
    k1, k2 = jax.random.split(key)
    noise = jax.random.randint(k1, actions.shape, 0, 5)
    return jnp.where(jax.random.uniform(k2, actions.shape) < p, noise, actions)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), p=st.sampled_from([0.0, 0.02, 0.05, 0.2]),
       rule=st.sampled_from(["plan", "freeze"]))
def test_the_traced_plan_is_what_the_verifier_reads(sample, seed, p, rule):
    levels, meta = sample
    n = int(levels.size.shape[0])
    space = ENV.config_space
    cfg = broadcast(space.to_config(dict(space.default(), goal_rule=rule)), n)
    out = replay(ENV, levels, _perturbed(levels, meta, jax.random.key(seed), p), cfg)
    for cost in ("makespan", "soc"):
        v = jax.device_get(verify_episodes(levels, out.trace, out.steps, cost=cost))
        m = jax.device_get(out.metrics)
        np.testing.assert_array_equal(v.valid, m["valid"])
        np.testing.assert_array_equal(v.makespan, m["makespan"])
        np.testing.assert_array_equal(v.soc, m["soc"])
        np.testing.assert_array_equal(v.optimal, m["optimal_makespan" if cost == "makespan"
                                                    else "optimal_soc"])
    if p == 0.0 and rule == "plan":
        assert bool(jnp.all(out.success))


@pytest.mark.slow
def test_validation_reads_valid_and_optimal_from_the_verifier():
    net = ActorCritic(hidden=8)
    validator = load_validator("validation")
    params = jax.jit(lambda k: init_params(net, validator.env, k))(jax.random.PRNGKey(0))
    v = evaluate_split(params, net, jax.random.PRNGKey(1), validator, mode="sample")
    r = v.result
    assert {"env_valid", "disagree"} <= set(r.metrics)
    assert not r.disagree.any()
    np.testing.assert_array_equal(r.valid, r.env_valid)
    with pytest.raises(ValueError, match="record=True"):
        evaluate_split(params, net, jax.random.PRNGKey(1), validator, record=False)
    # Another rule is another value of a traced argument: played, verified, not recompiled.
    space = validator.env.config_space
    freeze = space.to_config(dict(space.default(), goal_rule="freeze"))
    compiled = evaluator_for(validator.env, net, True)._levels._cache_size()
    f = evaluate_split(params, net, jax.random.PRNGKey(1), validator, mode="sample", cfg=freeze)
    assert not f.result.disagree.any()
    assert evaluator_for(validator.env, net, True)._levels._cache_size() == compiled
