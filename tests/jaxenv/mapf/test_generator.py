"""Generator guarantees, each checked by plain Python on the generated levels."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.batching import broadcast
from jaxenv.levels import ACCELERATOR_CHUNK, GEN_CHUNK, gen_chunk, generate_many
from jaxenv.mapf import Capacity, generate, make_config_space
from tests.jaxenv.mapf.plain_mapf import distances, needs_wait, optimal_makespan, optimal_soc

CAP = Capacity(max_size=8, max_agents=4, view_radius=2, max_steps=64)
SPACE = make_config_space(CAP.max_size, CAP.max_agents)
_gen = jax.jit(jax.vmap(generate, in_axes=(0, 0, None)), static_argnums=2)


def _levels(values_list, n_each: int, seed: int):
    cfgs = SPACE.stack([v for v in values_list for _ in range(n_each)])
    keys = jax.random.split(jax.random.key(seed), len(values_list) * n_each)
    return jax.device_get(_gen(keys, cfgs, CAP))


simplex = lambda n: st.lists(st.floats(0, 1), min_size=n, max_size=n).filter(  # noqa: E731
    lambda w: sum(w) > 0.05).map(lambda w: [x / sum(w) for x in w])
configs = st.fixed_dictionaries({
    "size_weights": simplex(CAP.n_sizes),
    "agent_weights": simplex(CAP.max_agents),
    "hole_ratio": st.lists(st.sampled_from(SPACE["hole_ratio"].grid()), min_size=CAP.n_sizes,
                           max_size=CAP.n_sizes),
    "wait_ratio": st.lists(st.floats(0, 1), min_size=CAP.n_sizes, max_size=CAP.n_sizes),
}).map(lambda d: SPACE.project(d)[0])


@settings(max_examples=8, deadline=None)
@given(st.lists(configs, min_size=4, max_size=4), st.integers(0, 2**31 - 1))
def test_level_guarantees(values_list, seed):
    lv = _levels(values_list, 16, seed)
    for i in range(lv.size.shape[0]):
        n, k = int(lv.size[i]), int(lv.n_agents[i])
        holes = lv.holes[i]
        assert not holes[n:, :].any() and not holes[:, n:].any(), "holes outside the grid"
        starts, goals = lv.starts[i][:k], lv.goals[i][:k]
        assert 1 <= k <= CAP.max_agents
        cells = [tuple(c) for c in np.concatenate([starts, goals])]
        assert len(set(cells)) == 2 * k, f"level {i}: starts/goals not all distinct {cells}"
        assert all(0 <= r < n and 0 <= c < n and not holes[r, c] for r, c in cells)
        board = holes[:n, :n].tolist()
        assert all(tuple(g) in distances(board, n, s) for s, g in zip(starts, goals)), f"level {i}"
        # The size and agent count were drawn where the config puts weight.
        cfg = values_list[i // 16]
        assert cfg["size_weights"][n - 3] > 0
        assert cfg["agent_weights"][k - 1] > 0 or k == n * n // 2
        # Hole count follows the ratio; fewer only for the hole-free fallback or when the
        # crossing layout protects too many cells (two or more agents).
        want = round(cfg["hole_ratio"][n - 3] * n * n)
        assert holes.sum() == want or holes.sum() == 0 or (holes.sum() < want and k >= 2)


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_two_agent_labels_are_exact(seed):
    v = SPACE.default()
    v["agent_weights"] = [0.0, 1.0, 0.0, 0.0]
    v["wait_ratio"] = [0.5] * CAP.n_sizes
    v["hole_ratio"] = [0.3] * CAP.n_sizes
    lv = _levels([v], 40, seed)
    for i in range(40):
        n = int(lv.size[i])
        args = (lv.holes[i][:n, :n].tolist(), lv.starts[i][:2], lv.goals[i][:2])
        assert int(lv.opt_soc[i]) == optimal_soc(*args)
        assert int(lv.opt_makespan[i]) == optimal_makespan(*args)
        assert bool(lv.needs_wait[i]) == needs_wait(*args)


@pytest.mark.slow
def test_wait_share_within_five_points_in_4096_levels():
    cap = Capacity()  # the paper's sizes 3-10
    space = make_config_space(cap.max_size, cap.max_agents)
    v = space.default()  # 2 agents, sizes 3-10 in equal shares
    ratios = [0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0]
    v["wait_ratio"] = ratios
    v["hole_ratio"] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.3, 0.2, 0.1]
    # chunks of 64 (jaxenv.levels.generate_many): one vmap of 4,096 BFS loops waits for the
    # slowest level at every step, a third slower here
    gen = jax.jit(lambda k, c: generate_many(lambda kk, cc: generate(kk, cc, cap), k,
                                             broadcast(c, 4096), chunk=64))
    lv = jax.device_get(gen(jax.random.split(jax.random.key(7), 4096), space.to_config(v)))
    for j, r in enumerate(ratios):
        sel = lv.size == 3 + j
        share = lv.needs_wait[sel].mean()
        assert abs(share - r) <= 0.05, f"size {3 + j}: share {share:.3f} vs wait_ratio {r}"
    want = np.mean(ratios)
    assert abs(lv.needs_wait.mean() - want) <= 0.05
    assert (lv.opt_soc > 0).all() and (lv.needs_wait >= 0).all()


@pytest.mark.slow
def test_generate_is_pure_and_vmappable_over_configs():
    a, b = SPACE.default(), SPACE.default()
    b["size_weights"] = [0.0] * (CAP.n_sizes - 1) + [1.0]
    cfgs = SPACE.stack([a, b])
    keys = jnp.stack([jax.random.key(3), jax.random.key(3)])
    lv = jax.device_get(_gen(keys, cfgs, CAP))
    assert int(lv.size[1]) == CAP.max_size
    again = jax.device_get(_gen(keys, cfgs, CAP))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(lv), jax.tree.leaves(again)))


@pytest.mark.slow
def test_levels_do_not_depend_on_the_generation_chunk():
    """`generate_many` picks its chunk by backend (`gen_chunk`); the levels must not change."""
    cap = Capacity(max_size=6, max_agents=3, view_radius=2, max_steps=32, cost_to_go=True)
    space = make_config_space(cap.max_size, cap.max_agents)
    v = space.default()
    v["agent_weights"] = [0.2, 0.4, 0.4]
    v["hole_ratio"] = [0.4] * cap.n_sizes
    v["wait_ratio"] = [0.5] * cap.n_sizes
    keys = jax.random.split(jax.random.key(11), 10)
    cfgs = broadcast(space.to_config(v), 10)
    made = [jax.device_get(jax.jit(lambda k, c, n=n: generate_many(
        lambda kk, cc: generate(kk, cc, cap), k, c, chunk=n))(keys, cfgs)) for n in (1, 3, 10)]
    for other in made[1:]:
        assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(made[0]),
                                                        jax.tree.leaves(other)))
    assert made[0].dist is not None and (made[0].opt_soc[made[0].n_agents == 2] > 0).all()


def test_generation_chunk_by_backend():
    assert gen_chunk(512, "cpu") == GEN_CHUNK["cpu"] == 4
    assert gen_chunk(512, "gpu") == gen_chunk(4096, "tpu") == ACCELERATOR_CHUNK == 512
    assert gen_chunk(3, "cpu") == 3 and gen_chunk(100, "gpu") == 100 and gen_chunk(0, "tpu") == 1
