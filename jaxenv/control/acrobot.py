"""Acrobot-v1 (gymnax's physics) as a physics family (`jaxenv.control.family`).

Varied: the two link masses, the two link lengths and the links' moment of inertia. Each
link's centre of mass is derived as half its length (gym's standard links are uniform rods:
length 1, centre 0.5), so an edited length always moves its centre of mass with it. gym's
dynamics never read the second link's length except through that centre of mass; the goal
test (tip above one link length over the pivot, in unit lengths) and the RK4 step of 0.2 s,
the torques {-1, 0, +1} and the velocity limits are the task's rules.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control import acrobot

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

HORIZON = 500  # the task's episode limit (a rule)
PARAMS = (
    Param("link_mass_1", "kg", "Mass of the first (upper) link.", 1.0, 0.25, 4.0, 0.05),
    Param("link_mass_2", "kg", "Mass of the second (lower) link.", 1.0, 0.25, 4.0, 0.05),
    Param("link_length_1", "m", "Length of the first link (its centre of mass at half of it).",
          1.0, 0.4, 2.0, 0.05),
    Param("link_length_2", "m", "Length of the second link (its centre of mass at half of it).",
          1.0, 0.4, 2.0, 0.05),
    Param("link_moi", "kg m^2", "Moment of inertia of each link about its centre.", 1.0, 0.25,
          4.0, 0.05),
)
OUTCOMES = ("goal", TIME_LIMIT, NONFINITE)


def build_level(v: Mapping[str, jax.Array]) -> acrobot.EnvParams:
    """Drawn values -> Acrobot's params, centres of mass derived, rules fixed (gym's)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return acrobot.EnvParams(
        available_torque=jnp.array([-1.0, 0.0, 1.0], jnp.float32), dt=f32(0.2),
        link_length_1=f32(v["link_length_1"]), link_length_2=f32(v["link_length_2"]),
        link_mass_1=f32(v["link_mass_1"]), link_mass_2=f32(v["link_mass_2"]),
        link_com_pos_1=f32(0.5 * v["link_length_1"]),
        link_com_pos_2=f32(0.5 * v["link_length_2"]),
        link_moi=f32(v["link_moi"]), max_vel_1=f32(4 * jnp.pi), max_vel_2=f32(9 * jnp.pi),
        torque_noise_max=f32(0.0), max_steps_in_episode=jnp.int32(HORIZON))



AcrobotLevel = level_class("Acrobot", PARAMS, __name__)
FAMILY = Family(
    name="acrobot", gym_id="Acrobot-v1", raw=acrobot.Acrobot, params=PARAMS, build=build_level,
    level_cls=AcrobotLevel, outcomes=OUTCOMES, cause=constant_cause(OUTCOMES, "goal"),
    horizon=HORIZON, success_threshold=-100.0, return_range=(-500.0, 0.0), worst_reward=-1.0,
    notes="Centres of mass derived as half the link lengths; goal test in unit lengths.")
AcrobotConfig = range_config_class("Acrobot", PARAMS, __name__)


def make_env() -> ControlEnv:
    """Acrobot-v1 as a physics family."""
    return ControlEnv(FAMILY, AcrobotConfig)
