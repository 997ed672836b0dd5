"""MAPF-FrozenLake: multi-agent path finding on a frozen lake, in pure JAX.

The core: the environment (`MAPFFrozenLake`, the rules), its injected observer (`Observer`,
what the agents see), its static `Capacity` and dynamic `MAPFConfig` (knobs in
`make_config_space`), the `Level` pytree and its generator, the exact two-agent solver the
generator labels levels with, text rendering, and `replay` (whole plans played step by step).
Around it, in subpackages:

- `jaxenv.mapf.plans`: whole plans as an LLM writes them, the parser and the jitted verifier;
- `jaxenv.mapf.benchmark`: the frozen held-out and validation sets, their builder, the
  paper's results table and the task validator;
- `jaxenv.mapf.solvers`: offline plain-Python code (CBS, the rules reference).
"""

from jaxenv.mapf.config import (
    CONFLICT_MODES,
    GOAL_RULES,
    MIN_SIZE,
    Capacity,
    MAPFConfig,
    make_config_space,
)
from jaxenv.mapf.env import MAPFFrozenLake, step_limit
from jaxenv.mapf.generator import generate, generate_batch, generate_many
from jaxenv.mapf.joint import PairSolution, solve_pair
from jaxenv.mapf.level import UNKNOWN, Level, make_level
from jaxenv.mapf.observe import MAPFObs, Observer
from jaxenv.mapf.render import render_text
from jaxenv.mapf.rules import CAUSES
from jaxenv.mapf.state import MAPFState

__all__ = [
    "CAUSES", "CONFLICT_MODES", "GOAL_RULES", "MIN_SIZE", "UNKNOWN", "Capacity", "Level",
    "MAPFConfig", "MAPFFrozenLake", "MAPFObs", "MAPFState", "Observer", "PairSolution",
    "generate", "generate_batch", "generate_many", "make_config_space", "make_level",
    "render_text", "solve_pair", "step_limit",
]
