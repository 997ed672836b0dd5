"""Plain-Python reference implementation of docs/rules.md (for differential tests).

Written directly from the spec, without jax or numpy: positions are ``(row, col)`` tuples, the
board is a ``list[list[bool]]`` of holes (it may be padded beyond ``size``; only cells inside
``[0, size)²`` are ever looked up). Only the *active* agents are passed in.
"""

from __future__ import annotations

from typing import Any

Cell = tuple[int, int]

STAY, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4
DELTAS: dict[int, Cell] = {STAY: (0, 0), UP: (-1, 0), DOWN: (1, 0), LEFT: (0, -1), RIGHT: (0, 1)}

CHECKS = (
    "parsable",
    "one_cell_moves",
    "conflict_free",
    "goals_reached",
    "starts_correct",
    "agent_count",
    "no_hole",
    "in_bounds",
)


def _in_grid(cell: Cell, size: int) -> bool:
    """True iff ``cell`` lies in ``[0, size)²``."""
    return 0 <= cell[0] < size and 0 <= cell[1] < size


def _is_hole(cell: Cell, size: int, holes: list[list[bool]]) -> bool:
    """True iff ``cell`` is inside the grid and a hole (off-grid cells are never looked up)."""
    return _in_grid(cell, size) and bool(holes[cell[0]][cell[1]])


def _manhattan(a: Cell, b: Cell) -> int:
    """Manhattan distance between two cells."""
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _slip(action: int, side: bool) -> int:
    """The perpendicular move that replaces ``action`` on a slip."""
    if action in (UP, DOWN):
        return LEFT if side else RIGHT
    if action in (LEFT, RIGHT):
        return UP if side else DOWN
    return action


def _vertex_flags(cells: list[Cell]) -> list[bool]:
    """Per agent: does another agent have the same cell?"""
    n = len(cells)
    return [any(j != i and cells[j] == cells[i] for j in range(n)) for i in range(n)]


def _edge_flags(pos: list[Cell], cells: list[Cell]) -> list[bool]:
    """Per agent: is it swapping cells with another agent (``cells`` are the targets)?"""
    n = len(cells)
    return [
        cells[i] != pos[i]
        and any(j != i and cells[i] == pos[j] and cells[j] == pos[i] for j in range(n))
        for i in range(n)
    ]


def ref_initial_frozen(pos: list[Cell], goals: list[Cell]) -> list[bool]:
    """Frozen flags at reset: an agent already on its goal is frozen."""
    return [tuple(p) == tuple(g) for p, g in zip(pos, goals, strict=True)]


