"""The two optional planes about the other agents (`Capacity.priority`, `Capacity.intent`)
against plain per-cell references.

Random boards (holes, agents anywhere, inactive slots, agents sharing a cell): agent a's
priority plane marks exactly the cells of its view where an active agent of a lower slot index
stands; its intent plane marks where each other active agent's first distance-shortening move
(a Python BFS from that agent's goal; up, down, left, right in that order) would take it, or
its own cell when it has none. The policy's input carries the planes as further view channels
after today's four, which stay bit for bit what the env without the flags gives; and the
options reach the loop's task and its validators, with runs saved before them resuming
without them.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.level import Level
from tests.jaxenv.mapf.plain_mapf import MOVES, distances
from tests.jaxenv.mapf.test_cost_to_go import random_level

S, A, R = 7, 5, 2
V = 2 * R + 1
CAP = dict(max_size=S, max_agents=A, view_radius=R, max_steps=40, cost_to_go=True)
ON = MAPFFrozenLake(Capacity(**CAP, priority=True, intent=True))
OFF = MAPFFrozenLake(Capacity(**CAP))


def window(pos: np.ndarray, cells: list[tuple[int, int]]) -> np.ndarray:
    """[V, V]: 1 at each of `cells` inside the view centred on `pos`."""
    out = np.zeros((V, V), np.uint8)
    for i in range(V):
        for j in range(V):
            out[i, j] = (pos[0] + i - R, pos[1] + j - R) in cells
    return out


def priority_reference(pos: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((A, V, V), np.uint8)
    for a in range(k):
        out[a] = window(pos[a], [tuple(pos[b]) for b in range(a)])
    return out


def heading(holes: np.ndarray, n: int, pos: np.ndarray, goal: np.ndarray) -> tuple[int, int]:
    """The cell of the first move that shortens the BFS distance to `goal`, else `pos`."""
    d = distances(holes, n, goal)
    here = tuple(pos)
    if here not in d:
        return here
    for dr, dc in MOVES:
        nxt = (here[0] + dr, here[1] + dc)
        if d.get(nxt, 1 << 30) < d[here]:
            return nxt
    return here


def intent_reference(holes, n, k, pos, goals) -> np.ndarray:
    heads = [heading(holes, n, pos[b], goals[b]) for b in range(k)]
    out = np.zeros((A, V, V), np.uint8)
    for a in range(k):
        out[a] = window(pos[a], [heads[b] for b in range(k) if b != a])
    return out


def references(level: Level, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k, n = int(level.n_agents), int(level.size)
    holes, goals = np.asarray(level.holes), np.asarray(level.goals)
    return priority_reference(pos, k), intent_reference(holes, n, k, pos, goals)


# Jitted once for every example's level (the same shapes each time).
_reset_on, _reset_off = jax.jit(ON.reset_to_level), jax.jit(OFF.reset_to_level)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_planes_equal_cell_by_cell_references(seed):
    level, _ = random_level(np.random.default_rng(seed), S, A, shared_cell=0.3)
    key = jax.random.PRNGKey(0)
    obs, state = _reset_on(key, level, ON.default_params)
    prio, intent = references(level, np.asarray(level.starts))
    np.testing.assert_array_equal(np.asarray(obs.priority), prio)
    np.testing.assert_array_equal(np.asarray(obs.intent), intent)
    # The policy's input: today's four channels unchanged, then priority, then intent.
    obs_off, state_off = _reset_off(key, level, OFF.default_params)
    inp_on, inp_off = ON.agent_obs(obs, state), OFF.agent_obs(obs_off, state_off)
    assert inp_on.view.shape == (A, V, V, 6) and inp_off.view.shape == (A, V, V, 4)
    np.testing.assert_array_equal(np.asarray(inp_on.view[..., :4]), np.asarray(inp_off.view))
    np.testing.assert_array_equal(np.asarray(inp_on.view[..., 4]), prio)
    np.testing.assert_array_equal(np.asarray(inp_on.view[..., 5]), intent)
    np.testing.assert_array_equal(np.asarray(inp_on.vec), np.asarray(inp_off.vec))
    assert obs_off.priority is None and obs_off.intent is None


@pytest.mark.slow
def test_the_planes_follow_the_steps_and_the_first_agent_ranks_first():
    """After random steps (auto-resets included) both planes are the references' for the new
    positions; agent 0 never sees an agent above it. Reset and step are jitted: one compile
    each for the twelve steps, where op by op every step would compile its loops again."""
    cfg = ON.default_params
    reset, step = jax.jit(ON.reset), jax.jit(ON.step)
    obs, state = reset(jax.random.PRNGKey(3), cfg)
    for t in range(12):
        key = jax.random.PRNGKey(100 + t)
        action = jax.random.randint(key, (A,), 0, 5)
        obs, state, *_ = step(key, state, action, cfg)
        assert not np.asarray(obs.priority[0]).any()
        prio, intent = references(state.level, np.asarray(state.pos))
        np.testing.assert_array_equal(np.asarray(obs.priority), prio)
        np.testing.assert_array_equal(np.asarray(obs.intent), intent)
    assert {"priority", "intent"} <= set(ON.observation_space().spaces)
    assert not {"priority", "intent"} & set(OFF.observation_space().spaces)


def test_intent_needs_the_cost_to_go():
    with pytest.raises(ValueError, match="cost_to_go"):
        Capacity(intent=True)


def test_flags_reach_the_task_and_runs_saved_before_them(tmp_path):
    """`--priority on --intent on` builds the loop's env and both validators with the planes
    (so the network's input matches across training, validation and held-out); intent is on by
    default, off by default with the cost-to-go off, and refused with it off; a run.json saved
    before the options resumes without them."""
    import json

    from designer.cli import CliError, Parser, add_run_flags, build_settings, saved_settings
    from designer.tasks.mapf.task import mapf_task

    p = Parser()
    add_run_flags(p)
    default = build_settings(p.parse_args([])).capacity
    assert not default.priority and default.intent and default.cost_to_go
    assert not build_settings(p.parse_args(["--cost-to-go", "off"])).capacity.intent
    s = build_settings(p.parse_args(["--priority", "on", "--intent", "on"]))
    task = mapf_task(s)
    for env in (task.env, task.validator.env, task.heldout.env):
        assert env.cap.priority and env.cap.intent
    with pytest.raises(CliError, match="intent needs cost_to_go"):
        build_settings(p.parse_args(["--intent", "on", "--cost-to-go", "off"]))
    old = s.model_dump()
    del old["capacity"]["priority"], old["capacity"]["intent"]
    (tmp_path / "run.json").write_text(json.dumps({"settings": old}))
    saved = saved_settings(tmp_path / "run.json").capacity
    assert saved.priority is False and saved.intent is False
