"""Python's builtins in converted code (``range``, ``enumerate``, ``zip``, ``len``, ``reversed``,
``min``, ``max``, ``any``, ``all``, ``sum``, ``sorted``), item assignments, ``in``, and what a ``for``
loop iterates over.

In converted code a traced bound gives a :class:`TracedRange`, which only a ``for`` consumes.
:func:`iteration_space` says how to loop over an object: a range, an array, ``enumerate`` of
either or ``zip`` with a traced member become one ``for_loop``; anything else is iterated by Python.
The reductions compute with JAX on traced values (the table is in docs/autograph.md).
``x[i] = v`` becomes ``x = ag__.set_item(x, i, v)``: ``.at[i].set`` on an array.

>>> space = iteration_space(range(2, 10, 3))
>>> (space.lower, space.upper, space.step, space.concrete)
(2, 10, 3, True)
>>> iteration_space([1, 2]) is None
True
"""

from __future__ import annotations

import copy
import functools
import operator
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler.specialize import trip_count
from ..errors import AutoGraphError
from ..jax_extras import Tracer, is_tracing
from .state import at, innermost_user_line, recording_operators

class TracedRange:
    """``range(start, stop, step)`` with a traced bound: iterable by a converted ``for`` only."""

    def __init__(self, start: Any, stop: Any, step: Any):
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self):
        raise AutoGraphError(
            f"range() with a traced bound{at(innermost_user_line())} can only be iterated by a `for` "
            "statement (which becomes a for_loop); its elements are not known while tracing."
        )

    def __repr__(self) -> str:
        return f"TracedRange({self.start}, {self.stop}, {self.step})"

    def values(self) -> Any:
        """Its elements as a 1-D array of run-time length (what ``sum``/``min``/... reduce)."""
        count = trip_count(self.start, self.stop, self.step)
        return self.start + self.step * jnp.arange(count)


@dataclass
class Zipped:
    """``zip(...)`` of arrays and ranges, one of them traced: a ``for`` loops over it to the shortest."""

    iterables: tuple

    def __iter__(self):
        return iter(zip(*self.iterables))


@dataclass
class Enumerated:
    """``enumerate(x, start)`` of an array or a range: a converted ``for`` loops over it."""

    iterable: Any
    start: Any = 0

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
    if isinstance(iterable, (list, tuple)) and compiles_lists():
        iterable = strict_iteration_array(iterable, innermost_user_line())
    if isinstance(iterable, (range, TracedRange, Zipped)) or _is_array(iterable):
        return Enumerated(iterable, start)
    return enumerate(iterable, start)


def strict_conversion() -> bool:
    """``catalyst_lite.autograph_strict_conversion``: no loop may run in Python while tracing."""
    return sys.modules["catalyst_lite"].autograph_strict_conversion


def compiles_lists() -> bool:
    """Whether a ``for`` over a list is compiled: under strict conversion, while tracing, but not where
    PennyLane records operations (:func:`~.state.recording_operators`: every loop runs in Python)."""
    return strict_conversion() and is_tracing() and not recording_operators()


def strict_iteration_array(iterable: Any, where: Any) -> Any:
    """What a ``for`` iterates under strict conversion when it is not a range or an array (a list of
    numbers): the array of its items, as Catalyst converts it, or an :class:`AutoGraphError`."""
    try:
        if not isinstance(iterable, (list, tuple)) or any(
            isinstance(v, (str, bytes)) for v in jax.tree.leaves(iterable)  # (NumPy reads "a" as a dtype)
        ):
            raise TypeError(f"{type(iterable).__name__} of non-numbers")
        return jnp.asarray(iterable)
    except (TypeError, ValueError) as error:
        raise AutoGraphError(
            f"Could not convert the iteration target {iterable!r} to array{at(where)}: with "
            "autograph_strict_conversion, a `for` loop is compiled over an array or a range, and "
            "never runs in Python while tracing. Iterate over an array (or set "
            "catalyst_lite.autograph_strict_conversion = False)."
        ) from error


def zip_(*iterables: Any, **kwargs: Any) -> Any:
    """``zip(...)``: of arrays and ranges one of which is traced, a loop a ``for`` statement can
    compile (a Python ``zip`` could not iterate a traced range or an array of run-time length)."""
    if iterables and not kwargs:
        spaces = [iteration_space(i) for i in iterables]
        if all(s is not None for s in spaces) and not all(s.concrete for s in spaces):
            return Zipped(iterables)
    return zip(*iterables, **kwargs)


