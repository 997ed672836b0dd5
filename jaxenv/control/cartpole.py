"""CartPole-v1 (gymnax's physics) with its parameters as an engineer-editable `ConfigSpace`.

gymnax's `EnvParams` already is a pytree; this module makes every field a float32/int32 array
(a Python float in one call and an array in the next would cost a compile) and exposes the
physical knobs (gravity, cart and pole mass, pole half-length, push force) with bounds and
descriptions. The derived fields `total_mass` and `polemass_length` are computed from the knobs
when a config is built, so an edited mass or length never leaves the physics inconsistent.
The integration step, failure thresholds and episode limit are the task's rules: fixed.

`CartPole()` is gymnax's environment with this space and these params; `policy.make_train`
trains it as the one-agent case of the multi-agent protocol (`jaxenv.wrappers.SingleAgent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
from gymnax.environments.classic_control import cartpole

from jaxenv.config_space import ConfigSpace, Knob

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
