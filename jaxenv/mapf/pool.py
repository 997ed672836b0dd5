"""Auto-reset from a pool of pre-generated levels: generation off the per-step hot path.

gymnax computes a reset inside every `step` (and `vmap` turns the branch into a select), so
an expensive generator would run once per step per env. `LevelPoolEnv` keeps the gymnax API
but its params carry a pool of levels drawn from the env's own config; a reset picks one at
random. Refresh the pool (`make_pool`) as often as the training loop wants fresh levels,
e.g. once per update, and the levels follow the config's distribution at a fraction of the cost.
"""

from __future__ import annotations

import jax
from flax import struct

from jaxenv.mapf.config import Capacity, MAPFConfig
from jaxenv.mapf.env import MAPFFrozenLake, MAPFObs, MAPFState
from jaxenv.mapf.generator import generate_batch
from jaxenv.mapf.level import Level


@struct.dataclass
class PoolParams:
    cfg: MAPFConfig
    pool: Level  # leading axis P


def make_pool(key: jax.Array, cfg: MAPFConfig, cap: Capacity, size: int) -> PoolParams:
    """`size` fresh levels from one (unbatched) config."""
    return PoolParams(cfg=cfg, pool=generate_batch(key, cfg, cap, size))


class LevelPoolEnv(MAPFFrozenLake):
    """MAPFFrozenLake whose params are `PoolParams`; resets draw from the pool."""

    @property
    def default_params(self) -> PoolParams:
        raise ValueError("LevelPoolEnv has no default params: build them with make_pool")

    def rule_config(self, params: PoolParams) -> MAPFConfig:
        return params.cfg

    def reset_env(self, key: jax.Array, params: PoolParams) -> tuple[MAPFObs, MAPFState]:
        k_pick, k_reset = jax.random.split(key)
        n = params.pool.size.shape[0]
        level = jax.tree.map(lambda x: x[jax.random.randint(k_pick, (), 0, n)], params.pool)
        return self.reset_to_level(k_reset, level, params)
