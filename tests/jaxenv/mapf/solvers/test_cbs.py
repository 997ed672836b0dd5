"""Tests for the exact CBS solver: hand cases, plan validity, and a joint-state brute force."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jaxenv.mapf.solvers import cbs
from jaxenv.mapf.solvers.cbs import Solution, SolverBudgetExceeded, single_agent_distances, solve
from tests.helpers.plan_helpers import ref
from tests.jaxenv.mapf.plain_mapf import distances, optimal_makespan, optimal_soc

Cell = tuple[int, int]


def grid_from(rows: Sequence[str]) -> np.ndarray:
    """``#`` = hole, anything else = ice."""
    return np.array([[ch == "#" for ch in row] for row in rows], dtype=bool)


# --- independent helpers ----------------------------------------------------------------------


def check_plan(holes: np.ndarray, starts, goals, paths) -> tuple[int, int]:
    """Assert the plan is valid under the rules reference; return (SoC, makespan)."""
    res = ref(holes, starts, goals, paths, holes.shape[0])
    assert res["valid"], res
    return res["soc"], res["makespan"]


# --- hand cases --------------------------------------------------------------------------------

CORRIDOR_POCKET = grid_from(["#.##", "....", "####", "####"])


def test_corridor_pass_with_pocket():
    # A (1,0)->(1,3), B (1,3)->(1,0): A ducks into the pocket (+2), B goes straight.
    sol = solve(CORRIDOR_POCKET, [(1, 0), (1, 3)], [(1, 3), (1, 0)])
    assert sol is not None
    assert (sol.soc, sol.makespan, sol.needs_wait) == (8, 5, False)
    assert check_plan(CORRIDOR_POCKET, [(1, 0), (1, 3)], [(1, 3), (1, 0)], sol.paths)[0] == 8


def test_open_swap():
    holes = np.zeros((3, 3), dtype=bool)
    sol = solve(holes, [(0, 0), (0, 2)], [(0, 2), (0, 0)])
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (6, 4, False)


def test_corridor_swap_unsolvable():
    holes = grid_from(["####", "....", "####", "####"])
    assert solve(holes, [(1, 0), (1, 3)], [(1, 3), (1, 0)]) is None
    assert solve(holes, [(1, 0), (1, 2)], [(1, 1), (1, 0)]) is None


def test_cross_needs_wait():
    # Both shortest paths cross the centre at t=2; arms are 1 wide, so one agent waits.
    holes = grid_from(["##.##", "##.##", ".....", "##.##", "##.##"])
    sol = solve(holes, [(2, 0), (0, 2)], [(2, 4), (4, 2)])
    assert sol is not None
    assert (sol.soc, sol.makespan, sol.needs_wait) == (9, 5, True)
    check_plan(holes, [(2, 0), (0, 2)], [(2, 4), (4, 2)], sol.paths)


def test_dead_end_needs_wait():
    holes = grid_from(["#.#", "...", "###"])
    sol = solve(holes, [(1, 0), (1, 2)], [(1, 2), (1, 0)])
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (7, 4, True)


def test_simple_no_wait():
    holes = np.zeros((4, 4), dtype=bool)
    sol = solve(holes, [(0, 0), (3, 3)], [(0, 3), (3, 0)])
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (6, 3, False)


def test_goal_sitter_steps_aside():
    # B starts on its goal in A's way: it leaves and comes back, its cost is its last arrival.
    holes = grid_from(["#.#", "...", "###"])
    sol = solve(holes, [(1, 0), (1, 1)], [(1, 2), (1, 1)])
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (4, 2, False)
    assert check_plan(holes, [(1, 0), (1, 1)], [(1, 2), (1, 1)], sol.paths) == (4, 2)


def test_cycle_rotation_allowed():
    # Four agents on a 2x2 ring rotate in one step (cycles of 4 are legal).
    holes = np.zeros((3, 3), dtype=bool)
    holes[2, :] = holes[:, 2] = True
    starts = [(0, 0), (0, 1), (1, 1), (1, 0)]
    goals = [(0, 1), (1, 1), (1, 0), (0, 0)]
    sol = solve(holes, starts, goals)
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (4, 1, False)


def test_invalid_instances():
    holes = grid_from(["..#", "...", "..."])
    assert solve(holes, [(0, 0), (1, 1)], [(2, 2), (2, 2)]) is None  # shared goal
    assert solve(holes, [(0, 2)], [(2, 2)]) is None  # start on a hole
    assert solve(grid_from([".#.", "##.", "..."]), [(0, 0)], [(2, 2)]) is None  # unreachable
    with pytest.raises(ValueError):
        solve(holes, [(0, 3)], [(0, 0)])
    assert solve(holes, [], []) == Solution(0, 0, [], False, 0)


# A crowded 4x4 board (13 cells, 5 agents, SoC 39) that takes both searches seconds.
CROWDED = (
    grid_from(["#...", ".#..", "..#.", "...."]),
    [(1, 2), (0, 2), (3, 2), (3, 3), (2, 3)],
    [(2, 3), (3, 2), (0, 2), (3, 0), (1, 3)],
)


def test_budget_exceeded():
    with pytest.raises(SolverBudgetExceeded):
        solve(*CROWDED, max_nodes=0, max_states=0)
    with pytest.raises(SolverBudgetExceeded):
        solve(*CROWDED, time_limit=0.0)


def test_single_agent_distances():
    holes = grid_from([".#.", "...", "#.."])
    d = single_agent_distances(holes, (0, 0))
    assert d.tolist() == [[0, -1, 4], [1, 2, 3], [-1, 3, 4]]


