"""The cost-to-go observation (`Capacity.cost_to_go`) against a plain breadth-first search.

Random boards (sizes below the capacity, holes up to half the cells, agents anywhere,
inactive slots): each agent's observed distance and its four move signs must equal a
Python BFS from its goal; generated levels carry the same distances as levels that get them
at reset; following the moves that shorten the distance walks a shortest path; and without
the flag nothing the trainee sees changes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.batching import select
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.level import Level
from jaxenv.mapf.observe import CTG_MAX
from tests.jaxenv.mapf.plain_mapf import MOVES, distances

S, A = 7, 4
ON = MAPFFrozenLake(Capacity(max_size=S, max_agents=A, max_steps=40, cost_to_go=True))
OFF = MAPFFrozenLake(Capacity(max_size=S, max_agents=A, max_steps=40))


def reference(holes, n, n_agents, pos, goals) -> np.ndarray:
    out = np.zeros((A, 5), np.float32)
    for a in range(n_agents):
        d = distances(holes, n, goals[a])
        here = tuple(pos[a])
        if here not in d:
            continue
        out[a, 0] = min(d[here] / S, CTG_MAX)
        for k, (dr, dc) in enumerate(MOVES):
            nxt = (here[0] + dr, here[1] + dc)
            out[a, 1 + k] = -1.0 if d.get(nxt, 1 << 30) < d[here] else 1.0
    return out


def random_level(rng: np.random.Generator, s: int = S, a: int = A,
                 shared_cell: float = 0.0) -> tuple[Level, np.ndarray]:
    """A board with holes (the goals kept free), and agent positions anywhere free or not;
    with probability `shared_cell` agents 0 and 1 stand on one cell (as after a vertex
    conflict)."""
    n = int(rng.integers(2, s + 1))
    k = int(rng.integers(1, a + 1))
    holes = np.zeros((s, s), bool)
    holes[:n, :n] = rng.random((n, n)) < rng.uniform(0, 0.5)
    goals = rng.integers(0, n, (a, 2))
    holes[goals[:k, 0], goals[:k, 1]] = False
    pos = rng.integers(0, n, (a, 2))
    if shared_cell > 0 and a > 1 and rng.random() < shared_cell:
        pos[1] = pos[0]
    level = Level(holes=jnp.asarray(holes), starts=jnp.asarray(pos, jnp.int32),
                  goals=jnp.asarray(goals, jnp.int32), size=jnp.int32(n),
                  n_agents=jnp.int32(k), opt_makespan=jnp.int32(-1), opt_soc=jnp.int32(-1),
                  needs_wait=jnp.int32(-1))
    return level, pos


_reset_to_level = jax.jit(ON.reset_to_level)  # one compile for every example's level


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_cost_to_go_equals_a_plain_bfs(seed):
    rng = np.random.default_rng(seed)
    level, pos = random_level(rng)
    obs, state = _reset_to_level(jax.random.PRNGKey(0), level, ON.default_params)
    assert state.level.dist.shape == (A, S, S)
    want = reference(np.asarray(level.holes), int(level.size), int(level.n_agents), pos,
                     np.asarray(level.goals))
    got = np.asarray(obs.cost_to_go)
    np.testing.assert_array_equal(got[:, 1:], want[:, 1:])  # the move signs exactly
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=1e-6)  # XLA divides by 1/S
    vec = ON.agent_obs(obs, state).vec
    np.testing.assert_array_equal(np.asarray(vec[:, 3:]), got)


@pytest.mark.slow
def test_generated_levels_carry_the_distances_a_reset_would_compute():
    keys = jax.random.split(jax.random.PRNGKey(3), 64)
    cfg = ON.default_params
    with_d = jax.jit(jax.vmap(ON.generate, in_axes=(0, None)))(keys, cfg)
    without = jax.jit(jax.vmap(OFF.generate, in_axes=(0, None)))(keys, cfg)
    assert without.dist is None
    # The flag draws the same levels; only the distances are added.
    for f in ("holes", "starts", "goals", "size", "n_agents", "opt_makespan"):
        np.testing.assert_array_equal(getattr(with_d, f), getattr(without, f))
    reset = jax.jit(jax.vmap(ON.reset_to_level, in_axes=(0, 0, None)))
    obs_gen, _ = reset(keys, with_d, cfg)
    obs_new, st_new = reset(keys, without, cfg)
    np.testing.assert_array_equal(st_new.level.dist, with_d.dist)
    np.testing.assert_array_equal(obs_gen.cost_to_go, obs_new.cost_to_go)


@pytest.mark.slow
def test_following_the_shorter_moves_walks_a_shortest_path():
    """One agent that always takes the first move marked -1 arrives in exactly the BFS
    distance, the level's optimal makespan."""
    keys = jax.random.split(jax.random.PRNGKey(7), 32)
    levels = jax.jit(jax.vmap(ON.generate, in_axes=(0, None)))(keys, ON.default_params)
    levels = levels.replace(n_agents=jnp.ones_like(levels.n_agents))
    cfg = ON.default_params

    def play(key, level):
        obs, state = ON.reset_to_level(key, level, cfg)

        def body(carry, _):
            obs, state, done, steps = carry
            move = jnp.argmax(obs.cost_to_go[:, 1:] < 0, -1) + 1
            act = jnp.where(state.level.agent_mask() & ~done, move, 0).astype(jnp.int32)
            obs2, state2, _, term, _ = ON.step_env(key, state, act, cfg)
            obs, state = select(done, (obs, state), (obs2, state2))
            return (obs, state, done | term, steps + ~done), None

        start = obs.cost_to_go[0, 0] * S
        done0 = state.success
        (_, state, done, steps), _ = jax.lax.scan(body, (obs, state, done0, jnp.int32(0)),
                                                  None, length=2 * S * S)
        return start, state.success, steps

    start, success, steps = jax.jit(jax.vmap(play))(keys, levels)
    assert bool(np.all(success))
    np.testing.assert_array_equal(steps, np.round(np.asarray(start)).astype(int))
    # The agent's optimal makespan alone is its BFS distance (holes are the only obstacle).
    for k in range(len(steps)):
        lv = jax.tree.map(lambda x, k=k: np.asarray(x[k]), levels)
        d = distances(lv.holes, int(lv.size), lv.goals[0])
        assert steps[k] == d[tuple(lv.starts[0])]


