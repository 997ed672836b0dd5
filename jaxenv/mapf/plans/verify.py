"""The jitted whole-plan verifier: the paper's eight checks, costs and accuracy reward.

`verify_plan(level, cells, length, parsed_ok, cost=...)` is pure JAX (jit and vmap it; see
`verify_batch`). The per-step rules (bounds, holes, vertex and edge conflicts) come from
`jaxenv.mapf.rules.violations` and one-cell moves from `rules.DELTAS`: one rules
implementation for stepwise play and whole plans. Semantics, costs and the default cost
(makespan) are in docs/plan_format.md.

Under the `plan` goal rule (docs/rules.md) an episode *is* a whole plan: each agent's cells at
times 0..T, where T is the step at which every agent first stands on its goal.
`verify_episodes` turns the recorded positions into the plan's array form (`episode_plans`)
and verifies it, which makes the verifier, not the environment, the judge of valid and
optimal, so the two can never disagree silently
(`jaxenv.mapf.benchmark.validator.Validator.read` counts any disagreement).
"""

from __future__ import annotations

from functools import partial

import chex
import jax
import jax.numpy as jnp
from flax import struct

from jaxenv.mapf import rules
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.parse import ParseReport, Plan, parse_plan, stack_plans

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
COSTS = ("makespan", "soc")

# ---------------------------------------------------------------------------------- verifier


@struct.dataclass
class Verdict:
    """Result of ``verify_plan`` for one plan (add a leading axis when vmapped)."""

    checks: jax.Array  # [8] bool, order CHECKS
    valid: jax.Array  # [] bool: all eight checks pass
    makespan: jax.Array  # [] int32, -1 unless valid
    soc: jax.Array  # [] int32, -1 unless valid
    cost: jax.Array  # [] int32: the chosen cost (makespan or soc), -1 unless valid
    optimal: jax.Array  # [] bool: valid and cost == the level's optimum (False if unknown)
    reward: jax.Array  # [] float32: the paper's accuracy reward (NaN if optimum unknown)
    first_conflict: jax.Array  # [] int32: first time with a vertex/edge conflict, -1 if none

    def check(self, name: str) -> jax.Array:
        return self.checks[..., CHECKS.index(name)]


def accuracy_reward(valid: jax.Array, cost: jax.Array, optimal: jax.Array) -> jax.Array:
    """Paper's reward: 0 if invalid; c = cost - optimal, c_max = 2 optimal; 1 if c <= 0,
    1 - 0.7 c / c_max if 0 < c <= c_max, 0.3 beyond (optimal 0: 1 if cost 0 else 0.3).
    NaN where ``optimal`` is unknown (< 0)."""
    c = (cost - optimal).astype(jnp.float32)
    c_max = (2 * optimal).astype(jnp.float32)
    graded = jnp.where(c <= 0, 1.0, jnp.where(c <= c_max, 1.0 - 0.7 * c / jnp.maximum(c_max, 1.0),
                                               0.3))
    r = jnp.where(valid, graded, 0.0)
    return jnp.where(optimal < 0, jnp.nan, r).astype(jnp.float32)