def ref_step(
    *,
    size: int,
    holes: list[list[bool]],
    goals: list[Cell],
    pos: list[Cell],
    frozen: list[bool],
    actions: list[int],
    slip_u: list[float],
    slip_side: list[bool],
    slip_prob: float,
    mode: str,
    time: int,
    step_limit: int,
    success_reward: float,
    step_cost: float,
    shaping: float,
    conflict_penalty: float,
    goal_rule: str = "freeze",
    cost: list[int] | None = None,
    soc_cost: float = 0.0,
    makespan_cost: float = 0.0,
) -> dict[str, Any]:
    """One environment step for the ``n`` active agents (rules.md "One step").

    ``mode`` is ``"fail"`` or ``"block"``; ``goal_rule`` is ``"freeze"`` or ``"plan"``; ``cost``
    holds each agent's path cost so far (rules.md "Costs"; None: the costs at time 0). Returns
    ``pos``, ``frozen``, ``cost``, ``reward``, ``success``, ``failed``, ``terminated``,
    ``truncated``, ``time`` and the per-agent lists ``oob``, ``hole``, ``vertex``, ``edge``,
    ``blocked``.
    """
    if mode not in ("fail", "block"):
        raise ValueError(f"unknown conflict mode {mode!r}")
    if goal_rule not in ("freeze", "plan"):
        raise ValueError(f"unknown goal rule {goal_rule!r}")
    n = len(pos)
    pos = [(int(p[0]), int(p[1])) for p in pos]
    goals = [(int(g[0]), int(g[1])) for g in goals]
    was_frozen = [bool(f) for f in frozen]
    if cost is None:
        cost = [0 if pos[i] == goals[i] else 1 for i in range(n)]
    old_cost = [int(c) for c in cost]
    was_home = [pos[i] == goals[i] for i in range(n)]
    assert len(goals) == len(was_frozen) == len(actions) == len(slip_u) == len(slip_side) == n

    # 1. frozen agents stay; 2. slip for non-frozen movers.
    acts: list[int] = []
    for i in range(n):
        a = int(actions[i])
        if a not in DELTAS:
            raise ValueError(f"invalid action {a}")
        if was_frozen[i]:
            a = STAY
        elif a != STAY and slip_u[i] < slip_prob:
            a = _slip(a, bool(slip_side[i]))
        acts.append(a)

    # 3. intended targets.
    tgt = [(pos[i][0] + DELTAS[acts[i]][0], pos[i][1] + DELTAS[acts[i]][1]) for i in range(n)]

    # 4. violations on the intended targets.
    oob = [not _in_grid(t, size) for t in tgt]
    hole = [_is_hole(t, size, holes) for t in tgt]
    vertex = _vertex_flags(tgt)
    edge = _edge_flags(pos, tgt)
    violated = [oob[i] or hole[i] or vertex[i] or edge[i] for i in range(n)]

    # 5. resolved positions: cancel oob/hole moves, then cancel conflicts until a fixpoint.
    t = [pos[i] if (oob[i] or hole[i]) else tgt[i] for i in range(n)]
    changed = True
    while changed:
        changed = False
        v, e = _vertex_flags(t), _edge_flags(pos, t)
        for i in range(n):
            if (v[i] or e[i]) and t[i] != pos[i]:
                t[i] = pos[i]
                changed = True
    new_pos = t
    blocked = [new_pos[i] != tgt[i] for i in range(n)]

    # 6. outcome.
    all_at_goal = all(new_pos[i] == goals[i] for i in range(n))
    if mode == "fail":
        failed = any(violated)
        success = all_at_goal and not failed
    else:
        failed = False
        success = all_at_goal
    terminated = success or failed
    new_time = time + 1
    truncated = (not terminated) and new_time >= step_limit
    if goal_rule == "freeze":
        new_frozen = [was_frozen[i] or new_pos[i] == goals[i] for i in range(n)]
    else:
        new_frozen = [False] * n
    # Costs: 1 + the last time an agent is off its goal (the new position is at time + 1).
    new_cost = [old_cost[i] if new_pos[i] == goals[i] else new_time + 1 for i in range(n)]

    # 7. reward.
    penalised = violated if mode == "fail" else blocked
    reward: list[float] = []
    for i in range(n):
        r = 0.0
        if success:
            r += success_reward
        if not was_home[i]:
            r -= step_cost
        if not was_frozen[i]:
            r += shaping * (_manhattan(pos[i], goals[i]) - _manhattan(new_pos[i], goals[i]))
        if penalised[i]:
            r -= conflict_penalty
        if success:  # the verifier's costs of the (valid) plan, paid at its end
            r -= soc_cost * new_cost[i] + makespan_cost * max(new_cost)
        reward.append(r)

    return {
        "pos": new_pos,
        "frozen": new_frozen,
        "cost": new_cost,
        "reward": reward,
        "success": success,
        "failed": failed,
        "terminated": terminated,
        "truncated": truncated,
        "time": new_time,
        "oob": oob,
        "hole": hole,
        "vertex": vertex,
        "edge": edge,
        "blocked": blocked,
    }


