"""Test setup: CPU JAX, one persistent compilation cache for the whole session (subprocess
runs of `envengineer` then compile what an earlier test already compiled in seconds; a fresh
folder per session, made by the controller and inherited by the xdist workers and
subprocesses, because an entry written by another session, with other flags or cut short,
can crash the process that reads it), XLA
flags from `helpers/xla_flags.py` (the CPU Eigen pool is single-threaded in tests, to avoid a
known XLA CPU hang), and the files that hold a `slow` test collected first."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # the controller: workers inherit its folder
    _cache = tempfile.mkdtemp(prefix="envengineer-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")

from tests.helpers.xla_flags import xla_flags  # noqa: E402  (before jax is imported)

os.environ["XLA_FLAGS"] = xla_flags()


def pytest_collection_modifyitems(config, items):
    """Files with a `slow` test first. Under `--dist loadfile --no-loadscope-reorder` (the
    Makefile) a worker takes whole files in collection order, so a heavy file collected last
    would run alone while the other core idles; the short files at the end fill the gaps."""
    heavy = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in heavy)  # stable: collection order otherwise
