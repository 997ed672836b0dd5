"""Hand-made cases for the plain-Python reference of docs/rules.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf.solvers.reference import (
    ref_accuracy_reward,
    ref_check_plan,
    ref_initial_frozen,
    ref_step,
)

STAY, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4
SR, SC, SH, CP = 10.0, 0.01, 0.1, 0.5  # success_reward, step_cost, shaping, conflict_penalty


def board(size: int, hole_cells: Sequence[tuple[int, int]] = (), pad: int = 0) -> list[list[bool]]:
    """A (size+pad)² hole grid with the given holes."""
    n = size + pad
    grid = [[False] * n for _ in range(n)]
    for r, c in hole_cells:
        grid[r][c] = True
    return grid


def step(**kw: Any) -> dict[str, Any]:
    """ref_step with defaults: 5x5 empty board, no slip, fail mode, far step limit."""
    n = len(kw["pos"])
    args: dict[str, Any] = dict(
        size=5,
        holes=board(5),
        frozen=[False] * n,
        slip_u=[0.9] * n,
        slip_side=[False] * n,
        slip_prob=0.0,
        mode="fail",
        time=0,
        step_limit=100,
        success_reward=SR,
        step_cost=SC,
        shaping=SH,
        conflict_penalty=CP,
    )
    args.update(kw)
    return ref_step(**args)


def flags(out: dict[str, Any], i: int) -> dict[str, bool]:
    """Violation flags of agent i."""
    return {k: out[k][i] for k in ("oob", "hole", "vertex", "edge", "blocked")}


NONE = {"oob": False, "hole": False, "vertex": False, "edge": False, "blocked": False}


# ----------------------------------------------------------------------------- one step


@pytest.mark.parametrize(
    ("action", "expected"),
    [(STAY, (2, 2)), (UP, (1, 2)), (DOWN, (3, 2)), (LEFT, (2, 1)), (RIGHT, (2, 3))],
)
def test_action_deltas(action: int, expected: tuple[int, int]) -> None:
    out = step(pos=[(2, 2)], goals=[(0, 0)], actions=[action])
    assert out["pos"] == [expected]
    assert flags(out, 0) == NONE
    assert out["failed"] is False and out["success"] is False and out["terminated"] is False
    assert out["time"] == 1


def test_step_cost_and_shaping_terms() -> None:
    out = step(pos=[(2, 2), (4, 4)], goals=[(0, 0), (4, 0)], actions=[UP, RIGHT])
    # A0 closer by 1; A1 tries to leave the grid -> oob, which also fails the episode
    assert out["reward"][0] == pytest.approx(-SC + SH)
    assert out["reward"][1] == pytest.approx(-SC - CP)
    out = step(pos=[(2, 2)], goals=[(0, 0)], actions=[DOWN])
    assert out["reward"] == [pytest.approx(-SC - SH)]


@pytest.mark.parametrize(
    ("pos", "action"), [((0, 3), UP), ((4, 1), DOWN), ((2, 0), LEFT), ((3, 4), RIGHT)]
)
def test_oob_fail_mode(pos: tuple[int, int], action: int) -> None:
    out = step(pos=[pos], goals=[(2, 2)], actions=[action])
    assert flags(out, 0) == {**NONE, "oob": True, "blocked": True}
    assert out["pos"] == [pos]
    assert out["failed"] is True and out["terminated"] is True and out["success"] is False
    assert out["truncated"] is False
    assert out["reward"] == [pytest.approx(-SC - CP)]


def test_oob_is_relative_to_size_not_padded_board() -> None:
    # board arrays padded to 7, grid is 5: row 5 is outside even though holes[5] exists
    out = step(holes=board(5, pad=2), pos=[(4, 4)], goals=[(0, 0)], actions=[DOWN])
    assert out["oob"] == [True] and out["hole"] == [False]
    assert out["pos"] == [(4, 4)]


def test_oob_cell_is_not_looked_up_as_hole() -> None:
    # holes[-1][0] is a hole; moving up from (0,0) targets (-1,0), which must not wrap around
    out = step(holes=board(5, [(4, 0)]), pos=[(0, 0)], goals=[(2, 2)], actions=[UP])
    assert out["oob"] == [True] and out["hole"] == [False]


def test_fail_mode_step_into_hole_ends_episode() -> None:
    out = step(
        holes=board(5, [(2, 3)]),
        pos=[(2, 2), (0, 0)],
        goals=[(2, 4), (0, 1)],
        actions=[RIGHT, RIGHT],
    )
    assert flags(out, 0) == {**NONE, "hole": True, "blocked": True}
    assert flags(out, 1) == NONE
    assert out["pos"] == [(2, 2), (0, 1)]  # the hole move is cancelled, the other move happens
    assert out["failed"] is True and out["terminated"] is True and out["success"] is False
    assert out["frozen"] == [False, True]
    assert out["reward"][0] == pytest.approx(-SC - CP)
    assert out["reward"][1] == pytest.approx(-SC + SH)


def test_block_mode_hole_is_cancelled_and_penalised_but_not_failed() -> None:
    out = step(
        mode="block", holes=board(5, [(2, 3)]), pos=[(2, 2)], goals=[(2, 4)], actions=[RIGHT]
    )
    assert flags(out, 0) == {**NONE, "hole": True, "blocked": True}
    assert out["pos"] == [(2, 2)]
    assert out["failed"] is False and out["terminated"] is False
    assert out["reward"] == [pytest.approx(-SC - CP)]


def test_vertex_conflict_fail_and_block() -> None:
    kw = dict(pos=[(1, 1), (1, 3)], goals=[(4, 4), (4, 0)], actions=[RIGHT, LEFT])
    out = step(**kw)
    for i in (0, 1):
        assert flags(out, i) == {**NONE, "vertex": True, "blocked": True}
        assert out["reward"][i] == pytest.approx(-SC - CP)
    assert out["pos"] == [(1, 1), (1, 3)]
    assert out["failed"] is True and out["terminated"] is True
    out = step(mode="block", **kw)
    assert out["pos"] == [(1, 1), (1, 3)]
    assert out["failed"] is False and out["terminated"] is False
    assert out["blocked"] == [True, True] and out["vertex"] == [True, True]
    assert out["reward"] == [pytest.approx(-SC - CP)] * 2


def test_vertex_conflict_with_agent_that_stays() -> None:
    out = step(pos=[(1, 1), (1, 2)], goals=[(4, 4), (4, 0)], actions=[RIGHT, STAY])
    assert out["vertex"] == [True, True]
    assert out["blocked"] == [True, False]  # A1 intended to stay and did
    assert out["pos"] == [(1, 1), (1, 2)]
    # fail mode penalises any violation, also the one of the agent that was hit
    assert out["reward"][0] == pytest.approx(-SC - CP)
    assert out["reward"][1] == pytest.approx(-SC - CP)
    out = step(mode="block", pos=[(1, 1), (1, 2)], goals=[(4, 4), (4, 0)], actions=[RIGHT, STAY])
    assert out["reward"][0] == pytest.approx(-SC - CP)
    assert out["reward"][1] == pytest.approx(-SC)


def test_edge_conflict_swap_forbidden() -> None:
    kw = dict(pos=[(2, 1), (2, 2)], goals=[(2, 4), (2, 0)], actions=[RIGHT, LEFT])
    out = step(**kw)
    for i in (0, 1):
        assert flags(out, i) == {**NONE, "edge": True, "blocked": True}
    assert out["pos"] == [(2, 1), (2, 2)]
    assert out["failed"] is True
    out = step(mode="block", **kw)
    assert out["pos"] == [(2, 1), (2, 2)] and out["failed"] is False
    assert out["reward"] == [pytest.approx(-SC - CP)] * 2


def test_following_allowed() -> None:
    for mode in ("fail", "block"):
        out = step(
            mode=mode,
            pos=[(0, 0), (0, 1), (0, 2)],
            goals=[(4, 4), (4, 4), (4, 4)],
            actions=[RIGHT, RIGHT, RIGHT],
        )
        assert out["pos"] == [(0, 1), (0, 2), (0, 3)]
        assert all(flags(out, i) == NONE for i in range(3))
        assert out["failed"] is False


def test_rotation_cycle_allowed() -> None:
    # the grid is bipartite, so the shortest cycle is four agents around a 2x2 block
    for mode in ("fail", "block"):
        out = step(
            mode=mode,
            pos=[(1, 1), (1, 2), (2, 2), (2, 1)],
            goals=[(0, 0)] * 4,
            actions=[RIGHT, DOWN, LEFT, UP],
        )
        assert out["pos"] == [(1, 2), (2, 2), (2, 1), (1, 1)]
        assert all(flags(out, i) == NONE for i in range(4))
        assert out["failed"] is False


def test_frozen_agent_ignores_action_and_gets_no_reward() -> None:
    out = step(
        pos=[(3, 3)], goals=[(3, 3)], frozen=[True], actions=[UP], slip_u=[0.0], slip_prob=1.0
    )
    assert out["pos"] == [(3, 3)]
    assert flags(out, 0) == NONE
    assert out["frozen"] == [True]
    assert out["reward"] == [pytest.approx(SR)]  # single agent at its goal: success
    assert out["success"] is True and out["terminated"] is True


def test_frozen_agent_can_be_hit_fail_mode() -> None:
    out = step(
        pos=[(1, 1), (1, 2)],
        goals=[(4, 4), (1, 2)],
        frozen=[False, True],
        actions=[RIGHT, LEFT],  # A1's action is ignored: it would otherwise be a swap
    )
    assert flags(out, 0) == {**NONE, "vertex": True, "blocked": True}
    assert flags(out, 1) == {**NONE, "vertex": True}
    assert out["pos"] == [(1, 1), (1, 2)]
    assert out["failed"] is True
    assert out["reward"][0] == pytest.approx(-SC - CP)
    assert out["reward"][1] == pytest.approx(-CP)  # no step cost/shaping, but its violation


def test_frozen_agent_can_be_hit_block_mode() -> None:
    out = step(
        mode="block",
        pos=[(1, 1), (1, 2)],
        goals=[(4, 4), (1, 2)],
        frozen=[False, True],
        actions=[RIGHT, LEFT],
    )
    assert out["blocked"] == [True, False]
    assert out["pos"] == [(1, 1), (1, 2)]
    assert out["frozen"] == [False, True]
    assert out["reward"][0] == pytest.approx(-SC - CP)
    assert out["reward"][1] == 0.0


def test_frozen_agent_does_not_swap() -> None:
    # A0 moves onto frozen A1, A1's "left" is replaced by stay: vertex, not edge
    out = step(
        pos=[(0, 0), (0, 1)], goals=[(4, 4), (0, 1)], frozen=[False, True], actions=[RIGHT, LEFT]
    )
    assert out["edge"] == [False, False] and out["vertex"] == [True, True]


@pytest.mark.parametrize(
    ("action", "side", "expected"),
    [
        (UP, False, (2, 3)),
        (UP, True, (2, 1)),
        (DOWN, False, (2, 3)),
        (DOWN, True, (2, 1)),
        (LEFT, False, (3, 2)),
        (LEFT, True, (1, 2)),
        (RIGHT, False, (3, 2)),
        (RIGHT, True, (1, 2)),
    ],
)
def test_slip_direction_and_side(action: int, side: bool, expected: tuple[int, int]) -> None:
    out = step(
        pos=[(2, 2)],
        goals=[(0, 0)],
        actions=[action],
        slip_u=[0.1],
        slip_side=[side],
        slip_prob=0.2,
    )
    assert out["pos"] == [expected]
    assert flags(out, 0) == NONE


def test_slip_threshold_is_strict() -> None:
    # slip iff slip_u < slip_prob
    out = step(pos=[(2, 2)], goals=[(0, 0)], actions=[UP], slip_u=[0.2], slip_prob=0.2)
    assert out["pos"] == [(1, 2)]
    out = step(pos=[(2, 2)], goals=[(0, 0)], actions=[UP], slip_u=[0.19], slip_prob=0.2)
    assert out["pos"] == [(2, 3)]
    out = step(pos=[(2, 2)], goals=[(0, 0)], actions=[STAY], slip_u=[0.0], slip_prob=1.0)
    assert out["pos"] == [(2, 2)]  # stay never slips


def test_slip_then_violations_on_slipped_target() -> None:
    # up slips right into a hole: the violation is on the slipped target
    out = step(
        holes=board(5, [(2, 3)]),
        pos=[(2, 2)],
        goals=[(0, 2)],
        actions=[UP],
        slip_u=[0.0],
        slip_side=[False],
        slip_prob=0.5,
    )
    assert out["hole"] == [True] and out["pos"] == [(2, 2)] and out["failed"] is True
    # left slips up, off the top of the grid
    out = step(
        pos=[(0, 2)], goals=[(4, 4)], actions=[LEFT], slip_u=[0.0], slip_side=[True], slip_prob=0.5
    )
    assert out["oob"] == [True]


def test_block_cascade_through_hole() -> None:
    # A0 moves into A1's cell, A1 is blocked by a hole -> A0 is blocked too
    kw = dict(
        holes=board(5, [(1, 2)]),
        pos=[(1, 0), (1, 1)],
        goals=[(4, 4), (4, 4)],
        actions=[RIGHT, RIGHT],
    )
    out = step(mode="block", **kw)
    assert out["pos"] == [(1, 0), (1, 1)]
    assert flags(out, 0) == {**NONE, "blocked": True}
    assert flags(out, 1) == {**NONE, "hole": True, "blocked": True}
    assert out["failed"] is False
    assert out["reward"] == [pytest.approx(-SC - CP)] * 2
    out = step(mode="fail", **kw)
    assert out["pos"] == [(1, 0), (1, 1)]
    assert out["failed"] is True
    # fail mode penalises violations only: A0 had none
    assert out["reward"][0] == pytest.approx(-SC)
    assert out["reward"][1] == pytest.approx(-SC - CP)


def test_block_cascade_chain_from_vertex_conflict() -> None:
    # A1 and A2 meet at (0,3): both cancelled; then A0 (following A1) and A3 (following A0)
    kw = dict(
        pos=[(0, 1), (0, 2), (0, 4), (0, 0)],
        goals=[(4, 4)] * 4,
        actions=[RIGHT, RIGHT, LEFT, RIGHT],
    )
    out = step(mode="block", **kw)
    assert out["vertex"] == [False, True, True, False]
    assert out["blocked"] == [True, True, True, True]
    assert out["pos"] == [(0, 1), (0, 2), (0, 4), (0, 0)]
    assert out["reward"] == [pytest.approx(-SC - CP)] * 4
    out = step(mode="fail", **kw)
    assert out["pos"] == [(0, 1), (0, 2), (0, 4), (0, 0)]
    assert out["failed"] is True
    assert out["reward"] == [pytest.approx(r) for r in (-SC, -SC - CP, -SC - CP, -SC)]


def test_success_all_agents_at_goal() -> None:
    out = step(
        pos=[(0, 1), (3, 3)],
        goals=[(0, 0), (3, 3)],
        frozen=[False, True],
        actions=[LEFT, STAY],
    )
    assert out["success"] is True and out["failed"] is False
    assert out["terminated"] is True and out["truncated"] is False
    assert out["frozen"] == [True, True]
    assert out["reward"][0] == pytest.approx(SR - SC + SH)
    assert out["reward"][1] == pytest.approx(SR)


def test_no_success_while_one_agent_is_off_goal() -> None:
    out = step(pos=[(0, 1), (3, 2)], goals=[(0, 0), (3, 3)], actions=[LEFT, STAY])
    assert out["success"] is False and out["terminated"] is False
    assert out["frozen"] == [True, False]
    assert out["reward"][0] == pytest.approx(-SC + SH)
    assert out["reward"][1] == pytest.approx(-SC)


def test_success_requires_no_violation_in_fail_mode_only() -> None:
    # A0 sits on its goal without being frozen (the plan rule) and bumps the wall: all agents
    # end on goals. On its goal before the step, it pays no step cost.
    kw = dict(pos=[(0, 0)], goals=[(0, 0)], actions=[UP], goal_rule="plan")
    out = step(**kw)
    assert out["pos"] == [(0, 0)] and out["oob"] == [True]
    assert out["success"] is False and out["failed"] is True and out["terminated"] is True
    assert out["reward"] == [pytest.approx(-CP)]
    out = step(mode="block", **kw)
    assert out["success"] is True and out["failed"] is False and out["terminated"] is True
    assert out["reward"] == [pytest.approx(SR - CP)] and out["frozen"] == [False]


def test_truncation() -> None:
    kw = dict(pos=[(2, 2)], goals=[(0, 0)], actions=[STAY], step_limit=10)
    out = step(time=8, **kw)
    assert out["time"] == 9 and out["truncated"] is False
    out = step(time=9, **kw)
    assert out["time"] == 10 and out["truncated"] is True and out["terminated"] is False
    out = step(time=12, **kw)
    assert out["time"] == 13 and out["truncated"] is True
    # a terminated step is never truncated
    out = step(time=9, pos=[(0, 1)], goals=[(0, 0)], actions=[LEFT], step_limit=10)
    assert out["terminated"] is True and out["truncated"] is False
    out = step(time=9, pos=[(0, 0)], goals=[(2, 2)], actions=[UP], step_limit=10)
    assert out["failed"] is True and out["truncated"] is False


def test_shaping_uses_resolved_position() -> None:
    # the move is cancelled (block mode), so the shaping term is 0
    out = step(mode="block", pos=[(2, 1), (2, 2)], goals=[(2, 4), (2, 0)], actions=[RIGHT, LEFT])
    assert out["reward"] == [pytest.approx(-SC - CP)] * 2
    out = step(pos=[(4, 4)], goals=[(0, 0)], actions=[UP], shaping=0.25, step_cost=0.0)
    assert out["reward"] == [pytest.approx(0.25)]


def test_initial_frozen() -> None:
    assert ref_initial_frozen([(0, 0), (1, 2), (3, 3)], [(0, 0), (2, 1), (3, 3)]) == [
        True,
        False,
        True,
    ]


def test_invalid_mode_rejected() -> None:
    with pytest.raises(ValueError):
        step(pos=[(0, 0)], goals=[(1, 1)], actions=[STAY], mode="bounce")


@st.composite
def random_states(draw: st.DrawFn) -> dict[str, Any]:
    """A random board with distinct, hole-free agent positions and random actions."""
    size = draw(st.integers(3, 5))
    cells = [(r, c) for r in range(size) for c in range(size)]
    n = draw(st.integers(1, 5))
    chosen = draw(st.lists(st.sampled_from(cells), min_size=n + 3, max_size=n + 3, unique=True))
    pos, hole_cells = chosen[:n], chosen[n:]
    goals = draw(st.lists(st.sampled_from(cells), min_size=n, max_size=n, unique=True))
    return dict(
        size=size,
        holes=board(size, hole_cells),
        pos=pos,
        goals=goals,
        frozen=[draw(st.booleans()) and p == g for p, g in zip(pos, goals, strict=True)],
        actions=draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
        slip_u=draw(st.lists(st.floats(0, 0.999), min_size=n, max_size=n)),
        slip_side=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        slip_prob=draw(st.sampled_from([0.0, 0.3, 1.0])),
        mode=draw(st.sampled_from(["fail", "block"])),
    )


@settings(max_examples=300, deadline=None)
@given(random_states())
def test_step_invariants(state: dict[str, Any]) -> None:
    out = step(**state)
    pos, new = state["pos"], out["pos"]
    n = len(pos)
    assert len(set(new)) == n  # no two agents share a cell
    for i in range(n):
        r, c = new[i]
        assert 0 <= r < state["size"] and 0 <= c < state["size"]
        assert not state["holes"][r][c]
        assert abs(r - pos[i][0]) + abs(c - pos[i][1]) <= 1
        if out["blocked"][i]:
            assert new[i] == pos[i]
        if state["frozen"][i]:
            assert new[i] == pos[i] and out["frozen"][i]
        for j in range(n):  # no swaps
            assert not (j != i and new[i] == pos[j] and new[j] == pos[i] and new[i] != pos[i])
    any_violation = any(out[k][i] for k in ("oob", "hole", "vertex", "edge") for i in range(n))
    assert out["failed"] == (state["mode"] == "fail" and any_violation)
    if not any_violation:
        assert out["blocked"] == [False] * n


# ----------------------------------------------------------------------------- whole plans

CHECK_KEYS = (
    "parsable",
    "one_cell_moves",
    "conflict_free",
    "goals_reached",
    "starts_correct",
    "agent_count",
    "no_hole",
    "in_bounds",
)


def check(
    plan: Any,
    *,
    size: int = 4,
    holes: Any = None,
    starts: Any = None,
    goals: Any = None,
    n_agents: int | None = None,
) -> dict[str, Any]:
    """ref_check_plan on a 4x4 board; two agents (0,0)->(0,3) and (3,0)->(3,3) by default."""
    starts = [(0, 0), (3, 0)] if starts is None else starts
    goals = [(0, 3), (3, 3)] if goals is None else goals
    return ref_check_plan(
        size=size,
        holes=board(size) if holes is None else holes,
        starts=starts,
        goals=goals,
        plan=plan,
        n_agents=len(starts) if n_agents is None else n_agents,
    )


def failing(out: dict[str, Any]) -> set[str]:
    """Names of the failed checks."""
    return {k for k in CHECK_KEYS if not out[k]}


GOOD = [
    [(0, 0), (0, 1), (0, 2), (0, 3)],
    [(3, 0), (3, 1), (3, 2), (3, 3)],
]


def test_valid_plan_costs() -> None:
    out = check(GOOD)
    assert failing(out) == set()
    assert out["valid"] is True and out["makespan"] == 3 and out["soc"] == 6


def test_valid_plan_padding_and_zero_cost() -> None:
    out = check(
        [[(0, 0), (0, 1)], [(3, 0), (3, 1), (3, 2), (3, 3)], [(2, 2)]],
        starts=[(0, 0), (3, 0), (2, 2)],
        goals=[(0, 1), (3, 3), (2, 2)],
    )
    assert out["valid"] is True and out["makespan"] == 3 and out["soc"] == 1 + 3 + 0


def test_waiting_at_goal_then_staying_counts_first_final_arrival() -> None:
    plan = [[(0, 0), (0, 1), (0, 2), (0, 3), (0, 3), (0, 3)], GOOD[1]]
    out = check(plan)
    assert out["valid"] is True and out["makespan"] == 3 and out["soc"] == 6


def test_goal_left_early_and_reentered() -> None:
    plan = [
        [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (0, 3)],  # at goal at t=3, leaves, back at t=5
        GOOD[1],
    ]
    out = check(plan)
    assert failing(out) == set()
    assert out["valid"] is True and out["makespan"] == 5 and out["soc"] == 5 + 3


def test_swap_is_edge_conflict() -> None:
    out = check(
        [[(0, 0), (0, 1), (0, 0), (0, 1)], [(0, 1), (0, 0), (0, 1), (0, 0)]],
        starts=[(0, 0), (0, 1)],
        goals=[(0, 1), (0, 0)],
    )
    assert failing(out) == {"conflict_free"}
    assert out["valid"] is False and out["makespan"] is None and out["soc"] is None


def test_following_and_rotation_are_not_conflicts() -> None:
    follow = check(
        [[(0, 0), (0, 1), (0, 2)], [(0, 1), (0, 2), (0, 3)]],
        starts=[(0, 0), (0, 1)],
        goals=[(0, 2), (0, 3)],
    )
    assert follow["valid"] is True and follow["soc"] == 4
    rot = check(
        [[(1, 1), (1, 2)], [(1, 2), (2, 2)], [(2, 2), (2, 1)], [(2, 1), (1, 1)]],
        starts=[(1, 1), (1, 2), (2, 2), (2, 1)],
        goals=[(1, 2), (2, 2), (2, 1), (1, 1)],
    )
    assert rot["valid"] is True and rot["makespan"] == 1 and rot["soc"] == 4


def test_vertex_clash() -> None:
    out = check(
        [[(0, 0), (0, 1), (0, 2)], [(1, 1), (0, 1), (0, 0)]],
        starts=[(0, 0), (1, 1)],
        goals=[(0, 2), (0, 0)],
    )
    assert failing(out) == {"conflict_free"}
    assert out["valid"] is False


def test_vertex_clash_with_finished_agent_after_padding() -> None:
    # A0 finishes at (0,1) at t=1 and stays; A1 passes through (0,1) at t=2
    out = check(
        [[(0, 0), (0, 1)], [(2, 1), (1, 1), (0, 1), (0, 2)]],
        starts=[(0, 0), (2, 1)],
        goals=[(0, 1), (0, 2)],
    )
    assert failing(out) == {"conflict_free"}


def test_hole() -> None:
    out = check(
        [[(0, 0), (0, 1), (0, 2), (0, 3)], GOOD[1]],
        holes=board(4, [(0, 2)]),
    )
    assert failing(out) == {"no_hole"}
    assert out["valid"] is False and out["makespan"] is None


def test_jump() -> None:
    out = check([[(0, 0), (0, 2), (0, 3)], GOOD[1]])
    assert failing(out) == {"one_cell_moves"}
    diag = check([[(0, 0), (1, 1), (0, 1), (0, 2), (0, 3)], GOOD[1]])
    assert failing(diag) == {"one_cell_moves"}


def test_jump_into_hole_fails_both() -> None:
    out = check([[(0, 0), (0, 2), (0, 3)], GOOD[1]], holes=board(4, [(0, 2)]))
    assert failing(out) == {"one_cell_moves", "no_hole"}


def test_missing_agent() -> None:
    out = check([GOOD[0]])
    assert failing(out) == {"agent_count"}
    assert out["valid"] is False and out["makespan"] is None and out["soc"] is None
    # the paths that exist are still checked
    bad = check([[(0, 0), (0, 2), (0, 3)]])
    assert failing(bad) == {"agent_count", "one_cell_moves"}


def test_extra_agent() -> None:
    out = check([*GOOD, [(1, 0), (1, 1)]])
    assert failing(out) == {"agent_count"}
    assert out["valid"] is False


def test_off_grid_move() -> None:
    # (-1, 2) and (-1, 3) are off-grid; holes[-1][2], holes[-1][3] are holes (negative indices
    # would wrap around) and must not be looked up
    out = check(
        [[(0, 0), (0, 1), (0, 2), (-1, 2), (-1, 3), (0, 3)], [(2, 0), (2, 1), (2, 2)]],
        starts=[(0, 0), (2, 0)],
        goals=[(0, 3), (2, 2)],
        holes=board(4, [(3, 2), (3, 3)]),
    )
    assert failing(out) == {"in_bounds"}
    assert out["valid"] is False and out["makespan"] is None
    # row == size is off-grid even if the hole array is padded and has a hole there
    padded = check(
        [GOOD[0], [(3, 0), (4, 0), (4, 1), (3, 1), (3, 2), (3, 3)]],
        holes=board(4, [(4, 0)], pad=2),
    )
    assert failing(padded) == {"in_bounds"}


def test_wrong_start() -> None:
    out = check([[(0, 1), (0, 2), (0, 3)], GOOD[1]])
    assert failing(out) == {"starts_correct"}


def test_goal_not_reached() -> None:
    out = check([[(0, 0), (0, 1), (0, 2)], GOOD[1]])
    assert failing(out) == {"goals_reached"}


@pytest.mark.parametrize(
    "plan",
    [
        None,
        [[(0, 0), (0, 1), (0, 2), (0, 3)], [(3, 0), (3, 1, 0), (3, 2), (3, 3)]],
        [[(0, 0), (0, 1), (0, 2), (0, 3)], [(3, 0), (3.0, 1), (3, 2), (3, 3)]],
        [[(0, 0), (0, 1), (0, 2), (0, 3)], [(3, 0), (3, True), (3, 2), (3, 3)]],
        [[(0, 0), (0, 1), (0, 2), (0, 3)], [(3, 0), "31", (3, 2), (3, 3)]],
        [[(0, 0), (0, 1), (0, 2), (0, 3)], []],
    ],
)
def test_unparsable(plan: Any) -> None:
    out = check(plan)
    assert failing(out) == set(CHECK_KEYS)
    assert out["valid"] is False and out["makespan"] is None and out["soc"] is None


def test_lists_are_accepted_as_cells() -> None:
    out = check([[list(c) for c in p] for p in GOOD])
    assert out["valid"] is True and out["soc"] == 6


# ----------------------------------------------------------------------------- accuracy reward


@pytest.mark.parametrize(
    ("valid", "cost", "optimal", "expected"),
    [
        (False, 10, 10, 0.0),
        (True, 10, 10, 1.0),
        (True, 9, 10, 1.0),
        (True, 15, 10, 1.0 - 0.7 * 5 / 20),
        (True, 30, 10, 0.3),
        (True, 31, 10, 0.3),
        (True, 11, 10, 1.0 - 0.7 / 20),
        (True, 0, 0, 1.0),
        (True, 2, 0, 0.3),
        (False, 0, 0, 0.0),
    ],
)
def test_accuracy_reward(valid: bool, cost: int, optimal: int, expected: float) -> None:
    assert ref_accuracy_reward(valid, cost, optimal) == pytest.approx(expected)


def test_plan_rule_lets_an_agent_leave_its_goal_and_charges_its_last_arrival() -> None:
    # A0 on its goal steps off at time 3: its cost becomes 5 (back at 4 at the earliest).
    out = step(pos=[(0, 0)], goals=[(0, 0)], actions=[RIGHT], goal_rule="plan", time=3,
               cost=[2], soc_cost=1.0, makespan_cost=0.5, step_cost=0.0, shaping=0.0)
    assert out["pos"] == [(0, 1)] and out["frozen"] == [False] and out["cost"] == [5]
    assert out["reward"] == [pytest.approx(0.0)]  # costs are paid on success only
    back = step(pos=[(0, 1)], goals=[(0, 0)], actions=[LEFT], goal_rule="plan", time=4,
                cost=[5], soc_cost=1.0, makespan_cost=0.5, step_cost=0.0, shaping=0.0)
    assert back["success"] and back["cost"] == [5]
    assert back["reward"] == [pytest.approx(SR - 5 - 0.5 * 5)]
    frozen = step(pos=[(0, 0)], goals=[(0, 0)], actions=[RIGHT], frozen=[True], time=3,
                  cost=[2], soc_cost=1.0)
    assert frozen["pos"] == [(0, 0)] and frozen["cost"] == [2]
