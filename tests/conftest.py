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

# The heaviest files first (measured: `pytest -n 2 --dist loadfile --durations=40`). Under
# `--dist loadfile` (the Makefile) a worker takes whole files in collection order, so a
# heavy file collected last would run alone while the other core idles.
HEAVY_FIRST = ("test_sweep.py", "test_loop.py", "test_llm_loop.py", "test_grpo.py",
               "test_control_loop.py", "test_policy_distributed.py", "test_brax_family.py",
               "test_policy_multidevice.py", "test_policy_train.py", "test_llm_engineer.py",
               "test_self_engineer.py", "test_generator.py", "test_cli.py", "test_export.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a file
