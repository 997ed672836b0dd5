"""Test setup: CPU JAX, and the tests folder importable for shared plain-Python helpers."""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(__file__))
