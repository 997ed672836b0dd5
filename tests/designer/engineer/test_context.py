"""The engineer's context: F from a real validation, H without round 0, T bookkeeping only,
module switches, the token budget on a worst-case context, and the reading order a small model
needs: training success first, labelled tables, the weakest cells named by the tables' own
labels, rounded numbers and configs as short text."""

from __future__ import annotations

import re

import jax
import pytest

from designer.engineer.context import (
    Context,
    ContextBuilder,
    ContextTooLarge,
    HistoryEntry,
    config_text,
    editable_values,
    knobs_text,
    parse_modules,
)
from designer.tasks.control.failures import ControlFailures
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
    # a random policy fails (its init jitted: one compile, not one per orthogonal kernel)
    params = jax.jit(lambda k: init_params(net, validator.env, k))(jax.random.PRNGKey(0))
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
    assert "Prefer 7x7 and larger maps" in user and "The environment (MAPF-FrozenLake)" not in user
    assert RunSettings(guidelines=str(g)).guidelines == str(g)
    with pytest.raises(ValueError, match="no such guidelines file"):
        RunSettings(guidelines=str(tmp_path / "missing.md"))


LONG_DECIMAL = re.compile(r"\d\.\d{4,}")


def test_training_success_comes_first_then_the_labelled_table(failures):
    lines = failures.render(n_traj=3, sizes=None).splitlines()
    assert lines[1].startswith("Training levels of this stage: success 40%")
    assert lines[2].startswith("Validation: valid ")
    assert lines[3] == "Valid % / optimal % (rows: agents; columns: map size NxN):"
    assert "Failed levels (rows: map size; columns: cause;" in "\n".join(lines)


def test_the_weakest_cells_are_named_by_the_tables_labels(failures):
    text = failures.render(n_traj=0, sizes=None)
    lines = text.splitlines()
    head = lines.index("Valid % / optimal % (rows: agents; columns: map size NxN):")
    assert lines[head + 1].startswith("map size: ")
    columns = lines[head + 1].split(": ")[1].split()
    table = {}
    for row in lines[head + 2:head + 2 + len(failures.by_cell)]:
        label, cells = row.split(": ")
        assert label.endswith(" agents") and len(cells.split()) == len(columns)
        for col, cell in zip(columns, cells.split()):
            if cell != "-":
                table[f"{label} {col}"] = int(cell.split("/")[0])
    weakest = re.search(r"Weakest cells \(valid %\): (.*)\.$", text, re.M).group(1)
    named = [w.rsplit(" ", 1) for w in weakest.split(", ")]
    assert len(named) == 3
    for label, pct in named:
        assert label in table and table[label] == int(pct.rstrip("%"))
    assert [int(p.rstrip("%")) for _, p in named] == sorted(table.values())[:3]
    assert failures.weakest(2) in failures.summary()
    cut = failures.render(n_traj=0, sizes=0, cells=False)  # the table cut, the names kept
    assert f"Weakest cells (valid %): {weakest}." in cut


def test_control_f_names_its_weakest_bins_by_the_tables_labels():
    rows = {"gravity": [{"value_lo": 4.0, "value_hi": 5.98, "n": 8, "success": 12.5,
                         "normalized_return": 0.512345},
                        {"value_lo": 5.98, "value_hi": 8.94, "n": 8, "success": 87.5,
                         "normalized_return": 0.9}],
            "length": [{"value_lo": 0.946, "value_hi": 2.0, "n": 8, "success": 0.0,
                        "normalized_return": 0.31}]}
    f = ControlFailures(split="validation", family="cartpole", n=24, success=33.333333,
                        normalized_return=0.612345, endings={"time_limit": 0.33, "angle": 0.67},
                        failed_endings={"angle": 16}, by_param=rows,
                        train={"success_rate": 0.456, "cause_angle": 0.544})
    text = f.render(n_traj=0, sizes=None)
    lines = text.splitlines()
    assert lines[1] == "Training episodes of this stage: normal end 46%; other endings: angle 54%."
    assert "Validation: success 33%, mean normalised return 0.61." in text
    assert "length: 0.946-2 0% (0.31)" in text and "gravity: 4-5.98 12% (0.51)" in text
    assert ("Weakest bins (success %): length 0.946-2 0%, gravity 4-5.98 12%, "
            "gravity 5.98-8.94 88%.") in text
    assert not LONG_DECIMAL.search(text)


def test_the_prompt_holds_no_long_decimals_and_configs_read_as_short_text(failures):
    vals = editable_values(SPACE, SPACE.default())
    vals["hole_ratio"] = {**vals["hole_ratio"], "9": 0.45, "10": 0.45}
    assert config_text(vals).startswith("size_weights=0.125 (all); hole_ratio=0.2 (3-8), "
                                        "0.45 (9-10); wait_ratio=")
    ctx = _ctx(failures)
    ctx.history = [HistoryEntry(stage=2, values=vals, summary=failures.summary())]
    user = ContextBuilder(token_budget=100_000).render(ctx).messages[1]["content"]
    assert f"stage 2: {config_text(vals)} -> training success 40%; valid " in user
    assert config_text(editable_values(SPACE, SPACE.default())) in user  # the current config
    assert not LONG_DECIMAL.search(user), LONG_DECIMAL.findall(user)


def test_a_min_max_pair_of_knobs_shares_one_line():
    from designer.settings import RunSettings
    from designer.tasks import make_task

    space = make_task(RunSettings(env="cartpole", engineer="fixed")).space
    text = knobs_text(space)
    assert "- gravity_min, gravity_max: Lowest / highest gravitational" in text
    assert text.count("\n") + 1 == len(space.editable_names()) // 2
    assert "Range (each): 4 to 20 in steps of 0.2. Default: 9.8." in text
    mapf = knobs_text(SPACE)
    assert "- hole_ratio: " in mapf and "Default: 0.2 (all)." in mapf
