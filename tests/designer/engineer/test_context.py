"""The engineer's context: F from a real validation, H without round 0, T bookkeeping only,
module switches, and the token budget on a worst-case context."""

from __future__ import annotations

import re

import jax
import pytest

from designer.engineer.context import (
    Context,
    ContextBuilder,
    ContextTooLarge,
    HistoryEntry,
    editable_values,
    parse_modules,
)
from designer.tasks.mapf.failures import MAPFFailures as Failures
from designer.tasks.mapf.failures import mapf_failures
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.benchmark.validator import load_validator
from policy.network import ActorCritic, init_params
from policy.split_eval import evaluate_split

SPACE = MAPFFrozenLake(Capacity()).config_space
FORBIDDEN_IN_T = re.compile(r"reward|learning rate|\blr\b|entropy|gamma|clip|hyperparam|loss",
                            re.IGNORECASE)


@pytest.fixture(scope="module")
def failures() -> Failures:
    net = ActorCritic(hidden=8)
    validator = load_validator("validation")
    params = init_params(net, validator.env, jax.random.PRNGKey(0))  # a random policy fails
    v = evaluate_split(params, net, jax.random.PRNGKey(1), validator)
    return mapf_failures(v, {"success_rate": 0.4, "cause_hole": 0.3, "cause_timeout": 0.3})


def _ctx(failures: Failures | None, stage: int = 3, n_hist: int = 4) -> Context:
    hist = [HistoryEntry(stage=i, values=editable_values(SPACE, SPACE.default()),
                         summary=f"summary of stage {i}") for i in range(n_hist)]
    return Context(stage=stage, stages_total=6, env_steps_per_stage=819_200,
                   env_steps_so_far=(stage + 1) * 819_200, current=SPACE.default(),
                   space=SPACE, failures=failures, history=hist, self_summary="my notes")


def test_failures_come_from_the_validation_split(failures):
    assert failures.split == "validation"
    text = failures.render(n_traj=3, sizes=None)
    assert "validation split" in text and "heldout" not in text
    assert sum(sum(d.values()) for d in failures.causes_by_size.values()) > 0
    assert 2 <= len(failures.trajectories) <= 3
    causes = [re.search(r"outcome: (\w+)", t).group(1) for t in failures.trajectories]
    assert len(set(causes)) == len(causes)  # chosen to show different causes
    assert "conflict_free" in text and "Training levels of this stage: success 40%" in text


def test_history_excludes_round_zero_and_keeps_the_last_k(failures):
    b = ContextBuilder("F,G,H,T", history_k=2, token_budget=100_000)
    kept = b.history(_ctx(failures).history)
    assert [h.stage for h in kept] == [2, 3]
    user = b.render(_ctx(failures, n_hist=3)).messages[1]["content"]
    assert "stage 0:" not in user and "stage 1:" in user and "stage 2:" in user


def test_t_is_bookkeeping_only(failures):
    b = ContextBuilder("T", token_budget=100_000)
    user = b.render(_ctx(failures)).messages[1]["content"]
    t = user.split("## T: bookkeeping")[1].split("##")[0]
    assert "Stage 4 of 6" in t and "819,200 env steps per stage" in t
    assert not FORBIDDEN_IN_T.search(t), t
    assert "## F:" not in user and "## G:" not in user and "## H:" not in user


def test_modules_switch_on_and_off(failures):
    assert parse_modules("f, g,T") == ("F", "G", "T")
    with pytest.raises(ValueError, match="unknown context module"):
        parse_modules("F,X")
    user = ContextBuilder("F,G,H,T,S", token_budget=100_000).render(
        _ctx(failures)).messages[1]["content"]
    for head in ("## F:", "## G:", "## H:", "## T:", "## S:"):
        assert head in user
    assert "## S:" not in ContextBuilder(token_budget=100_000).render(
        _ctx(failures)).messages[1]["content"]


def test_budget_holds_on_a_worst_case_context(failures):
    worst = Failures(**{**failures.__dict__,
                        "trajectories": [t * 8 for t in failures.trajectories] * 2})
    ctx = _ctx(worst, n_hist=12)
    full = ContextBuilder("F,G,H,T,S", history_k=10, n_traj=6, token_budget=10**9).render(ctx)
    for budget in (3000, 1800, 1000):
        b = ContextBuilder("F,G,H,T,S", history_k=10, n_traj=6, token_budget=budget)
        p = b.render(ctx)
        assert p.tokens <= budget < full.tokens
        assert p.tokens == b.count_tokens(p.messages)
        assert p.cuts and p.cuts[0] == "trajectory 6"  # documented order: trajectories first
    with pytest.raises(ContextTooLarge):
        ContextBuilder(token_budget=50).render(ctx)


def test_a_users_guidelines_file_replaces_the_shipped_one(failures, tmp_path):
    from designer.settings import RunSettings

    g = tmp_path / "guidelines.md"
    g.write_text("Prefer 7x7 and larger maps once 3x3 is solved.")
    user = ContextBuilder("G", guidelines=g, token_budget=100_000).render(
        _ctx(failures)).messages[1]["content"]
    assert "Prefer 7x7 and larger maps" in user and "How the training environment works" not in user
    assert RunSettings(guidelines=str(g)).guidelines == str(g)
    with pytest.raises(ValueError, match="no such guidelines file"):
        RunSettings(guidelines=str(tmp_path / "missing.md"))
