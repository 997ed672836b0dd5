"""The benchmark harness (benchmarks/harness.py): its rollout steps the envs as a plain loop of
`env.step` does, its pool broadcast shares one pool, its timer interleaves calls and reports
medians, and its JSON writer records the provenance of a figure."""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402

from jaxenv.batching import take  # noqa: E402
from jaxenv.levels import make_pool  # noqa: E402
from jaxenv.mapf import Capacity, MAPFFrozenLake  # noqa: E402
from jaxenv.wrappers import PoolReset  # noqa: E402

BATCH, STEPS, POOL = 3, 12, 4


@pytest.fixture(scope="module")
def pool_env():
    """A small MAPF env whose episodes end within the rollout (auto-resets are stepped too)."""
    env = PoolReset(MAPFFrozenLake(Capacity(max_size=5, max_agents=2, view_radius=2,
                                            max_steps=5)))
    params = make_pool(env, jax.random.key(0), env.config_space.to_config(), POOL)
    return env, params


def test_batch_pool_gives_every_env_the_whole_pool(pool_env):
    env, params = pool_env
    batched = harness.batch_pool(params, BATCH)
    assert batched.pool is params.pool  # held once, not per env
    np.testing.assert_array_equal(batched.lo, np.zeros(BATCH))
    np.testing.assert_array_equal(batched.count, np.full(BATCH, POOL))
    for a, b in zip(jax.tree.leaves(batched.cfg), jax.tree.leaves(params.cfg)):
        np.testing.assert_array_equal(a, np.broadcast_to(b, (BATCH, *np.shape(b))))


def test_rollout_steps_the_envs_as_a_plain_loop_of_env_step(pool_env):
    env, params = pool_env
    batched = harness.batch_pool(params, BATCH)
    actions = harness.uniform_actions(BATCH, env.cap.max_agents, env.num_actions)
    key, reset_key = jax.random.key(1), jax.random.key(2)
    obs0, state0 = harness.pool_reset(env, batched, jax.random.split(reset_key, BATCH))

    @jax.jit
    def scanned(obs, state):
        return harness.random_rollout(harness.pool_step(env, batched), obs, state, key, STEPS,
                                      actions=actions, read=lambda obs, _: obs,
                                      env_keys=partial(jax.random.split, num=BATCH))

    state, last_obs, total = scanned(obs0, state0)

    one_step = jax.jit(env.step)
    states = [take(state0, i) for i in range(BATCH)]
    env_params = [params.replace(cfg=take(batched.cfg, i), lo=batched.lo[i],
                                 count=batched.count[i]) for i in range(BATCH)]
    loop_total, last, episodes_ended = 0.0, [None] * BATCH, 0
    for k in jax.random.split(key, STEPS):
        ka, ks = jax.random.split(k)
        act, env_keys = actions(ka), jax.random.split(ks, BATCH)
        for i in range(BATCH):
            last[i], states[i], reward, term, trunc, _ = one_step(
                env_keys[i], states[i], act[i], env_params[i])
            loop_total += float(jnp.sum(reward))
            episodes_ended += bool(jnp.any(term) | jnp.any(trunc))
    assert episodes_ended  # the auto-reset was stepped too
    for i in range(BATCH):
        for a, b in zip(jax.tree.leaves(take(state, i)), jax.tree.leaves(states[i])):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(jax.tree.leaves(take(last_obs, i)), jax.tree.leaves(last[i])):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(float(total), loop_total, rtol=1e-6)


def test_rollout_of_zero_steps_reads_the_reset(pool_env):
    env, params = pool_env
    batched = harness.batch_pool(params, BATCH)
    obs0, state0 = harness.pool_reset(env, batched, jax.random.split(jax.random.key(3), BATCH))
    _, last, total = harness.random_rollout(
        harness.pool_step(env, batched), obs0, state0, jax.random.key(4), 0,
        actions=harness.uniform_actions(BATCH, env.cap.max_agents, env.num_actions),
        env_keys=partial(jax.random.split, num=BATCH), read=lambda obs, _: obs.view)
    np.testing.assert_array_equal(last, obs0.view)
    assert float(total) == 0.0


