"""jaxenv: pure-JAX environments whose configuration is a pytree of arrays.

Heavy optional parts are imported lazily by the modules that need them; `import jaxenv`
pulls in jax, flax, gymnax and pydantic only.
"""

from jaxenv.config_space import Adjustment, ConfigError, ConfigSpace, Knob

__all__ = ["Adjustment", "ConfigError", "ConfigSpace", "Knob"]
