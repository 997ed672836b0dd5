"""Environment throughput: agent-steps/s of jit(lax.scan(vmap(step))), side by side with
POGEMA 1.4 (random actions, its own venv, in a subprocess) and gymnax CartPole-v1.

    python benchmarks/env_throughput.py                 # full table (several minutes)
    python benchmarks/env_throughput.py --quick         # a smoke run
    python benchmarks/env_throughput.py --cases headline --json out.json

How it measures: docs/benchmarks.md, "How `benchmarks/env_throughput.py` measures".
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import harness
import jax
import jax.numpy as jnp

from jaxenv.levels import make_pool
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.views import packable
from jaxenv.wrappers import PoolReset

KINDS = ("step", "packed", "no_obs", "rules_only")


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    agents: int
    density: float
    view_radius: int
    batches: tuple[int, ...]
    mode: str = "block"


CASES = (
    Case("paper 10x10, 2 agents", 10, 2, 0.3, 3, (1, 64, 1024, 16384, 65536)),
    Case("paper 10x10, 5 agents", 10, 5, 0.3, 3, (1, 64, 1024, 16384, 65536)),
    Case("headline 32x32, 64 agents", 32, 64, 0.3, 5, (1, 16, 256, 1024, 4096)),
)
QUICK = (Case("paper 10x10, 2 agents", 10, 2, 0.3, 3, (1, 256)),
         Case("headline 32x32, 64 agents", 32, 64, 0.3, 5, (16,)))


def case_config(case: Case, static_rows: bool = False) -> tuple[MAPFFrozenLake, object]:
    """The env and the (unbatched) config of a case: every level at full size and agent count.
    `static_rows`: each pool level carries its obstacle and goal planes packed (`Level.rows`),
    which the packed views read instead of packing them every step."""
    cap = Capacity(max_size=case.size, max_agents=case.agents, view_radius=case.view_radius,
                   max_steps=256, label_waits=case.size <= 10, static_rows=static_rows)
    env = MAPFFrozenLake(cap)
    v = harness.full_size_values(env.config_space, case.agents, case.density)
    # POGEMA's on_target="finish" is our freeze rule (see pogema_bench.py); under the plan rule
    # random agents walk off their goals and every episode runs to the limit.
    v.update(conflict_mode=case.mode, goal_rule="freeze")
    return env, env.config_space.to_config(v)


def _case_env(case: Case, pool_size: int = 64, static_rows: bool = False):
    base, cfg = case_config(case, static_rows)
    env = PoolReset(base)
    params = make_pool(env, jax.random.key(0), cfg, pool_size)
    return env, params


def _timed_rates(fn, key: jax.Array, repeats: int, per_run: int) -> dict:
    """`fn(key)` after a warm-up, `repeats` times: per_run / seconds of each, and their median."""
    runs = harness.time_rounds({"run": lambda r: fn(jax.random.fold_in(key, r))}, repeats)["run"]
    rates = [per_run / t for t in runs.wall_s]
    return {"agent_steps_per_s": statistics.median(rates), "runs": rates}


def _steps_for(batch: int, agents: int, budget: float = 2e6) -> int:
    """Scan length so one timed run does about `budget` agent-steps (at least 8 steps)."""
    return int(max(8, min(1000, budget // (batch * agents))))


def bench_mapf(case: Case, batch: int, repeats: int, kind: str = "step") -> dict:
    """One of `KINDS` (see the module docstring) at batch size `batch`."""
    env, params = _case_env(case, static_rows=kind == "packed")
    base = env._env
    steps = _steps_for(batch, case.agents)
    # Each env its own config: slip probabilities spread over [0, 0.2].
    pool_params = harness.batch_pool(params, batch)
    cfgs = pool_params.cfg.replace(slip_prob=jnp.linspace(0.0, 0.2, batch))
    pool_params = pool_params.replace(cfg=cfgs)

    def read(obs, state):
        """What the policy reads this step (None: nothing)."""
        if kind == "step":
            return jax.vmap(base.agent_obs)(obs, state)
        if kind == "packed":
            inp = jax.vmap(base.agent_obs)(obs.replace(view=None), state)
            return inp.replace(view=jax.vmap(base.observer.packed_views)(state))
        return None

    def rules(keys, state, act):
        """The transition alone: no auto-reset, no observation."""
        state, r, _, _ = jax.vmap(base.transition)(keys, state, act, cfgs)
        return None, state, r

    step = rules if kind == "rules_only" else harness.pool_step(env, pool_params)

    def run(key):
        obs, state = harness.pool_reset(env, pool_params, jax.random.split(key, batch))
        _, last, total = harness.random_rollout(
            step, obs, state, key, steps, read=read,
            actions=harness.uniform_actions(batch, case.agents, env.num_actions),
            env_keys=partial(jax.random.split, num=batch))
        return last, total  # the last step's input is an output: no step's can be dropped

    row = _timed_rates(jax.jit(run), jax.random.key(1), repeats, batch * steps * case.agents)
    return {**row, "steps": steps}


def bench_cartpole(batch: int, repeats: int) -> dict:
    import gymnax

    env, p = gymnax.make("CartPole-v1")
    steps = _steps_for(batch, 1)
    reset = jax.vmap(env.reset, (0, None))
    env_step = jax.vmap(env.step, (0, 0, 0, None))

    def step(keys, state, act):
        obs, state, r, _, _, _ = env_step(keys, state, act, p)
        return obs, state, r

    def run(key):
        obs, state = reset(jax.random.split(key, batch), p)
        _, last, total = harness.random_rollout(
            step, obs, state, key, steps, read=lambda obs, _: obs.sum(),
            actions=lambda k: jax.random.randint(k, (batch,), 0, 2),
            env_keys=partial(jax.random.split, num=batch))
        return total + last

    row = _timed_rates(jax.jit(run), jax.random.key(2), repeats, batch * steps)
    return {**row, "steps": steps}


def bench_pogema(case: Case, repeats: int, steps: int) -> dict | None:
    try:
        from pogema_bench import run_pogema
    except ImportError as e:  # pragma: no cover - the file ships with the repo
        return {"error": str(e)}
    try:
        return run_pogema(case.size, case.density, case.agents, steps, repeats,
                          obs_radius=case.view_radius)
    except Exception as e:  # a broken POGEMA install must not lose our own figures
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--repeats", type=harness.positive_int, default=3)
    ap.add_argument("--no-pogema", action="store_true")
    ap.add_argument("--cases", default="", help="only cases whose name contains this")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    cases = [c for c in (QUICK if args.quick else CASES) if args.cases in c.name]
    repeats = 1 if args.quick else args.repeats
    result = {"device": str(jax.devices()[0]), "platform": platform.platform(),
              "cpus": os.cpu_count(), "jax": jax.__version__, "cases": []}
    for case in cases:
        row = {"case": asdict(case), "batches": {}}
        for b in case.batches:
            kinds = [k for k in KINDS if k != "packed" or packable(case.size, case.view_radius)]
            cell = {k: bench_mapf(case, b, repeats, k) for k in kinds}
            cell["cartpole"] = bench_cartpole(b, repeats)
            row["batches"][b] = cell
            print(f"{case.name:28s} B={b:6d}  " + "  ".join(
                f"{k} {v['agent_steps_per_s']:10.3g}" for k, v in cell.items()), flush=True)
        if not args.no_pogema:
            row["pogema"] = bench_pogema(case, repeats, 300 if args.quick else 2000)
        result["cases"].append(row)
    print(format_table(result))
    harness.write_json(args.json, result, command=harness.command(__file__, argv), seeds=[0, 1, 2])
    return result


def format_table(result: dict) -> str:
    def rate(cell: dict, kind: str) -> float | None:
        return cell[kind]["agent_steps_per_s"] if kind in cell else None

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3g}"

    def ratio(x: float | None, ref: float | None) -> str:
        return "n/a" if x is None or not ref else f"{x / ref:.1f}x"

    lines = ["", "| case | best B | ours: step + agent_obs | ours/POGEMA | packed views "
             "| packed/POGEMA | step, no obs | rules only | POGEMA 1.4 "
             "| CartPole-v1 env-steps/s (same B) | ours/CartPole |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["cases"]:
        name = f"{row['case']['size']}x{row['case']['size']}, {row['case']['agents']} agents, " \
               f"density {row['case']['density']}, r={row['case']['view_radius']}"
        best_b, best = max(row["batches"].items(), key=lambda kv: rate(kv[1], "step"))
        ours, cart = rate(best, "step"), rate(best, "cartpole")
        pg = row.get("pogema") or {}
        pg_rate = pg.get("agent_steps_per_s_median")
        pg_txt = f"{pg_rate:.3g}" if pg_rate else pg.get("error", "not run")[:40]
        lines.append(f"| {name} | {best_b} | {fmt(ours)} | {ratio(ours, pg_rate)} | "
                     f"{fmt(rate(best, 'packed'))} | {ratio(rate(best, 'packed'), pg_rate)} | "
                     f"{fmt(rate(best, 'no_obs'))} | {fmt(rate(best, 'rules_only'))} | "
                     f"{pg_txt} | {fmt(cart)} | {ours / cart:.2f}x |")
    lines.append("")
    lines.append("Per batch size (agent-steps/s, step + agent_obs):")
    for row in result["cases"]:
        cells = ", ".join(f"B={b}: {rate(v, 'step'):.3g}" for b, v in row["batches"].items())
        lines.append(f"- {row['case']['name']}: {cells}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
