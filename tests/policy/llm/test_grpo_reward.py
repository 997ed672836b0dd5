"""The LLM trainee's reward (designer.tasks.mapf.plans.reward) from the verifier, and its stage
data: pure JAX, no tunix needed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from designer.tasks.mapf.plans import reward as R
from designer.tasks.mapf.plans import stages
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.parse import format_plan

CFG = R.RewardConfig()


def level_3x3() -> Level:
    """3x3, no holes; A0 (0,0) -> (0,2), A1 (2,0) -> (2,2): optimal makespan 2."""
    return Level(holes=jnp.zeros((3, 3), bool), starts=jnp.array([[0, 0], [2, 0]], jnp.int32),
                 goals=jnp.array([[0, 2], [2, 2]], jnp.int32), size=jnp.int32(3),
                 n_agents=jnp.int32(2), opt_makespan=jnp.int32(2), opt_soc=jnp.int32(4),
                 needs_wait=jnp.int32(0))


def batch(level: Level, n: int) -> Level:
    return jax.tree.map(lambda x: jnp.stack([x] * n), level)


OPTIMAL = format_plan([[(0, 0), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]])
ONE_EXTRA = format_plan([[(0, 0), (0, 0), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]])
INVALID = {
    "jump": format_plan([[(0, 0), (0, 2)], [(2, 0), (2, 1), (2, 2)]]),
    "wrong start": format_plan([[(1, 0), (1, 1), (0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]]),
    "goal missed": format_plan([[(0, 0), (0, 1)], [(2, 0), (2, 1), (2, 2)]]),
    "vertex conflict": format_plan([[(0, 0), (1, 0), (1, 1), (1, 2), (0, 2)],
                                    [(2, 0), (1, 0), (2, 0), (2, 1), (2, 2)]]),
    "off grid": format_plan([[(0, 0), (-1, 0), (0, 0), (0, 1), (0, 2)],
                             [(2, 0), (2, 1), (2, 2)]]),
    "missing agent": format_plan([[(0, 0), (0, 1), (0, 2)]]),
    "prose": "I would move A0 right twice.",
}


def test_accuracy_reward_from_the_verifier():
    texts = [OPTIMAL, ONE_EXTRA, *INVALID.values()]
    acc = R.accuracy(batch(level_3x3(), len(texts)), texts, CFG)
    assert acc[0] == 1.0
    # c = 1, c_max = 2 * 2 = 4: 1 - 0.7 / 4
    assert acc[1] == pytest.approx(1 - 0.7 * 1 / 4)
    assert dict(zip(INVALID, acc[2:].tolist())) == dict.fromkeys(INVALID, 0.0)


@settings(max_examples=25, deadline=None)
@given(waits=st.integers(0, 12))
def test_accuracy_reward_grades_extra_steps(waits):
    """A0 waits ``waits`` steps first: makespan 2 + waits, reward as the paper writes it."""
    text = format_plan([[(0, 0)] * (waits + 1) + [(0, 1), (0, 2)], [(2, 0), (2, 1), (2, 2)]])
    acc = float(R.accuracy(batch(level_3x3(), 1), [text], CFG)[0])
    c, c_max = waits, 4
    expect = 1.0 if c == 0 else 1 - 0.7 * c / c_max if c <= c_max else 0.3
    assert acc == pytest.approx(expect)


def test_length_term_and_weight_schedule():
    n = jnp.array([0, 1500, 1501, 2798, 4096, 10_000])
    got = np.asarray(R.length_term(n, 1500, 4096))
    assert got[:2].tolist() == [0.0, 0.0]
    assert got[2] < 0 and got[3] == pytest.approx(-0.5) and got[4:].tolist() == [-1.0, -1.0]
    assert np.allclose(R.weights(0.0, CFG), [0.5, 0.5])
    assert np.allclose(R.weights(1.0, CFG), [0.8, 0.2])
    assert np.allclose(R.weights(0.5, CFG), [0.65, 0.35])
    lv = batch(level_3x3(), 3)
    r = R.plan_reward(lv, [OPTIMAL, OPTIMAL, INVALID["jump"]], [10, 4096, 10], 0.0, CFG)
    assert r["total"].tolist() == pytest.approx([0.5, 0.0, 0.0])  # long optimal reply penalised
    r = R.plan_reward(lv, [OPTIMAL, OPTIMAL, INVALID["jump"]], [10, 4096, 10], 1.0, CFG)
    assert r["total"].tolist() == pytest.approx([0.8, 0.6, 0.0])


def test_reward_config_rejects_bad_values():
    with pytest.raises(ValueError):
        R.RewardConfig(free_tokens=100, max_tokens=100)
    with pytest.raises(ValueError):
        R.RewardConfig(w_start=(1.5, 0.0))


@pytest.mark.slow
def test_stage_answers_are_valid_plans():
    s = stages.draw(jax.random.key(1), stages.PRESETS["cpu"], 6)
    acc = R.accuracy(s.levels, s.answers, CFG)
    assert (acc > 0).all()
    assert all(m[1]["content"].startswith("Grid ") for m in s.messages)
    assert set(np.asarray(s.levels.n_agents).tolist()) == {2}
