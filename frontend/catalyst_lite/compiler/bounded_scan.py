"""Reverse-mode loops with trip counts known only at run time, compiled as bounded scans.

JAX transposes a loop only when its trip count is static (a ``scan``). On the host, where the count
is a number, a ``for_loop`` with traced bounds or a ``while_loop`` becomes a ``lax.scan`` over the
count rounded up to a power of two, the steps beyond it ``lax.cond``'s identity branch: one
executable serves every count of its bucket, and results are ``jax.grad`` of ``lax.fori_loop``'s
with the count static, bit for bit. A ``while_loop`` first runs forward once to count.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit, for_loop, grad
>>> @qjit
... def g(x: float, n: int):
...     def f(x):
...         @for_loop(0, n, 1)
...         def step(i, a):
...             return a * 0.5 + x
...         return step(x)
...     return grad(f)(x)
>>> float(g(1.0, 3))
1.875
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from .capacity import capacity_for
from .inspection import LoopInfo
from .specialize import Mode, NeedsHost, dimension_inputs, eval_jaxpr, kept_by_program

__all__ = ["BoundedScan", "bounded_scan"]


class BoundedScan:
    """A loop body (``*consts *implicit *prefix *carried -> *implicit *carried``, the implicit
    sizes unchanged) run for a count known at run time, as a scan over the count's capacity
    bucket; compiled once per bucket (and per value of the inputs that size the body).
    ``predicate``: a ``while_loop``'s (``*pred_consts *implicit *carried -> bool[]``)."""

    def __init__(self, body: Any, nconsts: int, nimplicit: int, predicate: Any = None, pred_nconsts: int = 0):
        self.body, self.nconsts, self.nimplicit = body, nconsts, nimplicit
        self.predicate, self.pred_nconsts = predicate, pred_nconsts
        # Sizes are static: the implicit ones, and the constants that size the body.
        self.static = tuple(sorted({k for k in dimension_inputs(body) if k < nconsts} | {*range(nconsts, nconsts + nimplicit)}))
        self.pred_static = tuple(sorted(dimension_inputs(predicate))) if predicate is not None else ()
        self._compiled: dict[tuple, Callable] = {}
        self._lock = threading.Lock()
        self.unsupported = False

    def _jitted(self, key: tuple, make: Callable[[], Callable]) -> Callable:
        fn = self._compiled.get(key)
        if fn is None:
            with self._lock:
                fn = self._compiled.setdefault(key, jax.jit(make()))
        return fn

    def _scan(self, capacity: int, static: dict[int, int]) -> Callable:
        body, nimplicit = self.body, self.nimplicit
        prefix = self.predicate is None

        def run(fixed, carried, lower, step, count):
            fixed = [static.get(k, v) for k, v in enumerate(fixed)]

            def one_step(carry, k):
                def taken(c):
                    index = [lower + k * step] if prefix else []
                    return tuple(eval_jaxpr(body, [*fixed, *index, *c], Mode.STAGED)[nimplicit:])

                return lax.cond(k < count, taken, lambda c: tuple(c), carry), None

            return lax.scan(one_step, tuple(carried), jnp.arange(capacity, dtype=jnp.int64))[0]

        return run

    def _counter(self, static: dict[tuple, int]) -> Callable:
        body, predicate, nimplicit = self.body, self.predicate, self.nimplicit

        def count(pred_consts, fixed, carried):
            pred_consts = [static.get(("p", k), v) for k, v in enumerate(pred_consts)]
            fixed = [static.get(("b", k), v) for k, v in enumerate(fixed)]
            implicit = fixed[self.nconsts :]
            pred_consts, fixed, carried = jax.lax.stop_gradient((pred_consts, fixed, carried))

            def more(state):
                return eval_jaxpr(predicate, [*pred_consts, *implicit, *state[1]], Mode.STAGED)[0]

            def step(state):
                n, c = state
                return n + 1, tuple(eval_jaxpr(body, [*fixed, *c], Mode.STAGED)[nimplicit:])

            return lax.while_loop(more, step, (jnp.int64(0), tuple(carried)))[0]

        return count

    def describe(self, primitive: str) -> LoopInfo:
        """This scan as :mod:`.inspection` shows it (``primitive``: the loop's); the counters
        of ``while_loop``'s trip counts are not counted."""
        buckets = [key[0] for key in list(self._compiled) if key[0] != "count"]
        return LoopInfo("bounded scan", primitive, not self.unsupported, len(buckets), frozenset(buckets))

    def run(self, fixed: Sequence[Any], carried: Sequence[Any], lower: int = 0, step: int = 1,
            count: int | None = None, pred_consts: Sequence[Any] = ()) -> list[Any] | None:
        """The carried values after ``count`` iterations (a ``while_loop``: as many as its
        predicate allows); ``fixed``: the constants and the implicit sizes. ``None`` when the
        body cannot be staged so (a nested loop that itself needs the host)."""
        if self.unsupported:
            return None
        static = {k: int(fixed[k]) for k in self.static}
        try:
            if count is None:
                pred_static = {("p", k): int(pred_consts[k]) for k in self.pred_static if k < self.pred_nconsts}
                pred_static |= {("b", k): v for k, v in static.items()}
                counter = self._jitted(("count", *sorted(pred_static.items())), lambda: self._counter(pred_static))
                count = int(counter(list(pred_consts), list(fixed), list(carried)))
            capacity = capacity_for(count)
            scan = self._jitted((capacity, *sorted(static.items())), lambda: self._scan(capacity, static))
            return list(scan(list(fixed), list(carried), jnp.int64(lower), jnp.int64(step), jnp.int64(count)))
        except NeedsHost:
            self.unsupported = True
            return None


# The scans alive, by their body (inspection only: the program that runs a scan owns it).
_scans: weakref.WeakValueDictionary[int, BoundedScan] = weakref.WeakValueDictionary()


def compiled_scan(body: Any) -> BoundedScan | None:
    """The :class:`BoundedScan` of a loop body, if it ran in reverse mode."""
    scan = _scans.get(id(body))
    return scan if scan is not None and scan.body is body else None


def bounded_scan(body: Any, nconsts: int, nimplicit: int, predicate: Any = None, pred_nconsts: int = 0) -> BoundedScan:
    """The :class:`BoundedScan` of a loop body, kept by the program that runs it (see
    :func:`.specialize.kept_by_program`)."""

    def make(_: Any) -> BoundedScan:
        scan = _scans[id(body)] = BoundedScan(body, nconsts, nimplicit, predicate, pred_nconsts)
        return scan

    return kept_by_program(body, "bounded scan", make)