def test_rounds_report_median_and_best() -> None:
    rounds = harness.Rounds(None, [harness.Timing(w, 0.0) for w in (3.0, 1.0, 2.0, 9.0, 4.0)])
    assert rounds.median_s == 3.0
    assert rounds.best_s == 1.0
    assert rounds.wall_s == [3.0, 1.0, 2.0, 9.0, 4.0]


def test_time_rounds_warms_up_then_interleaves_and_times_each_call() -> None:
    seen: list[tuple[str, int]] = []
    sleeps = {"slow": [0.0, 0.01, 0.2, 0.06], "fast": [0.0, 0.0, 0.0, 0.0]}

    def call(name: str, r: int) -> int:
        seen.append((name, r))
        time.sleep(sleeps[name][r])
        return r

    results: list[tuple[str, int]] = []
    rounds = harness.time_rounds({n: partial(call, n) for n in sleeps}, 3,
                                 on_result=lambda n, out: results.append((n, out)))
    assert seen == [("slow", 0), ("fast", 0)] + [(n, r) for r in (1, 2, 3) for n in sleeps]
    assert results == seen[2:]  # every timed result, none of the warm-up
    slow = rounds["slow"]
    assert slow.first is not None and len(slow.runs) == 3
    assert 0.06 <= slow.median_s < 0.2 <= max(slow.wall_s)
    assert 0.01 <= slow.best_s < 0.06
    assert harness.time_rounds({"x": lambda r: r}, 1, warmup=False)["x"].first is None
    with pytest.raises(ValueError, match="repeats"):
        harness.time_rounds({"x": lambda r: r}, 0)


def test_compile_clock_counts_a_new_compile() -> None:
    with harness.CompileClock() as clock:
        jax.block_until_ready(jax.jit(lambda x: jnp.sin(x) * 3.0 + x.size)(jnp.arange(7.0)))
    assert clock.seconds > 0.0


def test_write_json_adds_the_provenance(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.json"
    cmd = harness.command(str(ROOT / "benchmarks" / "env_throughput.py"), ["--quick", "--x y"])
    assert cmd == "python benchmarks/env_throughput.py --quick '--x y'"
    harness.write_json(path, {"rate": 1.5, "cases": [1]}, command=cmd, seeds=[0, 7])
    out = json.loads(path.read_text())
    assert out["rate"] == 1.5 and out["cases"] == [1]
    prov = out["provenance"]
    assert prov["command"] == cmd and prov["seeds"] == [0, 7]
    assert set(prov) == {"command", "commit", "dirty", "machine", "seeds", "date"}
    assert prov["commit"] is None or len(prov["commit"]) == 40
    assert {"platform", "cpus", "python", "jax"} <= set(prov["machine"])
    harness.write_json(None, {"rate": 1.0}, command=cmd, seeds=[])  # no path: nothing
    with pytest.raises(ValueError, match="provenance"):
        harness.write_json(path, {"provenance": 1}, command=cmd, seeds=[])


@pytest.mark.parametrize("script, argv, said", [
    ("scaling", ["--devices", "1,x"], "--devices: an integer >= 1, got 'x'"),
    ("scaling", ["--devices", "0"], "--devices: an integer >= 1, got 0"),
    ("scaling", ["--workloads", "env,trian"], "--workloads: ['trian'] are none of"),
    ("scaling", ["--size", "-3"], "--size: an integer >= 1, got -3"),
    ("train_throughput", ["--envs", "0"], "--envs: an integer >= 1, got 0"),
    ("pool_gen", ["--repeats", "0"], "--repeats: an integer >= 1, got 0"),
    ("dense_floor", ["--samples", "-1"], "--samples: an integer >= 1, got -1"),
])
def test_a_bad_count_is_refused_before_any_measuring(script, argv, said, capsys):
    """Counts the benchmarks would trip over only after measuring (scaling read `--devices`
    after its batch sweep; an unknown workload name was dropped without a word) are refused
    by the parser, in one line."""
    mod = __import__(script)
    with pytest.raises(SystemExit) as e:
        mod.parse(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and said in err[-1]
    assert harness.int_list("1, 2,4") == [1, 2, 4] and harness.positive_int("7") == 7


def test_train_throughput_names_its_cases_for_an_unknown_one():
    import train_throughput

    with pytest.raises(SystemExit, match="--case: no env_throughput case contains 'nosuch' "
                                         r"\(paper 10x10"):
        train_throughput.main(["--case", "nosuch"])
