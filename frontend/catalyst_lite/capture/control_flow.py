"""PennyLane's captured control flow as catalyst_lite's ``for_loop``, ``while_loop`` and ``cond``.

PennyLane's loop primitives carry their arrays' dynamic sizes as leading carried values (its
"abstract shapes"); catalyst_lite's loops carry the arrays themselves, whose shapes hold the
sizes. Each rule below therefore carries the arrays only, recomputes the size inputs of the body
from them (:class:`~.interpreter.SizeLocations`), and returns PennyLane's results: the final sizes,
then the values. A loop whose body returns other sizes than it received runs with
``allow_array_resizing=True``; otherwise sizes are preserved (and shared with the rest of the
program), as catalyst_lite's loops do by default.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np
from pennylane.capture.primitives import cond_prim, for_loop_prim, while_loop_prim

from ..control_flow import cond, for_loop, while_loop
from ..errors import DimensionError
from ..jax_extras import Tracer
from .interpreter import PlxprCompiler, SizeLocations

__all__: list[str] = []


def _resizes(jaxpr: Any, n_sizes: int, loop: str) -> bool:
    """Whether a loop body returns other sizes than the ones it received (its carried values
    are its last inputs, after the sizes and a loop index). A static size that changes is a
    :class:`~catalyst_lite.errors.DimensionError`: PennyLane captured the body with it fixed."""
    n_carried = len(jaxpr.outvars) - n_sizes
    for inp, out in zip(jaxpr.invars[len(jaxpr.invars) - n_carried :], jaxpr.outvars[n_sizes:]):
        before, after = getattr(inp.aval, "shape", ()), getattr(out.aval, "shape", ())
        if any(isinstance(b, (int, np.integer)) and b != a for b, a in zip(before, after)):
            raise DimensionError(
                f"qml.{loop} (captured by PennyLane): the body receives {inp.aval.str_short()} and "
                f"returns {out.aval.str_short()}. PennyLane's program capture fixes the sizes of a "
                "carried array that starts with a static size, even with allow_array_resizing=True; "
                "start from an array of a traced size (e.g. an argument with abstracted_axes), or "
                "compile with capture=False."
            )
    return any(out is not inp for out, inp in zip(jaxpr.outvars[:n_sizes], jaxpr.invars[:n_sizes]))


@PlxprCompiler.register_primitive(for_loop_prim)
def _for_loop(
    self: PlxprCompiler, start: Any, stop: Any, step: Any, *invals: Any,
    jaxpr_body_fn: Any, consts_slice: tuple, args_slice: tuple, abstract_shapes_slice: tuple,
) -> list[Any]:
    n_sizes = len(invals[slice(*abstract_shapes_slice)])
    sizes = SizeLocations.of(jaxpr_body_fn.invars)  # body inputs: *sizes, i, *carried
    body = self.subprogram(jaxpr_body_fn, invals[slice(*consts_slice)])

    @for_loop(start, stop, step, allow_array_resizing=_resizes(jaxpr_body_fn, n_sizes, "for_loop"))
    def loop(i: Any, carried: tuple) -> tuple:
        return tuple(body(*sizes.fill([None] * n_sizes + [i, *carried]))[n_sizes:])

    final = loop(tuple(invals[slice(*args_slice)]))
    return [*sizes.fill([None] * (n_sizes + 1) + list(final))[:n_sizes], *final]


@PlxprCompiler.register_primitive(while_loop_prim)
def _while_loop(
    self: PlxprCompiler, *invals: Any,
    jaxpr_body_fn: Any, jaxpr_cond_fn: Any, body_slice: tuple, cond_slice: tuple, args_slice: tuple,
) -> list[Any]:
    sizes = SizeLocations.of(jaxpr_body_fn.invars)  # body and condition inputs: *sizes, *carried
    n_sizes = sizes.leading()
    body = self.subprogram(jaxpr_body_fn, invals[slice(*body_slice)])
    predicate = self.subprogram(jaxpr_cond_fn, invals[slice(*cond_slice)])

    def inputs(carried: tuple) -> list[Any]:
        return sizes.fill([None] * n_sizes + list(carried))

    @while_loop(lambda carried: predicate(*inputs(carried))[0],
                allow_array_resizing=_resizes(jaxpr_body_fn, n_sizes, "while_loop"))
    def loop(carried: tuple) -> tuple:
        return tuple(body(*inputs(carried))[n_sizes:])

    final = loop(tuple(invals[slice(*args_slice)][n_sizes:]))
    return inputs(final)


@PlxprCompiler.register_primitive(cond_prim)
def _cond(
    self: PlxprCompiler, *invals: Any, jaxpr_branches: Sequence[Any], consts_slices: Sequence[tuple],
    args_slice: tuple,
) -> list[Any]:
    preds = invals[: len(jaxpr_branches)]
    args = invals[slice(*args_slice)]
    # Each branch returns one size per dynamic axis of its results, in order, then the results.
    outvars = jaxpr_branches[0].outvars
    dynamic_axes = [
        (k, axis) for k, v in enumerate(outvars) for axis, d in enumerate(getattr(v.aval, "shape", ()))
        if not isinstance(d, (int, np.integer))
    ]
    n_sizes = len(dynamic_axes)
    # A branch may also return the operators it applies (`lambda: qml.RY(x, 0)`): they are queued
    # where the branch runs, and are not values of the conditional.
    arrays = [k for k, v in enumerate(outvars) if k >= n_sizes and hasattr(v.aval, "dtype")]

    def branch(jaxpr: Any, consts_slice: tuple):
        run = self.subprogram(jaxpr, invals[slice(*consts_slice)])
        return lambda: tuple(map(run(*args).__getitem__, arrays))

    branches = [branch(j, s) for j, s in zip(jaxpr_branches, consts_slices)]
    # PennyLane adds the `else` branch with the constant predicate True (empty without one).
    has_otherwise = len(preds) > 1 and not isinstance(preds[-1], Tracer) and bool(preds[-1])
    conditional = cond(preds[0])(branches[0])
    for pred, fn in zip(preds[1 : len(preds) - has_otherwise], branches[1 : len(branches) - has_otherwise]):
        conditional.else_if(pred)(fn)
    if has_otherwise:
        conditional.otherwise(branches[-1])
    results: list[Any] = [None] * len(outvars)
    for k, value in zip(arrays, conditional() or ()):
        results[k] = value
    for j, (k, axis) in enumerate(dynamic_axes):
        results[j] = jnp.shape(results[k])[axis]
    return results
