"""Verification of candidate configs: scores, the choice rule, and no recompilation."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from mapf_policies import constant_policy, toward_goal_policy

from designer.sampling import random_values
from designer.verify import Score, Verifier, coverage, distance
from jaxenv.mapf import Capacity, MAPFFrozenLake
from policy.network import ActorCritic

CAP = Capacity(max_size=5, max_agents=2, max_steps=24)
ENV = MAPFFrozenLake(CAP)
SPACE = ENV.config_space
NET = ActorCritic(hidden=8)


def _score(p: float) -> Score:
    return Score(success=p, learnability=p * (1 - p), coverage=1.0, distance=0.0, episodes=1,
                 outcomes={})


@pytest.fixture(scope="module")
def verifier():
    return Verifier(ENV, NET, k=4, episodes=64, targets={"size_weights": ("3", "4", "5")})


def test_choice_rule_floor_ceiling_learnability_then_order(verifier):
    assert verifier.choose([_score(0.99), _score(0.01)]).index is None  # trivial, hopeless
    assert verifier.choose([_score(0.99), _score(0.2), _score(0.5)]).index == 2
    # learnability within `tie` of the best: the proposer's order decides
    assert verifier.choose([_score(0.3), _score(0.5), _score(0.505)]).index == 1
    assert verifier.choose([_score(0.96), _score(0.04), _score(0.9)]).index == 2


def test_trivial_and_hopeless_candidates_are_never_chosen(verifier):
    base = SPACE.default()
    trivial = dict(base, size_weights=[1.0, 0.0, 0.0], hole_ratio=[0.0] * 3,
                   agent_weights=[1.0, 0.0])
    medium = dict(base, size_weights=[0.0, 0.0, 1.0], hole_ratio=[0.4] * 3,
                  agent_weights=[0.0, 1.0], wait_ratio=[0.5] * 3)
    key = jax.random.PRNGKey(0)
    walker = toward_goal_policy(NET, ENV)
    scores = verifier.score(walker, [trivial, medium], base, key)
    assert scores[0].success == 1.0  # greedy toward the goal always solves an empty 3x3
    assert 0.05 < scores[1].success < 0.95, scores[1]
    assert verifier.choose(scores).index == 1
    # a policy that never moves makes every candidate hopeless
    stay = constant_policy(NET, ENV, 0)
    scores = verifier.score(stay, [trivial, medium], base, key)
    assert [s.success for s in scores] == [0.0, 0.0]
    assert scores[0].outcomes["timeout"] == 1.0
    assert verifier.choose(scores).index is None


def test_no_recompile_across_twenty_batches_of_random_candidates(verifier):
    rng = np.random.default_rng(0)
    params = toward_goal_policy(NET, ENV)
    verifier.score(params, [SPACE.default()], SPACE.default(), jax.random.PRNGKey(1))
    warm = verifier.compiled
    for i in range(20):
        cands = [random_values(SPACE, rng) for _ in range(int(rng.integers(1, 5)))]
        scores = verifier.score(params, cands, SPACE.default(), jax.random.PRNGKey(i))
        assert len(scores) == len(cands)
        assert all(0.0 <= s.success <= 1.0 for s in scores)
    assert verifier.compiled == warm == 1


def test_distance_and_coverage():
    base = SPACE.default()
    assert distance(SPACE, base, base) == 0.0
    moved = dict(base, size_weights=[1.0, 0.0, 0.0])
    assert distance(SPACE, base, moved) > 0
    targets = {"size_weights": ("3", "4", "5")}
    assert coverage(SPACE, base, targets) == 1.0
    assert coverage(SPACE, moved, targets) == pytest.approx(1 / 3)


def test_coverage_counts_only_what_an_edit_can_reach():
    """Held-out agent counts above the capacity, and knobs a preset pins, are left out."""
    from designer.edits import preset_space

    base = SPACE.default()
    targets = {"size_weights": ("3", "4", "5", "9"), "agent_weights": ("3", "4", "5")}
    assert coverage(SPACE, base, targets) == 1.0  # "9" and agents 3-5 do not exist here
    one = dict(base, size_weights=[1.0, 0.0, 0.0])
    assert coverage(SPACE, one, targets) == pytest.approx(1 / 3)
    paper = preset_space(SPACE, "paper")
    assert not paper["agent_weights"].editable
    assert coverage(paper, base, {"agent_weights": ("1",)}) == 1.0  # pinned: not scored
    assert coverage(SPACE, dict(base, agent_weights=[0.0, 1.0]), {"agent_weights": ("1",)}) == 0.0
