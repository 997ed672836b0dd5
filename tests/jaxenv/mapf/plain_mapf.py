"""Plain-Python MAPF oracles for tests: BFS distances, component labels, and the exact optimum
(sum of costs, makespan, needs-wait) of a few agents by a joint-state search.

Independent of the code under test (no jax, no numpy tricks). A board is `holes[r][c]` (a
numpy array or nested lists), square, `len(holes)` cells a side. The joint search walks
(positions, settled flags) states: a settled agent stays on its goal for good and each step
costs the number of unsettled agents, so the cheapest terminal cost is the optimal sum of
costs; forbidding stays before settling gives the wait-free optimum.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator, Sequence

Cell = tuple[int, int]
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # up, down, left, right: actions 1-4
STEPS = ((0, 0), *MOVES)


def distances(holes, n: int, src) -> dict[Cell, int]:
    """BFS distance from `src` of every free cell of the n x n board that `src` reaches."""
    src = (int(src[0]), int(src[1]))
    dist, todo = {src: 0}, deque([src])
    while todo:
        r, c = todo.popleft()
        for dr, dc in MOVES:
            q = (r + dr, c + dc)
            if 0 <= q[0] < n and 0 <= q[1] < n and not holes[q[0]][q[1]] and q not in dist:
                dist[q] = dist[(r, c)] + 1
                todo.append(q)
    return dist


def component_labels(free) -> list[list[int]]:
    """Each free cell's component as the smallest flat index in it (row-major); -1 if blocked."""
    rows, cols = len(free), len(free[0])
    lab = [[-1] * cols for _ in range(rows)]
    for r0 in range(rows):
        for c0 in range(cols):
            if not free[r0][c0] or lab[r0][c0] >= 0:
                continue
            lab[r0][c0], todo = r0 * cols + c0, deque([(r0, c0)])  # first cell met is the min
            while todo:
                r, c = todo.popleft()
                for dr, dc in MOVES:
                    q = (r + dr, c + dc)
                    if (0 <= q[0] < rows and 0 <= q[1] < cols and free[q[0]][q[1]]
                            and lab[q[0]][q[1]] < 0):
                        lab[q[0]][q[1]] = lab[r0][c0]
                        todo.append(q)
    return lab


def _cells(cells) -> tuple[Cell, ...]:
    return tuple((int(r), int(c)) for r, c in cells)


def _steps(holes, cell: Cell, stay: bool) -> list[Cell]:
    n = len(holes)
    out = []
    for dr, dc in STEPS if stay else MOVES:
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < n and 0 <= c < n and not holes[r][c]:
            out.append((r, c))
    return out


def _joint_moves(holes, goals, pos, done, wait) -> Iterator[tuple[tuple, tuple, int]]:
    """Joint successors (new positions, new settled flags, step cost) of a search state."""
    options = []
    for p, d, g in zip(pos, done, goals, strict=True):
        if d:
            options.append([(p, True, 0)])
            continue
        opts = [(v, False, 1) for v in _steps(holes, p, stay=wait)]
        if p == g:
            opts.append((p, True, 0))  # settle for good (not a wait)
        options.append(opts)
    for combo in itertools.product(*options):
        cells = [c for c, _, _ in combo]
        if len(set(cells)) < len(cells):
            continue
        if any(
            cells[i] == pos[j] and cells[j] == pos[i] and cells[i] != pos[i]
            for i, j in itertools.combinations(range(len(pos)), 2)
        ):
            continue
        yield tuple(cells), tuple(d for _, d, _ in combo), sum(c for _, _, c in combo)


def optimal_soc(holes, starts: Sequence, goals: Sequence, wait: bool = True) -> int | None:
    """Optimal sum of costs (None if unsolvable); `wait=False`: the optimum without a stay
    before settling. Dijkstra over the joint states: an agent pays 1 per step until it settles
    on its goal, so its bill is its last arrival time."""
    goals = _cells(goals)
    start = (_cells(starts), (False,) * len(goals))
    dist = {start: 0}
    heap = [(0, start)]
    while heap:
        d, state = heapq.heappop(heap)
        if d > dist[state]:
            continue
        pos, done = state
        if all(done):
            return d
        for npos, ndone, c in _joint_moves(holes, goals, pos, done, wait):
            nxt = (npos, ndone)
            if d + c < dist.get(nxt, 1 << 30):
                dist[nxt] = d + c
                heapq.heappush(heap, (d + c, nxt))
    return None


def optimal_makespan(holes, starts: Sequence, goals: Sequence) -> int | None:
    """Optimal makespan: the first time every agent stands on its goal (None if never)."""
    start, goal = _cells(starts), _cells(goals)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        pos = queue.popleft()
        if pos == goal:
            return seen[pos]
        for npos, _, _ in _joint_moves(holes, goal, pos, (False,) * len(pos), True):
            if npos not in seen:
                seen[npos] = seen[pos] + 1
                queue.append(npos)
    return None


def needs_wait(holes, starts: Sequence, goals: Sequence) -> bool:
    """Solvable, and every plan at the optimal sum of costs has a stay before settling."""
    opt = optimal_soc(holes, starts, goals)
    wait_free = optimal_soc(holes, starts, goals, wait=False)
    return opt is not None and (wait_free is None or wait_free > opt)