def verify_plan(level: Level, plan_cells: jax.Array, plan_len: jax.Array, parsed_ok: jax.Array,
                cost: str = "makespan", optimal: jax.Array | None = None) -> Verdict:
    """The eight whole-plan checks, costs and accuracy reward of one plan (pure JAX).

    level: an unbatched ``Level``; plan_cells [P, T, 2] int, plan_len [P] int, parsed_ok bool
    (see the module docstring for the array form). ``cost`` ("makespan" default, or "soc")
    picks the cost the reward and ``optimal`` use; ``optimal`` overrides the level's stored
    optimum of that cost. Jittable (``cost`` static) and vmappable.
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    cells = jnp.asarray(plan_cells, jnp.int32)
    length = jnp.asarray(plan_len, jnp.int32)
    p, t = cells.shape[0], cells.shape[1]
    n = level.n_agents
    row = jnp.arange(p)
    present = length > 0
    agent_count = jnp.all(jnp.where(row < n, present, ~present)) & (n <= p)
    parsed = jnp.asarray(parsed_ok, bool) & jnp.all(length <= t)

    # Only rows below the level's capacity can be agents; the rest only count for agent_count.
    a = min(p, level.max_agents)
    cells, length = cells[:a], length[:a]
    used = (length > 0) & (jnp.arange(a) < n)

    # Padded paths: cell at time k is cells[min(k, len - 1)].
    k = jnp.arange(t)
    last = jnp.take_along_axis(cells, jnp.clip(length - 1, 0, t - 1)[:, None, None], axis=1)
    path = jnp.where(k[None, :, None] < length[:, None, None], cells, last)  # [a, T, 2]
    prev = jnp.concatenate([path[:, :1], path[:, :-1]], axis=1)

    # The per-step rules; the first "step" (prev = path[0]) checks the start cells themselves.
    v = jax.vmap(lambda x, y: rules.violations(level.holes, level.size, x, y, used),
                 in_axes=(1, 1))(prev, path)  # fields [T, a]
    delta = path - prev
    legal = jnp.any(jnp.all(delta[..., None, :] == rules.DELTAS, -1), -1)  # [a, T]
    one_cell_moves = jnp.all(legal | ~used[:, None])
    clash = jnp.any(v.vertex | v.edge, axis=1)  # [T]
    conflict_free = ~jnp.any(clash)
    no_hole = ~jnp.any(v.hole)
    in_bounds = ~jnp.any(v.oob)

    starts, goals = level.starts[:a], level.goals[:a]
    starts_correct = jnp.all(jnp.all(path[:, 0] == starts, -1) | ~used)
    goals_reached = jnp.all(jnp.all(path[:, -1] == goals, -1) | ~used)

    checks = jnp.stack([jnp.bool_(True), one_cell_moves, conflict_free, goals_reached,
                        starts_correct, agent_count, no_hole, in_bounds]) & parsed
    valid = jnp.all(checks)

    away = jnp.any(path != goals[:, None, :], -1)  # [P, T]
    arrival = jnp.max(jnp.where(away, k[None, :] + 1, 0), axis=1)
    arrival = jnp.where(used, arrival, 0)
    makespan = jnp.where(valid, jnp.max(arrival), -1).astype(jnp.int32)
    soc = jnp.where(valid, jnp.sum(arrival), -1).astype(jnp.int32)
    chosen = makespan if cost == "makespan" else soc
    opt = (level.opt_makespan if cost == "makespan" else level.opt_soc) if optimal is None \
        else jnp.asarray(optimal, jnp.int32)
    first = jnp.where(jnp.any(clash), jnp.argmax(clash), -1).astype(jnp.int32)
    return Verdict(
        checks=checks, valid=valid, makespan=makespan, soc=soc, cost=chosen,
        optimal=valid & (opt >= 0) & (chosen == opt),
        reward=accuracy_reward(valid, chosen, opt),
        first_conflict=jnp.where(parsed, first, -1),
    )


@partial(jax.jit, static_argnames=("cost", "mode"))
def verify_batch(levels: Level, plan_cells: jax.Array, plan_len: jax.Array,
                 parsed_ok: jax.Array, cost: str = "makespan", mode: str = "vmap") -> Verdict:
    """``verify_plan`` over a batch: levels [B] (batched pytree), cells [B, P, T, 2], ...

    ``mode``: ``"vmap"`` (default) vectorises over the batch; ``"map"`` runs the plans one
    after another (``lax.map``) with each plan's time steps vectorised, which needs less memory
    for very large batches. Results are identical (tested);
    ``benchmarks/verify_throughput.py`` times both.
    """
    if mode == "vmap":
        return jax.vmap(partial(verify_plan, cost=cost))(levels, plan_cells, plan_len, parsed_ok)
    if mode == "map":
        return jax.lax.map(lambda x: verify_plan(*x, cost=cost),
                           (levels, plan_cells, plan_len, parsed_ok))
    raise ValueError(f"mode must be 'vmap' or 'map', got {mode!r}")


verify_one = jax.jit(verify_plan, static_argnames=("cost",))
"""``verify_plan`` under ``jax.jit`` (one plan, one level)."""


def verify_text(level: Level, text: str, cost: str = "makespan",
                horizon: int | None = None) -> tuple[Verdict, ParseReport]:
    """Parse one reply and verify it against one (unbatched) level (jitted per shape)."""
    report = parse_plan(text)
    plan = report.to_arrays(level.max_agents, horizon)
    return verify_one(level, plan.cells, plan.length, plan.parsed_ok, cost=cost), report


MAX_PLAN_STEPS = 256  # cells per path the text scorer reads; longer paths count as unparsable


def verify_texts(levels: Level, texts: list, cost: str = "makespan",
                 horizon: int = MAX_PLAN_STEPS) -> Verdict:
    """Replies [N] against levels [N]: each text through the bounded parser (anything, however
    broken, is a parse failure, never an exception), then all plans in **one** batched
    verifier call (``lax.map`` on a CPU, ``vmap`` elsewhere). What
    ``designer.tasks.mapf.plans.evaluate.evaluate`` and the LLM trainee's validation and
    verification both use."""
    import numpy as np

    max_agents = int(np.asarray(levels.starts).shape[-2])
    batch = stack_plans([parse_plan(t).to_arrays(max_agents, horizon) for t in texts])
    mode = "map" if jax.default_backend() == "cpu" else "vmap"
    return verify_batch(levels, batch.cells, batch.length, batch.parsed_ok, cost=cost, mode=mode)


# ---------------------------------------------------------------------------------- episodes


def episode_plans(trace: jax.Array, steps: jax.Array, n_agents: jax.Array) -> Plan:
    """Plans of N episodes: trace [N, T+1, A, 2] positions, steps [N], n_agents [N].

    Agent rows below the level's agent count get the cells of times 0..steps (length
    steps + 1); the other rows are empty. Cells after an episode's end are ignored (the
    verifier pads a path with its last cell).
    """
    chex.assert_rank(trace, 4)
    n, _, a, _ = trace.shape
    chex.assert_shape([steps, n_agents], (n,))
    cells = jnp.swapaxes(jnp.asarray(trace, jnp.int32), 1, 2)  # [N, A, T+1, 2]
    used = jnp.arange(a)[None, :] < n_agents[:, None]
    length = jnp.where(used, steps[:, None] + 1, 0).astype(jnp.int32)
    return Plan(cells=cells, length=length, parsed_ok=jnp.ones(n, bool))


@partial(jax.jit, static_argnames=("cost", "mode"))
def verify_episodes(levels: Level, trace: jax.Array, steps: jax.Array, cost: str = "makespan",
                    mode: str = "vmap") -> Verdict:
    """The verifier's verdict on the plan each of N episodes traced (levels batched [N])."""
    plan = episode_plans(trace, steps, levels.n_agents)
    return verify_batch(levels, plan.cells, plan.length, plan.parsed_ok, cost=cost, mode=mode)
