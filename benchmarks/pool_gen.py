"""Seconds to generate a stage's level pool, by the chunk size of `jaxenv.levels.generate_many`.

A stage starts by generating its pool (`pool_size` levels, 512 by default). The generator runs
`while_loop`s (component labelling, BFS, the exact two-agent search); under `vmap` each chunk
runs until its slowest level stops, and the chunks run one after another. Small chunks waste
least on the CPU; on an accelerator every round of every chunk's loops is a kernel launch and a
sync, so fewer, larger chunks should win. This times each chunk size on this machine's default
device, in alternating rounds (best of `--repeats`), for two cases:

- `loop`: the closed loop's trainee capacity (`designer.settings.CapacitySettings`: 10 x 10,
  2 agents, exact wait labels, cost-to-go) on the default config;
- `headline`: 64 agents on 32 x 32 at density 0.3 (`benchmarks/env_throughput.py`), the case
  of `benchmarks/train_throughput.py --case headline`.

    python benchmarks/pool_gen.py --json runs/pool_gen.json
    python benchmarks/pool_gen.py --chunks 4,64,512 --cases headline

The chunk `generate_many` uses by default on this backend is printed beside the figures
(`jaxenv.levels.GEN_CHUNK`); the levels are the same for every chunk size (checked here too).
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import jax
import numpy as np
from env_throughput import CASES, case_config
from harness import command, positive_int, time_call, time_rounds, write_json

from designer.settings import CapacitySettings
from jaxenv.batching import broadcast
from jaxenv.levels import gen_chunk, generate_many
from jaxenv.mapf import Capacity, MAPFFrozenLake


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pool-size", type=positive_int, default=512)
    p.add_argument("--chunks", default="1,4,16,64,512", help="comma-separated chunk sizes")
    p.add_argument("--cases", default="loop,headline")
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def case_env(name: str):
    """(env, unbatched config) of a case."""
    if name == "loop":  # the capacity a run's trainee gets by default
        env = MAPFFrozenLake(Capacity(**CapacitySettings().model_dump()))
        return env, env.config_space.to_config()
    return case_config(next(c for c in CASES if name in c.name))


def bench_case(name: str, chunks: list[int], n: int, repeats: int) -> dict[int, dict]:
    """Per chunk size: the first call (compile included) and the best of `repeats` rounds."""
    env, cfg = case_env(name)
    cfgs = broadcast(cfg, n)
    fns = {c: jax.jit(partial(generate_many, env.generate, chunk=c)) for c in chunks}
    key = jax.random.PRNGKey(0)
    compile_s, first = {}, None
    for c, fn in fns.items():
        lv, t = time_call(lambda f, *args: jax.device_get(f(*args)), fn,
                          jax.random.split(key, n), cfgs)
        compile_s[c] = t.wall_s
        if first is None:
            first = lv
        same = all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(first),
                                                        jax.tree.leaves(lv)))
        if not same:
            raise AssertionError(f"{name}: chunk {c} made different levels than {chunks[0]}")
    keys = [jax.random.split(jax.random.PRNGKey(r), n) for r in range(repeats + 1)]
    # in rounds over the chunk sizes, so that load spreads over all of them
    rounds = time_rounds({c: (lambda r, fn=fn: fn(keys[r], cfgs)) for c, fn in fns.items()},
                         repeats, warmup=False)
    return {c: {"best_s": t.best_s, "all_s": t.wall_s, "levels_per_s": n / t.best_s,
                "first_call_s": compile_s[c]} for c, t in rounds.items()}


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    chunks = [int(c) for c in a.chunks.split(",")]
    n = a.pool_size
    out: dict = {"device": str(jax.devices()[0]), "backend": jax.default_backend(),
                 "pool_size": n, "default_chunk": gen_chunk(n), "repeats": a.repeats,
                 "cases": {}}
    for name in a.cases.split(","):
        rows = out["cases"][name] = bench_case(name, chunks, n, a.repeats)
        print(f"{name}: {n} levels on {out['device']} (default chunk here: {gen_chunk(n)})")
        for c, row in rows.items():
            print(f"  chunk {c:5d}: {row['best_s']:8.3f} s  ({row['levels_per_s']:9,.0f} levels/s)")
    write_json(a.json, out, command=command(__file__, argv), seeds=[0])
    return out


if __name__ == "__main__":
    main()
