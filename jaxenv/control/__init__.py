"""Classic-control physics families: gymnax tasks whose physics the engineer redesigns.

`make(name)` gives a family's environment (`jaxenv.control.family.ControlEnv`: config space
over physics distributions, `generate`, `reset_to_level`, episode metrics); `sets` holds the
frozen held-out and validation variants and their per-parameter breakdown. `CartPole` is the
plain gymnax CartPole with an editable config of its fixed physics (one variant per config).
"""

from jaxenv.control.cartpole import CartPole, make_cartpole_space
from jaxenv.control.family import ControlEnv, Family, Param
from jaxenv.control.registry import ALL_NAMES, BRAX_NAMES, NAMES, family, make

__all__ = ["ALL_NAMES", "BRAX_NAMES", "NAMES", "CartPole", "ControlEnv", "Family", "Param",
           "family", "make", "make_cartpole_space"]
