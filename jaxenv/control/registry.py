"""The physics families by name: `make("cartpole")` -> its environment (space, levels, metrics).

Names: ``cartpole`` (CartPole-v1), ``acrobot`` (Acrobot-v1), ``mountaincar`` (MountainCar-v0),
``pendulum`` (Pendulum-v1) (`NAMES`: gymnax, always available), ``brax:inverted_pendulum``,
``brax:inverted_double_pendulum`` and ``brax:hopper`` (`BRAX_NAMES`: need ``brax``, imported
when the env is made). An environment is built once
per name and reused, so jitted functions keyed on it (trainers, evaluators) compile once. Its
frozen held-out and validation sets: `jaxenv.control.sets.load_set(name, split)`.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxenv.control import (
    acrobot,
    brax_double_pendulum,
    brax_hopper,
    brax_pendulum,
    cartpole,
    mountain_car,
    pendulum,
)
from jaxenv.control.family import ControlEnv, Family

_MAKERS: dict[str, tuple[Family, Callable[[], ControlEnv]]] = {
    m.FAMILY.name: (m.FAMILY, m.make_env)
    for m in (cartpole, acrobot, mountain_car, pendulum, brax_pendulum, brax_double_pendulum,
              brax_hopper)
}
ALL_NAMES: tuple[str, ...] = tuple(_MAKERS)
BRAX_NAMES: tuple[str, ...] = tuple(n for n in ALL_NAMES if n.startswith("brax:"))
NAMES: tuple[str, ...] = tuple(n for n in ALL_NAMES if n not in BRAX_NAMES)
_ENVS: dict[str, ControlEnv] = {}


def family(name: str) -> Family:
    """The static description of a family (parameters, outcomes, thresholds)."""
    return _MAKERS[_check(name)][0]


def make(name: str) -> ControlEnv:
    """The environment of a family (one shared instance per name)."""
    name = _check(name)
    if name not in _ENVS:
        _ENVS[name] = _MAKERS[name][1]()
    return _ENVS[name]


def _check(name: str) -> str:
    if not isinstance(name, str) or name.lower() not in _MAKERS:
        raise ValueError(f"unknown control family {name!r} (known: {', '.join(ALL_NAMES)})")
    return name.lower()
