"""Verification of candidate configs: scores, the choice rule, and no recompilation."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from designer.engineer.sampling import random_values
from designer.run.scoring import CandidateScorer, Score, coverage, distance
from jaxenv.mapf import Capacity, MAPFFrozenLake
from policy.network import ActorCritic
from tests.helpers.mapf_policies import constant_policy, toward_goal_policy

CAP = Capacity(max_size=5, max_agents=2, max_steps=24)
ENV = MAPFFrozenLake(CAP)
SPACE = ENV.config_space
NET = ActorCritic(hidden=8)


def _score(p: float) -> Score:
    return Score(success=p, learnability=p * (1 - p), coverage=1.0, distance=0.0, episodes=1,
                 outcomes={})


@pytest.fixture(scope="module")
def verifier():
    return CandidateScorer(ENV, NET, k=4, episodes=64, targets={"size_weights": ("3", "4", "5")})


def test_choice_rule_floor_ceiling_learnability_then_order(verifier):
    assert verifier.choose([_score(0.99), _score(0.01)]).index is None  # trivial, hopeless
    assert verifier.choose([_score(0.99), _score(0.2), _score(0.5)]).index == 2
    # learnability within `tie` of the best: the proposer's order decides
    assert verifier.choose([_score(0.3), _score(0.5), _score(0.505)]).index == 1
    assert verifier.choose([_score(0.96), _score(0.04), _score(0.9)]).index == 2


def test_all_trivial_candidates_keep_the_config_or_give_the_hardest():
    keep = CandidateScorer(ENV, NET, k=4, episodes=8)
    hardest = CandidateScorer(ENV, NET, k=4, episodes=8, trivial="hardest")
    trivial = [_score(1.0), _score(0.97), _score(0.975), _score(0.99)]
    assert keep.choose(trivial).index is None
    c = hardest.choose(trivial)
    assert c.index == 1 and "hardest" in c.reason  # 0.97 and 0.975 tie: the proposer's order
    assert hardest.choose([_score(1.0), _score(1.0)]).index == 0
    # anything inside the window, or any hopeless candidate, and the usual rule holds
    assert hardest.choose([_score(0.99), _score(0.5)]).index == 1
    assert hardest.choose([_score(0.99), _score(0.01)]).index is None
    assert hardest.choose([]).index is None
    with pytest.raises(ValueError, match="trivial rule"):
        CandidateScorer(ENV, NET, k=4, episodes=8, trivial="easiest")


def test_the_run_settings_choice_rule_reaches_the_scorer():
    from designer.stage_settings import VerifySettings

    v = VerifySettings(k=3, floor=0.1, ceiling=0.9, tie=0.2, trivial="hardest", signal="return")
    s = CandidateScorer.from_settings(v, evaluator=object(), episodes=16, targets=None,
                                      space=SPACE)
    got = {f: getattr(s, f) for f in ("k", "floor", "ceiling", "tie", "trivial", "signal")}
    assert got == {"k": 3, "floor": 0.1, "ceiling": 0.9, "tie": 0.2, "trivial": "hardest",
                   "signal": "return"}
    assert s.episodes == 16
    # the tie band decides: 0.5 and 0.55 (learnability 0.25, 0.2475) tie under 0.2, not 0.001
    pair = [_score(0.55), _score(0.5)]
    assert s.choose(pair).index == 0
    tight = CandidateScorer.from_settings(v.model_copy(update={"tie": 0.001}), evaluator=object(),
                                          episodes=16, targets=None, space=SPACE)
    assert tight.choose(pair).index == 1


@pytest.mark.slow
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


@pytest.mark.slow
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
    from designer.engineer.edits import preset_space

    base = SPACE.default()
    targets = {"size_weights": ("3", "4", "5", "9"), "agent_weights": ("3", "4", "5")}
    assert coverage(SPACE, base, targets) == 1.0  # "9" and agents 3-5 do not exist here
    one = dict(base, size_weights=[1.0, 0.0, 0.0])
    assert coverage(SPACE, one, targets) == pytest.approx(1 / 3)
    paper = preset_space(SPACE, "paper")
    assert not paper["agent_weights"].editable
    assert coverage(paper, base, {"agent_weights": ("1",)}) == 1.0  # pinned: not scored
    assert coverage(SPACE, dict(base, agent_weights=[0.0, 1.0]), {"agent_weights": ("1",)}) == 0.0


# ------------------------------------------------------------------ the graded signal
def test_graded_signal_puts_a_candidate_inside_the_window_that_success_leaves_out():
    """All-or-nothing success (a control family's): every candidate at 0 or 1, none inside
    [floor, ceiling], the current config kept; the same episodes' normalised returns are graded
    and the rule chooses the most learnable inside."""
    ok = [1.0, 0.0, 0.0]  # trivial, then two hopeless by success
    nret = [0.98, 0.55, 0.12]  # the returns still tell the middle one is half learnt

    def scores(signal):
        return [Score(success=s, learnability=(g if signal == "return" else s)
                      * (1 - (g if signal == "return" else s)), coverage=1.0, distance=0.0,
                      episodes=8, outcomes={}, p=g if signal == "return" else None,
                      signal=signal, normalized_return=g) for s, g in zip(ok, nret)]

    by_success = CandidateScorer(evaluator=object(), space=SPACE, signal="success")
    graded = CandidateScorer(evaluator=object(), space=SPACE, signal="return")
    assert [s.p for s in scores("success")] == ok
    c = by_success.choose(scores("success"))
    assert c.index is None and "success is inside" in c.reason
    c = graded.choose(scores("return"))
    assert c.index == 1 and "normalised return 0.550" in c.reason and "success 0.000" in c.reason


def test_a_score_reads_back_from_old_and_new_candidates_json():
    old = {"success": 0.25, "learnability": 0.1875, "coverage": 1.0, "distance": 0.1,
           "episodes": 64, "outcomes": {"timeout": 0.75}}  # written before the graded signal
    s = Score.from_dict(old)
    assert s.p == 0.25 and s.signal == "success" and s.normalized_return is None
    new = Score(success=0.0, learnability=0.21, coverage=1.0, distance=0.0, episodes=8,
                outcomes={}, p=0.3, signal="return", normalized_return=0.3)
    assert Score.from_dict({**new.to_dict(), "later_field": 1}) == new
    assert _score(0.4).p == 0.4  # p defaults to success


@pytest.mark.slow
def test_bad_signal_and_a_return_signal_without_returns_fail_clearly():
    with pytest.raises(ValueError, match="unknown verify signal"):
        CandidateScorer(ENV, NET, k=2, episodes=8, signal="reward")
    mapf = CandidateScorer(ENV, NET, k=2, episodes=8, signal="return")  # MAPF reports no returns
    with pytest.raises(ValueError, match="normalized_return"):
        mapf.score(toward_goal_policy(NET, ENV), [SPACE.default()], SPACE.default(),
                   jax.random.PRNGKey(0))


@pytest.mark.slow
def test_mapf_scores_are_unchanged_by_the_graded_fields(verifier):
    """MAPF verifies on success: p is success, learnability p(1 - p) as before."""
    scores = verifier.score(toward_goal_policy(NET, ENV), [SPACE.default()], SPACE.default(),
                            jax.random.PRNGKey(3))
    s = scores[0]
    assert s.signal == "success" and s.p == s.success and s.normalized_return is None
    assert s.learnability == s.success * (1 - s.success)


def test_a_real_control_env_chooses_only_under_the_graded_signal():
    """CartPole, an untrained policy: it balances nothing, so success is 0.0 on every
    candidate; its normalised return is higher on easy physics (a long pole, low gravity, a
    weak push) and only there inside the window."""
    from designer.settings import RunSettings
    from designer.tasks import make_task

    task = make_task(RunSettings(env="cartpole", engineer="fixed"))
    space = task.space
    net = ActorCritic(num_actions=2, hidden=8)
    from policy.network import init_params

    params = init_params(net, task.env, jax.random.PRNGKey(0))
    cur = space.default()
    easy = dict(cur)
    for name, v in {"length": 2.0, "gravity": 4.0, "force_mag": 2.0, "masscart": 3.0}.items():
        easy[f"{name}_min"] = easy[f"{name}_max"] = v
    out = {}
    for signal in ("success", "return"):
        v = CandidateScorer(task.env, net, k=2, episodes=32, space=space, signal=signal)
        scores = v.score(params, [cur, easy], cur, jax.random.PRNGKey(1))
        assert [s.success for s in scores] == [0.0, 0.0]
        assert all(s.normalized_return is not None for s in scores)
        out[signal] = (scores, v.choose(scores))
    assert out["success"][1].index is None
    graded, choice = out["return"]
    assert graded[0].p < 0.05 <= graded[1].p <= 0.95, [s.p for s in graded]
    assert choice.index == 1
    # the same rollouts: the graded p is the recorded normalised return
    assert [s.normalized_return for s in graded] == [s.p for s in graded]
    assert [s.normalized_return for s in out["success"][0]] == [s.p for s in graded]
