"""Test setup: CPU JAX, one persistent compilation cache for the whole session (subprocess
runs of `envengineer` then compile what an earlier test already compiled in seconds), and the
tests folder importable for shared plain-Python helpers."""

import os
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), f"envengineer-jax-cache-{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
sys.path.insert(0, os.path.dirname(__file__))
