"""MAPF-FrozenLake: multi-agent path finding on a frozen lake, in pure JAX."""

from jaxenv.mapf.benchmark.heldout import load_heldout
from jaxenv.mapf.benchmark.report import format_markdown, make_table
from jaxenv.mapf.config import CONFLICT_MODES, MIN_SIZE, Capacity, MAPFConfig, make_config_space
from jaxenv.mapf.env import CAUSES, MAPFFrozenLake, MAPFObs, MAPFState, step_limit
from jaxenv.mapf.generator import generate, generate_batch
from jaxenv.mapf.joint import PairSolution, solve_pair
from jaxenv.mapf.level import UNKNOWN, Level, make_level
from jaxenv.mapf.plans import (
    ParseReport,
    Plan,
    Verdict,
    parse_plan,
    plan_arrays,
    verify_batch,
    verify_plan,
)
from jaxenv.mapf.pool import LevelPoolEnv, PoolParams, make_pool
from jaxenv.mapf.render import render_text

__all__ = [
    "CAUSES", "CONFLICT_MODES", "MIN_SIZE", "UNKNOWN", "Capacity", "Level", "LevelPoolEnv",
    "MAPFConfig", "MAPFFrozenLake", "MAPFObs", "MAPFState", "PairSolution", "PoolParams",
    "generate", "generate_batch", "make_config_space", "make_level", "make_pool", "solve_pair",
    "step_limit", "load_heldout", "ParseReport", "Plan", "Verdict", "parse_plan",
    "plan_arrays", "verify_batch", "verify_plan", "render_text", "format_markdown", "make_table",
]
