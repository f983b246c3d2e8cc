"""Lowering programs with many scalar constants in linear time (a repair for JAX 0.7.2).

JAX 0.7.2 stages NumPy scalars (a circuit's rotation angles, masks and matrix entries) as
``LiteralArray`` literals, and its lowering deduplicates literals in a dictionary keyed by
``mlir.HashableLiteral``, which gives every ``LiteralArray`` the same hash and no comparable data:
each literal is compared with all earlier ones, so a program with ``k`` scalar constants lowers in
time quadratic in ``k`` (seconds for a few thousand). Within :func:`literals_by_value`, the calling
thread's lowerings key such literals by their bytes instead (literals equal in value and type then
share one constant, as NumPy literals already do). Other threads, and JAX outside the block, are
unaffected; JAX 0.7.1 has no ``LiteralArray`` and needs nothing.

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


_BY_VALUE = PatchSet(
    [
        Patch(
            "literals_by_value",
            mlir.HashableLiteral,
            "__init__",
            _make_init_by_value,
            "LiteralArray literals are deduplicated by value, in linear time",
        )
    ]
    if LiteralArray is not None
    else []
)


def literals_by_value() -> contextlib.AbstractContextManager[None]:
    """Lowerings in the calling thread key ``LiteralArray`` literals by value during the block
    (re-entrant; the replacement is installed while some thread is inside)."""
    return _BY_VALUE.scope()
