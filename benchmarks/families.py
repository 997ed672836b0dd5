"""Physics families: env-steps/s of our environment vs raw gymnax at the same batch, one run.

    python benchmarks/families.py --json benchmarks/results/families_cpu2.json
    python benchmarks/families.py --quick                # fewer repeats, smaller batch

How it measures: docs/benchmarks.md, "How `benchmarks/families.py` measures".
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import harness
import jax
import jax.numpy as jnp
import numpy as np

from jaxenv.batching import broadcast, take
from jaxenv.compiles import count_compiles
from jaxenv.control import ALL_NAMES, BRAX_NAMES, NAMES, make
from jaxenv.control.family import ControlEnv
from jaxenv.levels import PoolParams
from jaxenv.wrappers import PoolReset

STEPS = 100
# Seconds of timed calls per kind when --repeats is not given: a handful of calls leaves the
# median ratio noisy from run to run; this many seconds of calls steadies it.
MIN_TIMED_S = 10.0


def dr_config(env: ControlEnv) -> Any:
    """Domain randomisation: every parameter uniform over its knob bounds."""
    cs = env.config_space
    return cs.to_config({k.name: (k.low if k.name.endswith("_min") else k.high)
                         for k in cs.knobs})


def random_actions(env: ControlEnv, key: jax.Array, b: int) -> jax.Array:
    if env.continuous:  # brax clips to its control range [-1, 1]
        return jax.random.uniform(key, (b, env.action_dim), minval=-2.0, maxval=2.0)
    return jax.random.randint(key, (b, 1), 0, env.num_actions)


class SameLevel(PoolReset):
    """Restart on the first level of the env's slice (no level draw)."""

    def sample_level(self, key: jax.Array, params: PoolParams) -> Any:
        return take(params.pool, params.lo)


def raw_fns(env: ControlEnv) -> tuple[Callable, Callable]:
    """The raw env's own (reset, auto-resetting step) under a variant's params.

    gymnax: its ``reset`` / ``step``. brax: its env on the variant's ``System`` (rebuilt in the
    vmap, as a brax user varies physics without recompiling) under brax's training wrappers
    ``EpisodeWrapper`` and ``AutoResetWrapper``. Both return (obs, state[, reward]).
    """
    if not env.family.name.startswith("brax:"):
        def reset(key, params):
            return env.raw.reset(key, params)

        def step(key, state, action, params):
            obs, state, r, *_ = env.raw.step(key, state, action, params)
            return obs, state, r
        return reset, step
    from brax.envs.wrappers.training import AutoResetWrapper, EpisodeWrapper

    def wrapped(sys):
        inner = env.raw._with(sys)
        return AutoResetWrapper(EpisodeWrapper(inner, env.horizon, 1))

    def reset(key, sys):
        state = wrapped(sys).reset(key)
        return state.obs, state

    def step(key, state, action, sys):
        state = wrapped(sys).step(state, action)
        return state.obs, state, state.reward
    return reset, step


def make_runners(env: ControlEnv, b: int, pool_size: int,
                 explain: bool = False) -> dict[str, Callable]:
    """name -> jitted (key) -> checksum; each call draws new variants, then runs STEPS steps."""
    cfg = dr_config(env)
    gen = jax.vmap(env.generate, in_axes=(0, None))

    def rollout(step, obs, state, key):
        """STEPS random-action steps; the checksum reads every reward and the last obs."""
        _, obs_sum, total = harness.random_rollout(
            step, obs, state, key, STEPS, actions=partial(random_actions, env, b=b),
            env_keys=partial(jax.random.split, num=b), read=lambda obs, _: jnp.sum(obs[:, 0]))
        return total + obs_sum

    raw_reset, raw_step = raw_fns(env)

    @jax.jit
    def run_raw(key):
        kv, kr, kk = jax.random.split(key, 3)
        params = jax.vmap(env.family.env_params)(gen(jax.random.split(kv, b), cfg))
        obs, state = jax.vmap(raw_reset)(jax.random.split(kr, b), params)

        def step(keys, state, a):
            act = a if env.continuous else a[:, 0]
            return jax.vmap(raw_step)(keys, state, act, params)
        return rollout(step, obs, state, kk)

    def pool_runner(pooled: PoolReset) -> Callable:
        same = isinstance(pooled, SameLevel)  # each env keeps one level: its own

        @jax.jit
        def run_pooled(key):
            kv, kr, kk = jax.random.split(key, 3)
            pool = gen(jax.random.split(kv, pool_size), cfg)
            one = PoolParams(cfg=cfg, pool=pool, lo=jnp.int32(0), count=jnp.int32(pool_size))
            pp = harness.batch_pool(one, b)
            if same:
                pp = pp.replace(lo=jnp.arange(b, dtype=jnp.int32) % pool_size)
            obs, state = harness.pool_reset(pooled, pp, jax.random.split(kr, b))
            return rollout(harness.pool_step(pooled, pp), obs, state, kk)
        return run_pooled

    @jax.jit
    def run_fresh(key):
        kr, kk = jax.random.split(key)
        cfgs = broadcast(cfg, b)
        obs, state = jax.vmap(env.reset)(jax.random.split(kr, b), cfgs)

        def step(keys, state, a):
            obs, state, r, *_ = jax.vmap(env.step)(keys, state, a, cfgs)
            return obs, state, r
        return rollout(step, obs, state, kk)

    runners = {"raw": run_raw, "ours": pool_runner(PoolReset(env)), "ours_fresh": run_fresh}
    if explain:
        runners["same_level"] = pool_runner(SameLevel(env))
    return runners


