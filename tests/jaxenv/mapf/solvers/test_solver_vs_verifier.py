"""The exact CBS solver against the JAX joint BFS and the plan verifier.

- optimum (SoC, makespan, needs-wait) equals ``jaxenv.mapf.joint.solve_pair`` on random
  2-agent levels;
- the solver's plans pass ``verify_plan`` with reward 1 (sum of costs), on 2-5 agents;
- faults planted into a solver plan fail exactly the right check; a goal left early and
  re-entered stays valid and is costed at the re-entry.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.mapf.joint import solve_pair
from jaxenv.mapf.plans import CHECKS, plan_arrays, verify_batch, verify_plan
from jaxenv.mapf.solvers.cbs import SolverBudgetExceeded, solve
from tests.helpers.plan_helpers import FAULTS, mutate, random_instance, ref, stack_levels, to_arrays

MAX_SIZE, MAX_AGENTS = 6, 5
verify_jit = jax.jit(verify_plan, static_argnames=("cost",))


def _solve(holes, starts, goals, time_limit=10.0):
    try:
        return solve(holes, starts, goals, max_nodes=5_000, time_limit=time_limit)
    except SolverBudgetExceeded:
        return "budget"


def _has_wait(paths) -> bool:
    return any(p[t] == p[t + 1] for p in paths for t in range(len(p) - 1))


def test_cbs_matches_joint_bfs_on_two_agents():
    rng = np.random.default_rng(11)
    cases = [random_instance(rng, sizes=(3, MAX_SIZE), agents=(2, 2), hole_max=0.5)
             for _ in range(240)]
    free = np.zeros((len(cases), MAX_SIZE, MAX_SIZE), bool)
    for i, (holes, _, _) in enumerate(cases):
        n = holes.shape[0]
        free[i, :n, :n] = ~holes
    st = np.array([c[1] for c in cases], np.int32)
    gl = np.array([c[2] for c in cases], np.int32)
    pair = jax.device_get(jax.jit(jax.vmap(solve_pair))(
        jnp.asarray(free), st[:, 0], gl[:, 0], st[:, 1], gl[:, 1]))
    counts = {"solved": 0, "unsolvable": 0, "wait": 0}
    for i, (holes, starts, goals) in enumerate(cases):
        sol = _solve(holes, starts, goals)
        assert sol != "budget", (holes, starts, goals)
        if sol is None:
            assert not pair.solvable[i], (holes, starts, goals)
            counts["unsolvable"] += 1
            continue
        assert pair.solvable[i]
        got = (sol.soc, sol.makespan, sol.needs_wait)
        assert got == (int(pair.soc[i]), int(pair.makespan[i]), bool(pair.needs_wait[i])), (
            holes, starts, goals)
        counts["solved"] += 1
        counts["wait"] += sol.needs_wait
        if sol.needs_wait:
            assert _has_wait(sol.paths)
    assert counts["solved"] > 100 and counts["unsolvable"] > 5 and counts["wait"] > 5, counts


def test_solver_plans_pass_the_verifier():
    rng = np.random.default_rng(5)
    rows = []
    while len(rows) < 120:
        holes, starts, goals = random_instance(rng, sizes=(3, MAX_SIZE), agents=(2, 5),
                                               hole_max=0.35)
        sol = _solve(holes, starts, goals, time_limit=0.5)
        if sol is None or sol == "budget":
            continue
        rows.append((holes, starts, goals, sol))
    horizon = max(len(p) for *_, s in rows for p in s.paths)
    levels = stack_levels([(h, s, g, sol.makespan, sol.soc) for h, s, g, sol in rows],
                          MAX_SIZE, MAX_AGENTS)
    arrays = [to_arrays(sol.paths, MAX_AGENTS + 1, horizon) for *_, sol in rows]
    cells = np.stack([a[0] for a in arrays])
    lens = np.stack([a[1] for a in arrays])
    ok = np.ones(len(rows), bool)
    soc = jax.device_get(verify_batch(levels, cells, lens, ok, cost="soc"))
    mks = jax.device_get(verify_batch(levels, cells, lens, ok, cost="makespan"))
    assert soc.valid.all() and (soc.reward == 1.0).all() and soc.optimal.all()
    assert (soc.soc == [sol.soc for *_, sol in rows]).all()
    # the SoC-optimal plan's makespan is at least the optimum, reward 1 iff equal
    plan_ms = mks.makespan
    opt_ms = np.array([sol.makespan for *_, sol in rows])
    assert (plan_ms >= opt_ms).all()
    assert ((mks.reward == 1.0) == (plan_ms == opt_ms)).all()
    assert (mks.reward[plan_ms > opt_ms] < 1.0).all()


def _isolated_instance():
    """5x5 ice, A0 (0,0)->(0,2), A1 (0,4)->(0,3), A2 (4,0)->(4,4): unique straight paths."""
    holes = np.zeros((5, 5), bool)
    starts, goals = [(0, 0), (0, 4), (4, 0)], [(0, 2), (0, 3), (4, 4)]
    sol = solve(holes, starts, goals)
    assert sol is not None and (sol.soc, sol.makespan, sol.needs_wait) == (7, 4, False)
    return holes, starts, goals, sol


def _pad(paths):
    h = max(len(p) for p in paths)
    return [list(p) + [p[-1]] * (h - len(p)) for p in paths]


def _planted(paths):
    """name -> (paths, hole to add or None, the one failing check)."""
    p = _pad(paths)
    a0, a1, a2 = p
    return {
        "swap": ([a0 + [(0, 3), (0, 2)], a1 + [(0, 2), (0, 3)], a2], None, "conflict_free"),
        "vertex": ([a0 + [(0, 3), (0, 2)], a1, a2], None, "conflict_free"),
        "hole": (p, (4, 2), "no_hole"),
        "jump": ([a0, a1, [c for c in a2 if c != (4, 2)]], None, "one_cell_moves"),
        "missing_agent": ([a0, a1], None, "agent_count"),
        "off_grid": ([a0 + [(-1, 2), (0, 2)], a1, a2], None, "in_bounds"),
        "goal_not_reached": ([a0[:-1] + [(1, 2)], a1, a2], None, "goals_reached"),
        "wrong_start": ([[(1, 0)] + a0, a1, a2], None, "starts_correct"),
    }


@pytest.mark.parametrize("fault", ["swap", "vertex", "hole", "jump", "missing_agent",
                                   "off_grid", "goal_not_reached", "wrong_start"])
def test_planted_faults_in_solver_plan(fault):
    holes, starts, goals, sol = _isolated_instance()
    lv_args = dict(max_size=MAX_SIZE, max_agents=MAX_AGENTS)
    base = plan_arrays(sol.paths, MAX_AGENTS, 12)
    lv = stack_levels([(holes, starts, goals, sol.makespan, sol.soc)], **lv_args)
    lv = jax.tree.map(lambda x: x[0], lv)
    v = verify_jit(lv, base.cells, base.length, base.parsed_ok, cost="soc")
    assert bool(v.valid) and float(v.reward) == 1.0
    paths, hole, check = _planted(sol.paths)[fault]
    h = holes.copy()
    if hole is not None:
        h[hole] = True
    lv = jax.tree.map(lambda x: x[0], stack_levels([(h, starts, goals, 4, 7)], **lv_args))
    plan = plan_arrays(paths, MAX_AGENTS, 12)
    v = verify_jit(lv, plan.cells, plan.length, plan.parsed_ok)
    failed = {c for c, ok in zip(CHECKS, np.asarray(v.checks).tolist(), strict=True) if not ok}
    assert failed == {check}
    assert float(v.reward) == 0.0
    r = ref(h, starts, goals, paths, MAX_SIZE)
    assert {c for c in CHECKS if not r[c]} == {check}


def test_goal_left_early_and_reentered_in_solver_plan():
    holes, starts, goals, sol = _isolated_instance()
    a0, a1, a2 = _pad(sol.paths)
    assert a1[:2] == [(0, 4), (0, 3)]
    a1 = [(0, 4), (0, 3), (1, 3), (0, 3)] + a1[4:]  # home at t=1, away at t=2, back at t=3
    lv = jax.tree.map(lambda x: x[0], stack_levels([(holes, starts, goals, 4, 7)], MAX_SIZE,
                                                    MAX_AGENTS))
    plan = plan_arrays([a0, a1, a2], MAX_AGENTS, 12)
    v = verify_jit(lv, plan.cells, plan.length, plan.parsed_ok, cost="soc")
    assert bool(v.valid) and (int(v.soc), int(v.makespan)) == (2 + 3 + 4, 4)
    assert float(v.reward) == pytest.approx(1 - 0.7 * 2 / 14)
    v = verify_jit(lv, plan.cells, plan.length, plan.parsed_ok, cost="makespan")
    assert bool(v.optimal) and float(v.reward) == 1.0


def test_random_faults_in_solver_plans_agree_with_reference():
    rng = np.random.default_rng(3)
    cases = []
    while len(cases) < 400:
        holes, starts, goals = random_instance(rng, sizes=(3, MAX_SIZE), agents=(2, 4))
        sol = _solve(holes, starts, goals, time_limit=0.5)
        if sol is None or sol == "budget":
            continue
        for fault in FAULTS[1:]:
            cases.append((holes, starts, goals, mutate(rng, sol.paths, holes.shape[0], fault)))
    horizon = max(len(p) for *_, paths in cases for p in paths)
    levels = stack_levels([(h, s, g, -1, -1) for h, s, g, _ in cases], MAX_SIZE, MAX_AGENTS)
    arr = [to_arrays(paths, MAX_AGENTS + 1, horizon) for *_, paths in cases]
    out = jax.device_get(verify_batch(levels, np.stack([a[0] for a in arr]),
                                      np.stack([a[1] for a in arr]), np.ones(len(cases), bool)))
    invalid = 0
    for i, (holes, starts, goals, paths) in enumerate(cases):
        r = ref(holes, starts, goals, paths, MAX_SIZE)
        far = any(not (-1 <= x <= MAX_SIZE) for p in paths for c in p for x in c)
        for j, name in enumerate(CHECKS):
            if not (far and name == "conflict_free"):
                assert bool(out.checks[i, j]) == r[name], (name, paths)
        assert bool(out.valid[i]) == r["valid"]
        invalid += not r["valid"]
    assert invalid > len(cases) // 2
