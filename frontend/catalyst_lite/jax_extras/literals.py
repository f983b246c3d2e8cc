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
import threading
from typing import Any, Iterator

from jax._src.interpreters import mlir

try:
    from jax._src.literals import LiteralArray
except ImportError:  # JAX 0.7.1
    LiteralArray = None

__all__ = ["literals_by_value"]

_thread = threading.local()
_lock = threading.Lock()
_users = 0
_original_init: Any = None


def _init_by_value(self: Any, value: Any) -> None:
    _original_init(self, value)
    if self.data is None and getattr(_thread, "active", 0) and isinstance(value.val, LiteralArray):
        self.data = value.val.val.tobytes()  # equal bytes and (compared separately) equal avals


@contextlib.contextmanager
def literals_by_value() -> Iterator[None]:
    """Lowerings in the calling thread key ``LiteralArray`` literals by value during the block
    (re-entrant; the replacement is installed while some thread is inside)."""
    global _users, _original_init
    if LiteralArray is None:
        yield
        return
    with _lock:
        if _users == 0:
            _original_init = mlir.HashableLiteral.__init__
            mlir.HashableLiteral.__init__ = _init_by_value
        _users += 1
    _thread.active = getattr(_thread, "active", 0) + 1
    try:
        yield
    finally:
        _thread.active -= 1
        with _lock:
            _users -= 1
            if _users == 0:
                mlir.HashableLiteral.__init__ = _original_init
