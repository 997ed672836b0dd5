"""Pendulum-v1 (gymnax's physics) as a physics family (`jaxenv.control.family`).

Varied: gravity, the bob's mass, the rod's length and the motor's torque limit. The action is
one real torque, clipped to the variant's limit. The 0.05 s step, the speed limit of 8 rad/s,
the reward and the 200-step limit are the task's rules. Pendulum never terminates, and gym
sets no return threshold: success here is a return of at least -200 (a swung-up, held
pendulum scores about -150 from a random start, a hanging one about -1,200).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control import pendulum

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
    Param("g", "m/s^2", "Gravitational acceleration.", 10.0, 2.0, 20.0, 0.5),
    Param("m", "kg", "Mass of the bob.", 1.0, 0.25, 3.0, 0.05),
    Param("l", "m", "Length of the rod.", 1.0, 0.25, 2.0, 0.05),
    Param("max_torque", "N m", "Largest torque the motor applies (actions are clipped to it).",
          2.0, 0.5, 4.0, 0.1),
)
OUTCOMES = (TIME_LIMIT, NONFINITE)
MAX_SPEED = 8.0
# The worst step reward over the knob bounds: angle pi, top speed, the largest torque.
WORST_REWARD = -(math.pi ** 2 + 0.1 * MAX_SPEED ** 2 + 0.001 * 4.0 ** 2)


def build_level(v: Mapping[str, jax.Array]) -> pendulum.EnvParams:
    """Drawn values -> Pendulum's params, rules fixed (gym's)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return pendulum.EnvParams(
        max_speed=f32(MAX_SPEED), max_torque=f32(v["max_torque"]), dt=f32(0.05),
        g=f32(v["g"]), m=f32(v["m"]), l=f32(v["l"]), max_steps_in_episode=jnp.int32(HORIZON))



PendulumLevel = level_class("Pendulum", PARAMS, __name__,
                           gather_rows=False)
FAMILY = Family(
    name="pendulum", gym_id="Pendulum-v1", raw=pendulum.Pendulum, params=PARAMS, build=build_level,
    level_cls=PendulumLevel, outcomes=OUTCOMES, cause=constant_cause(OUTCOMES, TIME_LIMIT),
    horizon=HORIZON, success_threshold=-200.0, return_range=(200 * WORST_REWARD, 0.0),
    worst_reward=WORST_REWARD, continuous=True, action_bound=2.0,
    notes="No natural termination; success (return >= -200) is our convention.")
PendulumConfig = range_config_class("Pendulum", PARAMS, __name__)


def make_env() -> ControlEnv:
    """Pendulum-v1 as a physics family."""
    return ControlEnv(FAMILY, PendulumConfig)
