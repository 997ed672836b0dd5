"""MountainCar-v0 (gymnax's physics) as a physics family (`jaxenv.control.family`).

Varied: the engine's push and the hill's gravity (the two numbers of the velocity update
``v += (a - 1) * force - cos(3 x) * gravity``). The track, the speed limit, the goal at
x >= 0.5 and the 200-step limit are the task's rules.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control import mountain_car

from jaxenv.control.family import (
    NONFINITE,
    TIME_LIMIT,
    ControlEnv,
    Family,
    Param,
    constant_cause,
    level_class,
    range_config_class,
)

HORIZON = 200  # the task's episode limit (a rule)
PARAMS = (
    Param("force", "velocity units/step", "Push of the engine per step (the change of "
          "velocity an accelerate action adds).", 0.001, 0.0004, 0.002, 0.00005),
    Param("gravity", "velocity units/step", "Pull of the hill's slope per step (scales "
          "-cos(3 x)).", 0.0025, 0.001, 0.005, 0.0001),
)
OUTCOMES = ("goal", TIME_LIMIT, NONFINITE)


def build_level(v: Mapping[str, jax.Array]) -> mountain_car.EnvParams:
    """Drawn values -> MountainCar's params, rules fixed (gym's)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return mountain_car.EnvParams(
        min_position=f32(-1.2), max_position=f32(0.6), max_speed=f32(0.07),
        goal_position=f32(0.5), goal_velocity=f32(0.0), force=f32(v["force"]),
        gravity=f32(v["gravity"]), max_steps_in_episode=jnp.int32(HORIZON))



MountainCarLevel = level_class("MountainCar", PARAMS, __name__,
                              gather_rows=False)
FAMILY = Family(
    name="mountaincar", gym_id="MountainCar-v0", raw=mountain_car.MountainCar, params=PARAMS,
    build=build_level, level_cls=MountainCarLevel, outcomes=OUTCOMES,
    cause=constant_cause(OUTCOMES, "goal"), horizon=HORIZON, success_threshold=-110.0,
    return_range=(-200.0, 0.0), worst_reward=-1.0)
MountainCarConfig = range_config_class("MountainCar", PARAMS, __name__)


def make_env() -> ControlEnv:
    """MountainCar-v0 as a physics family."""
    return ControlEnv(FAMILY, MountainCarConfig)
