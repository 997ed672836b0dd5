"""The paper's results table from per-instance flags."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.report import UNKNOWN_SPLIT, format_markdown, format_text, make_table
from jaxenv.mapf.plans import CHECKS


def test_hand_table():
    # agents 3: size 3 has 2 instances (both valid, one optimal), size 4 has 4 (one valid).
    agents = [3, 3, 3, 3, 3, 3, 4]
    size = [3, 3, 4, 4, 4, 4, 4]
    subset = [0.25, 0.75, 0.25, 0.5, 0.75, 0.75, 0.5]
    valid = [1, 1, 1, 0, 0, 0, 1]
    optimal = [1, 0, 0, 0, 0, 0, 1]
    t = make_table(valid, optimal, agents, size, subset)
    assert t.by_size[3][3].valid == 100.0 and t.by_size[3][3].optimal == 50.0
    assert t.by_size[3][4].valid == 25.0 and t.by_size[3][4].n == 4
    # mean over sizes is the unweighted mean of the per-size rates (not 3/6 = 50 %)
    assert t.mean_over_sizes[3].valid == pytest.approx(62.5)
    assert t.mean_over_sizes[3].optimal == pytest.approx(25.0)
    assert t.by_subset[3][0.25].valid == 100.0 and t.by_subset[3][0.75].valid == pytest.approx(
        100 / 3)
    assert t.subset_all[0.5].valid == 50.0 and t.subset_all[0.5].n == 2
    assert t.overall.n == 7 and t.overall.valid == pytest.approx(400 / 7)
    md = format_markdown(t, title="demo")
    assert md.splitlines()[0] == "### demo · split: unknown (7 instances)"
    assert "| 3 | 100.00 / 50.00 | 25.00 / 0.00 | **62.50 / 25.00** |" in md
    assert "| 4 | - | 100.00 / 100.00 | **100.00 / 100.00** |" in md
    assert "wr 0.25" in md and "overall (7 instances)" in md
    txt = format_text(t)
    assert "62.50 / 25.00" in txt and "3x3" in txt
    assert txt.splitlines()[0] == "split: unknown (7 instances)"
    d = t.to_dict()
    assert d["split"] == t.split == UNKNOWN_SPLIT
    assert d["mean_over_sizes"]["3"]["valid"] == pytest.approx(62.5)
    assert d["by_subset"]["3"]["0.75"]["n"] == 3


def test_failures_and_validation():
    checks = np.ones((3, len(CHECKS)), bool)
    checks[1, CHECKS.index("conflict_free")] = False
    checks[2, CHECKS.index("no_hole")] = False
    checks[2, CHECKS.index("in_bounds")] = False
    t = make_table([1, 0, 0], [1, 0, 0], [3, 3, 3], [5, 5, 6], [0.25] * 3, checks=checks)
    assert t.failures[3][5]["conflict_free"] == 1 and t.failures[3][5]["no_hole"] == 0
    assert t.failures[3][6]["no_hole"] == 1 and t.failures[3][6]["in_bounds"] == 1
    assert "failed checks" in format_markdown(t)
    with pytest.raises(ValueError, match="optimal but not valid"):
        make_table([0], [1], [3], [3], [0.25])
    with pytest.raises(ValueError, match="equal lengths"):
        make_table([0, 1], [0], [3], [3], [0.25])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([3, 4, 5]), st.integers(3, 10),
                          st.sampled_from([0.25, 0.5, 0.75]), st.booleans(), st.booleans()),
                min_size=1, max_size=80))
def test_aggregates_are_consistent(rows):
    agents, size, subset, valid, opt = (np.array(x) for x in zip(*rows, strict=True))
    opt = opt & valid
    t = make_table(valid, opt, agents, size, subset)
    assert t.overall.valid == pytest.approx(100 * valid.mean())
    for k, cells in t.by_size.items():
        assert sum(c.n for c in cells.values()) == (agents == k).sum()
        assert t.mean_over_sizes[k].valid == pytest.approx(np.mean([c.valid for c in
                                                                    cells.values()]))
        for r, c in t.by_subset[k].items():
            sel = (agents == k) & np.isclose(subset, r)
            assert c.n == sel.sum() and c.optimal == pytest.approx(100 * opt[sel].mean())
            assert c.optimal <= c.valid


def test_tables_name_their_split():
    """Every rendering says which split the numbers come from, so a validation (tuning)
    number is never read as a published held-out one."""
    lv, meta = load_split("validation", agents=[3], sizes=[3, 4])
    valid = np.arange(len(meta["index"])) % 2 == 0
    t = make_table(valid, valid & meta["needs_wait"], meta["agents"], meta["size"],
                   meta["subset"], split=meta["split"])
    assert t.split == "validation" and t.to_dict()["split"] == "validation"
    assert format_markdown(t).splitlines()[0] == "### split: validation (60 instances)"
    assert format_markdown(t, "stage 2").splitlines()[0] == (
        "### stage 2 · split: validation (60 instances)")
    assert format_text(t).splitlines()[0] == "split: validation (60 instances)"
    h = make_table([1], [1], [3], [3], [0.25], split="heldout")
    assert "split: heldout" in format_markdown(h).splitlines()[0]
    assert "validation" not in format_markdown(h) + format_text(h)
    for bad in ("", "held out", "a\nb", None, 3):
        with pytest.raises(ValueError, match="split must be"):
            make_table([1], [1], [3], [3], [0.25], split=bad)


def test_optimal_by_sum_of_costs_is_counted_beside_makespan():
    valid = np.array([1, 1, 1, 0], bool)
    by_ms = np.array([1, 0, 1, 0], bool)
    by_soc = np.array([1, 1, 0, 0], bool)
    agents, size, subset = np.array([3, 3, 3, 3]), np.array([5, 5, 6, 6]), np.zeros(4)
    t = make_table(valid, by_ms, agents, size, subset, optimal_soc=by_soc)
    assert t.overall.optimal == 50.0 and t.overall.optimal_soc == 50.0
    assert t.by_size[3][5].optimal_soc == 100.0 and t.by_size[3][6].optimal_soc == 0.0
    assert t.mean_over_sizes[3].optimal_soc == 50.0
    d = t.to_dict()
    assert d["by_size"]["3"]["5"]["optimal_soc"] == 100.0
    assert "optimal_soc" not in make_table(valid, by_ms, agents, size, subset).to_dict()["overall"]
    with pytest.raises(ValueError, match="optimal but not valid"):
        make_table(valid, by_ms, agents, size, subset, optimal_soc=~valid)
