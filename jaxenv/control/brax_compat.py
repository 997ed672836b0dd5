"""The one place that mends brax 0.14 for the jax it runs on; an upstream fix should delete
code here.

brax's trainers (``brax.training.agents.ppo.train``, ``brax.training.pmap``) call
``jax.device_put_replicated``, which jax 0.10 removed. ``brax_training()`` supplies it while a
block runs (`device_put_replicated`: one copy per device, stacked on a leading axis that is
sharded over the devices, as the removed function returned), and takes it away again after;
it is a no-op where jax still has its own. The families (`jaxenv.control.brax_family`) use
only brax's envs and need none of this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def device_put_replicated(x: Any, devices: Sequence[Any]) -> Any:
    """Every leaf of `x` stacked once per device [D, ...], row i on `devices[i]`."""
    devices = list(devices)
    if not devices:
        raise ValueError("device_put_replicated needs at least one device")
    sharding = NamedSharding(Mesh(np.asarray(devices), ("devices",)), P("devices"))
    stacked = jax.tree.map(lambda a: jnp.stack([jnp.asarray(a)] * len(devices)), x)
    return jax.device_put(stacked, sharding)


@contextlib.contextmanager
def brax_training() -> Iterator[None]:
    """Inside the block, jax has the `device_put_replicated` that brax's trainers call."""
    if hasattr(jax, "device_put_replicated"):
        yield
        return
    jax.device_put_replicated = device_put_replicated
    try:
        yield
    finally:
        del jax.device_put_replicated
