"""Plan parser and jitted verifier: hand cases, planted faults, and a differential test
against the plain-Python reference (jaxenv.mapf.solvers.reference.ref_check_plan)."""

from __future__ import annotations

import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxenv.mapf.level import Level
from jaxenv.mapf.plans import (
    CHECKS,
    accuracy_reward,
    format_plan,
    parse_plan,
    plan_arrays,
    verify_batch,
    verify_plan,
    verify_text,
)
from jaxenv.mapf.plans.parse import MAX_REPLY_CHARS
from jaxenv.mapf.solvers import reference
from tests.helpers.plan_helpers import (
    FAULTS,
    level_of,
    mutate,
    prioritised_plan,
    random_instance,
    random_walk,
    ref,
    stack_levels,
    to_arrays,
)

MAX_SIZE, MAX_AGENTS = 8, 5
ROWS = MAX_AGENTS + 1

verify_jit = jax.jit(verify_plan, static_argnames=("cost",))


def failing(verdict) -> set[str]:
    return {name for name, ok in zip(CHECKS, np.asarray(verdict.checks).tolist(),
                                     strict=True) if not ok}


def verify_paths(level, paths, cost="makespan", horizon=16, parsed_ok=True):
    plan = plan_arrays(paths, MAX_AGENTS, horizon, parsed_ok=parsed_ok)
    return verify_jit(level, plan.cells, plan.length, plan.parsed_ok, cost=cost)


# ------------------------------------------------------------------------------- the parser

def test_checks_order_matches_reference():
    assert reference.CHECKS == CHECKS


def test_parse_text_with_prose_and_variants():
    text = """Sure! Here is the plan.
```
A0: (0,0) -> (0,1) -> (0,2).
**Agent 1**: [2, 0] → [2, 1], [2,1] ; (1,1)
- agent A2 = ((2,2), (2,2))
```
Hope this helps (1,1)."""
    r = parse_plan(text)
    assert r.ok and r.form == "text", r.errors
    assert r.paths == {0: [(0, 0), (0, 1), (0, 2)], 1: [(2, 0), (2, 1), (2, 1), (1, 1)],
                       2: [(2, 2), (2, 2)]}
    assert r.ignored == ["Sure! Here is the plan.", "Hope this helps (1,1)."]
    assert r.as_list() == [r.paths[0], r.paths[1], r.paths[2]]


@pytest.mark.parametrize("text, needle", [
    ("A0: (0,0) -> (0,1) -> up", "could not read 'up'"),
    ("A0: (0,0) -> (0.5,1)", "could not read"),
    ("A0: (0,0) -> (0,1,2)", "could not read"),
    ("A0:", "no cells"),
    ("A0: (0,0)\nA0: (0,1)", "given twice"),
    ("I think the agents should move right.", "no agent lines"),
    ("A1: (0,0) -> (0,1)...", "could not read"),
    ('{"A0": [[0,0],[0,1]], "A1": [[1,1], [1.0, 2]]}', "step 1"),
    ('{"A0": [[0,0],[true,1]]}', "step 1"),
    ('{"A0": [[0,0],[0,1]]', "invalid JSON"),
    ('{"robot": [[0,0]]}', "unknown key"),
    ('{"A0": []}', "no cells"),
    ('{"A0": 5}', "path must be a list"),
    ('{"A0": "teleport (0,0) -> (2,2) !!", "A0": [[0,0],[0,1],[0,2]]}', "duplicate key 'A0'"),
    ('{"plan": {"A0": [[0,0]], "A1": [[1,1]]}, "plan": {"A0": [[0,0]]}}', "duplicate key"),
    ("42", "no agent lines"),
])
def test_parse_reports_instead_of_guessing(text, needle):
    r = parse_plan(text)
    assert not r.ok
    assert any(needle in e for e in r.errors), r.errors
    assert r.as_list() is None
    plan = r.to_arrays(MAX_AGENTS)
    assert not bool(plan.parsed_ok)