@st.composite
def instances(draw, sizes=(3, 6), agents=(1, 4), max_hole=0.4):
    """Random grid with distinct starts/goals, each goal reachable from its start."""
    n = draw(st.integers(*sizes))
    ratio = draw(st.floats(0.0, max_hole))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    holes = rng.random((n, n)) < ratio
    free = [tuple(map(int, c)) for c in np.argwhere(~holes)]
    k = draw(st.integers(*agents))
    if len(free) < k:
        k = len(free)
    idx_s = rng.permutation(len(free))[:k]
    starts = [free[i] for i in idx_s]
    goals: list[Cell] = []
    for s in starts:
        reach = distances(holes, n, s)
        cands = [c for c in free if c not in goals and c in reach]
        if not cands:
            break
        goals.append(cands[int(rng.integers(len(cands)))])
    starts = starts[: len(goals)]
    assume(starts)
    return holes, starts, goals


# --- each exact search alone -------------------------------------------------------------------


GAVE_UP = "gave up"


def _run(gen, steps: int = 100_000):
    """Drive one search generator to its answer (``GAVE_UP`` if it has none after ``steps``)."""
    for _ in range(steps):
        try:
            next(gen)
        except StopIteration as stop:
            return GAVE_UP if stop.value is cbs._GAVE_UP else stop.value
    gen.close()
    return GAVE_UP


def alone(holes, starts, goals) -> dict[str, object]:
    """(SoC, no wait-free plan at that SoC, makespan) from CBS alone and from joint A* alone."""
    n = holes.shape[0]
    ctx = cbs._Ctx(cbs._Grid(holes), [r * n + c for r, c in starts], [r * n + c for r, c in goals])
    work, inf = cbs._Work(), float("inf")
    searches = {
        "cbs": (cbs._cbs_soc, cbs._cbs_mks, {"max_nodes": 3000}),
        "joint": (cbs._joint_soc, cbs._joint_mks, {"max_states": 100_000}),
    }
    out: dict[str, object] = {}
    for name, (soc_search, mks_search, budget) in searches.items():
        res = _run(soc_search(ctx, wait=True, bound=inf, work=work, **budget))
        if not isinstance(res, tuple):
            out[name] = res
            continue
        soc, paths = res
        plan = [[divmod(c, n) for c in p] for p in paths]
        assert check_plan(holes, starts, goals, plan)[0] == soc
        wait_free = _run(soc_search(ctx, wait=False, bound=soc, work=work, **budget))
        upper = max(len(p) - 1 for p in paths)
        mks = _run(mks_search(ctx, bound=upper, work=work, **budget))
        if GAVE_UP in (wait_free, mks):
            out[name] = GAVE_UP
        else:
            out[name] = (soc, wait_free is None, upper if mks is None else mks)
    return out


# Two rooms joined by a 5-cell corridor: crossing it needs corridor reasoning in CBS.
ROOMS = grid_from(
    [
        "..#####..",
        "..#####..",
        ".........",
        "..#####..",
        "..#####..",
        "#########",
        "#########",
        "#########",
        "#########",
    ]
)


@pytest.mark.parametrize(
    ("starts", "goals"),
    [
        ([(2, 0), (2, 8)], [(2, 8), (2, 0)]),  # corridor crossing
        ([(2, 8), (3, 1)], [(2, 0), (2, 4)]),  # B parks mid-corridor: target reasoning
        ([(2, 0), (2, 1)], [(2, 8), (2, 3)]),
        ([(2, 1), (2, 8), (1, 8)], [(2, 7), (2, 0), (1, 0)]),
    ],
)
def test_searches_agree_on_rooms(starts, goals):
    res = alone(ROOMS, starts, goals)
    assert res["cbs"] == res["joint"] != GAVE_UP
    if len(starts) == 2:
        soc = optimal_soc(ROOMS, starts, goals, wait=True)
        wait_free = optimal_soc(ROOMS, starts, goals, wait=False)
        mks = optimal_makespan(ROOMS, starts, goals)
        assert res["cbs"] == (soc, wait_free is None or wait_free > soc, mks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(sizes=(4, 7), agents=(3, 4), max_hole=0.5))
def test_searches_agree(inst):
    """CBS (with its symmetry reasoning) and the joint A* are independent exact methods."""
    res = alone(*inst)
    if GAVE_UP not in res.values():
        assert res["cbs"] == res["joint"]


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_plan_valid_and_bounds(inst):
    holes, starts, goals = inst
    try:
        sol = solve(holes, starts, goals, max_nodes=3000, time_limit=5.0)
    except SolverBudgetExceeded:
        return
    if sol is None:
        return
    soc, mks = check_plan(holes, starts, goals, sol.paths)
    assert soc == sol.soc
    assert mks >= sol.makespan
    d = [distances(holes, holes.shape[0], s)[g] for s, g in zip(starts, goals, strict=True)]
    assert sol.soc >= sum(d)
    assert sol.makespan >= max(d, default=0)
    if len(starts) == 1:
        assert (sol.soc, sol.makespan, sol.needs_wait) == (d[0], d[0], False)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(instances(sizes=(3, 4), agents=(2, 2)), instances(sizes=(3, 3), agents=(3, 3))))
def test_matches_brute_force(inst):
    holes, starts, goals = inst
    sol = solve(holes, starts, goals)
    soc = optimal_soc(holes, starts, goals, wait=True)
    if soc is None:
        assert sol is None
        return
    assert sol is not None
    assert sol.soc == soc
    assert check_plan(holes, starts, goals, sol.paths)[0] == soc
    assert sol.makespan == optimal_makespan(holes, starts, goals)
    wait_free = optimal_soc(holes, starts, goals, wait=False)
    assert sol.needs_wait == (wait_free is None or wait_free > soc)
