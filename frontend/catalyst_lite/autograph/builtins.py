"""``range``, ``enumerate`` and ``len`` in converted code, and what a ``for`` loop iterates over.

Python's ``range(n)`` needs a concrete ``n``; in converted code a traced bound gives a
:class:`TracedRange` instead, which only a ``for`` statement consumes. :func:`iteration_space`
tells the ``for`` overload how to loop over an object: a range (concrete or traced) becomes a
``for_loop`` over the same bounds; an array, a ``for_loop`` over its rows; ``enumerate`` of either,
the same loop yielding ``(count, item)``. Anything else (lists, tuples, dicts, generators, ``zip``)
is iterated by Python, as in plain Python: unrolled while tracing.

>>> space = iteration_space(range(2, 10, 3))
>>> (space.lower, space.upper, space.step, space.concrete)
(2, 10, 3, True)
>>> iteration_space([1, 2]) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import jax
import numpy as np

from ..errors import AutoGraphError
from ..jax_extras import Tracer
from .state import at, user_location

__all__ = ["TracedRange", "Enumerated", "IterationSpace", "iteration_space", "range_", "enumerate_", "len_"]


class TracedRange:
    """``range(start, stop, step)`` with a traced bound: iterable by a converted ``for`` only."""

    def __init__(self, start: Any, stop: Any, step: Any):
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self):
        raise AutoGraphError(
            f"range() with a traced bound{at(user_location())} can only be iterated by a `for` "
            "statement (which becomes a for_loop); its elements are not known while tracing."
        )

    def __repr__(self) -> str:
        return f"TracedRange({self.start}, {self.stop}, {self.step})"


class Enumerated:
    """``enumerate(x, start)`` of an array or a range: a converted ``for`` loops over it."""

    def __init__(self, iterable: Any, start: Any = 0):
        self.iterable, self.start = iterable, start

    def __iter__(self):
        return iter(enumerate(self.iterable, self.start))


def range_(*args: Any) -> range | TracedRange:
    """``range(...)``: Python's when every bound is concrete."""
    if not any(isinstance(a, Tracer) for a in args):
        return range(*args)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected at most 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    return TracedRange(start, stop, step)


def enumerate_(iterable: Any, start: Any = 0) -> Any:
    """``enumerate(...)``: of an array or a range, a loop a ``for`` statement can compile."""
    if isinstance(iterable, (range, TracedRange)) or _is_array(iterable):
        return Enumerated(iterable, start)
    return enumerate(iterable, start)


def len_(obj: Any) -> Any:
    """``len(...)``: an array's first size even when it is known only at run time."""
    if isinstance(obj, Tracer) and np.ndim(obj) > 0:
        return obj.shape[0]
    return len(obj)


def _is_array(x: Any) -> bool:
    return isinstance(x, (Tracer, jax.Array, np.ndarray)) and np.ndim(x) > 0


@dataclass(frozen=True)
class IterationSpace:
    """What a ``for`` statement loops over as a ``for_loop``: ``range(lower, upper, step)``, the
    element for index ``i``, and whether Python could iterate it as well (every bound known)."""

    lower: Any
    upper: Any
    step: Any
    item: Callable[[Any], Any]
    concrete: bool
    python_items: Callable[[], Iterable[Any]]


def _identity(i: Any) -> Any:
    return i


def iteration_space(iterable: Any) -> IterationSpace | None:
    """How a ``for`` statement compiles a loop over ``iterable``; ``None``: Python iterates it."""
    if isinstance(iterable, range):
        r = iterable
        return IterationSpace(r.start, r.stop, r.step, _identity, True, lambda: r)
    if isinstance(iterable, TracedRange):
        r = iterable
        return IterationSpace(r.start, r.stop, r.step, _identity, False, lambda: iter(r))
    if _is_array(iterable):
        x = iterable
        concrete = not isinstance(x, Tracer)
        return IterationSpace(0, x.shape[0], 1, lambda i: x[i], concrete, lambda: iter(x))
    if isinstance(iterable, Enumerated):
        inner, start = iteration_space(iterable.iterable), iterable.start

        def item(i: Any) -> Any:
            return (_count(i, inner, start), inner.item(i))

        return IterationSpace(
            inner.lower, inner.upper, inner.step, item, inner.concrete,
            lambda: enumerate(inner.python_items(), start),
        )
    return None


def _count(i: Any, space: IterationSpace, start: Any) -> Any:
    """``enumerate``'s count at loop index ``i`` (no arithmetic when it is the index itself)."""
    unit = isinstance(space.lower, int) and space.lower == 0 and isinstance(space.step, int) and space.step == 1
    position = i if unit else (i - space.lower) // space.step
    return position if isinstance(start, int) and start == 0 else position + start