def test_parse_json_forms():
    want = {0: [(0, 0), (0, 1)], 1: [(2, 2), (2, 1)]}
    for text in ('{"A0": [[0,0],[0,1]], "A1": [[2,2],[2,1]]}',
                 '{"plan": {"Agent 0": [[0,0],[0,1]], "agent_1": "(2,2) -> (2,1)"}}',
                 '[[[0,0],[0,1]], [[2,2],[2,1]]]',
                 'Plan:\n```json\n{"paths": {"0": [[0,0],[0,1]], "1": [[2,2],[2,1]]}}\n```'):
        r = parse_plan(text)
        assert r.ok and r.form == "json", (text, r.errors)
        assert r.paths == want


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 7), st.lists(
    st.tuples(st.integers(-3, 12), st.integers(-3, 12)), min_size=1, max_size=12),
    min_size=1, max_size=6), st.booleans())
def test_format_parse_round_trip(paths, as_json):
    text = (json.dumps({f"A{i}": [list(c) for c in p] for i, p in paths.items()}) if as_json
            else format_plan(paths))
    r = parse_plan(text)
    assert r.ok, r.errors
    assert r.paths == {i: list(p) for i, p in paths.items()}


# ------------------------------------------------------------------- adversarial replies

def _parse_timed(text):
    t = time.perf_counter()
    report = parse_plan(text)
    assert time.perf_counter() - t < 2.0, "hang guard"  # speed itself is not asserted
    return report


@pytest.mark.parametrize("unit, tail", [
    ("A0", " " * 40_000 + "x"),  # a label followed by spaces: 13-16 s with backtracking
    ("agent", " " * 40_000 + "x"),
    ("**Agent 1**", " " * 40_000 + "x"),
    ("A0: (1", " " * 40_000 + "x"),
    ("```", "\n" * 40_000),
    ("", "A0 " * 13_000 + "x"),
    ("A0: ", "(" * 40_000),
    ('{"A0": "', " " * 40_000 + '"}'),
    ("", "A0: (0,0)\n" * 5_000),
])
def test_adversarial_replies_parse_in_bounded_time(unit, tail):
    r = _parse_timed(unit + tail)
    assert not r.ok and r.errors
    big = _parse_timed(unit + tail * 5)  # 200 k characters: over the bound, not read
    assert not big.ok and any("longer than" in e for e in big.errors)


@pytest.mark.parametrize("text, needle", [
    ("A0: (" + "9" * 5000 + ",0)", "more than 400 digits"),
    ('{"A0": [[' + "9" * 5000 + ", 0]]}", "not [row, col] integers"),
    ("[" * 10**5, "longer than"),
    ("[" * (MAX_REPLY_CHARS - 1), "nested deeper"),
    ('{"plan": ' * 40 + "1" + "}" * 40, "nested deeper"),
    ("A" + "9" * 5000 + ": (0,0)", "agent label above"),
    ("A4096: (0,0)", "agent label above"),
    ('{"A99999999999": [[0, 0]]}', "unknown key"),
    ("x" * (MAX_REPLY_CHARS + 1), "longer than"),
])
def test_huge_numbers_and_deep_json_are_parse_errors(text, needle):
    r = _parse_timed(text)
    assert not r.ok and any(needle in e for e in r.errors), r.errors
    assert all(len(e) < 300 for e in r.errors)
    assert not bool(r.to_arrays(MAX_AGENTS).parsed_ok)


def test_coordinates_beyond_int64_fail_in_bounds_without_overflow():
    lv = level_of(OPEN, [(0, 0)], [(0, 2)], max_size=3, max_agents=MAX_AGENTS)
    for big in (2**63, 2**64 + 5, -(2**63) - 1, 10**40):
        for text in (f"A0: (0,0) -> ({big},1) -> (0,2)",
                     json.dumps({"A0": [[0, 0], [big, 1], [0, 2]]})):
            v, r = verify_text(lv, text)
            assert r.ok and r.paths[0][1] == (big, 1)
            assert "in_bounds" in failing(v) and "parsable" not in failing(v)
    plan = plan_arrays({0: [(2**70, -(2**70))]}, MAX_AGENTS)
    assert plan.cells[0, 0].tolist() == [2**20, -(2**20)]