def len_(obj: Any) -> Any:
    """``len(...)``: an array's first size even when known only at run time; a traced range's length."""
    if isinstance(obj, Tracer) and np.ndim(obj) > 0:
        return obj.shape[0]
    if isinstance(obj, TracedRange):
        return trip_count(obj.start, obj.stop, obj.step)
    return len(obj)


def reversed_(seq: Any) -> Any:
    """``reversed(...)`` of a traced range (still a compiled loop) or of a traced array."""
    if isinstance(seq, TracedRange):
        start, step = seq.start, seq.step
        count = trip_count(start, seq.stop, step)
        return TracedRange(start + (count - 1) * step, start - step, -step)
    if isinstance(seq, Tracer) and np.ndim(seq) > 0:
        return jnp.flip(seq, 0)
    return reversed(seq)


def _reduction(python: Callable, array_fn: Callable, pairwise: Callable, initial: Any = None) -> Callable:
    """``min``/``max``/``any``/``all`` of traced values, which Python's cannot compare one at a time:
    the same reduction by JAX (over a 1-D array, or pairwise over numbers, from ``initial``)."""

    decided = {any: bool, all: operator.not_}.get(python, lambda v: False)

    def reduce(*args: Any, **kwargs: Any) -> Any:
        items = args[0] if len(args) == 1 else args
        if isinstance(items, TracedRange) and not kwargs:
            items = items.values()
        if isinstance(items, Iterator) and not kwargs:  # a generator: its items, as Python reads them
            items = _items_until_traced(items, decided)
            args = (items,)
        if kwargs or not args:
            return python(*args, **kwargs)
        if isinstance(items, Tracer) and np.ndim(items) == 1:
            return array_fn(items)
        if isinstance(items, (list, tuple)) and items and any(isinstance(v, Tracer) for v in items):
            if all(np.ndim(v) == 0 for v in items):
                return functools.reduce(pairwise, items if initial is None else [initial, *items])
        return python(*args, **kwargs)

    reduce.__name__ = python.__name__ + "_"
    return reduce


def _items_until_traced(items: Iterator[Any], decided: Callable[[Any], bool]) -> list[Any]:
    """The items of an iterator that Python's reduction reads while they are concrete (``any``
    stops at a true one: ``decided``), and all the rest once one is traced (its truth is unknown)."""
    seen = []
    for v in items:
        seen.append(v)
        if isinstance(v, Tracer):
            return seen + list(items)
        if decided(v):
            break
    return seen


min_ = _reduction(min, jnp.min, jnp.minimum)
max_ = _reduction(max, jnp.max, jnp.maximum)
any_ = _reduction(any, jnp.any, lambda a, b: jnp.logical_or(a, jnp.asarray(b, bool)), False)
all_ = _reduction(all, jnp.all, lambda a, b: jnp.logical_and(a, jnp.asarray(b, bool)), True)


def sorted_(iterable: Any, /, **kwargs: Any) -> Any:
    """``sorted(...)`` of a traced 1-D array: ``jnp.sort`` (a list of its items when its length is
    known, as Python's), since Python's compares one pair of items at a time."""
    if not (isinstance(iterable, Tracer) and np.ndim(iterable) == 1) or set(kwargs) - {"reverse"}:
        return sorted(iterable, **kwargs)
    ordered = jnp.sort(iterable)
    ordered = jnp.flip(ordered) if kwargs.get("reverse") else ordered
    return list(ordered) if isinstance(ordered.shape[0], int) else ordered


def sum_(iterable: Any, /, start: Any = 0) -> Any:
    """``sum(...)``: ``jnp.sum`` over axis 0 of an array of run-time length (or of a traced range)."""
    if isinstance(iterable, TracedRange):
        iterable = iterable.values()
    if isinstance(iterable, Tracer) and np.ndim(iterable) > 0 and not isinstance(iterable.shape[0], int):
        return start + jnp.sum(iterable, axis=0)
    return sum(iterable, start)


def _is_scalar_array(x: Any) -> bool:
    return isinstance(x, (Tracer, jax.Array, np.ndarray)) and np.ndim(x) == 0


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


