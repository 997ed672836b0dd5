"""Count XLA compilations, to prove that new configs or variants never recompile.

`count_compiles()` is a context manager whose `.n` is the number of backend compilations
inside it (every jit cache miss anywhere in the process compiles once; a cache hit does not).
It listens to JAX's monitoring event for lowering a program to XLA, which every jit cache
miss emits (in a nested jit or an eager op too) *before* the persistent compilation cache is
consulted, so a miss served from that disk cache still counts.
"""

from __future__ import annotations

from types import TracebackType

import jax

_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_active: list[count_compiles] = []
_registered = False


def _listener(event: str, duration: float, **kwargs: object) -> None:
    if event == _EVENT:
        for c in _active:
            c.n += 1


class count_compiles:  # noqa: N801 (used as a context manager, like a function)
    """``with count_compiles() as c: ...`` then ``c.n``."""

    def __init__(self) -> None:
        self.n = 0

    def __enter__(self) -> count_compiles:
        global _registered
        if not _registered:
            jax.monitoring.register_event_duration_secs_listener(_listener)
            _registered = True
        _active.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _active.remove(self)
