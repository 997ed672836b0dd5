"""Model selection (`designer.run.selection`): which stage a run hands back, against a plain
reference, and the settings of runs saved before the option existed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from designer.run.selection import select_stage
from designer.settings import RunSettings, upgrade_saved
from designer.tasks.control.task import score as control_score
from designer.tasks.mapf.task import score as mapf_score

scores = st.lists(st.integers(0, 6).map(float), min_size=1, max_size=12)


@given(scores)
def test_validation_picks_the_best_score_and_the_later_stage_on_a_tie(xs):
    k = select_stage(xs, "validation")
    assert xs[k] == max(xs)
    assert all(x < xs[k] for x in xs[k + 1:])  # nothing after it is as good
    # plain reference: walk the stages, keep the last one that is at least as good
    ref = 0
    for i, x in enumerate(xs):
        if x >= xs[ref]:
            ref = i
    assert k == ref


@given(scores)
def test_last_is_the_last_stage(xs):
    assert select_stage(xs, "last") == len(xs) - 1


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="no finished stage"):
        select_stage([], "validation")
    with pytest.raises(ValueError, match="unknown selection rule"):
        select_stage([1.0], "best")
    with pytest.raises(ValueError, match="select"):
        RunSettings(select="best")


def test_the_task_scores_read_the_whole_split():
    assert mapf_score({"overall": {"n": 9, "valid": 40.0, "optimal": 25.5}}) == 65.5
    assert control_score({"overall": {"success": 50.0, "normalized_return": 0.25}}) == 0.25


def test_a_run_saved_before_selection_existed_hands_back_its_last_stage():
    saved = RunSettings().model_dump()
    del saved["select"]
    assert RunSettings.model_validate(upgrade_saved(saved)).select == "last"
    assert RunSettings().select == "validation"  # new runs choose on validation
