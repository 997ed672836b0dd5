"""MAPF-FrozenLake: multi-agent path finding on a frozen lake, in pure JAX."""

from jaxenv.mapf.config import CONFLICT_MODES, MIN_SIZE, Capacity, MAPFConfig, make_config_space
from jaxenv.mapf.env import CAUSES, MAPFFrozenLake, MAPFObs, MAPFState, step_limit
from jaxenv.mapf.generator import generate, generate_batch
from jaxenv.mapf.joint import PairSolution, solve_pair
from jaxenv.mapf.level import UNKNOWN, Level, make_level
from jaxenv.mapf.pool import LevelPoolEnv, PoolParams, make_pool

__all__ = [
    "CAUSES", "CONFLICT_MODES", "MIN_SIZE", "UNKNOWN", "Capacity", "Level", "LevelPoolEnv",
    "MAPFConfig", "MAPFFrozenLake", "MAPFObs", "MAPFState", "PairSolution", "PoolParams",
    "generate", "generate_batch", "make_config_space", "make_level", "make_pool", "solve_pair",
    "step_limit",
]