# --------------------------------------------------------------------------- array form

def test_plan_arrays_overflow_row_and_horizon():
    paths = {0: [(0, 0), (0, 1)], 7: [(1, 1)], 6: [(2, 2)]}
    plan = plan_arrays(paths, 5, horizon=4)
    assert plan.cells.shape == (6, 4, 2) and plan.length.tolist() == [2, 0, 0, 0, 0, 1]
    assert plan.cells[0].tolist() == [[0, 0], [0, 1], [0, 1], [0, 1]]  # padded by last cell
    assert bool(plan.parsed_ok)
    too_long = plan_arrays({0: [(0, 0)] * 5}, 5, horizon=4)
    assert not bool(too_long.parsed_ok)
    assert plan_arrays({0: [(0, 0)] * 9}, 5).cells.shape[1] == 16  # default: round up to 8s


# ---------------------------------------------------------------------- hand-made faults

OPEN = np.zeros((3, 3), bool)


def test_valid_plan_costs_and_reward():
    lv = level_of(OPEN, [(0, 0), (2, 0)], [(0, 2), (2, 2)], opt_makespan=2, opt_soc=4)
    v = verify_paths(lv, [[(0, 0), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]])
    assert bool(v.valid) and failing(v) == set()
    assert (int(v.makespan), int(v.soc), int(v.cost)) == (2, 4, 2)
    assert bool(v.optimal) and float(v.reward) == 1.0 and int(v.first_conflict) == -1
    # One extra wait: makespan 3 (c = 1, c_max = 4: 1 - 0.7/4), soc 5 (c_max = 8).
    slow = [[(0, 0), (0, 0), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]]
    v = verify_paths(lv, slow)
    assert bool(v.valid) and not bool(v.optimal)
    assert float(v.reward) == pytest.approx(1 - 0.7 / 4)
    v = verify_paths(lv, slow, cost="soc")
    assert int(v.cost) == 5 and float(v.reward) == pytest.approx(1 - 0.7 / 8)


# (name, level kwargs, paths, the one check that must fail)
FAULT_CASES = [
    ("swap", dict(starts=[(0, 0), (0, 1)], goals=[(0, 1), (0, 0)]),
     [[(0, 0), (0, 1)], [(0, 1), (0, 0)]], "conflict_free"),
    ("vertex", dict(starts=[(0, 0), (0, 2)], goals=[(1, 1), (0, 0)]),
     [[(0, 0), (0, 1), (1, 1)], [(0, 2), (0, 1), (0, 0)]], "conflict_free"),
    ("vertex_with_parked_agent", dict(starts=[(0, 0), (2, 2)], goals=[(0, 2), (0, 0)]),
     [[(0, 0), (0, 1), (0, 2)], [(2, 2), (1, 2), (0, 2), (0, 1), (0, 0)]], "conflict_free"),
    ("hole", dict(starts=[(0, 0)], goals=[(0, 2)], hole=(0, 1)),
     [[(0, 0), (0, 1), (0, 2)]], "no_hole"),
    ("jump", dict(starts=[(0, 0), (2, 0)], goals=[(0, 2), (2, 2)]),
     [[(0, 0), (0, 2)], [(2, 0), (2, 1), (2, 2)]], "one_cell_moves"),
    ("diagonal", dict(starts=[(0, 0)], goals=[(1, 1)]), [[(0, 0), (1, 1)]], "one_cell_moves"),
    ("missing_agent", dict(starts=[(0, 0), (2, 0)], goals=[(0, 2), (2, 2)]),
     [[(0, 0), (0, 1), (0, 2)]], "agent_count"),
    ("missing_middle_agent", dict(starts=[(0, 0), (1, 0), (2, 0)],
                                  goals=[(0, 2), (1, 2), (2, 2)]),
     {0: [(0, 0), (0, 1), (0, 2)], 2: [(2, 0), (2, 1), (2, 2)]}, "agent_count"),
    ("extra_agent", dict(starts=[(0, 0)], goals=[(0, 2)]),
     [[(0, 0), (0, 1), (0, 2)], [(2, 2), (2, 1)]], "agent_count"),
    ("agent_beyond_capacity", dict(starts=[(0, 0)], goals=[(0, 2)]),
     {0: [(0, 0), (0, 1), (0, 2)], 9: [(2, 2)]}, "agent_count"),
    ("off_grid", dict(starts=[(0, 0), (2, 2)], goals=[(0, 1), (2, 0)]),
     [[(0, 0), (0, 1), (-1, 1), (0, 1)], [(2, 2), (2, 1), (2, 0)]], "in_bounds"),
    ("off_grid_inside_padding", dict(starts=[(2, 0)], goals=[(2, 2)]),
     [[(2, 0), (3, 0), (3, 1), (3, 2), (2, 2)]], "in_bounds"),
    ("goal_not_reached", dict(starts=[(0, 0)], goals=[(0, 2)]),
     [[(0, 0), (0, 1)]], "goals_reached"),
    ("wrong_start", dict(starts=[(0, 0)], goals=[(0, 2)]),
     [[(1, 0), (1, 1), (1, 2), (0, 2)]], "starts_correct"),
]