def _parse_cell(entry: object) -> Cell | None:
    """``(row, col)`` if ``entry`` is a 2-tuple (or 2-list) of ints (not bools), else None."""
    if not isinstance(entry, tuple | list) or len(entry) != 2:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
        return None
    return (entry[0], entry[1])


def _parse_plan(plan: object) -> list[list[Cell]] | None:
    """The plan as lists of cells, or None if it is not parsable (empty paths included)."""
    if not isinstance(plan, list | tuple):
        return None
    paths: list[list[Cell]] = []
    for path in plan:
        if not isinstance(path, list | tuple) or len(path) == 0:
            return None
        cells = [_parse_cell(c) for c in path]
        if any(c is None for c in cells):
            return None
        paths.append([c for c in cells if c is not None])
    return paths


def _arrival_cost(path: list[Cell], goal: Cell) -> int:
    """Smallest t such that path[t:] is all ``goal`` (len(path) if the last cell is not it)."""
    t = len(path)
    while t > 0 and path[t - 1] == goal:
        t -= 1
    return t


def ref_check_plan(
    *,
    size: int,
    holes: list[list[bool]],
    starts: list[Cell],
    goals: list[Cell],
    plan: list[list[Cell]] | None,
    n_agents: int,
) -> dict[str, Any]:
    """The eight whole-plan checks of rules.md "Whole plans", plus ``valid``, ``makespan``, ``soc``.

    Checks other than ``agent_count`` use the first ``min(len(plan), n_agents)`` paths. An
    unparsable plan fails every check. ``makespan``/``soc`` are None unless the plan is valid.
    """
    starts = [(int(s[0]), int(s[1])) for s in starts]
    goals = [(int(g[0]), int(g[1])) for g in goals]
    paths = None if plan is None else _parse_plan(plan)
    if paths is None:
        out: dict[str, Any] = {k: False for k in CHECKS}
        out.update(valid=False, makespan=None, soc=None)
        return out

    m = min(len(paths), n_agents)
    used = paths[:m]
    horizon = max((len(p) for p in used), default=1)
    padded = [p + [p[-1]] * (horizon - len(p)) for p in used]

    cells = [c for p in used for c in p]
    one_cell_moves = all(_manhattan(p[k], p[k + 1]) <= 1 for p in used for k in range(len(p) - 1))
    in_bounds = all(_in_grid(c, size) for c in cells)
    no_hole = not any(_is_hole(c, size, holes) for c in cells)

    conflict_free = True
    for t in range(horizon):
        now = [p[t] for p in padded]
        if any(_vertex_flags(now)):
            conflict_free = False
            break
        if t + 1 < horizon and any(_edge_flags(now, [p[t + 1] for p in padded])):
            conflict_free = False
            break

    checks = {
        "parsable": True,
        "one_cell_moves": one_cell_moves,
        "conflict_free": conflict_free,
        "goals_reached": all(used[i][-1] == goals[i] for i in range(m)),
        "starts_correct": all(used[i][0] == starts[i] for i in range(m)),
        "agent_count": len(paths) == n_agents,
        "no_hole": no_hole,
        "in_bounds": in_bounds,
    }
    valid = all(checks.values())
    out = dict(checks)
    out["valid"] = valid
    if valid:
        costs = [_arrival_cost(padded[i], goals[i]) for i in range(m)]
        out["makespan"] = max(costs, default=0)
        out["soc"] = sum(costs)
    else:
        out["makespan"] = None
        out["soc"] = None
    return out


def ref_accuracy_reward(valid: bool, cost: int, optimal: int) -> float:
    """Paper's accuracy reward: 1 at the optimum, linearly down to 0.3 at 3x it, 0 if invalid."""
    if not valid:
        return 0.0
    if optimal == 0:
        return 1.0 if cost == 0 else 0.3
    c = cost - optimal
    c_max = 2 * optimal
    if c <= 0:
        return 1.0
    if c <= c_max:
        return 1.0 - 0.7 * c / c_max
    return 0.3