def iteration_space(iterable: Any) -> IterationSpace | None:
    """How a ``for`` statement compiles a loop over ``iterable``; ``None``: Python iterates it."""
    if isinstance(iterable, (range, TracedRange)):
        r = iterable
        return IterationSpace(r.start, r.stop, r.step, lambda i: i, isinstance(r, range), lambda: iter(r))
    if _is_array(iterable):
        x = iterable
        # a traced array of known length iterates in Python too (its rows are traced)
        concrete = isinstance(x.shape[0], int)
        return IterationSpace(0, x.shape[0], 1, lambda i: x[i], concrete, lambda: iter(x))
    if isinstance(iterable, Zipped):
        inner = [iteration_space(i) for i in iterable.iterables]
        shortest = min_([trip_count(s.lower, s.upper, s.step) for s in inner])  # (traced: jnp.minimum)

        def zipped_item(i: Any) -> Any:
            return tuple(s.item(s.lower + i * s.step if not _unit(s) else i) for s in inner)

        return IterationSpace(
            0, shortest, 1, zipped_item, all(s.concrete for s in inner),
            lambda: zip(*(s.python_items() for s in inner)),
        )
    if isinstance(iterable, Enumerated):
        inner, start = iteration_space(iterable.iterable), iterable.start
        return IterationSpace(
            inner.lower, inner.upper, inner.step, lambda i: (_count(i, inner, start), inner.item(i)),
            inner.concrete, lambda: enumerate(inner.python_items(), start),
        )
    return None


def _unit(space: IterationSpace) -> bool:
    """Whether the loop index of ``space`` counts 0, 1, 2... (no arithmetic needed)."""
    lower, step = space.lower, space.step
    return isinstance(lower, int) and lower == 0 and isinstance(step, int) and step == 1


def _count(i: Any, space: IterationSpace, start: Any) -> Any:
    """``enumerate``'s count at loop index ``i`` (no arithmetic when it is the index itself)."""
    position = i if _unit(space) else (i - space.lower) // space.step
    return position if isinstance(start, int) and start == 0 else position + start


BUILTINS: dict[Any, Callable] = {
    range: range_, enumerate: enumerate_, zip: zip_, len: len_, reversed: reversed_,
    min: min_, max: max_, any: any_, all: all_, sum: sum_, sorted: sorted_,
}
"""Python's builtins that converted code calls in these versions instead."""


def contains(container: Any, item: Any) -> Any:
    """``item in container``: Python's, but for a traced item or array, whose comparisons have no
    Python truth: ``any(item == e for e in container)`` computed by JAX over a 1-D array, a range
    or a list, tuple, set or dict (its keys) of numbers or scalar arrays (a traced boolean)."""
    traced = isinstance(item, Tracer) or isinstance(container, (Tracer, TracedRange)) or (
        isinstance(container, (list, tuple)) and any(isinstance(e, Tracer) for e in container)
    )
    if not traced or np.ndim(item) != 0:
        return item in container
    if isinstance(container, (range, TracedRange)):
        offset, count = item - container.start, trip_count(container.start, container.stop, container.step)
        index = offset // container.step
        return (offset % container.step == 0) & (index >= 0) & (index < count)
    if _is_array(container) and np.ndim(container) == 1:
        return jnp.any(jnp.asarray(container) == item)
    if isinstance(container, (list, tuple, set, frozenset, dict)) and all(
        isinstance(e, (bool, int, float, complex, np.generic)) or _is_scalar_array(e) for e in container
    ):
        return functools.reduce(jnp.logical_or, [item == e for e in container], jnp.asarray(False))
    return item in container


def set_item(target: Any, key: Any, value: Any) -> Any:
    """``target[key] = value``, returning the updated ``target`` (a new array for JAX arrays)."""
    if isinstance(target, (Tracer, jax.Array)):
        return target.at[key].set(value)
    if any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves((value, key))):
        if isinstance(target, np.ndarray):
            return jnp.asarray(target).at[key].set(value)
        if isinstance(target, (list, dict)):
            # A traced value belongs to a branch or an iteration being traced: a copy, assigned
            # to the variable, flows out of the compiled block (the original is its start value).
            target = copy.copy(target)
    target[key] = value
    return target


def update_item(target: Any, key: Any, value: Any, op: str) -> Any:
    """``target[key] op= value``, returning the updated ``target``. ``/=`` on an integer array
    gives a float array, as JAX's ``x.at[key].divide(value)`` does (Catalyst's meaning of it)."""
    new = getattr(operator, f"i{op}")(target[key], value)
    if op == "truediv" and isinstance(target, (Tracer, jax.Array)):
        target = target.astype(jnp.result_type(target, new))
    return set_item(target, key, new)
