"""Data-parallel stages: the env batch sharded over devices, gradients summed across them.

`sharded_stage(trainee, devices)` wraps the PPO trainee's public `stage` in `jax.shard_map` over a
1-D mesh `("envs",)`: the learner state, config batch and key are replicated; each device runs
`num_envs / D` environments, generates `pool_size / D` levels (all-gathered into the full
pool), and every gradient, count and metric is psum'd. Because per-env randomness comes from
the global env index (see `policy.ppo`), the result is the one-device update up to float
summation order. The same function runs across processes: `policy.distributed` builds the mesh
over every process's devices and turns each process's (identical) inputs into global arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from policy.ppo import PPOTrainee

AXIS = "envs"


def env_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh over `devices` (default: all local devices)."""
    devs = list(jax.local_devices() if devices is None else devices)
    return Mesh(np.array(devs), (AXIS,))


def sharded_stage(trainee: PPOTrainee,
                  devices: Sequence[jax.Device] | None = None) -> Callable:
    """A jitted `stage(runner, cfg_batch, key) -> (runner, metrics)` over `devices`."""
    mesh = env_mesh(devices)
    d = mesh.devices.size
    trainee.hparams.check(1, d)
    fn = partial(trainee.stage, axis=AXIS, n_shards=d)
    # Outputs are psum'd or computed from psum'd values: replicated, hence P().
    mapped = jax.shard_map(fn, mesh=mesh, in_specs=(P(), P(), P()), out_specs=P(),
                           check_vma=False)
    return jax.jit(mapped)