@pytest.mark.parametrize("name, kw, paths, check", FAULT_CASES, ids=[c[0] for c in FAULT_CASES])
def test_planted_fault_fails_exactly_one_check(name, kw, paths, check):
    holes = OPEN.copy()
    if "hole" in kw:
        holes[kw["hole"]] = True
    lv = level_of(holes, kw["starts"], kw["goals"], opt_makespan=2, opt_soc=2)
    v = verify_paths(lv, paths)
    assert failing(v) == {check}
    assert not bool(v.valid) and float(v.reward) == 0.0 and int(v.makespan) == -1
    assert (int(v.first_conflict) >= 0) == (check == "conflict_free")
    # the reference agrees wherever the list form can express the plan
    if isinstance(paths, list):
        r = ref(holes, kw["starts"], kw["goals"], paths, MAX_SIZE)
        assert {c for c in CHECKS if not r[c]} == {check}


def test_goal_left_and_reentered_is_valid_and_costed_at_reentry():
    # A1 sits on its goal (1,1) and steps aside for A0, then comes back at t = 3.
    holes = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], bool)
    lv = level_of(holes, [(1, 0), (1, 1)], [(1, 2), (1, 1)], opt_makespan=3, opt_soc=5)
    paths = [[(1, 0), (1, 0), (1, 1), (1, 2)], [(1, 1), (0, 1), (0, 1), (1, 1)]]
    v = verify_paths(lv, paths)
    assert bool(v.valid) and (int(v.makespan), int(v.soc)) == (3, 6)
    r = ref(holes, [(1, 0), (1, 1)], [(1, 2), (1, 1)], paths, MAX_SIZE)
    assert r["valid"] and (r["makespan"], r["soc"]) == (3, 6)
    # leaving the goal after everyone is home and coming back also counts at re-entry
    late = [[(0, 0), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2), (2, 1), (2, 2)]]
    v = verify_paths(level_of(OPEN, [(0, 0), (2, 0)], [(0, 2), (2, 2)]), late)
    assert bool(v.valid) and (int(v.makespan), int(v.soc)) == (4, 6)


def test_unparsable_fails_every_check():
    lv = level_of(OPEN, [(0, 0)], [(0, 2)], opt_makespan=2, opt_soc=2)
    v, report = verify_text(lv, "A0: (0,0) -> right -> right")
    assert not report.ok and failing(v) == set(CHECKS) and float(v.reward) == 0.0
    v, report = verify_text(lv, "A0: (0,0) -> (0,1) -> (0,2)")
    assert report.ok and bool(v.valid) and float(v.reward) == 1.0


