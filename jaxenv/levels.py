"""Levels in bulk: chunked generation and level pools, for any environment with levels.

An environment with levels offers `generate(key, cfg) -> Level` (pure JAX) and
`reset_to_level(key, level, cfg)`. Generators may run `while_loop`s (MAPF's BFS), and under one
big `vmap` every lane waits for the slowest level of the whole batch, so on the CPU
`generate_many` maps small vmapped chunks with `lax.map` instead. On an accelerator the lanes
run in parallel but each chunk's loops run in series (a kernel launch and a device-to-host sync
per round), so there a stage pool (512 levels) is one vmap (`GEN_CHUNK`; `benchmarks/pool_gen.py`
times each chunk size on the device at hand).

A *pool* is a batch of pre-generated levels with a leading axis P. Resets that draw from a pool
(`jaxenv.wrappers.PoolReset`) keep generation off the per-step hot path: gymnax computes a
reset inside every `step`, and `vmap` turns that branch into a select, so a generating reset
would run once per step per env. A *stage pool* (`stage_pool`) serves a batch of C configs:
levels `[c*P/C, (c+1)*P/C)` come from config c, and level j is always drawn with key
`split(key, P)[j]`, whichever device generates it, so a pool generated in shards and
all-gathered equals the one-device pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxenv.batching import broadcast, take

# Levels per vmapped chunk, by backend. On the CPU small chunks generate a pool faster than one
# vmap (`benchmarks/pool_gen.py` measures it). Other backends: ACCELERATOR_CHUNK, a default stage
# pool in one vmap, bounded because the exact two-agent search holds max_size**4 states a level
# (1 M at 32 x 32).
GEN_CHUNK: dict[str, int] = {"cpu": 4}
ACCELERATOR_CHUNK = 512
Generate = Callable[[jax.Array, Any], Any]


def gen_chunk(n: int, backend: str | None = None) -> int:
    """Chunk size `generate_many` uses for n levels on `backend` (default: JAX's default)."""
    return max(1, min(n, GEN_CHUNK.get(backend or jax.default_backend(), ACCELERATOR_CHUNK)))


def generate_many(generate: Generate, keys: jax.Array, cfgs: Any, chunk: int | None = None) -> Any:
    """One level per (key, config) row: keys [n], cfgs batched [n] -> levels [n]. Levels do not
    depend on `chunk` (default `gen_chunk(n)`), only the time to make them does."""
    chunk = chunk or gen_chunk(keys.shape[0])
    return jax.lax.map(lambda kc: generate(kc[0], kc[1]), (keys, cfgs), batch_size=chunk)


def generate_batch(generate: Generate, key: jax.Array, cfg: Any, n: int) -> Any:
    """n levels from one (unbatched) config."""
    return generate_many(generate, jax.random.split(key, n), broadcast(cfg, n))


@struct.dataclass
class PoolParams:
    """The params of a `PoolReset` env: its config and the slice of a shared pool it draws from.

    When vmapping envs that share one pool, map `cfg`, `lo` and `count` and broadcast `pool`
    (`PoolParams.in_axes()`), so the pool is held once, not once per env.
    """

    cfg: Any
    pool: Any  # levels, leading axis P
    lo: jax.Array  # [] first level of this env's slice
    count: jax.Array  # [] levels in the slice

    @staticmethod
    def in_axes() -> PoolParams:
        return PoolParams(cfg=0, pool=None, lo=0, count=0)

    def sample(self, key: jax.Array) -> Any:
        """A uniformly random level of this env's slice.

        The index is read from the key's own bits (a split key's words are threefry outputs,
        uniform 32-bit values), not drawn with ``randint``: that would hash three more times per
        env step, since under ``vmap`` the reset branch runs every step. 24 bits give the index
        (bias below count / 2**24)."""
        bits = jax.random.key_data(key).reshape(-1)[-1]
        u = (bits >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)
        count = jnp.maximum(self.count, 1)
        i = jnp.minimum((u * count.astype(jnp.float32)).astype(jnp.int32), count - 1)
        return take_rows(self.pool, self.lo + i)


def take_rows(pool: Any, index: jax.Array) -> Any:
    """`take(pool, index)`, with each dtype's per-level scalars gathered as one row.

    A physics level is a handful of scalars [P] each; under `vmap` every env gathers from
    the pool at every step (the reset branch is a select), and XLA's CPU gather costs per
    gather op, so one gather of a [P, n] row is cheaper than n gathers of [P]
    (`benchmarks/families.py` measures it). The stacking is loop-invariant, so XLA
    hoists it out of a rollout's scan. Leaves with more dims (MAPF's grids) are taken as is.
    Which is faster depends on how XLA fuses the step that reads the level (for some
    families one gather per leaf is faster): a level class whose
    `gather_rows` is False is taken leaf by leaf.
    """
    if not getattr(pool, "gather_rows", True):
        return take(pool, index)
    leaves, treedef = jax.tree.flatten(pool)
    out = list(leaves)
    groups: dict[Any, list[int]] = {}
    for n, x in enumerate(leaves):
        if jnp.ndim(x) == 1:
            groups.setdefault(jnp.result_type(x), []).append(n)
        else:
            out[n] = x[index]
    for members in groups.values():
        row = jnp.stack([leaves[n] for n in members], axis=-1)[index]
        for j, n in enumerate(members):
            out[n] = row[..., j]
    return jax.tree.unflatten(treedef, out)


def make_pool(env: Any, key: jax.Array, cfg: Any, size: int) -> PoolParams:
    """`size` fresh levels from one (unbatched) config, as the params of a `PoolReset` env."""
    pool = generate_batch(env.generate, key, cfg, size)
    return PoolParams(cfg=cfg, pool=pool, lo=jnp.int32(0), count=jnp.int32(size))


def stage_pool(env: Any, key: jax.Array, cfgs: Any, n_configs: int, pool_size: int, *,
               shard: jax.Array | int = 0, n_shards: int = 1, axis: str | None = None) -> Any:
    """`pool_size` levels [P] for a batch of C = `n_configs` configs; see the module docstring.

    With `axis` (inside `shard_map`), each of the `n_shards` devices generates its contiguous
    slice and the slices are all-gathered, so every device holds the whole pool.
    """
    per_cfg = pool_size // n_configs
    local = pool_size // n_shards
    idx = shard * local + jnp.arange(local)
    keys = jax.random.split(key, pool_size)[idx]
    levels = generate_many(env.generate, keys, take(cfgs, idx // per_cfg))
    if axis is not None:
        levels = jax.tree.map(lambda x: jax.lax.all_gather(x, axis, tiled=True), levels)
    return levels


def env_pool_params(cfgs: Any, pool: Any, env_cfg_idx: jax.Array, n_configs: int,
                    pool_size: int) -> PoolParams:
    """Per-env `PoolParams` [B] for envs running config `env_cfg_idx` [B] of a stage pool."""
    per_cfg = pool_size // n_configs
    return PoolParams(cfg=take(cfgs, env_cfg_idx), pool=pool,
                      lo=(env_cfg_idx * per_cfg).astype(jnp.int32),
                      count=jnp.full(env_cfg_idx.shape, per_cfg, jnp.int32))
