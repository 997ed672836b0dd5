"""Sharded training over 4 host CPU devices gives the one-device update.

The device count must be set before jax is imported, so the comparison runs in a
subprocess (this file run as a script). Tolerance: parameters after one stage of 2 updates x
2 epochs x 2 minibatches agree to 1e-5 absolute + 1e-4 relative (only the float summation order
of the psum'd gradients differs); integer episode statistics agree exactly. The second update
runs on a fresh pool (`pool_every`), generated in slices and all-gathered inside a cond.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

N_DEVICES = 4


def _compare() -> dict:
    import jax
    import numpy as np

    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.network import ActorCritic
    from policy.ppo import Hparams, make_train
    from policy.sharding import sharded_stage

    assert jax.local_device_count() == N_DEVICES, jax.devices()
    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2, max_steps=16, label_waits=False))
    cs = env.config_space
    a = cs.default()
    b = dict(a, hole_ratio=[0.3, 0.3], agent_weights=[1.0, 0.0], slip_prob=0.1)
    cfgs = cs.stack([a, b])  # 2 configs over 8 envs: shards hold envs of both
    hp = Hparams(num_envs=8, num_steps=8, num_updates=2, update_epochs=2, num_minibatches=2,
                 pool_size=16, pool_every=1, lr=1e-3)  # a fresh pool (all-gathered) at update 1
    tr = make_train(env, ActorCritic(hidden=16, critic="mappo"), hp)
    runner = tr.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    one, m_one = tr.train_stage(runner, cfgs, key)
    many, m_many = sharded_stage(tr)(runner, cfgs, key)
    diff = jax.tree.map(lambda x, y: float(np.max(np.abs(np.asarray(x) - np.asarray(y)))),
                        one.params, many.params)
    close = jax.tree.all(jax.tree.map(
        lambda x, y: bool(np.allclose(x, y, rtol=1e-4, atol=1e-5)), one.params, many.params))
    moved = max(jax.tree.leaves(jax.tree.map(
        lambda x, y: float(np.max(np.abs(np.asarray(x) - np.asarray(y)))),
        runner.params, one.params)))
    return {
        "devices": jax.local_device_count(),
        "max_abs_diff": max(jax.tree.leaves(diff)),
        "params_moved": moved,
        "close": close,
        "episodes": [np.asarray(m_one["episodes"]).tolist(),
                     np.asarray(m_many["episodes"]).tolist()],
        "causes_equal": bool(np.array_equal(m_one["outcomes"], m_many["outcomes"])),
        "loss": [np.asarray(m_one["loss"]).tolist(), np.asarray(m_many["loss"]).tolist()],
    }


def test_four_devices_equal_one():
    from tests.helpers.xla_flags import xla_flags  # here: the script run as a child has no `tests`

    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(N_DEVICES))
    out = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["devices"] == N_DEVICES
    assert res["params_moved"] > 1e-4  # the update did something
    assert res["close"], res
    assert res["episodes"][0] == res["episodes"][1] and sum(res["episodes"][0]) > 0
    assert res["causes_equal"]
    for x, y in zip(*res["loss"], strict=True):
        assert abs(x - y) <= 1e-5 + 1e-4 * abs(x)


if __name__ == "__main__":
    print(json.dumps(_compare()))
