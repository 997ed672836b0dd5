"""Brax's inverted pendulum (``generalized`` backend) as a physics family (`jaxenv.control.family`).

Brax 0.14's README says only ``brax/training`` is still maintained: its environments and
pipelines are frozen, and MJX / MuJoCo Playground are their successors. For users this means
the family works with brax 0.14.2 as it is, but no upstream fix will come for its physics; a
successor family would rebuild MJX's ``mjx.Model`` fields (``body_mass``, ``actuator_gear``,
``opt.gravity``, ``dof_damping``) instead. brax is imported only when this family is built.

A level is five numbers; the variant's ``System`` is rebuilt from the standard one with
``sys.tree_replace`` inside each step (inside the vmap, so thousands of variants run in one
jit with no recompile; brax's own ``DomainRandomizationVmapWrapper`` holds its batch as a
constant, so new values would recompile). Fields are those the generalized backend reads
(each proven by a test to change a trajectory): the links' masses, the actuator's gear,
gravity and the hinge's damping. A link's inertia tensor scales with its mass (same shape,
denser material): a derived field, so an edited mass never leaves the dynamics inconsistent.
Rules (brax's): time step 0.02 s x 2 substeps, actions in [-1, 1] scaled to the control range,
failure beyond 0.2 rad, 1,000 steps, reward 1 per step. The time step is no knob: a slightly longer
step already diverges to NaN within an episode; the non-finite guard covers what remains.
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

ENV = "inverted_pendulum"
HORIZON = 1000
CART, POLE = 0, 1  # link indices (brax's inverted_pendulum.xml: cart, pole)
PARAMS = (
    Param("pole_mass", "kg", "Mass of the pole (its inertia scales with it).", 5.0185914, 1.25,
          20.0, 0.25),
    Param("cart_mass", "kg", "Mass of the cart (its inertia scales with it).", 10.471975, 2.5,
          42.0, 0.5),
    Param("gear", "N per unit control", "Gear of the cart's motor (force per unit action).",
          100.0, 25.0, 200.0, 5.0),
    Param("gravity", "m/s^2", "Gravitational acceleration (downwards).", 9.81, 4.0, 20.0, 0.25),
    Param("hinge_damping", "N m s/rad", "Viscous damping of the pole's hinge.", 1.0, 0.25, 4.0,
          0.25),
)
OUTCOMES = (TIME_LIMIT, "angle", NONFINITE)


def build_level(v: Mapping[str, jax.Array]) -> Any:
    """Drawn values -> the variant's brax ``System`` (inertia tensors scaled with the masses)."""
    return cart_pole_system(ENV, v, poles=(POLE,), cart=CART)




BraxInvertedPendulumLevel = level_class("BraxInvertedPendulum", PARAMS, __name__)
FAMILY = Family(
    name="brax:inverted_pendulum", gym_id=f"brax inverted_pendulum ({BACKEND})",
    raw=partial(BraxRaw, ENV), params=PARAMS, build=build_level,
    level_cls=BraxInvertedPendulumLevel, outcomes=OUTCOMES, cause=constant_cause(OUTCOMES, "angle"),
    horizon=HORIZON, success_threshold=950.0, return_range=(0.0, 1000.0), worst_reward=0.0,
    continuous=True, action_bound=1.0,
    notes="brax 0.14.2, generalized backend; inertia scales with mass; success: return >= 950 "
          "(gymnasium InvertedPendulum's threshold).")
BraxInvertedPendulumConfig = range_config_class("BraxInvertedPendulum", PARAMS, __name__)


def make_env() -> ControlEnv:
    """brax's inverted pendulum as a physics family (imports brax)."""
    return ControlEnv(FAMILY, BraxInvertedPendulumConfig)
