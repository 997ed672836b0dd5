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
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from bench_json import write_json

from jaxenv.batching import take
from jaxenv.compiles import count_compiles
from jaxenv.control import ALL_NAMES, BRAX_NAMES, NAMES, make
from jaxenv.control.family import ControlEnv
from jaxenv.levels import PoolParams
from jaxenv.wrappers import PoolReset

STEPS = 100
# A gymnax call takes ~30 ms: seven of them gave ratios 0.84-0.96 run to run on one build;
# ten seconds of calls per kind (Brax: 7-17 calls) keep the median within about 0.03.
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
    ``EpisodeWrapper`` and ``AutoResetWrapper``.
    """
    if not env.family.name.startswith("brax:"):
        def reset(key, params):
            return env.raw.reset(key, params)[1]

        def step(key, state, action, params):
            obs, state, r, *_ = env.raw.step(key, state, action, params)
            return obs, state, r
        return reset, step
    from brax.envs.wrappers.training import AutoResetWrapper, EpisodeWrapper

    def wrapped(sys):
        inner = env.raw._with(sys)
        return AutoResetWrapper(EpisodeWrapper(inner, env.horizon, 1))

    def reset(key, sys):
        return wrapped(sys).reset(key)

    def step(key, state, action, sys):
        state = wrapped(sys).step(state, action)
        return state.obs, state, state.reward
    return reset, step


def make_runners(env: ControlEnv, b: int, pool_size: int,
                 explain: bool = False) -> dict[str, Callable]:
    """name -> jitted (key) -> checksum; each call draws new variants, then runs STEPS steps."""
    cfg = dr_config(env)
    gen = jax.vmap(env.generate, in_axes=(0, None))

    def scan(step, carry0, key):
        def body(carry, k):
            ka, ks = jax.random.split(k)
            return step(carry, random_actions(env, ka, b), jax.random.split(ks, b)), None
        carry, _ = jax.lax.scan(body, carry0, jax.random.split(key, STEPS))
        return carry

    raw_reset, raw_step = raw_fns(env)

    @jax.jit
    def run_raw(key):
        kv, kr, kk = jax.random.split(key, 3)
        params = jax.vmap(env.family.env_params)(gen(jax.random.split(kv, b), cfg))
        state = jax.vmap(raw_reset)(jax.random.split(kr, b), params)

        def step(c, a, ks):
            state, acc = c
            act = a if env.continuous else a[:, 0]
            obs, state, r = jax.vmap(raw_step)(ks, state, act, params)
            return state, acc + jnp.sum(r) + jnp.sum(obs[:, 0])
        return scan(step, (state, jnp.float32(0)), kk)[1]

    def pool_runner(pooled: PoolReset) -> Callable:
        same = isinstance(pooled, SameLevel)  # each env keeps one level: its own

        @jax.jit
        def run_pooled(key):
            kv, kr, kk = jax.random.split(key, 3)
            pool = gen(jax.random.split(kv, pool_size), cfg)
            lo = jnp.arange(b, dtype=jnp.int32) % pool_size if same else jnp.zeros(b, jnp.int32)
            pp = PoolParams(cfg=jax.tree.map(lambda x: jnp.broadcast_to(x, (b,)), cfg),
                            pool=pool, lo=lo, count=jnp.full(b, pool_size, jnp.int32))
            axes = PoolParams.in_axes()
            _, state = jax.vmap(pooled.reset, in_axes=(0, axes))(jax.random.split(kr, b), pp)

            def step(c, a, ks):
                state, acc = c
                obs, state, r, term, trunc, _ = jax.vmap(
                    pooled.step, in_axes=(0, 0, 0, axes))(ks, state, a, pp)
                return state, acc + jnp.sum(r) + jnp.sum(obs[:, 0])
            return scan(step, (state, jnp.float32(0)), kk)[1]
        return run_pooled

    @jax.jit
    def run_fresh(key):
        kr, kk = jax.random.split(key)
        cfgs = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,)), cfg)
        _, state = jax.vmap(env.reset)(jax.random.split(kr, b), cfgs)

        def step(c, a, ks):
            state, acc = c
            obs, state, r, term, trunc, _ = jax.vmap(env.step)(ks, state, a, cfgs)
            return state, acc + jnp.sum(r) + jnp.sum(obs[:, 0])
        return scan(step, (state, jnp.float32(0)), kk)[1]

    runners = {"raw": run_raw, "ours": pool_runner(PoolReset(env)), "ours_fresh": run_fresh}
    if explain:
        runners["same_level"] = pool_runner(SameLevel(env))
    return runners


def bench_family(name: str, b: int, repeats: int | None, pool_size: int,
                 explain: bool = False) -> dict[str, Any]:
    """repeats None: as many timed calls as fill about `MIN_TIMED_S` per kind (7 to 101)."""
    env = make(name)
    runners = make_runners(env, b, pool_size, explain)
    t0 = time.perf_counter()
    for f in runners.values():
        jax.block_until_ready(f(jax.random.PRNGKey(0)))
    compile_s = time.perf_counter() - t0
    if repeats is None:
        t = time.perf_counter()
        jax.block_until_ready(runners["raw"](jax.random.PRNGKey(0)))
        repeats = int(np.clip(np.ceil(MIN_TIMED_S / (time.perf_counter() - t)), 7, 101))
    times: dict[str, list[float]] = {k: [] for k in runners}
    with count_compiles() as c:
        for r in range(repeats):
            for kind, f in runners.items():
                key = jax.random.PRNGKey(1 + r)
                t = time.perf_counter()
                out = jax.block_until_ready(f(key))
                times[kind].append(time.perf_counter() - t)
                if not np.isfinite(float(out)):
                    raise RuntimeError(f"{name} {kind}: non-finite checksum")
    rate = {k: b * STEPS / statistics.median(v) for k, v in times.items()}
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
    ap.add_argument("--batch", type=int, default=None, help="envs per batch (default 4096)")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"timed calls (default: about {MIN_TIMED_S:g} s of calls per kind, "
                         "7 to 101; 3 with --quick)")
    ap.add_argument("--explain", action="store_true",
                    help="also time the same_level kinds (where the overhead goes)")
    ap.add_argument("--brax-batch", type=int, default=None,
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
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
