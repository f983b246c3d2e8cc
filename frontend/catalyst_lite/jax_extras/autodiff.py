"""What catalyst_lite needs to know about JAX's automatic differentiation: JAX 0.7 differentiates in
reverse mode by *linearizing* (a ``LinearizeTrace``), so such a tracer among a program's arguments
means "this run will be transposed" (a loop of unknown trip count must record its iterations).

>>> import jax
>>> seen = []
>>> _ = jax.grad(lambda x: seen.append(is_reverse_mode_value(x)) or x * 2.0)(1.0)
>>> _ = jax.jvp(lambda x: seen.append(is_reverse_mode_value(x)) or x * 2.0, (1.0,), (1.0,))
>>> seen
[True, False]
"""

from __future__ import annotations

from typing import Any

from jax._src import core
from jax._src.interpreters import ad

__all__ = ["is_reverse_mode_value", "is_concrete_value"]


def is_reverse_mode_value(x: Any) -> bool:
    """True when ``x`` is traced by reverse-mode differentiation (its parent traces walked)."""
    if not isinstance(x, core.Tracer):
        return False
    trace = getattr(x, "_trace", None)
    while trace is not None:
        if isinstance(trace, ad.LinearizeTrace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def is_concrete_value(x: Any) -> bool:
    """True when ``x`` has a value known now (not a ``jax.jit`` tracer)."""
    return not isinstance(x, core.Tracer) or core.is_concrete(x)
