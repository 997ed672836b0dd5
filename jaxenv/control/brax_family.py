"""brax environments in gymnax's shape, with a brax ``System`` as their params.

Shared by the brax physics families (`jaxenv.control.brax_pendulum`,
`jaxenv.control.brax_double_pendulum`, `jaxenv.control.brax_hopper`). brax is imported only when
an env is first built.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

BACKEND = "generalized"


@functools.cache
def brax_env(name: str) -> Any:
    """brax's env `name` on the generalized backend (built once)."""
    from brax import envs

    return envs.get_environment(name, backend=BACKEND)


def cart_pole_system(name: str, v: Any, poles: tuple[int, ...], cart: int) -> Any:
    """The brax ``System`` of a cart-pole variant (brax's inverted pendulums, one or two poles):
    drawn ``pole_mass`` (every pole), ``cart_mass``, ``gear``, ``gravity`` and ``hinge_damping``
    (every pole's hinge) written into the fields the generalized backend reads, each link's
    inertia tensor scaled with its mass."""
    sys = brax_env(name).sys
    mass0, damping = sys.link.inertia.mass, sys.dof.damping
    mass = mass0.at[cart].set(v["cart_mass"])
    for pole in poles:
        mass = mass.at[pole].set(v["pole_mass"])
        damping = damping.at[pole].set(v["hinge_damping"])
    return sys.tree_replace({
        "link.inertia.mass": mass,
        "link.inertia.i": sys.link.inertia.i * (mass / mass0)[:, None, None],
        "actuator.gear": sys.actuator.gear.at[0].set(v["gear"]),
        "gravity": sys.gravity.at[2].set(-v["gravity"]),
        "dof.damping": damping,
    })


@struct.dataclass
class BraxRawState:
    """A brax env's state in gymnax's shape (time counted here, as gymnax envs do)."""

    pipeline_state: Any
    obs: jax.Array
    time: jax.Array


class BraxRaw:
    """A brax env as a gymnax-shaped raw env whose params are a brax ``System``: each call runs
    brax's own ``reset`` / ``step`` on a copy of the env holding that system."""

    def __init__(self, name: str) -> None:
        self.env = brax_env(name)
        self.num_actions = int(self.env.action_size)

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
        st = self._with(sys).step(st, jnp.reshape(action, (self.num_actions,)))
        new = BraxRawState(st.pipeline_state, st.obs, state.time + 1)
        return st.obs, new, jnp.asarray(st.reward, jnp.float32), st.done > 0, {}

    def finite_parts(self, state: BraxRawState) -> tuple[jax.Array, ...]:
        """What `ControlEnv`'s non-finite guard checks: the generalized state's ``q`` and
        ``qd`` and the observation (the reward is checked too).

        Every other field of the pipeline state (``x``, ``xd``, com, mass matrix and its
        inverse, constraint terms) is computed within the step from ``q``, ``qd`` and the
        system, and the next step integrates from them: a non-finite value there shows in
        ``q`` or ``qd`` one step later at the latest, and the observation and reward (all a
        trainee reads) are checked themselves. Checking the whole pipeline state cost about a
        tenth of a step on CPU."""
        return state.pipeline_state.q, state.pipeline_state.qd, state.obs

    def get_obs(self, state: BraxRawState) -> jax.Array:
        return state.obs

    def observation_space(self, params: Any) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (int(self.env.observation_size),), jnp.float32)
