"""Brax's hopper (``generalized`` backend) as a physics family (`jaxenv.control.family`).

Built as `jaxenv.control.brax_pendulum` is: a level is five numbers (torso mass, foot-ground
friction, gear, gravity, joint damping), each written into a field the generalized backend
reads and each tested to change a trajectory. The rules are brax's; success is gymnasium
Hopper's return threshold over the same 1,000 steps. Which fields are written and why:
docs/families.md, "Hopper".
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxenv.control.brax_family import BACKEND, BraxRaw, brax_env
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

ENV = "hopper"
HORIZON = 1000
TORSO = 0  # link index (torso, thigh, leg, foot)
HINGES = (3, 4, 5)  # dof indices of the thigh, leg and foot hinges (0-2: the root)
FLOOR_GEOM, FOOT_GEOM = 0, 4  # geom indices (floor, torso, thigh, leg, foot)
PARAMS = (
    Param("torso_mass", "kg", "Mass of the torso, the hopper's top body (its inertia scales "
          "with it).", 3.6651914, 1.75, 7.25, 0.25),
    Param("friction", "dimensionless", "Sliding friction coefficient between the foot and the "
          "ground.", 2.0, 1.0, 4.0, 0.1),
    Param("gear", "N m per unit control", "Gear of each of the three joint motors (torque per "
          "unit action).", 200.0, 100.0, 300.0, 10.0),
    Param("gravity", "m/s^2", "Gravitational acceleration (downwards).", 9.81, 5.0, 15.0,
          0.25),
    Param("joint_damping", "N m s/rad", "Viscous damping of each of the thigh, leg and foot "
          "hinges.", 1.0, 0.5, 2.0, 0.1),
)
OUTCOMES = (TIME_LIMIT, "fall", NONFINITE)


def hopper_system(v: Mapping[str, jax.Array]) -> Any:
    """The brax ``System`` of a hopper variant (see the module docstring for the fields)."""
    sys = brax_env(ENV).sys
    mass0, fr = sys.link.inertia.mass, sys.geom_friction
    mass = mass0.at[TORSO].set(v["torso_mass"])
    mu = jnp.asarray(v["friction"], fr.dtype)
    fr = fr.at[FOOT_GEOM, 0].set(mu).at[FLOOR_GEOM, 0].set(jnp.minimum(fr[FLOOR_GEOM, 0], mu))
    return sys.tree_replace({
        "link.inertia.mass": mass,
        "link.inertia.i": sys.link.inertia.i * (mass / mass0)[:, None, None],
        "geom_friction": fr,
        "actuator.gear": jnp.full_like(sys.actuator.gear, v["gear"]),
        "gravity": sys.gravity.at[2].set(-v["gravity"]),
        "dof.damping": sys.dof.damping.at[jnp.array(HINGES)].set(v["joint_damping"]),
    })


def build_level(v: Mapping[str, jax.Array]) -> Any:
    """Drawn values -> the variant's brax ``System``."""
    return hopper_system(v)




BraxHopperLevel = level_class("BraxHopper", PARAMS, __name__)
FAMILY = Family(
    name="brax:hopper", gym_id=f"brax {ENV} ({BACKEND})", raw=partial(BraxRaw, ENV), params=PARAMS,
    build=build_level, level_cls=BraxHopperLevel, outcomes=OUTCOMES,
    cause=constant_cause(OUTCOMES, "fall"), horizon=HORIZON, success_threshold=3800.0,
    return_range=(0.0, 4000.0), worst_reward=-10.0, continuous=True, action_bound=1.0, action_dim=3,
    notes="brax 0.14.2, generalized backend; three motors (actions [3]); the torso's inertia "
          "scales with its mass; friction is the foot-ground contact's; success: return >= 3800 "
          "(gymnasium Hopper's threshold, same reward and step).")
BraxHopperConfig = range_config_class("BraxHopper", PARAMS, __name__)


def make_env() -> ControlEnv:
    """brax's hopper as a physics family (imports brax)."""
    return ControlEnv(FAMILY, BraxHopperConfig)
