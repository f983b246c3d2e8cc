"""Lowering programs with many scalar constants in linear time (a repair for JAX 0.7.2).

JAX 0.7.2 stages NumPy scalars (a circuit's angles) as ``LiteralArray`` literals, which its
lowering deduplicates by ``mlir.HashableLiteral``: one hash for all and no comparable data, so
``k`` scalar constants lower in time quadratic in ``k``. Within :func:`literals_by_value`, the
calling thread's lowerings key them by their bytes instead (JAX 0.7.1 needs nothing).

>>> with literals_by_value():
...     pass
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from jax._src.interpreters import mlir

from .patches import Patch, PatchSet

try:
    from jax._src.literals import LiteralArray
except ImportError:  # JAX 0.7.1
    LiteralArray = None


def _make_init_by_value(original: Callable[..., None]) -> Callable[..., None]:
    def init_by_value(self: Any, value: Any) -> None:
        original(self, value)
        if self.data is None and _BY_VALUE.active() and isinstance(value.val, LiteralArray):
            self.data = value.val.val.tobytes()  # equal bytes and (compared separately) equal avals

    return init_by_value


_BY_VALUE = PatchSet()
if LiteralArray is not None:
    _BY_VALUE.register(Patch("literals_by_value", mlir.HashableLiteral, "__init__", _make_init_by_value,
                             "LiteralArray literals are deduplicated by value, in linear time"))


def literals_by_value() -> contextlib.AbstractContextManager[None]:
    """Lowerings in the calling thread key ``LiteralArray`` literals by value during the block."""
    return _BY_VALUE.scope()
