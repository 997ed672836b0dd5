"""Plain-Python MAPF helpers for tests: BFS reachability, component labels and an exact
two-agent Dijkstra.

Independent of the JAX code under test (no jax, no numpy tricks): the joint search walks
(pos0, pos1, settled0, settled1) states, where a settled agent stays on its goal for good and
each step costs the number of unsettled agents, so the cheapest terminal cost is the optimal
sum of costs; forbidding stays before settling gives the wait-free optimum.
"""

from __future__ import annotations

import heapq
from collections import deque

MOVES = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))


def reachable(free, start, goal) -> bool:
    n = len(free)
    seen, todo = {tuple(start)}, deque([tuple(start)])
    while todo:
        r, c = todo.popleft()
        if (r, c) == tuple(goal):
            return True
        for dr, dc in MOVES[1:]:
            q = (r + dr, c + dc)
            if 0 <= q[0] < n and 0 <= q[1] < n and free[q[0]][q[1]] and q not in seen:
                seen.add(q)
                todo.append(q)
    return False


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
                for dr, dc in MOVES[1:]:
                    q = (r + dr, c + dc)
                    if (0 <= q[0] < rows and 0 <= q[1] < cols and free[q[0]][q[1]]
                            and lab[q[0]][q[1]] < 0):
                        lab[q[0]][q[1]] = lab[r0][c0]
                        todo.append(q)
    return lab


def _steps(free, p, settled, allow_wait):
    if settled:
        return [p]
    n = len(free)
    out = []
    for d in MOVES:
        if d == (0, 0) and not allow_wait:
            continue
        q = (p[0] + d[0], p[1] + d[1])
        if 0 <= q[0] < n and 0 <= q[1] < n and free[q[0]][q[1]]:
            out.append(q)
    return out


def pair_soc(free, s0, g0, s1, g1, allow_wait=True):
    """Optimal sum of costs of a two-agent instance (None if unsolvable)."""
    s0, g0, s1, g1 = map(tuple, (s0, g0, s1, g1))
    start = (s0, s1, False, False)
    dist, pq = {start: 0}, [(0, start)]
    while pq:
        c, st = heapq.heappop(pq)
        if dist.get(st, 1 << 30) < c:
            continue
        p0, p1, f0, f1 = st
        if f0 and f1:
            return c
        for nxt in ((p0, p1, f0 or p0 == g0, f1), (p0, p1, f0, f1 or p1 == g1)):
            if nxt != st and dist.get(nxt, 1 << 30) > c:
                dist[nxt] = c
                heapq.heappush(pq, (c, nxt))
        cost = (not f0) + (not f1)
        for q0 in _steps(free, p0, f0, allow_wait):
            for q1 in _steps(free, p1, f1, allow_wait):
                if q0 == q1 or (q0 == p1 and q1 == p0 and q0 != p0):
                    continue
                nxt = (q0, q1, f0, f1)
                if dist.get(nxt, 1 << 30) > c + cost:
                    dist[nxt] = c + cost
                    heapq.heappush(pq, (c + cost, nxt))
    return None


def pair_makespan(free, s0, g0, s1, g1):
    """Optimal makespan: first time both agents stand on their goals (None if never)."""
    s0, g0, s1, g1 = map(tuple, (s0, g0, s1, g1))
    seen, frontier, t = {(s0, s1)}, [(s0, s1)], 0
    while frontier:
        if (g0, g1) in frontier:
            return t
        nxt = []
        for p0, p1 in frontier:
            for q0 in _steps(free, p0, False, True):
                for q1 in _steps(free, p1, False, True):
                    if q0 == q1 or (q0 == p1 and q1 == p0 and q0 != p0):
                        continue
                    if (q0, q1) not in seen:
                        seen.add((q0, q1))
                        nxt.append((q0, q1))
        frontier, t = nxt, t + 1
    return None


def pair_needs_wait(free, s0, g0, s1, g1) -> bool:
    opt = pair_soc(free, s0, g0, s1, g1)
    no_wait = pair_soc(free, s0, g0, s1, g1, allow_wait=False)
    return opt is not None and (no_wait is None or no_wait > opt)
