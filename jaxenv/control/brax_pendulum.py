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
failure beyond 0.2 rad, 1,000 steps, reward 1 per step. The time step is no knob: x1.3 already
gave NaN within 50 steps (the issue's finding); the non-finite guard covers what remains.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from jaxenv.control.family import (
    NONFINITE,
    TIME_LIMIT,
    ControlEnv,
    Family,
    Param,
    level_class,
    range_config_class,
)

BACKEND = "generalized"
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


@functools.cache
def _brax_env() -> Any:
    from brax import envs

    return envs.get_environment("inverted_pendulum", backend=BACKEND)


@struct.dataclass
class BraxRawState:
    """A brax env's state in gymnax's shape (time counted here, as gymnax envs do)."""

    pipeline_state: Any
    obs: jax.Array
    time: jax.Array


class BraxRaw:
    """brax's inverted pendulum as a gymnax-shaped raw env whose params are a brax ``System``:
    each call runs brax's own ``reset`` / ``step`` on a copy of the env holding that system."""

    num_actions = 1

    def __init__(self) -> None:
        self.env = _brax_env()

    @property
    def default_params(self) -> Any:
        return self.env.sys

    def _with(self, sys: Any) -> Any:
        env = copy.copy(self.env)
        env.sys = sys
        return env

    def reset_env(self, key: jax.Array, sys: Any) -> tuple[jax.Array, BraxRawState]:
        st = self._with(sys).reset(key)
        return st.obs, BraxRawState(st.pipeline_state, st.obs, jnp.int32(0))

    def step_env(self, key: jax.Array, state: BraxRawState, action: jax.Array, sys: Any):
        from brax.envs.base import State

        zero = jnp.float32(0.0)
        st = State(pipeline_state=state.pipeline_state, obs=state.obs, reward=zero, done=zero,
                   metrics={}, info={"time_out": zero})
        st = self._with(sys).step(st, jnp.reshape(action, (1,)))
        new = BraxRawState(st.pipeline_state, st.obs, state.time + 1)
        return st.obs, new, jnp.asarray(st.reward, jnp.float32), st.done > 0, {}

    def get_obs(self, state: BraxRawState) -> jax.Array:
        return state.obs

    def observation_space(self, params: Any) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (4,), jnp.float32)


def build_level(v: Mapping[str, jax.Array]) -> Any:
    """Drawn values -> the variant's brax ``System`` (inertia tensors scaled with the masses)."""
    sys = _brax_env().sys
    mass0 = sys.link.inertia.mass
    mass = mass0.at[POLE].set(v["pole_mass"]).at[CART].set(v["cart_mass"])
    inertia = sys.link.inertia.i * (mass / mass0)[:, None, None]
    return sys.tree_replace({
        "link.inertia.mass": mass,
        "link.inertia.i": inertia,
        "actuator.gear": sys.actuator.gear.at[0].set(v["gear"]),
        "gravity": jnp.stack([jnp.float32(0), jnp.float32(0), -v["gravity"]]),
        "dof.damping": sys.dof.damping.at[POLE].set(v["hinge_damping"]),
    })


def _cause(state: BraxRawState, sys: Any) -> jax.Array:
    return jnp.int32(OUTCOMES.index("angle"))


def _raw() -> BraxRaw:
    return BraxRaw()


BraxInvertedPendulumLevel = level_class("BraxInvertedPendulum", PARAMS, __name__)
FAMILY = Family(
    name="brax:inverted_pendulum", gym_id=f"brax inverted_pendulum ({BACKEND})", raw=_raw,
    params=PARAMS, build=build_level, level_cls=BraxInvertedPendulumLevel, outcomes=OUTCOMES,
    cause=_cause, horizon=HORIZON, success_threshold=950.0, return_range=(0.0, 1000.0),
    worst_reward=0.0, continuous=True, action_bound=1.0,
    notes="brax 0.14.2, generalized backend; inertia scales with mass; success: return >= 950 "
          "(gymnasium InvertedPendulum's threshold).")
BraxInvertedPendulumConfig = range_config_class("BraxInvertedPendulum", PARAMS, __name__)


def make_env() -> ControlEnv:
    """brax's inverted pendulum as a physics family (imports brax)."""
    return ControlEnv(FAMILY, BraxInvertedPendulumConfig)
