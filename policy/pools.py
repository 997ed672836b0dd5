"""Stage level pools: generation once per stage, off the per-step hot path.

Choice (documented in `policy.ppo`): a stage's config batch holds C configs for B envs
(C divides B); env b runs config `b // (B // C)`. One pool of `pool_size` levels is generated
per stage, `pool_size // C` from each config, and the envs that share a config share its
levels (C = B gives every env its own config and its own pool slice). Generation costs
~2-4 ms per level on this CPU, so a stage regenerates `pool_size` levels, not one per reset.

Level j is always drawn with key `split(key, pool_size)[j]`, whichever device generates it,
so a pool generated in shards and all-gathered equals the one-device pool.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxenv.mapf.config import Capacity, MAPFConfig
from jaxenv.mapf.generator import generate_many
from jaxenv.mapf.level import Level


def num_configs(cfgs: MAPFConfig) -> int:
    """Leading axis of a batched config (C)."""
    return int(cfgs.slip_prob.shape[0])


def stage_pool(key: jax.Array, cfgs: MAPFConfig, cap: Capacity, pool_size: int, *,
               shard: jax.Array | int = 0, n_shards: int = 1,
               axis: str | None = None) -> Level:
    """`pool_size` levels [P]; levels [c*P/C, (c+1)*P/C) come from config c.

    With `axis`, each of the `n_shards` devices generates its contiguous slice and the
    slices are all-gathered, so every device holds the whole pool.
    """
    c = num_configs(cfgs)
    per_cfg = pool_size // c
    local = pool_size // n_shards
    idx = shard * local + jnp.arange(local)
    keys = jax.random.split(key, pool_size)[idx]
    cfg_l = jax.tree.map(lambda x: x[idx // per_cfg], cfgs)
    levels = generate_many(keys, cfg_l, cap)
    if axis is not None:
        levels = jax.tree.map(lambda x: jax.lax.all_gather(x, axis, tiled=True), levels)
    return levels
