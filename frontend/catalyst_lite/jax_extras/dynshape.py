"""The design documents' algorithm for binding primitives that hold nested programs.

``bindNested(Function, Inputs, S)`` from "Jax dynamically-shaped arrays" is spelled here as:

1. :func:`expand_args` — deduce the input type of the body from the outer ``Inputs`` and the
   :class:`ExpansionStrategy` ``S`` (which dimensions become implicit arguments);
2. :func:`trace_nested` — the abstract evaluation: open an :class:`~.tracing.InnerTrace`, create the
   argument tracers (:func:`~.tracing.input_type_to_tracers`), :func:`~.tracing.collapse` them, call
   the Python body, deduce the results' implicit dimensions with :func:`expand_results`, and close
   the trace into a jaxpr whose captured values are hoisted to leading constants (``body_nconsts``);
3. :func:`output_type_of` — the body's output type, with ``InDBIdx`` pointing at operands of the
   outer equation and ``OutDBIdx`` at its own results;
4. :meth:`DynshapePrimitive.bind_nested` — emit the equation and build the outer result tracers
   (:func:`output_type_to_tracers` is :func:`~.tracing.emit_equation`), then collapse them.

The control-flow primitives (:mod:`catalyst_lite.control_flow`) are thin users of these pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from jax._src import core
from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from .size_facts import describe_aval
from .tracing import (
    DBIdx,
    DShapedArray,
    InDBIdx,
    InnerTrace,
    InputType,
    Jaxpr,
    Literal,
    OutDBIdx,
    OutputType,
    ShapedArray,
    Tracer,
    Var,
    collapse,
    debug_info_for,
    emit_equation,
    get_aval,
)

__all__ = [
    "ExpansionStrategy",
    "expand_args",
    "expand_results",
    "NestedBody",
    "trace_nested",
    "output_type_of",
    "output_type_to_tracers",
    "DynshapePrimitive",
    "DimensionMismatch",
    "same_dim",
]

DIM_AVAL = ShapedArray((), np.dtype("int64"))


@dataclass(frozen=True)
class ExpansionStrategy:
    """Which dimensions of a nested body's arguments become implicit arguments.

    ``preserve_dimensions=True``: dimensions of the arguments stay the enclosing program's
    variables; inside the body they are constants shared with captured arrays, so arguments and
    captures of one size mix freely, and a loop may not change them.
    ``preserve_dimensions=False``: every dynamic dimension of every argument is a separate implicit
    argument (and, for loops, a carried value), so a loop may resize arrays, but an argument no
    longer shares its size with captured arrays.
    """

    preserve_dimensions: bool


class DimensionMismatch(TypeError):
    """A body result does not have the dimensions its strategy requires (see ``reason``).

    ``axis`` is set when a resizing loop's result changes a size that the argument has as a
    static number: the caller may retry with that axis made dynamic.
    """

    def __init__(self, position: int, arg_aval: Any, result_aval: Any, reason: str, axis: int | None = None):
        super().__init__(reason)
        self.position = position
        self.axis = axis
        self.arg_aval = arg_aval
        self.result_aval = result_aval
        self.reason = reason
        # Described now, while the body's trace can still name its sizes (`f64[n + 1]`).
        self.arg_description = describe_aval(arg_aval)
        self.result_description = describe_aval(result_aval)


def same_dim(d1: Any, d2: Any) -> bool:
    """Two dimensions are the same variable (tracers) or the same number."""
    if isinstance(d1, Tracer) or isinstance(d2, Tracer):
        if not (isinstance(d1, Tracer) and isinstance(d2, Tracer)):
            return False
        return core.get_referent(d1) is core.get_referent(d2) or d1 is d2
    return d1 == d2


def _is_dynamic(d: Any) -> bool:
    return not isinstance(d, (int, np.integer))


def expand_args(
    args: Sequence[Any],
    strategy: ExpansionStrategy,
    force_dynamic: frozenset[tuple[int, int]] = frozenset(),
) -> tuple[list[Any], InputType]:
    """Deduce the body input type from outer values (design doc: ``deduceInputType``).

    Returns the expanded inputs (implicit dimensions first) and an input type whose shapes hold
    ``DBIdx`` (a new implicit argument) or, when dimensions are preserved, the enclosing tracer.
    ``force_dynamic`` lists ``(argument, axis)`` pairs of static sizes that become implicit
    arguments all the same (a resizing loop whose carry starts with a static size).

    >>> expand_args([np.float32(1.0)], ExpansionStrategy(True))[1]
    ((ShapedArray(float32[]), True),)
    """
    avals = [get_aval(a) for a in args]
    if strategy.preserve_dimensions:
        return list(args), tuple((a, True) for a in avals)
    implicit: list[Any] = []
    explicit_type = []
    for k, aval in enumerate(avals):
        dynamic = [_is_dynamic(d) or (k, j) in force_dynamic for j, d in enumerate(aval.shape)]
        if any(dynamic):
            shape = []
            for d, is_dyn in zip(aval.shape, dynamic):
                if is_dyn:
                    shape.append(DBIdx(len(implicit)))
                    implicit.append(d)
                else:
                    shape.append(d)
            aval = DShapedArray(tuple(shape), aval.dtype, aval.weak_type)
        explicit_type.append((aval, True))
    in_type = tuple([(DIM_AVAL, False)] * len(implicit) + explicit_type)
    return [*implicit, *args], in_type


def expand_results(
    carried_args: Sequence[Tracer] | None,
    results: Sequence[Any],
    strategy: ExpansionStrategy | None,
) -> tuple[list[Any], int]:
    """Deduce the implicit results of a body (design doc: ``deduceOutputType``).

    For a loop body (``carried_args`` given, one per result) the results must keep the arguments'
    types: with preserved dimensions the very same dimension variables (no implicit results), with
    resizing one implicit result per dynamic dimension of each argument (the new size), in the
    arguments' order, so that results can be fed back as arguments. Without ``carried_args`` (a
    branch) every dimension that is not a number becomes an implicit result.
    Returns the expanded results and the number of implicit ones.
    """
    result_avals = [get_aval(r) for r in results]
    implicit: list[Any] = []
    if carried_args is None:
        for aval in result_avals:
            implicit.extend(d for d in getattr(aval, "shape", ()) if _is_dynamic(d))
        return [*implicit, *results], len(implicit)
    for k, (arg, aval) in enumerate(zip(carried_args, result_avals)):
        arg_aval = get_aval(arg)
        if arg_aval.dtype != aval.dtype:
            raise DimensionMismatch(k, arg_aval, aval, "dtype")
        if len(arg_aval.shape) != len(aval.shape):
            raise DimensionMismatch(k, arg_aval, aval, "rank")
        for j, (d_arg, d_res) in enumerate(zip(arg_aval.shape, aval.shape)):
            if _is_dynamic(d_arg):
                if strategy.preserve_dimensions:
                    if not same_dim(d_arg, d_res):
                        raise DimensionMismatch(k, arg_aval, aval, "dimension")
                else:
                    implicit.append(d_res)
            elif _is_dynamic(d_res) or d_arg != d_res:
                axis = None if strategy.preserve_dimensions else j
                raise DimensionMismatch(k, arg_aval, aval, "dimension", axis)
    return [*implicit, *results], len(implicit)


@dataclass
class NestedBody:
    """A traced body: ``jaxpr`` takes ``consts + expanded args`` and returns expanded results."""

    jaxpr: Jaxpr
    consts: list[Any]  # values of enclosing traces (or concrete) for the leading invars
    in_type: InputType
    nimplicit_out: int
    out_tree: PyTreeDef
    out_avals: list[Any]  # inner avals of the explicit results (for error messages)

    @property
    def nconsts(self) -> int:
        return len(self.consts)


def trace_nested(
    fn: Callable,
    in_type: InputType,
    in_tree: PyTreeDef | None,
    name: str,
    expand: Callable[[list[Tracer], list[Any]], tuple[list[Any], int]],
    prefix_args: Sequence[Any] = (),
) -> NestedBody:
    """Abstract evaluation of a Python body (design doc: ``abstractEval``).

    ``expand(explicit_arg_tracers, flat_results)`` deduces the expanded results (usually a partial
    application of :func:`expand_results`). ``prefix_args`` are passed before the unflattened
    arguments (e.g. nothing for a branch). The returned jaxpr has the captured constants hoisted
    to leading arguments.
    """
    inner = InnerTrace(debug_info_for(fn, name))
    try:
        expanded_args = inner.arguments(in_type)
        explicit = collapse(in_type, expanded_args)
        args = tree_unflatten(in_tree, explicit) if in_tree is not None else explicit
        results = inner.call(fn, *prefix_args, *args)
        flat_results, out_tree = tree_flatten(results)
        flat_results = [_as_jax_value(r, name) for r in flat_results]
        flat_results = [inner.lift(r) for r in flat_results]
        expanded_results, nimplicit = expand(explicit, flat_results)
        arg_dims = [d for t in expanded_args for d in getattr(t.aval, "shape", ()) if _is_dynamic(d)]
        jaxpr, consts = inner.to_jaxpr(expanded_results, keep_alive=arg_dims)
        out_avals = [r.aval for r in flat_results]
    finally:
        inner.close()
    return NestedBody(jaxpr, consts, in_type, nimplicit, out_tree, out_avals)


def _as_jax_value(x: Any, name: str) -> Any:
    if isinstance(x, (Tracer, np.ndarray, np.generic, int, float, bool, complex)) or hasattr(
        x, "__jax_array__"
    ) or hasattr(x, "aval"):
        return x
    raise TypeError(
        f"{name} returned a value of type {type(x).__name__}, which is not a JAX array or number."
    )


def output_type_of(
    jaxpr: Jaxpr, nimplicit_out: int, invar_to_operand: Callable[[int], int | None]
) -> OutputType:
    """Output type of an equation whose results are ``jaxpr``'s outputs.

    A dimension that is the body's argument ``k`` becomes ``InDBIdx(invar_to_operand(k))`` (the
    operand fed to that argument; ``None`` when the argument has no fixed operand, e.g. a loop's
    carried value, which is an error the caller's strategy prevents); a dimension that is one of the
    body's own results becomes ``OutDBIdx``.
    """
    in_pos = {v: i for i, v in enumerate(jaxpr.invars)}
    out_pos = {v: i for i, v in enumerate(jaxpr.outvars) if isinstance(v, Var)}
    out_type = []
    for i, v in enumerate(jaxpr.outvars):
        aval = v.aval
        if type(aval) is DShapedArray:
            shape = []
            for d in aval.shape:
                if isinstance(d, Var) and d in out_pos and out_pos[d] < nimplicit_out:
                    shape.append(OutDBIdx(out_pos[d]))
                elif isinstance(d, Var) and d in in_pos and invar_to_operand(in_pos[d]) is not None:
                    shape.append(InDBIdx(invar_to_operand(in_pos[d])))
                elif isinstance(d, Literal):
                    shape.append(int(d.val))
                elif isinstance(d, Var):
                    raise AssertionError(f"unbound dimension {d} in the output of a nested body")
                else:
                    shape.append(d)
            aval = aval.update(shape=tuple(shape))
        out_type.append((aval, i >= nimplicit_out))
    return tuple(out_type)


output_type_to_tracers = emit_equation


class DynshapePrimitive(core.Primitive):
    """A primitive with nested jaxprs whose results may have dynamic shapes.

    JAX's ``bind`` derives result avals from operand avals; with nested dynamic shapes the result
    type is only known after tracing the body, so subclasses trace first and then call
    :meth:`bind_nested` with the deduced output type.
    """

    multiple_results = True

    def bind_nested(self, operands: Sequence[Any], out_type: OutputType, **params: Any) -> list[Any]:
        """Emit ``self[params] operands`` into the current trace; return the expanded results."""
        return emit_equation(self, operands, out_type, params)