def test_without_the_flag_the_observation_is_unchanged():
    level, _ = random_level(np.random.default_rng(11))
    obs_on, st_on = ON.reset_to_level(jax.random.PRNGKey(0), level, ON.default_params)
    obs_off, st_off = OFF.reset_to_level(jax.random.PRNGKey(0), level, OFF.default_params)
    assert obs_off.cost_to_go is None and st_off.level.dist is None
    for f in ("view", "goal_vec", "agent_mask", "at_goal", "acting"):
        np.testing.assert_array_equal(getattr(obs_on, f), getattr(obs_off, f))
    vec_on, vec_off = ON.agent_obs(obs_on, st_on).vec, OFF.agent_obs(obs_off, st_off).vec
    assert vec_off.shape == (A, 3) and vec_on.shape == (A, 8)
    np.testing.assert_array_equal(vec_on[:, :3], vec_off)
    assert "cost_to_go" in ON.observation_space().spaces
    assert "cost_to_go" not in OFF.observation_space().spaces


@pytest.mark.slow
def test_the_evaluator_plays_stored_levels_with_or_without_distances():
    """Levels from disk have no distances: a cost-to-go env adds them (`prepare_levels`), and
    an env without the option drops distances it does not read. A scripted policy that follows
    the cost-to-go walks around a wall the goal vector runs into, at the optimal makespan."""
    from jaxenv.mapf import make_level
    from policy.evaluate import Evaluator
    from policy.network import ActorCritic
    from tests.helpers import mapf_policies

    cap = dict(max_size=4, max_agents=2, max_steps=16, label_waits=False)
    on, off = MAPFFrozenLake(Capacity(**cap, cost_to_go=True)), MAPFFrozenLake(Capacity(**cap))
    holes = np.zeros((4, 4), bool)
    holes[0, 1] = holes[1, 1] = True  # a wall between (0, 0) and its goal (0, 2)
    wall = make_level(holes, [(0, 0)], [(0, 2)], max_size=4, max_agents=2, opt_makespan=6,
                      opt_soc=6)
    open_ = make_level(np.zeros((3, 3), bool), [(0, 0), (2, 2)], [(2, 0), (0, 2)],
                       max_size=4, max_agents=2, opt_makespan=2, opt_soc=4)
    levels = jax.tree.map(lambda *x: jnp.stack(x), wall, open_)
    assert levels.dist is None
    net = ActorCritic(hidden=8)
    follow = mapf_policies.follow_cost_to_go_policy(net, on)
    r = Evaluator(on, net)(follow, levels, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(r.valid, [True, True])
    np.testing.assert_array_equal(r.optimal, [True, True])
    np.testing.assert_array_equal(r.makespan, [6, 2])
    # The goal-vector policy on the env without the option walks into the wall's hole.
    toward = mapf_policies.toward_goal_policy(net, off)
    with_dist = on.prepare_levels(levels)
    assert with_dist.dist.shape == (2, 2, 4, 4)
    r = Evaluator(off, net)(toward, with_dist, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(r.valid, [False, True])
