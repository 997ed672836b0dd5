"""CartPole-v1 (gymnax's physics) with its parameters as an engineer-editable `ConfigSpace`.

gymnax's `EnvParams` already is a pytree; this module makes every field a float32/int32 array
(a Python float in one call and an array in the next would cost a compile) and exposes the
physical knobs (gravity, cart and pole mass, pole half-length, push force) with bounds and
descriptions. The derived fields `total_mass` and `polemass_length` are computed from the knobs
when a config is built, so an edited mass or length never leaves the physics inconsistent.
The integration step, failure thresholds and episode limit are the task's rules: fixed.

`CartPole()` is gymnax's environment with this space and these params; `policy.make_train`
trains it as the one-agent case of the multi-agent protocol (`jaxenv.wrappers.SingleAgent`).

`FAMILY` is CartPole as a physics family (`jaxenv.control.family`): the engineer edits a
*distribution* over the same physical parameters and every episode runs one drawn variant;
`jaxenv.control.make("cartpole")` builds its environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control import cartpole

from jaxenv.config_space import ConfigSpace, Knob
from jaxenv.control.family import (
    NONFINITE,
    TIME_LIMIT,
    ControlEnv,
    Family,
    Param,
    level_class,
    range_config_class,
)

THETA_THRESHOLD = 12 * 2 * 3.141592653589793 / 360


def make_cartpole_space() -> ConfigSpace:
    """The knob space of CartPole-v1 (defaults: gymnax's / gym's CartPole-v1)."""
    knobs = [
        Knob(name="gravity", kind="float", low=4.0, high=20.0, step=0.5, default=9.8,
             description="Gravitational acceleration (m/s^2)."),
        Knob(name="masscart", kind="float", low=0.25, high=3.0, step=0.05, default=1.0,
             description="Mass of the cart (kg)."),
        Knob(name="masspole", kind="float", low=0.02, high=1.0, step=0.02, default=0.1,
             description="Mass of the pole (kg)."),
        Knob(name="length", kind="float", low=0.1, high=2.0, step=0.05, default=0.5,
             description="Half the pole's length (m)."),
        Knob(name="force_mag", kind="float", low=2.0, high=30.0, step=0.5, default=10.0,
             description="Force of one push left or right (N)."),
        Knob(name="tau", kind="float", low=0.005, high=0.05, step=0.005, default=0.02,
             editable=False, description="Seconds between state updates (Euler step)."),
        Knob(name="max_steps_in_episode", kind="int", low=1, high=10_000, step=1, default=500,
             editable=False, description="Episode limit in steps (the task's horizon)."),
    ]
    return ConfigSpace(knobs, _build)


def _build(enc: Mapping[str, Any]) -> cartpole.EnvParams:
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return cartpole.EnvParams(
        gravity=f32(enc["gravity"]), masscart=f32(enc["masscart"]),
        masspole=f32(enc["masspole"]), total_mass=f32(enc["masscart"] + enc["masspole"]),
        length=f32(enc["length"]), polemass_length=f32(enc["masspole"] * enc["length"]),
        force_mag=f32(enc["force_mag"]), tau=f32(enc["tau"]),
        theta_threshold_radians=f32(THETA_THRESHOLD), x_threshold=f32(2.4),
        max_steps_in_episode=jnp.asarray(enc["max_steps_in_episode"], jnp.int32))


class CartPole(cartpole.CartPole):
    """gymnax's CartPole-v1 whose params come from `config_space` (all arrays)."""

    def __init__(self) -> None:
        super().__init__()
        self.config_space = make_cartpole_space()

    @property
    def default_params(self) -> cartpole.EnvParams:
        return self.config_space.to_config()


# ------------------------------------------------------------------------ the family

HORIZON = 500  # the task's episode limit (a rule)
PARAMS = (
    Param("gravity", "m/s^2", "Gravitational acceleration.", 9.8, 4.0, 20.0, 0.2),
    Param("masscart", "kg", "Mass of the cart.", 1.0, 0.25, 3.0, 0.05),
    Param("masspole", "kg", "Mass of the pole.", 0.1, 0.02, 1.0, 0.01),
    Param("length", "m", "Half the pole's length.", 0.5, 0.1, 2.0, 0.05),
    Param("force_mag", "N", "Force of one push left or right.", 10.0, 2.0, 30.0, 0.5),
)
OUTCOMES = (TIME_LIMIT, "angle", "position", NONFINITE)


def build_level(v: Mapping[str, jax.Array]) -> cartpole.EnvParams:
    """Drawn values -> CartPole's params, derived masses computed, rules fixed (gym's)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return cartpole.EnvParams(
        gravity=f32(v["gravity"]), masscart=f32(v["masscart"]), masspole=f32(v["masspole"]),
        total_mass=f32(v["masscart"] + v["masspole"]), length=f32(v["length"]),
        polemass_length=f32(v["masspole"] * v["length"]), force_mag=f32(v["force_mag"]),
        tau=f32(0.02), theta_threshold_radians=f32(THETA_THRESHOLD), x_threshold=f32(2.4),
        max_steps_in_episode=jnp.int32(HORIZON))


def _cause(state: cartpole.EnvState, p: cartpole.EnvParams) -> jax.Array:
    angle = jnp.abs(state.theta) > p.theta_threshold_radians
    return jnp.where(angle, OUTCOMES.index("angle"), OUTCOMES.index("position"))


CartPoleLevel = level_class("CartPole", PARAMS, __name__)
FAMILY = Family(
    name="cartpole", gym_id="CartPole-v1", raw=cartpole.CartPole, params=PARAMS,
    build=build_level, level_cls=CartPoleLevel, outcomes=OUTCOMES, cause=_cause, horizon=HORIZON,
    success_threshold=475.0, return_range=(0.0, 500.0), worst_reward=0.0,
    notes="Euler step 0.02 s, fail beyond 12 degrees or 2.4 m, 500 steps: gym's rules.")
CartPoleConfig = range_config_class("CartPole", PARAMS, __name__)


def make_env() -> ControlEnv:
    """CartPole-v1 as a physics family."""
    return ControlEnv(FAMILY, CartPoleConfig)
