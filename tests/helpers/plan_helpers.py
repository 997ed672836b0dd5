"""Numpy/plain-Python helpers for the plan-verifier tests: random levels, plans and faults.

Independent of the code under test: levels are drawn with numpy, plans come from a small
prioritised space-time BFS or random walks, and faults are edits of cell lists.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from jaxenv.mapf.level import make_level
from jaxenv.mapf.solvers.reference import ref_check_plan

Cell = tuple[int, int]
STEPS = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))


def random_instance(rng: np.random.Generator, sizes=(3, 8), agents=(1, 5), hole_max=0.4):
    """holes [n, n], starts, goals (2k distinct ice cells; reachability not guaranteed)."""
    n = int(rng.integers(sizes[0], sizes[1] + 1))
    k = min(int(rng.integers(agents[0], agents[1] + 1)), n * n // 2)
    holes = rng.random((n, n)) < rng.uniform(0.0, hole_max)
    free = np.argwhere(~holes)
    while len(free) < 2 * k:
        holes[tuple(np.argwhere(holes)[0])] = False
        free = np.argwhere(~holes)
    pick = free[rng.permutation(len(free))[: 2 * k]]
    starts = [tuple(map(int, c)) for c in pick[:k]]
    goals = [tuple(map(int, c)) for c in pick[k:]]
    return holes, starts, goals


def _free(holes: np.ndarray, c: Cell) -> bool:
    n = holes.shape[0]
    return 0 <= c[0] < n and 0 <= c[1] < n and not holes[c]


def prioritised_plan(holes, starts, goals, rng: np.random.Generator, horizon: int = 40):
    """Agents in order, each a space-time BFS (random tie order) avoiding the earlier agents'
    cells, swaps and parked goals. Returns a list of paths or None if some agent fails."""
    paths: list[list[Cell]] = []
    for s, g in zip(starts, goals, strict=True):
        def taken(c, t, prev, paths=paths):
            for p in paths:
                q = p[min(t, len(p) - 1)]
                if q == c:
                    return True
                if t > 0 and q == prev and p[min(t - 1, len(p) - 1)] == c and c != prev:
                    return True
            return False

        last_needed = max((len(p) for p in paths), default=0)
        parent = {(s, 0): None}
        queue = deque([(s, 0)])
        found = None
        while queue:
            c, t = queue.popleft()
            if c == g and t >= last_needed - 1 and all(
                    not taken(g, tt, g) for tt in range(t, last_needed + 1)):
                found = (c, t)
                break
            if t >= horizon:
                continue
            order = rng.permutation(len(STEPS))
            for i in order:
                dr, dc = STEPS[i]
                v = (c[0] + dr, c[1] + dc)
                if not _free(holes, v) or (v, t + 1) in parent or taken(v, t + 1, c):
                    continue
                parent[(v, t + 1)] = (c, t)
                queue.append((v, t + 1))
        if found is None:
            return None
        path = []
        node = found
        while node is not None:
            path.append(node[0])
            node = parent[node]
        paths.append(path[::-1])
        # parked agents may be hit by later agents' earlier moves only through `taken`.
    return paths


def random_walk(rng: np.random.Generator, start: Cell, length: int) -> list[Cell]:
    path = [start]
    for _ in range(length):
        dr, dc = STEPS[int(rng.integers(5))]
        path.append((path[-1][0] + dr, path[-1][1] + dc))
    return path


FAULTS = ("none", "jump", "teleport", "far", "truncate", "extend", "drop_last", "extra_agent",
          "delay", "swap_paths", "wait", "wrong_start", "reverse")


def mutate(rng: np.random.Generator, paths: list[list[Cell]], n: int, fault: str):
    """A copy of ``paths`` with one fault applied (may be a no-op on tiny plans)."""
    p = [list(x) for x in paths]
    if not p:
        return p
    i = int(rng.integers(len(p)))
    path = p[i]
    if fault == "jump" and len(path) >= 3:
        del path[int(rng.integers(1, len(path) - 1))]
    elif fault == "teleport":
        path[int(rng.integers(len(path)))] = (int(rng.integers(-1, n + 1)),
                                              int(rng.integers(-1, n + 1)))
    elif fault == "far":
        path[int(rng.integers(len(path)))] = (int(rng.integers(-9, n + 9)),
                                              int(rng.integers(-9, n + 9)))
    elif fault == "truncate" and len(path) >= 2:
        del path[int(rng.integers(1, len(path))):]
    elif fault == "extend":
        path += random_walk(rng, path[-1], int(rng.integers(1, 4)))[1:]
    elif fault == "drop_last":
        p.pop()
    elif fault == "extra_agent":
        p.append(random_walk(rng, (int(rng.integers(n)), int(rng.integers(n))), 3))
    elif fault == "delay":
        path.insert(0, path[0])
    elif fault == "swap_paths" and len(p) >= 2:
        j = (i + 1) % len(p)
        p[i], p[j] = p[j], p[i]
    elif fault == "wait":
        t = int(rng.integers(len(path)))
        path.insert(t, path[t])
    elif fault == "wrong_start":
        path.insert(0, (path[0][0] + 1, path[0][1]))
    elif fault == "reverse":
        path.reverse()
    return p


def to_arrays(paths, rows: int, horizon: int):
    """List-form plan -> (cells [rows, T, 2], len [rows]); agents >= rows - 1 fold into the
    last row (same convention as jaxenv.mapf.plans.plan_arrays, written independently)."""
    cells = np.zeros((rows, horizon, 2), np.int32)
    length = np.zeros(rows, np.int32)
    for i, path in enumerate(paths):
        r = min(i, rows - 1)
        if length[r]:
            continue
        a = np.asarray(path, np.int32).reshape(-1, 2)
        cells[r, : len(a)] = a
        cells[r, len(a):] = a[-1]
        length[r] = len(a)
    return cells, length


def ref(holes, starts, goals, paths, max_size: int):
    """ref_check_plan on a padded board (None paths: unparsable)."""
    n = holes.shape[0]
    board = [[bool(holes[r][c]) if r < n and c < n else False for c in range(max_size)]
             for r in range(max_size)]
    return ref_check_plan(size=n, holes=board, starts=starts, goals=goals, plan=paths,
                          n_agents=len(starts))


def level_of(holes, starts, goals, max_size=8, max_agents=5, opt_makespan=-1, opt_soc=-1):
    return make_level(holes, starts, goals, max_size=max_size, max_agents=max_agents,
                      opt_makespan=opt_makespan, opt_soc=opt_soc)


def stack_levels(instances, max_size: int, max_agents: int):
    """A batched Level (numpy leaves) from [(holes, starts, goals, opt_makespan, opt_soc)]."""
    from jaxenv.mapf.level import Level

    b = len(instances)
    holes = np.zeros((b, max_size, max_size), bool)
    starts = np.zeros((b, max_agents, 2), np.int32)
    goals = np.zeros((b, max_agents, 2), np.int32)
    size, k, ms, soc = (np.zeros(b, np.int32) for _ in range(4))
    for i, (h, s, g, m, c) in enumerate(instances):
        n = h.shape[0]
        holes[i, :n, :n] = h
        starts[i, : len(s)] = s
        goals[i, : len(g)] = g
        size[i], k[i], ms[i], soc[i] = n, len(s), m, c
    return Level(holes=holes, starts=starts, goals=goals, size=size, n_agents=k,
                 opt_makespan=ms, opt_soc=soc, needs_wait=np.full(b, -1, np.int32))
