"""Exact multi-agent path finding for MAPF-FrozenLake (docs/rules.md), for offline labelling.

Plain Python + numpy (no jax). Answers ``soc`` (with one SoC-optimal plan), ``makespan`` and
``needs_wait`` exactly, each by racing CBS (with the ICBS/CBSH improvements) against joint A*
with operator decomposition in alternating turns counted in search steps, never seconds, so
the returned plan does not depend on the machine. The model, the searches and how each answer
is proved: docs/splits.md, "The exact solver".
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

__all__ = ["Solution", "SolverBudgetExceeded", "single_agent_distances", "solve"]

Cell = tuple[int, int]
Path = tuple[int, ...]  # flat cell indices r * N + c, one per time step, ending at the goal
# A conflict between agents i < j: (t, kind, x, y). kind 0: both at cell x at time t (y == x).
# kind 1: i moves x -> y and j moves y -> x, arriving at time t.
Conflict = tuple[int, int, int, int]

_FIRST_STEPS = 40  # steps the first member of a race runs before the others get a turn
_STEPS = 12  # steps per turn after that
_REACH_CAP = 200_000  # joint configurations per component explored by the infeasibility proof


class SolverBudgetExceeded(RuntimeError):
    """``max_nodes`` or ``time_limit`` ran out before the answer was proven (skip the instance)."""


@dataclass(frozen=True)
class Solution:
    """Exact answers for one instance (see the module docstring for the definitions)."""

    soc: int
    makespan: int
    paths: list[list[Cell]]
    needs_wait: bool
    nodes_expanded: int


def single_agent_distances(holes: np.ndarray, goal: Cell) -> np.ndarray:
    """BFS distance of every cell to ``goal`` avoiding holes (-1: unreachable or a hole)."""
    holes = np.asarray(holes, dtype=bool)
    grid = _Grid(holes)
    n = grid.n
    dist = grid.bfs(goal[0] * n + goal[1]) if not holes[goal] else [-1] * grid.nc
    return np.asarray(dist, dtype=np.int32).reshape(n, n)


class _Grid:
    """Flat-index grid with precomputed neighbour tuples (the inner loops only index lists)."""

    def __init__(self, holes: np.ndarray) -> None:
        n = holes.shape[0]
        self.n = n
        self.nc = n * n
        free = [not bool(h) for h in holes.reshape(-1)]
        moves: list[tuple[int, ...]] = []
        for c in range(self.nc):
            if not free[c]:
                moves.append(())
                continue
            r, q = divmod(c, n)
            m = []
            if r > 0 and free[c - n]:
                m.append(c - n)
            if r < n - 1 and free[c + n]:
                m.append(c + n)
            if q > 0 and free[c - 1]:
                m.append(c - 1)
            if q < n - 1 and free[c + 1]:
                m.append(c + 1)
            moves.append(tuple(m))
        self.free = free
        self.moves = moves  # 4-neighbour moves only
        self.moves_w = [m + (c,) for c, m in enumerate(moves)]  # moves plus the stay

    def bfs(self, src: int) -> list[int]:
        """Distances from ``src`` (symmetric graph, so also distances *to* it)."""
        dist = [-1] * self.nc
        dist[src] = 0
        frontier = [src]
        moves = self.moves
        d = 0
        while frontier:
            d += 1
            nxt = []
            for u in frontier:
                for v in moves[u]:
                    if dist[v] < 0:
                        dist[v] = d
                        nxt.append(v)
            frontier = nxt
        return dist


class _Work:
    """Expansions done by all searches of one ``solve`` call (reported, never limiting)."""

    def __init__(self) -> None:
        self.count = 0


class _Ctx:
    """Per-instance constants shared by every search."""

    def __init__(self, grid: _Grid, starts: list[int], goals: list[int]) -> None:
        self.grid = grid
        self.nc = grid.nc
        self.k = len(starts)
        self.starts = starts
        self.goals = goals
        self.dists = [grid.bfs(g) for g in goals]
        self._to: dict[int, list[int]] = {}
        self._around: dict[tuple[int, int], list[int]] = {}
        self.corridors = _corridors(grid)

    def dist_to(self, cell: int) -> list[int]:
        """Cached BFS distances to ``cell``."""
        d = self._to.get(cell)
        if d is None:
            d = self._to[cell] = self.grid.bfs(cell)
        return d

    def dist_around(self, end: int, corridor: _Corridor) -> list[int]:
        """Cached BFS distances to corridor end ``end`` with the interior removed."""
        d = self._around.get((end, corridor.ident))
        if d is None:
            d = [-1] * self.nc
            d[end] = 0
            frontier = [end]
            moves, inside = self.grid.moves, corridor.interior
            while frontier:
                nxt = []
                for u in frontier:
                    for v in moves[u]:
                        if d[v] < 0 and v not in inside:
                            d[v] = d[u] + 1
                            nxt.append(v)
                frontier = nxt
            self._around[(end, corridor.ident)] = d
        return d


@dataclass(frozen=True)
class _Corridor:
    """A chain e1 - v_1 - ... - v_{k-1} - e2 whose interior cells have exactly two neighbours."""

    ident: int
    e1: int
    e2: int
    k: int
    interior: frozenset[int]


def _corridors(grid: _Grid) -> list[_Corridor | None]:
    """The corridor through each interior cell (None elsewhere, and for rings)."""
    moves = grid.moves
    out: list[_Corridor | None] = [None] * grid.nc
    done = [False] * grid.nc
    for v in range(grid.nc):
        if done[v] or len(moves[v]) != 2:
            continue
        ends = []
        chains = []
        for first in moves[v]:
            prev, cur, chain = v, first, []
            while len(moves[cur]) == 2 and cur != v:
                chain.append(cur)
                prev, cur = cur, moves[cur][0] if moves[cur][1] == prev else moves[cur][1]
            ends.append(cur)
            chains.append(chain)
        interior = frozenset([v, *chains[0], *chains[1]])
        for c in interior:
            done[c] = True
        if ends[0] == v or ends[0] == ends[1]:  # a ring, or a loop hanging off one cell
            continue
        corridor = _Corridor(v, ends[0], ends[1], len(interior) + 1, interior)
        for c in interior:
            out[c] = corridor
    return out


# ---------------------------------------------------------------------------------------------
# Low level


def _vkey(nc: int, t: int, v: int) -> int:
    """Vertex constraint: not at ``v`` at time ``t`` (non-negative keys)."""
    return t * nc + v


def _ekey(nc: int, t: int, u: int, v: int) -> int:
    """Edge constraint: no move ``u -> v`` arriving at time ``t`` (negative keys)."""
    return -((t * nc + u) * nc + v) - 1


# Target-reasoning constraints live far above every vertex key.
_SPECIAL = 1 << 40
_FINISH_AFTER = 1  # the agent's last arrival is after t
_FINISH_BY = 2  # the agent's last arrival is at or before t
_BLOCK_FROM = 3  # the agent never stands on v at time t or later


def _special(kind: int, value: int) -> int:
    return kind * _SPECIAL + value


def _parse(cons: frozenset[int], nc: int, goal: int) -> tuple[int, int, float, dict[int, int]]:
    """``(glast, tmax, lmax, blocks)`` of one agent's constraints.

    glast: the agent may only finish after it; tmax: the last time any constraint can bite;
    lmax: the agent must finish by it; blocks: cell -> time from which it is forbidden for good.
    """
    glast = tmax = -1
    lmax = float("inf")
    blocks: dict[int, int] = {}
    nc2 = nc * nc
    for key in cons:
        if key < 0:
            t = (-key - 1) // nc2
        elif key < _SPECIAL:
            t = key // nc
            if key - t * nc == goal and t > glast:
                glast = t
        else:
            kind, t = divmod(key, _SPECIAL)
            if kind == _FINISH_AFTER:
                glast = max(glast, t)
            elif kind == _FINISH_BY:
                lmax = min(lmax, t)
                continue
            else:
                t, v = divmod(t, nc)
                blocks[v] = min(blocks.get(v, t), t)
        if t > tmax:
            tmax = t
    return glast, tmax, lmax, blocks


def _plan(
    ctx: _Ctx, a: int, cons: frozenset[int], others: Sequence[Path], wait: bool
) -> Path | None:
    """Shortest path of agent ``a`` obeying ``cons`` (space-time A*), fewest CAT conflicts.

    Ties on f are broken by conflicts with ``others`` (their paths, parked at their goals
    afterwards), then by fewer waits, then deeper first. Beyond the last constraint and the end
    of every other path the world is static, so times are clamped there: the space is finite
    and an impossible agent returns None. With ``wait=False`` the agent never stays.
    """
    nc = ctx.nc
    start, goal, dist = ctx.starts[a], ctx.goals[a], ctx.dists[a]
    glast, tmax, lmax, blocks = _parse(cons, nc, goal)
    if glast >= lmax:
        return None
    cat_v: dict[int, int] = {}
    cat_e: dict[int, int] = {}
    parked: dict[int, int] = {}
    end = 0
    for p in others:
        n_p = len(p)
        if n_p - 1 > end:
            end = n_p - 1
        prev = p[0]
        for t in range(1, n_p):
            v = p[t]
            key = t * nc + v
            cat_v[key] = cat_v.get(key, 0) + 1
            if v != prev:  # my move v -> prev arriving at t would swap with it
                key = key * nc + prev
                cat_e[key] = cat_e.get(key, 0) + 1
            prev = v
        parked[p[-1]] = n_p  # there from time n_p - 1 on; cat_v covers n_p - 1 itself
    horizon = max(tmax, end) + 1
    succ = ctx.grid.moves_w if wait else ctx.grid.moves
    heappush, heappop = heapq.heappush, heapq.heappop
    big = 1 << 30

    d0 = dist[start]
    if wait:
        h0 = d0 if d0 > glast else glast + 1
    else:
        h0 = d0 if d0 > glast else glast + 1 + ((glast + 1 - d0) & 1)
    if h0 > lmax:
        return None
    # entry: (f, conflicts, waits, -g, cell, t, link); link = (cell, parent link)
    heap: list[tuple] = [(h0, 0, 0, 0, start, 0, (start, None))]
    closed: set[int] = set()
    best: dict[int, int] = {}
    while heap:
        _, cf, nw, _, u, t, link = heappop(heap)
        s = u + nc * (t if t < horizon else horizon)
        if s in closed:
            continue
        closed.add(s)
        if u == goal and t > glast:
            path = []
            while link is not None:
                path.append(link[0])
                link = link[1]
            path.reverse()
            return tuple(path)
        t1 = t + 1
        tk = t1 * nc
        tbase = nc * (t1 if t1 < horizon else horizon)
        check = t1 <= tmax
        for v in succ[u]:
            s1 = v + tbase
            if s1 in closed:
                continue
            if check and (tk + v in cons or (v != u and -((tk + u) * nc + v) - 1 in cons)):
                continue
            if blocks and t1 >= blocks.get(v, big):
                continue
            c1 = cf + cat_v.get(tk + v, 0)
            pk = parked.get(v)
            if pk is not None and t1 >= pk:
                c1 += 1
            if v != u:
                w1 = nw
                if cat_e:
                    c1 += cat_e.get((tk + u) * nc + v, 0)
            else:
                w1 = nw + 1
            rank = (t1 << 24) | (c1 << 12) | w1
            old = best.get(s1)
            if old is not None and old <= rank:
                continue
            best[s1] = rank
            d = dist[v]
            if d + t1 > glast:
                f = t1 + d
            elif wait:
                f = glast + 1
            else:
                f = glast + 1 + ((glast + 1 - t1 - d) & 1)
            if f > lmax:
                continue
            heappush(heap, (f, c1, w1, -t1, v, t1, (v, link)))
    return None


def _earliest(ctx: _Ctx, start: int, cons: frozenset[int], target: int, wait: bool) -> float:
    """Earliest time an agent at ``start`` can stand on ``target`` under ``cons`` (inf: never)."""
    nc = ctx.nc
    dist = ctx.dist_to(target)
    if dist[start] < 0:
        return float("inf")
    _, tmax, _, blocks = _parse(cons, nc, -1)
    horizon = tmax + 1
    big = 1 << 30
    succ = ctx.grid.moves_w if wait else ctx.grid.moves
    heap = [(dist[start], 0, start)]
    closed: set[int] = set()
    while heap:
        _, t, u = heapq.heappop(heap)
        if u == target:
            return t
        s = u + nc * (t if t < horizon else horizon)
        if s in closed:
            continue
        closed.add(s)
        t1 = t + 1
        tk = t1 * nc
        for v in succ[u]:
            if t1 <= tmax and (tk + v in cons or (v != u and -((tk + u) * nc + v) - 1 in cons)):
                continue
            if blocks and t1 >= blocks.get(v, big):
                continue
            if v + nc * (t1 if t1 < horizon else horizon) not in closed:
                heapq.heappush(heap, (t1 + dist[v], t1, v))
    return float("inf")


def _mdd_singles(ctx: _Ctx, a: int, cons: frozenset[int], cost: int, wait: bool) -> list[int]:
    """Per time step of agent ``a``'s MDD at ``cost``: the only cell if its width is 1, else -1.

    Width 1 at time t means every optimal path is there then, which makes a conflict there
    cardinal (its constraint must raise the agent's cost).
    """
    nc = ctx.nc
    succ = ctx.grid.moves_w if wait else ctx.grid.moves
    dist = ctx.dists[a]
    blocks = _parse(cons, nc, -1)[3] if cons else {}
    big = 1 << 30
    levels: list[set[int]] = [{ctx.starts[a]}]
    for t1 in range(1, cost + 1):
        tk = t1 * nc
        rem = cost - t1
        nxt: set[int] = set()
        for u in levels[-1]:
            for v in succ[u]:
                if dist[v] > rem or v in nxt:
                    continue
                if cons and (tk + v in cons or (v != u and -((tk + u) * nc + v) - 1 in cons)):
                    continue
                if blocks and t1 >= blocks.get(v, big):
                    continue
                nxt.add(v)
        levels.append(nxt)
    singles = [-1] * (cost + 1)
    keep = levels[cost] & {ctx.goals[a]}
    singles[cost] = ctx.goals[a]
    for t in range(cost - 1, -1, -1):
        tk = (t + 1) * nc
        cur = set()
        for u in levels[t]:
            for v in succ[u]:
                if v in keep and not (cons and v != u and -((tk + u) * nc + v) - 1 in cons):
                    cur.add(u)
                    break
        keep = cur
        if len(cur) == 1:
            singles[t] = next(iter(cur))
    return singles


# ---------------------------------------------------------------------------------------------
# High level


def _pair_conflicts(p: Path, q: Path) -> list[Conflict]:
    """All vertex and swap conflicts between two paths (agents park at their last cell)."""
    lp, lq = len(p), len(q)
    out: list[Conflict] = []
    a0, b0 = p[0], q[0]
    pe, qe = p[-1], q[-1]
    for t in range(1, max(lp, lq)):
        a = p[t] if t < lp else pe
        b = q[t] if t < lq else qe
        if a == b:
            out.append((t, 0, a, a))
        elif a == b0 and b == a0:
            out.append((t, 1, a0, a))
        a0, b0 = a, b
    return out


class _Node:
    """A constraint-tree node; lists are copied on write, so children share nothing mutable."""

    __slots__ = ("cons", "paths", "mdds", "confs", "g", "h", "nconf", "choice")

    def __init__(
        self,
        cons: list[frozenset[int]],
        paths: list[Path],
        mdds: list[list[int] | None],
        confs: dict[tuple[int, int], list[Conflict]],
        g: int,
    ) -> None:
        self.cons = cons
        self.paths = paths
        self.mdds = mdds
        self.confs = confs
        self.g = g
        self.h = 0
        self.nconf = sum(len(c) for c in confs.values())
        self.choice: tuple[int, int, Conflict, bool, bool] | None = None


def _min_vertex_cover(edges: list[tuple[int, int]]) -> int:
    """Exact minimum vertex cover by brute force (a handful of agents)."""
    if not edges:
        return 0
    verts = sorted({v for e in edges for v in e})
    for size in range(1, len(verts)):
        for comb in combinations(verts, size):
            s = set(comb)
            if all(i in s or j in s for i, j in edges):
                return size
    return len(verts)


def _evaluate(ctx: _Ctx, node: _Node, wait: bool, mks: bool) -> None:
    """Classify conflicts with MDDs, pick the one to split on and set the heuristic ``h``.

    Choice: cardinal > semi-cardinal > non-cardinal, earliest first. SoC ``h``: minimum vertex
    cover of the cardinal-conflict graph (each edge forces +1 on one of its agents). Makespan
    ``h``: 1 if a conflict is cardinal for two agents that both already have the max cost.
    """
    paths, mdds = node.paths, node.mdds
    best_score = -1
    choice = None
    card_edges: list[tuple[int, int]] = []
    h_mks = 0
    for (i, j), lst in node.confs.items():
        mi = mdds[i]
        if mi is None:
            mi = mdds[i] = _mdd_singles(ctx, i, node.cons[i], len(paths[i]) - 1, wait)
        mj = mdds[j]
        if mj is None:
            mj = mdds[j] = _mdd_singles(ctx, j, node.cons[j], len(paths[j]) - 1, wait)
        ci_cost, cj_cost = len(mi) - 1, len(mj) - 1
        pair_card = False
        for conf in lst:
            t, kind, x, y = conf
            if kind == 0:
                card_i = t >= ci_cost or mi[t] == x
                card_j = t >= cj_cost or mj[t] == x
            else:
                card_i = mi[t - 1] == x and mi[t] == y
                card_j = mj[t - 1] == y and mj[t] == x
            score = card_i + card_j
            if score == 2:
                pair_card = True
                if ci_cost == node.g and cj_cost == node.g:
                    h_mks = 1
            if score > best_score or (score == best_score and t < choice[2][0]):
                best_score = score
                choice = (i, j, conf, card_i, card_j)
        if pair_card:
            card_edges.append((i, j))
    node.choice = choice
    node.h = h_mks if mks else _min_vertex_cover(card_edges)


def _child_confs(node: _Node, a: int, path: Path) -> dict[tuple[int, int], list[Conflict]]:
    """The parent's conflicts with those of agent ``a`` recomputed for its new path."""
    confs = {pair: lst for pair, lst in node.confs.items() if a not in pair}
    for b, q in enumerate(node.paths):
        if b == a:
            continue
        lst = _pair_conflicts(path, q) if a < b else _pair_conflicts(q, path)
        if lst:
            confs[(a, b) if a < b else (b, a)] = lst
    return confs


def _split(conf: Conflict, nc: int, first: bool) -> int:
    """The constraint key that forbids the first (or second) agent's part of ``conf``."""
    t, kind, x, y = conf
    if kind == 0:
        return _vkey(nc, t, x)
    return _ekey(nc, t, x, y) if first else _ekey(nc, t, y, x)


# How to split a conflict: per child, the agent to replan, whether the conflict is cardinal for
# it (no bypass then) and the constraints added, per agent.
_Split = tuple[tuple[int, bool, dict[int, frozenset[int]]], ...]


def _target_split(
    ctx: _Ctx, node: _Node, conf: Conflict, first: tuple[int, bool], second: tuple[int, bool]
) -> _Split | None:
    """Target reasoning (Li et al. 2020) for a vertex conflict on a parked agent's goal.

    a1 sits on its goal v from its last arrival l on; a2 is on v at t >= l. Every plan has
    either l > t (a1 finishes later), or l <= t and then a2 is never on v from t on. The plain
    split would forbid a2 on v only at t, and then again at t + 1, ...
    """
    t, kind, x, _ = conf
    if kind:
        return None
    for (a1, _), (a2, card2) in ((first, second), (second, first)):
        if x == ctx.goals[a1] and t >= len(node.paths[a1]) - 1:
            later = frozenset((_special(_FINISH_AFTER, t),))
            sooner = frozenset((_special(_FINISH_BY, t),))
            block = frozenset((_special(_BLOCK_FROM, t * ctx.nc + x),))
            return ((a1, True, {a1: later}), (a2, card2, {a2: block, a1: sooner}))
    return None


def _corridor_split(
    ctx: _Ctx, node: _Node, i: int, j: int, conf: Conflict, wait: bool
) -> _Split | None:
    """Corridor symmetry reasoning (after Li et al. 2020), as two range constraints.

    Two agents crossing a 1-wide corridor e1 - v_1..v_{k-1} - e2 in opposite directions cannot
    overlap inside it, so if a1 (starting outside, heading for e2) first stands on e2 at T1 and
    a2 first stands on e1 at T2, then T2 >= T1 + k + 1 or T1 >= T2 + k + 1 (swaps and vertex
    conflicts at the ends included). Unless a1 reaches e2 around the corridor (not before
    t1', the BFS distance avoiding the interior), hence every plan has a1 off e2 during
    [0, min(t1' - 1, t2 + k)] or a2 off e1 during [0, min(t2' - 1, t1 + k)], where t1 / t2 are the
    constrained earliest arrivals. Used only when the current paths break both ranges, so both
    children make progress; None otherwise (then the plain split is used).
    """
    t, kind, x, y = conf
    corridor = ctx.corridors[x] or (ctx.corridors[y] if kind == 1 else None)
    if corridor is None:
        return None
    inside = corridor.interior
    if ctx.starts[i] in inside or ctx.starts[j] in inside:
        return None
    e1, e2, k = corridor.e1, corridor.e2, corridor.k
    for a1, a2 in ((i, j), (j, i)):
        p1, p2 = node.paths[a1], node.paths[a2]
        if e2 not in p1 or e1 not in p2:
            continue
        big = 1 << 30
        around1 = ctx.dist_around(e2, corridor)[ctx.starts[a1]]
        around2 = ctx.dist_around(e1, corridor)[ctx.starts[a2]]
        around1 = big if around1 < 0 else around1
        around2 = big if around2 < 0 else around2
        first1, first2 = p1.index(e2), p2.index(e1)
        if first1 >= around1 or first2 >= around2:
            continue
        t1 = _earliest(ctx, ctx.starts[a1], node.cons[a1], e2, wait)
        t2 = _earliest(ctx, ctx.starts[a2], node.cons[a2], e1, wait)
        x1 = min(around1 - 1, t2 + k)
        x2 = min(around2 - 1, t1 + k)
        if first1 <= x1 and first2 <= x2:
            nc = ctx.nc
            # no bypass: the ranges are not the conflict itself
            return (
                (a1, True, {a1: frozenset(_vkey(nc, tt, e2) for tt in range(int(x1) + 1))}),
                (a2, True, {a2: frozenset(_vkey(nc, tt, e1) for tt in range(int(x2) + 1))}),
            )
    return None


_GAVE_UP = object()  # a search member ran out of its own budget without an answer


def _cbs(
    ctx: _Ctx, *, wait: bool, mks: bool, prune_at: float, max_nodes: int, work: _Work
) -> Generator[None, None, object]:
    """Best-first CBS, yielding after every expansion (so it can be raced).

    Returns the first conflict-free node, None if no node below ``prune_at`` is left (no plan
    that cheap exists), or ``_GAVE_UP`` after ``max_nodes`` expansions.
    """
    k = ctx.k
    agg = max if mks else sum
    cons: list[frozenset[int]] = [frozenset()] * k
    paths: list[Path] = []
    for a in range(k):
        p = _plan(ctx, a, cons[a], paths, wait)
        if p is None:
            return None
        paths.append(p)
    confs: dict[tuple[int, int], list[Conflict]] = {}
    for i, j in combinations(range(k), 2):
        lst = _pair_conflicts(paths[i], paths[j])
        if lst:
            confs[(i, j)] = lst
    root = _Node(cons, paths, [None] * k, confs, agg(len(p) - 1 for p in paths))
    _evaluate(ctx, root, wait, mks)
    if root.g + root.h >= prune_at:
        return None
    counter = 0
    open_: list[tuple[int, int, int, _Node]] = [(root.g + root.h, root.nconf, 0, root)]
    expanded = 0
    while open_:
        f, _, _, node = heapq.heappop(open_)
        while True:  # expand node; bypasses repeat the expansion in place
            if node.nconf == 0:
                return node
            if expanded >= max_nodes:
                return _GAVE_UP
            expanded += 1
            work.count += 1
            yield
            i, j, conf, card_i, card_j = node.choice
            children: list[_Node] = []
            bypassed = False
            split = _target_split(ctx, node, conf, (i, card_i), (j, card_j))
            if split is None:
                split = _corridor_split(ctx, node, i, j, conf, wait)
            if split is None:
                nc = ctx.nc
                split = (
                    (i, card_i, {i: frozenset((_split(conf, nc, True),))}),
                    (j, card_j, {j: frozenset((_split(conf, nc, False),))}),
                )
            for a, card, add in split:
                ccons = node.cons.copy()
                for b, keys in add.items():
                    ccons[b] = ccons[b] | keys
                others = [p for b, p in enumerate(node.paths) if b != a]
                p = _plan(ctx, a, ccons[a], others, wait)
                if p is None:
                    continue
                cconfs = _child_confs(node, a, p)
                same_cost = len(p) == len(node.paths[a])
                if not card and same_cost and sum(map(len, cconfs.values())) < node.nconf:
                    # Bypass: an equally short path with fewer conflicts is valid here too.
                    node.paths = node.paths.copy()
                    node.paths[a] = p
                    node.confs = cconfs
                    node.nconf = sum(len(c) for c in cconfs.values())
                    bypassed = True
                    break
                cpaths = node.paths.copy()
                cpaths[a] = p
                cmdds = node.mdds.copy()
                cmdds[a] = None
                children.append(
                    _Node(ccons, cpaths, cmdds, cconfs, agg(len(q) - 1 for q in cpaths))
                )
            if bypassed:
                if node.nconf == 0:
                    return node
                _evaluate(ctx, node, wait, mks)
                if node.g + node.h > f:
                    counter += 1
                    heapq.heappush(open_, (node.g + node.h, node.nconf, counter, node))
                    break
                continue
            for child in children:
                _evaluate(ctx, child, wait, mks)
                cf = child.g + child.h
                if cf < prune_at:
                    counter += 1
                    heapq.heappush(open_, (cf, child.nconf, counter, child))
            break
    return None


def _cbs_soc(
    ctx: _Ctx, *, wait: bool, bound: float, max_nodes: int, work: _Work
) -> Generator[None, None, object]:
    """SoC CBS with the joint searches' result shape: ``(soc, paths)``, None or ``_GAVE_UP``."""
    node = yield from _cbs(
        ctx, wait=wait, mks=False, prune_at=bound + 1, max_nodes=max_nodes, work=work
    )
    return (node.g, node.paths) if isinstance(node, _Node) else node


def _cbs_mks(
    ctx: _Ctx, *, bound: int, max_nodes: int, work: _Work
) -> Generator[None, None, object]:
    """Makespan CBS: the optimal makespan if below ``bound``, else None (or ``_GAVE_UP``)."""
    node = yield from _cbs(ctx, wait=True, mks=True, prune_at=bound, max_nodes=max_nodes, work=work)
    return node.g if isinstance(node, _Node) else node


# ---------------------------------------------------------------------------------------------
# Joint-state A* with operator decomposition (Standley 2010)


def _joint_soc(
    ctx: _Ctx, *, wait: bool, bound: float, max_states: int, work: _Work
) -> Generator[None, None, object]:
    """SoC-optimal plan by A* over joint states, one agent's move at a time.

    Why: in narrow, crowded boards CBS drowns in symmetric conflicts while the joint space is
    small. A state is (positions, done flags, next agent, pre-step cells of the agents already
    moved). An agent pays 1 per step until it stops *for good* at its goal (a free "done" action
    there), so its bill is its last arrival time; heuristic = summed BFS distances of the agents
    not done (consistent). Returns ``(soc, paths)``, None if no plan costs at most ``bound``
    (with ``bound`` infinite: the instance is unsolvable), or ``_GAVE_UP`` past ``max_states``.
    """
    m = ctx.k
    goals = tuple(ctx.goals)
    dists = ctx.dists
    succ = ctx.grid.moves_w if wait else ctx.grid.moves
    start = tuple(ctx.starts)
    h0 = sum(dists[i][c] for i, c in enumerate(start))
    if h0 > bound:
        return None
    heappush, heappop = heapq.heappush, heapq.heappop
    big = 1 << 30
    full = (1 << m) - 1
    best: dict[tuple, int] = {(start, 0, 0, ()): 0}
    # entry: (f, -g, tie, h, positions, done mask, next agent, pre-step cells, link), where
    # link = (positions after the last whole step, parent link)
    heap: list[tuple] = [(h0, 0, 0, h0, start, 0, 0, (), (start, None))]
    counter = 0
    expanded = 0
    while heap:
        _, ng, _, h, pos, done, i, olds, link = heappop(heap)
        g = -ng
        if best.get((pos, done, i, olds), big) < g:
            continue
        if pos == goals:  # the others stay put for free
            if link[0] != pos:
                link = (pos, link)
            seq: list[tuple[int, ...]] = []
            while link is not None:
                seq.append(link[0])
                link = link[1]
            seq.reverse()
            return g, _trim(seq, goals)
        expanded += 1
        work.count += 1
        if not expanded & 63:
            if len(best) > max_states:
                return _GAVE_UP
            yield
        u = pos[i]
        du = dists[i][u]
        blocked = set(pos[:i])
        swap = olds[pos.index(u)] if u in blocked else -1  # moving there would swap
        for j in range(i + 1, m):
            if done >> j & 1:
                blocked.add(pos[j])
        opts: list[tuple[int, int, int]] = []
        for v in succ[u]:
            if v not in blocked and v != swap:
                opts.append((v, done, 1))
        if u == goals[i] and u not in blocked:
            opts.append((u, done | (1 << i), 0))
        for v, nd, cost in opts:
            npos = pos[:i] + (v,) + pos[i + 1 :]
            ni, nolds, nlink = i + 1, (*olds, u), link
            while True:  # done agents just stay: skip their turns
                if ni == m:
                    ni, nolds, nlink = 0, (), (npos, link)
                    if nd == full:
                        break
                if not nd >> ni & 1:
                    break
                nolds += (npos[ni],)
                ni += 1
            g1 = g + cost
            h1 = h - du + dists[i][v] if cost else h
            if g1 + h1 > bound:
                continue
            key = (npos, nd, ni, nolds)
            if best.get(key, big) <= g1:
                continue
            best[key] = g1
            counter += 1
            heappush(heap, (g1 + h1, -g1, counter, h1, npos, nd, ni, nolds, nlink))
    return None


def _trim(seq: list[tuple[int, ...]], goals: tuple[int, ...]) -> list[Path]:
    """Per-agent paths from joint states, cut at each agent's last arrival."""
    paths = []
    for a, goal in enumerate(goals):
        cells = [s[a] for s in seq]
        end = len(cells) - 1
        while end > 0 and cells[end - 1] == goal:
            end -= 1
        paths.append(tuple(cells[: end + 1]))
    return paths


def _joint_mks(
    ctx: _Ctx, *, bound: int, max_states: int, work: _Work
) -> Generator[None, None, object]:
    """Optimal makespan below ``bound`` by A* with operator decomposition, else None.

    One step costs 1 for everybody; h = max BFS distance (for a step in progress: max of the
    moved agents' distances and the others' distances minus the step being paid), consistent.
    """
    m = ctx.k
    goals = tuple(ctx.goals)
    dists = ctx.dists
    succ = ctx.grid.moves_w
    start = tuple(ctx.starts)
    f0 = max(dists[i][c] for i, c in enumerate(start))
    if f0 >= bound:
        return None
    heappush, heappop = heapq.heappush, heapq.heappop
    big = 1 << 30
    best: dict[tuple, int] = {(start, ()): 0}
    heap: list[tuple] = [(f0, 0, 0, start, ())]  # (f, -g, tie, positions, pre-step cells)
    counter = 0
    expanded = 0
    while heap:
        _, ng, _, pos, olds = heappop(heap)
        g = -ng
        if best.get((pos, olds), big) < g:
            continue
        i = len(olds)
        if not i and pos == goals:
            return g
        expanded += 1
        work.count += 1
        if not expanded & 63:
            if len(best) > max_states:
                return _GAVE_UP
            yield
        u = pos[i]
        g1 = g + 1 if i == 0 else g
        moved = pos[:i]
        swap = olds[moved.index(u)] if u in moved else -1
        for v in succ[u]:
            if v in moved or v == swap:
                continue
            npos = pos[:i] + (v,) + pos[i + 1 :]
            if i + 1 == m:
                nolds: tuple[int, ...] = ()
                f1 = g1 + max(dists[j][c] for j, c in enumerate(npos))
            else:
                nolds = (*olds, u)
                f1 = g1 + max(
                    max(dists[j][npos[j]] for j in range(i + 1)),
                    max(dists[j][npos[j]] for j in range(i + 1, m)) - 1,
                )
            if f1 >= bound:
                continue
            key = (npos, nolds)
            if best.get(key, big) <= g1:
                continue
            best[key] = g1
            counter += 1
            heappush(heap, (f1, -g1, counter, npos, nolds))
    return None


def _race(members: list[Generator[None, None, object]], deadline: float | None) -> object:
    """Run exact searches round-robin, a fixed number of steps per turn; the first answer wins.

    Why: CBS and the joint A* fail on different instances, and each is exponential where it
    fails, so interleaving costs at most a factor ``len(members)`` over the better one. A step is
    one CT expansion or 64 joint expansions (similar CPU time). Counting steps rather than
    seconds keeps the winner, hence the returned plan, independent of machine speed. The first
    member gets a longer first turn, since it alone settles the easy majority.
    """
    active = list(members)
    turn = 0
    try:
        while active:
            gen = active[turn % len(active)]
            try:
                for _ in range(_FIRST_STEPS if turn == 0 else _STEPS):
                    next(gen)
            except StopIteration as stop:
                active.remove(gen)
                if stop.value is not _GAVE_UP:
                    return stop.value
                continue
            if deadline is not None and time.perf_counter() > deadline:
                raise SolverBudgetExceeded("time limit reached")
            turn += 1
    finally:
        for gen in members:
            gen.close()
    raise SolverBudgetExceeded("every search ran out of its node/state budget")


# ---------------------------------------------------------------------------------------------
# Unsolvability proof


def _rotations(moves: list[tuple[int, ...]], occ: set[int]) -> list[list[int]]:
    """Directed simple cycles (length >= 3) through occupied cells: each can rotate at once."""
    cycles: list[list[int]] = []
    cells = sorted(occ)

    def extend(path: list[int]) -> None:
        for v in moves[path[-1]]:
            if v == path[0] and len(path) >= 3:
                cycles.append(path.copy())
            elif v > path[0] and v in occ and v not in path:
                path.append(v)
                extend(path)
                path.pop()

    for s in cells:
        extend([s])
    return cycles


def _reachable(ctx: _Ctx, agents: list[int], cap: int) -> Generator[None, None, bool | None]:
    """Whether the goal configuration of ``agents`` is reachable from their starts.

    Single moves into free cells plus rotations of fully occupied cycles generate every joint
    step (chains decompose into single moves), and all of them are reversible, so exhausting the
    reachable set is a proof. Greedy best-first on summed distances finds solvable goals fast.
    None: more than ``cap`` configurations, undecided.
    """
    moves = ctx.grid.moves
    start = tuple(ctx.starts[a] for a in agents)
    goal = tuple(ctx.goals[a] for a in agents)
    dists = [ctx.dists[a] for a in agents]
    m = len(agents)
    seen = {start}
    heap = [(sum(dists[i][c] for i, c in enumerate(start)), 0, start)]
    counter = 0
    while heap:
        _, _, conf = heapq.heappop(heap)
        if conf == goal:
            return True
        if not counter & 63:
            yield
        occ = set(conf)
        nexts = []
        for i in range(m):
            for v in moves[conf[i]]:
                if v not in occ:
                    nexts.append(conf[:i] + (v,) + conf[i + 1 :])
        if m >= 4:
            where = {c: i for i, c in enumerate(conf)}
            for cyc in _rotations(moves, occ):
                new = list(conf)
                for idx, c in enumerate(cyc):
                    new[where[c]] = cyc[idx + 1] if idx + 1 < len(cyc) else cyc[0]
                nexts.append(tuple(new))
        for nxt in nexts:
            if nxt not in seen:
                if len(seen) >= cap:
                    return None
                seen.add(nxt)
                counter += 1
                hval = sum(dists[i][c] for i, c in enumerate(nxt))
                heapq.heappush(heap, (hval, counter, nxt))
    return False


def _infeasibility_proof(ctx: _Ctx) -> Generator[None, None, object]:
    """None (the SoC answer "no plan") if some connected component's agents provably cannot
    reach their goals, else ``_GAVE_UP``: feasibility itself is left to the exact searches."""
    comp = [-1] * ctx.nc
    groups: dict[int, list[int]] = {}
    for a, s in enumerate(ctx.starts):
        if comp[s] < 0:
            for c, d in enumerate(ctx.grid.bfs(s)):
                if d >= 0:
                    comp[c] = s
        groups.setdefault(comp[s], []).append(a)
    for group in groups.values():
        if len(group) > 1 and (yield from _reachable(ctx, group, _REACH_CAP)) is False:
            return None
    return _GAVE_UP


# ---------------------------------------------------------------------------------------------
# Entry point


def _has_wait(paths: Sequence[Path]) -> bool:
    """Whether some agent stays before its final arrival (paths end at that arrival)."""
    return any(p[t] == p[t + 1] for p in paths for t in range(len(p) - 1))


def solve(
    holes: np.ndarray,
    starts: Sequence[Cell],
    goals: Sequence[Cell],
    *,
    max_nodes: int = 20_000,
    max_states: int = 500_000,
    time_limit: float | None = None,
) -> Solution | None:
    """Optimal SoC (with one optimal plan), optimal makespan and ``needs_wait`` of an instance.

    Budgets: ``max_nodes`` constraint-tree expansions per CBS search, ``max_states`` stored
    states per joint search (about 0.5 KB each), ``time_limit`` wall-clock seconds for the call.
    A question is given up (``SolverBudgetExceeded``) when both of its racers ran out, or at the
    time limit; pass one when labelling in bulk (the rare hard instances then cost at most that).

    Returns None when no valid plan exists (a start or goal on a hole, shared starts or goals,
    an unreachable goal, or a proven-infeasible configuration), and raises ``ValueError`` for
    malformed input (non-square grid, length mismatch, off-grid cell). ``nodes_expanded`` counts
    CT and joint-search expansions over all searches run.
    """
    holes = np.asarray(holes, dtype=bool)
    if holes.ndim != 2 or holes.shape[0] != holes.shape[1]:
        raise ValueError(f"holes must be a square 2-D array, got shape {holes.shape}")
    if len(starts) != len(goals):
        raise ValueError(f"{len(starts)} starts but {len(goals)} goals")
    n = holes.shape[0]
    for r, c in (*starts, *goals):
        if not (0 <= r < n and 0 <= c < n):
            raise ValueError(f"cell {(r, c)} is outside the {n}x{n} grid")
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    work = _Work()
    k = len(starts)
    if k == 0:
        return Solution(0, 0, [], False, 0)
    grid = _Grid(holes)
    s_idx = [int(r) * n + int(c) for r, c in starts]
    g_idx = [int(r) * n + int(c) for r, c in goals]
    if len(set(s_idx)) < k or len(set(g_idx)) < k:
        return None
    if not all(grid.free[c] for c in (*s_idx, *g_idx)):
        return None
    ctx = _Ctx(grid, s_idx, g_idx)
    if any(ctx.dists[a][s_idx[a]] < 0 for a in range(k)):
        return None
    inf = float("inf")

    found = _race(
        [
            _cbs_soc(ctx, wait=True, bound=inf, max_nodes=max_nodes, work=work),
            _joint_soc(ctx, wait=True, bound=inf, max_states=max_states, work=work),
            _infeasibility_proof(ctx),
        ],
        deadline,
    )
    if found is None:
        return None
    soc, paths = found
    upper = max(len(p) - 1 for p in paths)

    needs_wait = False
    if _has_wait(paths):
        wait_free = _race(
            [
                _cbs_soc(ctx, wait=False, bound=soc, max_nodes=max_nodes, work=work),
                _joint_soc(ctx, wait=False, bound=soc, max_states=max_states, work=work),
            ],
            deadline,
        )
        needs_wait = wait_free is None
        if wait_free is not None:
            upper = min(upper, max(len(p) - 1 for p in wait_free[1]))

    lower = max(ctx.dists[a][s_idx[a]] for a in range(k))
    makespan = upper
    if lower < upper:
        best = _race(
            [
                _cbs_mks(ctx, bound=upper, max_nodes=max_nodes, work=work),
                _joint_mks(ctx, bound=upper, max_states=max_states, work=work),
            ],
            deadline,
        )
        if best is not None:
            makespan = best

    out = [[divmod(c, n) for c in p] for p in paths]
    return Solution(soc, makespan, out, needs_wait, work.count)