def bench_family(name: str, b: int, repeats: int | None, pool_size: int,
                 explain: bool = False) -> dict[str, Any]:
    """repeats None: as many timed calls as fill about `MIN_TIMED_S` per kind (7 to 101)."""
    env = make(name)
    runners = make_runners(env, b, pool_size, explain)
    first = {kind: harness.time_call(f, jax.random.PRNGKey(0))[1] for kind, f in runners.items()}
    compile_s = sum(t.wall_s for t in first.values())
    if repeats is None:  # one more call of raw says how many calls fill the time
        per_call = harness.time_call(runners["raw"], jax.random.PRNGKey(0))[1].wall_s
        repeats = int(np.clip(np.ceil(MIN_TIMED_S / per_call), 7, 101))
    keys = [jax.random.PRNGKey(r) for r in range(repeats + 1)]  # round r's (1 ... repeats)

    def finite(kind: str, out: jax.Array) -> None:
        if not np.isfinite(float(out)):
            raise RuntimeError(f"{name} {kind}: non-finite checksum")

    with count_compiles() as c:
        calls = {kind: (lambda r, f=f: f(keys[r])) for kind, f in runners.items()}
        rounds = harness.time_rounds(calls, repeats, warmup=False, on_result=finite)
    rate = {k: b * STEPS / t.median_s for k, t in rounds.items()}
    extra = {f"{k}_steps_per_s": v for k, v in rate.items() if k.startswith("same_level")}
    return {**extra, "steps_per_s": rate["ours"], "raw_steps_per_s": rate["raw"],
            "fresh_steps_per_s": rate["ours_fresh"], "ratio": rate["ours"] / rate["raw"],
            "fresh_ratio": rate["ours_fresh"] / rate["raw"], "recompiles_after_warmup": c.n,
            "compile_and_warmup_s": compile_s, "batch": b, "steps": STEPS,
            "repeats": repeats, "pool_size": pool_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--quick", action="store_true", help="B=512, 3 repeats (a smoke run)")
    ap.add_argument("--batch", type=harness.positive_int, default=None,
                   help="envs per batch (default 4096)")
    ap.add_argument("--repeats", type=harness.positive_int, default=None,
                    help=f"timed calls (default: about {MIN_TIMED_S:g} s of calls per kind, "
                         "7 to 101; 3 with --quick)")
    ap.add_argument("--explain", action="store_true",
                    help="also time the same_level kinds (where the overhead goes)")
    ap.add_argument("--brax-batch", type=harness.positive_int, default=None,
                    help="envs per batch for brax families (default 1024; 128 with --quick)")
    ap.add_argument("--families", nargs="*", default=None, choices=ALL_NAMES,
                    help="default: the gymnax families, plus brax's if brax is installed")
    args = ap.parse_args(argv)
    b = args.batch or (512 if args.quick else 4096)
    repeats = args.repeats or (3 if args.quick else None)
    out: dict[str, Any] = {"families": {}, "meta": {
        "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "jax": jax.__version__, "quick": args.quick}}
    names = args.families
    if names is None:
        names = list(NAMES) + (list(BRAX_NAMES) if importlib.util.find_spec("brax") else [])
    bb = args.brax_batch or (128 if args.quick else 1024)
    for name in names:
        res = bench_family(name, bb if name in BRAX_NAMES else b, repeats, pool_size=1024,
                           explain=args.explain)
        out["families"][name] = res
        print(f"{name:12s} ours {res['steps_per_s'] / 1e6:7.2f} M/s  raw "
              f"{res['raw_steps_per_s'] / 1e6:7.2f} M/s  ratio {res['ratio']:.2f}  fresh "
              f"{res['fresh_ratio']:.2f}  recompiles {res['recompiles_after_warmup']}  "
              f"compile {res['compile_and_warmup_s']:.1f}s", flush=True)
        for k in ("same_level",):
            if f"{k}_steps_per_s" in res:
                print(f"{'':12s} {k}: {res[f'{k}_steps_per_s'] / res['raw_steps_per_s']:.2f}x raw")
    harness.write_json(args.json, out, command=harness.command(__file__, argv), seeds=[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
