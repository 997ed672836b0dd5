"""jaxenv.control.brax_compat: brax's trainers call `jax.device_put_replicated`, which this jax
lacks; inside `brax_training()` they find it (one copy per device, as brax checks), and after
the block jax is as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

pytest.importorskip("brax")

from brax.training import pmap  # noqa: E402

from jaxenv.control.brax_compat import brax_training, device_put_replicated  # noqa: E402
from tests.helpers.xla_flags import xla_flags  # noqa: E402

TREE = {"w": np.arange(6.0).reshape(2, 3), "step": np.int32(4)}


def test_brax_fails_without_the_mend_and_replicates_with_it() -> None:
    if hasattr(jax, "device_put_replicated"):
        pytest.skip("this jax has device_put_replicated: brax_training() is a no-op")
    with pytest.raises(AttributeError, match="device_put_replicated"):
        pmap.bcast_local_devices(TREE, 1)
    with brax_training():
        out = pmap.bcast_local_devices(TREE, 1)
        pmap.assert_is_replicated(out)
    assert not hasattr(jax, "device_put_replicated")
    np.testing.assert_array_equal(out["w"], TREE["w"][None])
    assert out["step"].shape == (1,) and int(out["step"][0]) == 4


def test_needs_a_device() -> None:
    with pytest.raises(ValueError, match="at least one device"):
        device_put_replicated(TREE, [])


def test_one_copy_per_device_on_two_devices() -> None:
    """Two host devices (a fresh process): row i lives on device i and brax's pmap check holds."""
    code = textwrap.dedent("""
        import jax, numpy as np
        from brax.training import pmap
        from jaxenv.control.brax_compat import brax_training
        with brax_training():
            out = pmap.bcast_local_devices({"w": np.arange(3.0)}, 2)
            pmap.assert_is_replicated(out)
        w = out["w"]
        assert w.shape == (2, 3), w.shape
        assert [s.device for s in w.addressable_shards] == jax.devices()[:2]
        assert all(np.array_equal(s.data, np.arange(3.0)[None]) for s in w.addressable_shards)
        print(float(jax.pmap(lambda x: x.sum())(w).sum()))
    """)
    env = {"XLA_FLAGS": xla_flags(devices=2), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "6.0"
