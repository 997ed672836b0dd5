"""Brax's inverted double pendulum (``generalized`` backend) as a physics family.

The same construction as `jaxenv.control.brax_pendulum` (read its docstring for brax's status
and why the ``System`` is rebuilt inside the vmap): a level is five numbers, each a field the
generalized backend reads, each tested to change a trajectory. Both poles share one mass knob
and one hinge-damping knob (they are the same part twice); inertia tensors scale with masses.
Rules (brax's): time step 0.01 s x 2 substeps, actions in [-1, 1] times the gear, failure
when the tip falls to 1 m, reward 10 per step alive minus distance and velocity penalties,
1,000 steps. Success: return >= 9,100 (gymnasium InvertedDoublePendulum's threshold).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import jax

from jaxenv.control.brax_family import BACKEND, BraxRaw, cart_pole_system
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

ENV = "inverted_double_pendulum"
HORIZON = 1000
CART, POLE, POLE2 = 0, 1, 2  # link indices (cart, pole, pole2)
PARAMS = (
    Param("pole_mass", "kg", "Mass of each of the two poles (inertia scales with it).",
          4.1987386, 1.0, 16.0, 0.25),
    Param("cart_mass", "kg", "Mass of the cart (its inertia scales with it).", 10.471975, 2.5,
          42.0, 0.5),
    Param("gear", "N per unit control", "Gear of the cart's motor (force per unit action).",
          500.0, 125.0, 1000.0, 25.0),
    Param("gravity", "m/s^2", "Gravitational acceleration (downwards).", 9.81, 4.0, 20.0, 0.25),
    Param("hinge_damping", "N m s/rad", "Viscous damping of each of the two hinges.", 0.05,
          0.0125, 0.2, 0.0125),
)
OUTCOMES = (TIME_LIMIT, "fall", NONFINITE)


def build_level(v: Mapping[str, jax.Array]) -> Any:
    """Drawn values -> the variant's brax ``System`` (inertia tensors scaled with the masses)."""
    return cart_pole_system(ENV, v, poles=(POLE, POLE2), cart=CART)




BraxInvertedDoublePendulumLevel = level_class("BraxInvertedDoublePendulum", PARAMS, __name__)
FAMILY = Family(
    name="brax:inverted_double_pendulum", gym_id=f"brax {ENV} ({BACKEND})",
    raw=partial(BraxRaw, ENV), params=PARAMS, build=build_level,
    level_cls=BraxInvertedDoublePendulumLevel, outcomes=OUTCOMES,
    cause=constant_cause(OUTCOMES, "fall"), horizon=HORIZON, success_threshold=9100.0,
    return_range=(0.0, 10.0 * HORIZON), worst_reward=-10.0, continuous=True, action_bound=1.0,
    notes="brax 0.14.2, generalized backend; both poles share the mass and damping knobs.")
BraxInvertedDoublePendulumConfig = range_config_class("BraxInvertedDoublePendulum", PARAMS,
                                                      __name__)


def make_env() -> ControlEnv:
    """brax's inverted double pendulum as a physics family (imports brax)."""
    return ControlEnv(FAMILY, BraxInvertedDoublePendulumConfig)
