"""The level generator: `generate(key, cfg, cap) -> Level`, pure JAX, vmappable over both.

A level is drawn in three steps:
1. map size from `size_weights`, agent count from `agent_weights` (at most N*N // 2), and
   whether this level should need a wait, with probability `wait_ratio[size]`;
2. candidates: a *random* layout (holes on round(hole_ratio * N^2) random cells, agents in the
   largest ice component), a *crossing* layout (agents 0 and 1 walk straight lines that meet
   at one cell at the same time, which on a bipartite grid cannot be resolved at equal cost
   without a wait; holes elsewhere), and a hole-free fallback;
3. the exact two-agent labels (`jaxenv.mapf.joint.solve_pair` on agents 0 and 1) pick the
   first candidate that is valid and has the wanted label, else the first valid one.

Guarantees (tested): starts distinct, goals distinct, no start or goal on a hole or on
another agent's start/goal, every goal reachable from its start; for 2 agents the stored
optimal makespan, sum of costs and needs-wait label are exact and every level is solvable.
For 3+ agents the label is the pair (A0, A1) label with the others ignored, an approximation;
costs stay UNKNOWN (the exact solver, `jaxenv.mapf.solvers.cbs`, labels levels offline).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxenv import levels
from jaxenv.mapf.config import MIN_SIZE, Capacity, MAPFConfig
from jaxenv.mapf.grid import INF, bfs_distance, components, goal_distances, in_grid_mask
from jaxenv.mapf.joint import solve_pair
from jaxenv.mapf.level import UNKNOWN, Level
from jaxenv.mapf.views import static_rows


def _cells(flat: jax.Array, s: int) -> jax.Array:
    return jnp.stack([flat // s, flat % s], -1).astype(jnp.int32)


def _mask_of(cells: jax.Array, valid: jax.Array, s: int) -> jax.Array:
    """[k, 2] cells (rows where valid) -> [S, S] bool."""
    m = jnp.zeros((s, s), bool)
    return m.at[cells[:, 0], cells[:, 1]].max(valid)


def _place(key, size, n_holes, n, protect, fixed_s, fixed_g, n_fixed, cap: Capacity):
    """Random holes avoiding `protect`; agents >= n_fixed on free cells of the fixed agents'
    component (or the largest component when n_fixed == 0). Returns holes, starts, goals, ok."""
    s, a = cap.max_size, cap.max_agents
    kh, ka = jax.random.split(key)
    inside = in_grid_mask(size, s)
    # Holes: the n_holes lowest random priorities among unprotected inside cells.
    pri = jnp.where(inside & ~protect, jax.random.uniform(kh, (s, s)), 2.0).ravel()
    rank = jnp.zeros(s * s, jnp.int32).at[jnp.argsort(pri)].set(jnp.arange(s * s))
    holes = (rank < n_holes).reshape(s, s) & inside & ~protect
    free = inside & ~holes
    lab = components(free)
    counts = jnp.zeros(s * s + 1, jnp.int32).at[jnp.where(lab >= 0, lab, s * s)].add(1)[:-1]
    target = jnp.where(n_fixed > 0, lab[fixed_s[0, 0], fixed_s[0, 1]], jnp.argmax(counts))
    agent_idx = jnp.arange(a)
    is_fixed = agent_idx < n_fixed
    taken = _mask_of(fixed_s, is_fixed, s) | _mask_of(fixed_g, is_fixed, s)
    eligible = (lab == target) & ~protect & ~taken
    pri2 = jnp.where(eligible, jax.random.uniform(ka, (s, s)), 2.0).ravel()
    order = jnp.argsort(pri2)  # eligible cells first, in random order
    n_free = n - n_fixed
    # Free agent i (counted from n_fixed) takes cell 2*j and its goal cell 2*j+1.
    j = jnp.clip(agent_idx - n_fixed, 0, a - 1)
    rand_s = _cells(order[2 * j], s)
    rand_g = _cells(order[2 * j + 1], s)
    starts = jnp.where(is_fixed[:, None], fixed_s, rand_s)
    goals = jnp.where(is_fixed[:, None], fixed_g, rand_g)
    active = agent_idx < n
    starts = jnp.where(active[:, None], starts, 0)
    goals = jnp.where(active[:, None], goals, 0)
    ok = (2 * n_free <= eligible.sum()) & (n_fixed <= n)
    # Fixed agents must sit on ice of one component (they do unless a protect bug).
    ok &= jnp.all(jnp.where(is_fixed, lab[fixed_g[:, 0], fixed_g[:, 1]] == target, True))
    return holes, starts, goals, ok


def _segment(a: jax.Array, b: jax.Array, s: int) -> jax.Array:
    """[S, S] mask of the cells between a and b inclusive (a, b on one row or column)."""
    idx = jnp.arange(s)
    rows = (idx >= jnp.minimum(a[0], b[0])) & (idx <= jnp.maximum(a[0], b[0]))
    cols = (idx >= jnp.minimum(a[1], b[1])) & (idx <= jnp.maximum(a[1], b[1]))
    return rows[:, None] & cols[None, :]


def _crossing(key, size, cap: Capacity):
    """Agents 0 and 1 on straight lines through a cell X, both reaching X at time `d`.

    Returns (starts [A, 2], goals [A, 2], protect [S, S]) with agents 0, 1 filled.
    """
    s, a = cap.max_size, cap.max_agents
    kx, ky, kd, kb, kc, ksh, ksv, kr = jax.random.split(key, 8)
    xr = jax.random.randint(kx, (), 1, jnp.maximum(size - 1, 2))
    xc = jax.random.randint(ky, (), 1, jnp.maximum(size - 1, 2))
    sh = jnp.where(jax.random.bernoulli(ksh), 1, -1)  # side of agent 0's start along the row
    sv = jnp.where(jax.random.bernoulli(ksv), 1, -1)  # side of agent 1's start along the column
    room = lambda x, sign: jnp.where(sign > 0, size - 1 - x, x)  # noqa: E731
    d_max = jnp.minimum(room(xc, sh), room(xr, sv))
    d = jax.random.randint(kd, (), 1, d_max + 1)
    b = jax.random.randint(kb, (), 1, room(xc, -sh) + 1)
    c = jax.random.randint(kc, (), 1, room(xr, -sv) + 1)
    s0, g0 = jnp.stack([xr, xc + sh * d]), jnp.stack([xr, xc - sh * b])
    s1, g1 = jnp.stack([xr + sv * d, xc]), jnp.stack([xr - sv * c, xc])
    swap = jax.random.bernoulli(kr)  # which agent walks the row
    s0, s1 = jnp.where(swap, s1, s0), jnp.where(swap, s0, s1)
    g0, g1 = jnp.where(swap, g1, g0), jnp.where(swap, g0, g1)
    protect = _segment(s0, g0, s) | _segment(s1, g1, s)
    starts = jnp.zeros((a, 2), jnp.int32).at[0].set(s0).at[1].set(s1)
    goals = jnp.zeros((a, 2), jnp.int32).at[0].set(g0).at[1].set(g1)
    return starts, goals, protect


# Jitted (static capacity) so that its trace is cached: a run calls it inside several programs
# (the stage's pool, verification, evaluation, a dummy observation), each traced by its caller;
# an inner jit is traced once per input shape and inlined by XLA as before.
@partial(jax.jit, static_argnames=("cap",))
def generate(key: jax.Array, cfg: MAPFConfig, cap: Capacity) -> Level:
    """Draw one level from `cfg` (see the module docstring)."""
    s, a = cap.max_size, cap.max_agents
    k_size, k_n, k_wait, k_rand, k_cross, k_cross_place, k_safe = jax.random.split(key, 7)
    si = jax.random.categorical(k_size, jnp.log(cfg.size_weights))
    size = (MIN_SIZE + si).astype(jnp.int32)
    n = (jax.random.categorical(k_n, jnp.log(cfg.agent_weights)) + 1).astype(jnp.int32)
    n = jnp.minimum(n, size * size // 2)
    n_holes = jnp.round(cfg.hole_ratio[si] * size * size).astype(jnp.int32)
    want_wait = jax.random.bernoulli(k_wait, cfg.wait_ratio[si])

    none = jnp.zeros((s, s), bool)
    zeros = jnp.zeros((a, 2), jnp.int32)
    rand = _place(k_rand, size, n_holes, n, none, zeros, zeros, 0, cap)
    cs, cg, protect = _crossing(k_cross, size, cap)
    cross = _place(k_cross_place, size, n_holes, n, protect, cs, cg, jnp.minimum(n, 2), cap)
    safe = _place(k_safe, size, 0, n, none, zeros, zeros, 0, cap)
    cands = jax.tree.map(lambda *x: jnp.stack(x), rand, cross, safe)
    holes, starts, goals, ok = cands
    ok = ok.at[1].set(ok[1] & (n >= 2))  # the crossing needs two agents

    if cap.label_waits:
        inside = in_grid_mask(size, s)
        free = inside[None] & ~holes
        sol = jax.vmap(solve_pair)(free, starts[:, 0], goals[:, 0], starts[:, 1], goals[:, 1])
        two = n >= 2
        ok &= sol.solvable | ~two
        label = jnp.where(two, sol.needs_wait, False)
    else:
        label = jnp.zeros(3, bool)
    match = ok & (label == want_wait)
    pick = jnp.where(jnp.any(match), jnp.argmax(match), jnp.argmax(ok))
    holes, starts, goals = holes[pick], starts[pick], goals[pick]

    unknown = jnp.int32(UNKNOWN)
    if cap.label_waits:
        free = in_grid_mask(size, s) & ~holes
        single = bfs_distance(free, (jnp.arange(s)[:, None] == goals[0, 0])
                              & (jnp.arange(s)[None, :] == goals[0, 1]))[starts[0, 0], starts[0, 1]]
        ms = jnp.where(n == 1, single, jnp.where(n == 2, sol.makespan[pick], unknown))
        soc = jnp.where(n == 1, single, jnp.where(n == 2, sol.soc[pick], unknown))
        wait = jnp.where(n == 1, 0, label[pick].astype(jnp.int32))
        ms, soc = jnp.where(ms >= INF, unknown, ms), jnp.where(soc >= INF, unknown, soc)
    else:
        ms = soc = wait = unknown
    level = Level(holes=holes, starts=starts, goals=goals, size=size, n_agents=n,
                  opt_makespan=ms.astype(jnp.int32), opt_soc=soc.astype(jnp.int32),
                  needs_wait=wait.astype(jnp.int32))
    return with_derived(level, cap)


def with_derived(level: Level, cap: Capacity) -> Level:
    """`level` (unbatched) with the per-level fields `cap` observes from filled where missing
    (`dist` for the cost-to-go, `rows` for packed views) and the others dropped: computed once
    per level, never per step."""
    dist = rows = None
    if cap.cost_to_go:
        dist = level.dist if level.dist is not None else goal_distances(
            level.holes, level.size, level.goals, level.agent_mask())
    if cap.static_rows:
        rows = level.rows if level.rows is not None else static_rows(
            level.holes, level.size, level.goals, level.agent_mask())
    return level.replace(dist=dist, rows=rows)


# Jitted: called from Python (the LLM trainee's stages, plan datasets), an eager `lax.map`
# would trace and lower the generator again at every call; inside a jit they inline.
@partial(jax.jit, static_argnames=("cap",))
def generate_many(keys: jax.Array, cfgs: MAPFConfig, cap: Capacity) -> Level:
    """One level per (key, config) row: keys [n], cfgs batched [n] (in vmapped chunks, see
    `jaxenv.levels.generate_many`)."""
    return levels.generate_many(partial(generate, cap=cap), keys, cfgs)


@partial(jax.jit, static_argnames=("cap", "n"))
def generate_batch(key: jax.Array, cfg: MAPFConfig, cap: Capacity, n: int) -> Level:
    """n levels from one (unbatched) config."""
    return levels.generate_batch(partial(generate, cap=cap), key, cfg, n)
