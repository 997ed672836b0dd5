"""Differential test: the JAX step against the independent plain-Python reference.

Thousands of random boards, positions, frozen flags, path costs and joint actions, both
conflict modes, both goal rules, every reward term, with and without slips (the reference
receives the same slip draws, from `slip_noise` on the same key). States, costs, rewards and
terminations must be identical.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.mapf import Capacity, MAPFFrozenLake, MAPFState, make_level
from jaxenv.mapf.rules import slip_noise
from jaxenv.mapf.solvers.reference import ref_step

CAP = Capacity(max_size=7, max_agents=6, view_radius=2, max_steps=50, label_waits=False)
ENV = MAPFFrozenLake(CAP)


def _random_case(rng: np.random.Generator) -> dict:
    n_size = int(rng.integers(3, CAP.max_size + 1))
    holes = rng.random((n_size, n_size)) < rng.uniform(0.0, 0.5)
    free = np.argwhere(~holes)
    if len(free) < 2:
        holes[:] = False
        free = np.argwhere(~holes)
    n = int(rng.integers(1, min(CAP.max_agents, len(free)) + 1))
    pos = free[rng.choice(len(free), n, replace=False)]
    goals = free[rng.choice(len(free), n, replace=False)]
    # Some agents sit on their goal (frozen under the freeze rule); crowding makes conflicts
    # frequent.
    frozen = rng.random(n) < 0.25
    goals[frozen] = pos[frozen]
    # Goals must stay distinct for a well-formed level: re-draw clashes as frozen-free.
    _, first = np.unique(goals, axis=0, return_index=True)
    dup = np.ones(n, bool)
    dup[first] = False
    goals[dup], frozen[dup] = pos[dup], True
    goal_rule = str(rng.choice(["plan", "freeze"]))
    if goal_rule == "plan":  # nobody is ever frozen under the plan rule
        frozen[:] = False
    # Costs so far (rules.md "Costs"): an agent off its goal at time t costs t + 1; one on its
    # goal arrived at some time <= t.
    time = int(rng.integers(0, 12))
    home = (pos == goals).all(-1)
    cost = np.where(home, rng.integers(0, time + 1, n), time + 1)
    return {
        "size": n_size, "holes": holes, "pos": pos, "goals": goals, "frozen": frozen, "n": n,
        "goal_rule": goal_rule, "cost": cost, "time": time,
        "actions": rng.integers(0, 5, CAP.max_agents),
        "slip_prob": float(rng.choice([0.0, 0.0, 0.3, 0.5])),
        "mode": str(rng.choice(["fail", "block"])),
        "factor": float(rng.choice([1.0, 2.0])),
        "rewards": rng.choice([0.0, 0.5, 1.0], 6),
    }


def _stack(trees: list):
    """`jaxenv.batching.stack` done on the host: one `jnp.stack` of a thousand leaves compiles
    a thousand-operand program per leaf, which took most of the test."""
    return jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *trees)


def _jax_inputs(cases: list[dict]):
    space = ENV.config_space
    levels, cfgs = [], []
    for c in cases:
        levels.append(make_level(c["holes"], c["pos"], c["goals"], max_size=CAP.max_size,
                                 max_agents=CAP.max_agents))
        v = space.default()
        v.update(slip_prob=c["slip_prob"], conflict_mode=c["mode"], step_limit_factor=c["factor"],
                 success_reward=c["rewards"][0], step_cost=c["rewards"][1] / 10,
                 shaping=c["rewards"][2] / 10, conflict_penalty=c["rewards"][3],
                 soc_cost=c["rewards"][4] / 10, makespan_cost=c["rewards"][5] / 10,
                 goal_rule=c["goal_rule"])
        cfgs.append(space.to_config(v))
    frozen = np.zeros((len(cases), CAP.max_agents), bool)
    cost = np.zeros((len(cases), CAP.max_agents), np.int32)
    for i, c in enumerate(cases):
        frozen[i, : c["n"]] = c["frozen"]
        cost[i, : c["n"]] = c["cost"]
    cfgs = _stack(cfgs)
    # one jitted, vmapped reset for all cases (op by op, 1,000 resets took most of the test)
    states = _reset(_stack(levels), cfgs)
    states = states.replace(time=jnp.asarray([c["time"] for c in cases], jnp.int32),
                            frozen=jnp.asarray(frozen), cost=jnp.asarray(cost))
    return states, cfgs


@jax.jit
def _reset(levels, cfgs) -> MAPFState:
    return jax.vmap(lambda lv, cfg: ENV.reset_to_level(jax.random.key(0), lv, cfg)[1])(levels,
                                                                                      cfgs)


@jax.jit
def _jax_step(keys, states: MAPFState, actions, cfgs):
    _, st, reward, terminated, info = jax.vmap(ENV.step_env)(keys, states, actions, cfgs)
    truncated = jax.vmap(ENV.is_truncated)(st, cfgs)
    return st, reward, terminated, truncated, info


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_matches_reference(seed):
    rng = np.random.default_rng(seed)
    cases = [_random_case(rng) for _ in range(1000)]
    states, cfgs = _jax_inputs(cases)
    keys = jax.random.split(jax.random.key(seed), len(cases))
    actions = jnp.asarray(np.stack([c["actions"] for c in cases]), jnp.int32)
    st, reward, terminated, truncated, info = jax.device_get(
        _jax_step(keys, states, actions, cfgs))
    u_all, side_all = jax.device_get(jax.vmap(lambda k: slip_noise(k, CAP.max_agents))(keys))
    n_conflicts = 0
    for i, c in enumerate(cases):
        n = c["n"]
        ref = ref_step(
            size=c["size"], holes=c["holes"].tolist(), goals=[tuple(g) for g in c["goals"]],
            pos=[tuple(p) for p in c["pos"]], frozen=c["frozen"].tolist(),
            actions=c["actions"][:n].tolist(), slip_u=u_all[i][:n].tolist(),
            slip_side=side_all[i][:n].tolist(), slip_prob=c["slip_prob"], mode=c["mode"],
            time=c["time"], step_limit=int(states.step_limit[i]),
            success_reward=c["rewards"][0], step_cost=c["rewards"][1] / 10,
            shaping=c["rewards"][2] / 10, conflict_penalty=c["rewards"][3],
            goal_rule=c["goal_rule"], cost=c["cost"].tolist(), soc_cost=c["rewards"][4] / 10,
            makespan_cost=c["rewards"][5] / 10)
        where = f"case {i}: {c}"
        assert [tuple(p) for p in st.pos[i][:n].tolist()] == ref["pos"], where
        assert st.frozen[i][:n].tolist() == ref["frozen"], where
        assert st.cost[i][:n].tolist() == ref["cost"], where
        np.testing.assert_allclose(reward[i][:n], ref["reward"], rtol=1e-6, atol=1e-6,
                                   err_msg=where)
        assert not reward[i][n:].any(), where
        assert bool(st.success[i]) == ref["success"], where
        assert bool(st.failed[i]) == ref["failed"], where
        assert bool(terminated[i]) == ref["terminated"], where
        assert bool(truncated[i]) == ref["truncated"], where
        assert int(st.time[i]) == ref["time"], where
        counts = [sum(ref[k]) for k in ("vertex", "edge", "hole", "oob")]
        assert st.violations[i].tolist() == counts, where
        n_conflicts += counts[0] + counts[1] > 0
    # The random cases must actually exercise conflicts, or the test proves little.
    assert n_conflicts > 50
