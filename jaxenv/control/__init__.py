"""Classic-control environments whose physics parameters are a config pytree (gymnax's)."""

from jaxenv.control.cartpole import CartPole, make_cartpole_space

__all__ = ["CartPole", "make_cartpole_space"]
