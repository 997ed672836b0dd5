"""render_text: exact output on a hand level, and a round trip of random levels and states."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxenv.mapf.env import MAPFState
from jaxenv.mapf.level import make_level
from jaxenv.mapf.render import render_text
from tests.helpers.plan_helpers import random_instance

EXPECTED = """\
Grid 3x3, 2 agents. Cells are (row, col); row 0 is the top row, col 0 the left column.
Legend: . ice, H hole, Ai agent i, Gi goal of agent i.
    c0 c1 c2
r0  A0 .  G1
r1  .  H  .
r2  A1 .  G0
Agents:
A0: start (0,0), goal (2,2)
A1: start (2,0), goal (0,2)"""


def test_level_exact_text():
    holes = np.zeros((3, 3), bool)
    holes[1, 1] = True
    lv = make_level(holes, [(0, 0), (2, 0)], [(2, 2), (0, 2)], max_size=6, max_agents=4)
    assert render_text(lv) == EXPECTED
    rules = Path(__file__).resolve().parents[3] / "docs" / "rules.md"
    assert EXPECTED in rules.read_text()  # the rules page shows this very rendering


def read_back(text: str):
    """Invert render_text: holes, grid tokens per agent, and the agent lines."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("c0"))
    n = int(re.match(r"Grid (\d+)x", lines[0]).group(1))
    holes = np.zeros((n, n), bool)
    agents, goals = {}, {}
    for r in range(n):
        toks = lines[head + 1 + r].split()
        assert toks[0] == f"r{r}" and len(toks) == n + 1
        for c, tok in enumerate(toks[1:]):
            for part in tok.split("+"):
                if part == "H":
                    holes[r, c] = True
                elif part[0] == "A":
                    agents[int(part[1:])] = (r, c)
                elif part[0] == "G":
                    goals[int(part[1:])] = (r, c)
                else:
                    assert part == "." and tok == "."
    listed = {int(m.group(1)): ((int(m.group(2)), int(m.group(3))),
                                (int(m.group(4)), int(m.group(5))), bool(m.group(6)))
              for m in re.finditer(r"A(\d+): (?:start|at) \((\d+),(\d+)\), goal \((\d+),(\d+)\)"
                                   r"(, done)?", text)}
    return holes, agents, goals, listed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_level_round_trip(seed):
    rng = np.random.default_rng(seed)
    holes, starts, goals = random_instance(rng, sizes=(3, 10), agents=(1, 5))
    lv = make_level(holes, starts, goals, max_size=10, max_agents=5)
    h, a, g, listed = read_back(render_text(lv))
    assert (h == holes).all()
    assert a == dict(enumerate(starts)) and g == dict(enumerate(goals))
    assert listed == {i: (starts[i], goals[i], False) for i in range(len(starts))}


def test_state_shows_positions_time_and_done():
    holes = np.zeros((4, 4), bool)
    holes[3, 3] = True
    lv = make_level(holes, [(0, 0), (2, 2), (3, 0)], [(0, 1), (2, 2), (1, 0)], max_size=4,
                    max_agents=3)
    # after one step: A0 moved right onto its goal, A1 started on its goal, A2 moved up
    pos = jnp.array([[0, 1], [2, 2], [2, 0]])
    state = MAPFState(time=jnp.int32(1), level=lv, pos=pos, tried=pos,
                      frozen=jnp.array([True, True, False]), cost=jnp.array([1, 0, 2]),
                      step_limit=jnp.int32(10), success=jnp.bool_(False),
                      failed=jnp.bool_(False), violations=jnp.zeros(4, jnp.int32))
    text = render_text(state)
    assert "Time step 1, running." in text
    h, a, g, listed = read_back(text)
    assert a == {0: (0, 1), 1: (2, 2), 2: (2, 0)}
    assert listed[0] == ((0, 1), (0, 1), True) and listed[1][2] and not listed[2][2]
    assert "A0+G0" in text and "A1+G1" in text and (h == holes).all()


def test_rejects_batches_and_other_types():
    lv = make_level(np.zeros((3, 3), bool), [(0, 0)], [(2, 2)], max_size=3, max_agents=1)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), lv)
    with pytest.raises(ValueError, match="batch"):
        render_text(batch)
    with pytest.raises(TypeError):
        render_text("not a level")
    assert "Legend" not in render_text(lv, legend=False)
