"""Test setup: CPU JAX, one persistent compilation cache for the whole session (subprocess
runs of `envengineer` then compile what an earlier test already compiled in seconds), and the
tests folder importable for shared plain-Python helpers. XLA flags: `xla_flags.py` (the CPU
Eigen pool is single-threaded in tests, to avoid a known XLA CPU hang)."""

import os
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), f"envengineer-jax-cache-{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
sys.path.insert(0, os.path.dirname(__file__))

from xla_flags import xla_flags  # noqa: E402  (needs the path above; jax is not imported yet)

os.environ["XLA_FLAGS"] = xla_flags()