def test_start_on_goal_costs_zero_and_unknown_optimum_gives_nan():
    lv = level_of(OPEN, [(0, 0)], [(0, 0)])
    v = verify_paths(lv, [[(0, 0)]])
    assert bool(v.valid) and int(v.makespan) == 0
    assert np.isnan(float(v.reward)) and not bool(v.optimal)
    v = verify_paths(lv, [[(0, 0), (0, 1), (0, 0)]])
    assert bool(v.valid) and int(v.makespan) == 2


def test_bad_cost_name():
    lv = level_of(OPEN, [(0, 0)], [(0, 2)])
    with pytest.raises(ValueError, match="cost"):
        verify_paths(lv, [[(0, 0)]], cost="time")


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.integers(0, 80), st.integers(-1, 40))
def test_reward_matches_reference(valid, cost, opt):
    got = float(accuracy_reward(jnp.bool_(valid), jnp.int32(cost), jnp.int32(opt)))
    if opt < 0:
        assert np.isnan(got)
    else:
        assert got == pytest.approx(reference.ref_accuracy_reward(valid, cost, opt), abs=1e-6)


# ----------------------------------------------------------------- differential vs reference

def _random_cases(seed: int, count: int):
    """(holes, starts, goals, paths or None) with valid, wandering and corrupted plans."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        holes, starts, goals = random_instance(rng, sizes=(3, MAX_SIZE), agents=(1, MAX_AGENTS))
        base = prioritised_plan(holes, starts, goals, rng, horizon=24)
        if base is None or rng.random() < 0.15:
            base = [random_walk(rng, s, int(rng.integers(0, 10))) for s in starts]
        n = holes.shape[0]
        for fault in FAULTS:
            if fault != "none" and rng.random() < 0.6:
                continue
            paths = mutate(rng, base, n, fault)
            if rng.random() < 0.2:
                paths = mutate(rng, paths, n, FAULTS[int(rng.integers(len(FAULTS)))])
            if not paths or any(len(p) == 0 for p in paths):
                continue
            cases.append((holes, starts, goals, paths))
        if rng.random() < 0.1:
            cases.append((holes, starts, goals, None))  # unparsable
    return cases[:count]


def _batch(cases, horizon):
    lvs, cells, lens, oks, opt = [], [], [], [], []
    rng = np.random.default_rng(1)
    for holes, starts, goals, paths in cases:
        c, ln = to_arrays(paths or [], ROWS, horizon)
        r = ref(holes, starts, goals, paths, MAX_SIZE)
        ms = r["makespan"] if r["valid"] else int(rng.integers(1, 20))
        soc = r["soc"] if r["valid"] else int(rng.integers(1, 40))
        # optimum: the plan's own cost, something cheaper, or (rarely) unknown
        opt_ms = int(rng.choice([ms, max(0, ms - int(rng.integers(0, ms + 1))), -1],
                                p=[0.4, 0.55, 0.05]))
        opt_soc = int(rng.choice([soc, max(0, soc - int(rng.integers(0, soc + 1)))]))
        lvs.append((holes, starts, goals, opt_ms, opt_soc))
        cells.append(c)
        lens.append(ln)
        oks.append(paths is not None)
        opt.append((opt_ms, opt_soc))
    levels = stack_levels(lvs, MAX_SIZE, MAX_AGENTS)
    return levels, np.stack(cells), np.stack(lens), np.array(oks), opt


def _far(paths, n_pad):
    return paths is not None and any(not (-1 <= x <= n_pad) for p in paths for c in p for x in c)


def test_differential_against_reference_thousands():
    cases = _random_cases(seed=7, count=3000)
    horizon = max(len(p) for *_, paths in cases if paths for p in paths)
    levels, cells, lens, oks, opt = _batch(cases, horizon)
    out = {cost: jax.device_get(verify_batch(levels, cells, lens, oks, cost=cost))
           for cost in ("makespan", "soc")}
    n_valid = 0
    seen_fail = {c: 0 for c in CHECKS}
    for i, (holes, starts, goals, paths) in enumerate(cases):
        r = ref(holes, starts, goals, paths, MAX_SIZE)
        v = out["makespan"]
        for j, name in enumerate(CHECKS):
            if name == "conflict_free" and _far(paths, MAX_SIZE):
                continue  # documented limit of rules' padded cell ids (in_bounds fails anyway)
            assert bool(v.checks[i, j]) == r[name], (i, name, paths)
            seen_fail[name] += not r[name]
        assert bool(v.valid[i]) == r["valid"], (i, paths)
        if r["valid"]:
            n_valid += 1
            assert (int(v.makespan[i]), int(v.soc[i])) == (r["makespan"], r["soc"])
        else:
            assert int(v.makespan[i]) == -1 and int(v.soc[i]) == -1
        for cost, k in (("makespan", 0), ("soc", 1)):
            want = (reference.ref_accuracy_reward(r["valid"], r[cost] or 0, opt[i][k])
                    if opt[i][k] >= 0 else float("nan"))
            got = float(out[cost].reward[i])
            assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want, abs=1e-6)
            assert bool(out[cost].optimal[i]) == (r["valid"] and opt[i][k] >= 0
                                                  and r[cost] == opt[i][k])
    # both batch modes give the same verdicts
    sl = slice(0, 400)
    sub = jax.tree.map(lambda x: x[sl], levels)
    a = jax.device_get(verify_batch(sub, cells[sl], lens[sl], oks[sl], mode="vmap"))
    b = jax.device_get(verify_batch(sub, cells[sl], lens[sl], oks[sl], mode="map"))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="mode"):
        verify_batch(sub, cells[sl], lens[sl], oks[sl], mode="pmap")
    # the random mix exercises every check, valid and invalid plans
    assert 0.1 * len(cases) < n_valid < 0.8 * len(cases), n_valid
    assert all(count >= 20 for count in seen_fail.values()), seen_fail


@st.composite
def small_case(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    holes, starts, goals = random_instance(rng, sizes=(3, 5), agents=(1, 3))
    base = prioritised_plan(holes, starts, goals, rng, horizon=12)
    if base is None:
        base = [random_walk(rng, s, 4) for s in starts]
    paths = mutate(rng, base, holes.shape[0], draw(st.sampled_from(FAULTS)))
    return holes, starts, goals, [p for p in paths if p]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_case())
def test_differential_hypothesis(case):
    holes, starts, goals, paths = case
    r = ref(holes, starts, goals, paths, MAX_SIZE)
    c, ln = to_arrays(paths, ROWS, 24)
    if max((len(p) for p in paths), default=0) > 24:
        return
    v = verify_jit(level_of(holes, starts, goals), c, ln, True)
    got = dict(zip(CHECKS, np.asarray(v.checks).tolist(), strict=True))
    if _far(paths, MAX_SIZE):
        got.pop("conflict_free")
    assert got == {k: r[k] for k in got}
    assert bool(v.valid) == r["valid"]
    if r["valid"]:
        assert (int(v.makespan), int(v.soc)) == (r["makespan"], r["soc"])


def test_jit_vmap_shapes_and_level_rows_mismatch():
    # plan rows fewer than the level's agents: agent_count fails, the rest is checked
    lv = level_of(OPEN, [(0, 0), (2, 0)], [(0, 2), (2, 2)], max_size=3, max_agents=2)
    cells = np.array([[[0, 0], [0, 1], [0, 2]]], np.int32)
    v = verify_jit(lv, cells, np.array([3], np.int32), True)
    assert failing(v) == {"agent_count"}
    batch: Level = jax.tree.map(lambda x: jnp.stack([x] * 4), lv)
    out = verify_batch(batch, np.stack([cells] * 4), np.ones((4, 1), np.int32) * 3,
                       np.ones(4, bool))
    assert out.checks.shape == (4, len(CHECKS)) and out.reward.shape == (4,)
