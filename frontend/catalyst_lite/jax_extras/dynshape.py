"""Types of nested programs: the design documents' input and output types, sizes as de Bruijn indices.

:func:`expand_args` (``deduceInputType``), :func:`input_type_of`, :func:`expand_results`
(``deduceOutputType``), *the* output-type function of every primitive (:func:`output_type_of`)
and :func:`join_output_types`; :func:`array_aval` and :func:`has_symbolic_shape` make and read
array types for the rest of catalyst_lite.

>>> import numpy as np
>>> expand_args([np.float32(1.0)], ExpansionStrategy(True))[1]
((ShapedArray(float32[]), True),)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from jax import lax
from jax._src import core

from .size_facts import describe_aval
from .tracing import (
    DBIdx, DShapedArray, InDBIdx, InputType, Literal, OutDBIdx, OutputType, ShapedArray, Tracer, Var, get_aval
)

DIM_AVAL = ShapedArray((), np.dtype("int64"))
JaxprTypeError = core.JaxprTypeError


@dataclass(frozen=True)
class ExpansionStrategy:
    """Which dimensions of a nested body's arguments become implicit arguments: none with
    ``preserve_dimensions`` (a loop may not change them), else every dynamic one."""

    preserve_dimensions: bool


class DimensionMismatch(TypeError):
    """A body result does not have the dimensions its strategy requires (see ``reason``); ``axis``
    is a static size of the argument a resizing loop changes (retry with it dynamic)."""

    def __init__(self, position: int, arg_aval: Any, result_aval: Any, reason: str, axis: int | None = None):
        super().__init__(reason)
        self.position, self.axis, self.reason = position, axis, reason
        self.arg_aval, self.result_aval = arg_aval, result_aval
        # Described now, while the body's trace can still name its sizes (`f64[n + 1]`).
        self.arg_description = describe_aval(arg_aval)
        self.result_description = describe_aval(result_aval)


def same_dim(d1: Any, d2: Any) -> bool:
    """Two dimensions are the same variable (tracers) or the same number."""
    if isinstance(d1, Tracer) and isinstance(d2, Tracer):
        return core.get_referent(d1) is core.get_referent(d2) or d1 is d2
    return not (isinstance(d1, Tracer) or isinstance(d2, Tracer)) and d1 == d2


def is_dynamic(d: Any) -> bool:
    """A dimension that is not a number (a tracer, a variable or a de Bruijn index)."""
    return not isinstance(d, (int, np.integer))


def has_symbolic_shape(aval: Any) -> bool:
    """``aval`` is an array type with a size that is not a number (JAX's dynamic-shape type).

    >>> import numpy as np
    >>> has_symbolic_shape(array_aval((2, 3), np.dtype("float64")))
    False
    """
    return type(aval) is DShapedArray


def array_aval(shape: Sequence[Any], dtype: Any, weak_type: bool = False) -> Any:
    """The array type of ``shape``: JAX's static type when every size is a number, else its
    dynamic-shape type (sizes that are variables, tracers or de Bruijn indices).

    >>> import numpy as np
    >>> array_aval((2, 3), np.dtype("float64")).str_short()
    'float64[2,3]'
    """
    cls = ShapedArray if all(type(d) is int for d in shape) else DShapedArray
    return cls(tuple(shape), dtype, weak_type)


# --- input types ---------------------------------------------------------------------------------


def expand_args(
    args: Sequence[Any], strategy: ExpansionStrategy, force_dynamic: frozenset[tuple[int, int]] = frozenset()
) -> tuple[list[Any], InputType]:
    """The expanded inputs (implicit dimensions first) and the body's input type (``deduceInputType``);
    ``force_dynamic``: ``(argument, axis)`` of static sizes made implicit arguments too."""
    avals = [get_aval(a) for a in args]
    if strategy.preserve_dimensions:
        return list(args), tuple((a, True) for a in avals)
    implicit: list[Any] = []
    explicit_type = []
    for k, aval in enumerate(avals):
        if any(is_dynamic(d) or (k, j) in force_dynamic for j, d in enumerate(aval.shape)):
            shape = []
            for j, d in enumerate(aval.shape):
                if is_dynamic(d) or (k, j) in force_dynamic:
                    implicit.append(d)
                    d = DBIdx(len(implicit) - 1)
                shape.append(d)
            aval = DShapedArray(tuple(shape), aval.dtype, aval.weak_type)
        explicit_type.append((aval, True))
    in_type = tuple([(DIM_AVAL, False)] * len(implicit) + explicit_type)
    return [*implicit, *args], in_type


def input_type_of(binders: Sequence[Any]) -> InputType:
    """The input type that a jaxpr's binders have (a size that is binder ``k`` is ``DBIdx(k)``), to
    trace a transformed body (its JVP, its batched version) with binders of the same types.

    >>> from jax._src import core
    >>> n = core.Var(DIM_AVAL)
    >>> x = core.Var(DShapedArray((n, 2), np.dtype("float64"), False))
    >>> [str(a) for a, _ in input_type_of([n, x])]
    ['int64[]', 'f64[DBIdx(val=0),2]']
    """
    position: dict[Var, int] = {}
    for k, v in enumerate(binders):
        position.setdefault(v, k)  # a binder listed twice (a primal and its tangent) is the first
    in_type = []
    for v in binders:
        aval = v.aval
        if type(aval) is DShapedArray:
            shape = tuple(DBIdx(position[d]) if isinstance(d, Var) else d for d in aval.shape)
            aval = aval.update(shape=shape)
        in_type.append((aval, True))
    return tuple(in_type)


# --- output types --------------------------------------------------------------------------------


def expand_results(
    carried_args: Sequence[Tracer] | None, results: Sequence[Any], strategy: ExpansionStrategy | None
) -> tuple[list[Any], int]:
    """The expanded results of a body and how many are implicit (``deduceOutputType``): a loop body's
    (``carried_args``) keep the arguments' types; a function's sizes that are not numbers lead."""
    result_avals = [get_aval(r) for r in results]
    implicit: list[Any] = []
    if carried_args is None:
        for aval in result_avals:
            implicit.extend(d for d in getattr(aval, "shape", ()) if is_dynamic(d))
        return [*implicit, *results], len(implicit)
    for k, (arg, aval) in enumerate(zip(carried_args, result_avals)):
        arg_aval = get_aval(arg)
        if arg_aval.dtype != aval.dtype:
            raise DimensionMismatch(k, arg_aval, aval, "dtype")
        if len(arg_aval.shape) != len(aval.shape):
            raise DimensionMismatch(k, arg_aval, aval, "rank")
        for j, (d_arg, d_res) in enumerate(zip(arg_aval.shape, aval.shape)):
            if is_dynamic(d_arg):
                if strategy.preserve_dimensions:
                    if not same_dim(d_arg, d_res):
                        raise DimensionMismatch(k, arg_aval, aval, "dimension")
                else:
                    implicit.append(d_res)
            elif is_dynamic(d_res) or d_arg != d_res:
                axis = None if strategy.preserve_dimensions else j
                raise DimensionMismatch(k, arg_aval, aval, "dimension", axis)
    return [*implicit, *results], len(implicit)


def conform_carried_sizes(carried_args: Sequence[Any], results: Sequence[Any]) -> list[Any]:
    """A loop body's results, each size ``core.definitely_equal`` to its argument's given as that very
    size, so that the body keeps its arguments' types (call in the body's trace)."""
    out = list(results)
    for k, (arg, result) in enumerate(zip(carried_args, results)):
        arg_aval, aval = get_aval(arg), get_aval(result)
        arg_shape, shape = getattr(arg_aval, "shape", ()), getattr(aval, "shape", ())
        if len(arg_shape) != len(shape) or getattr(arg_aval, "dtype", None) != getattr(aval, "dtype", None):
            continue
        differ = [(a, d) for a, d in zip(arg_shape, shape) if is_dynamic(a) and not same_dim(a, d)]
        if differ and all(core.definitely_equal(a, d) for a, d in differ):
            out[k] = lax.broadcast_in_dim(result, arg_shape, tuple(range(len(shape))))
    return out


def size_matches(dim: Any, atom: Any) -> bool:
    """A size (a variable or a number) is the value of ``atom`` (a variable, a literal or a number)."""
    if isinstance(atom, Var) or isinstance(dim, Var):
        return dim is atom
    if dim is None:
        return False
    return int(atom.val if isinstance(atom, Literal) else atom) == int(dim)


def output_type_of(
    avals: Sequence[Any], implicit: Sequence[Any], operand_of: Mapping[Any, int], free: Callable | None = None
) -> OutputType:
    """The output type of an equation: its implicit results (the atoms ``implicit``), then results
    of types ``avals`` (inside a nested jaxpr, whose binder ``v`` operand ``operand_of[v]`` feeds).
    A size is a number, ``OutDBIdx(k)`` (the ``k``-th implicit result), ``InDBIdx(operand_of[v])``,
    or else implicit result ``free(v)`` (``None``: undecided) or an error.

    >>> from jax._src import core
    >>> n, m = core.Var(DIM_AVAL), core.Var(DIM_AVAL)
    >>> x = DShapedArray((n, m, 3), np.dtype("float64"), False)
    >>> [str(a) for a, _ in output_type_of([x], [m], {n: 4})]
    ['int64[]', 'f64[InDBIdx(val=4),OutDBIdx(val=0),3]']
    """
    out_type: list[tuple[Any, bool]] = [(DIM_AVAL, False)] * len(implicit)
    for aval in avals:
        if type(aval) is DShapedArray:
            shape = [_outer_dim(d, implicit, operand_of, free) for d in aval.shape]
            aval = array_aval(shape, aval.dtype, aval.weak_type)
        out_type.append((aval, True))
    return tuple(out_type)


def _outer_dim(d: Any, implicit: Sequence[Any], operand_of: Mapping[Any, int], free: Callable | None) -> Any:
    if isinstance(d, Literal):
        d = d.val
    if not isinstance(d, Var):
        return int(d)
    for k, atom in enumerate(implicit):
        if atom is d:
            return OutDBIdx(k)
    if d in operand_of:
        return InDBIdx(operand_of[d])
    if free is not None:
        k = free(d)
        return None if k is None else OutDBIdx(k)
    raise JaxprTypeError(f"a result size {d} is neither an operand nor an implicit result")


def join_output_types(
    alternatives: Sequence[tuple], same_operand: Callable[[int, int], bool], allow_new_implicit: bool = False
) -> tuple[OutputType, list[list[Any]]]:
    """The output type of an equation returning one of several alternatives' results (each ``(avals,
    implicit, operand_of)``): a size agreeing in all, else (``allow_new_implicit``) a new implicit one."""
    nimplicit = len(alternatives[0][1])
    new: list[list[Any]] = [[] for _ in alternatives]
    types = [
        output_type_of(avals, implicit, operand_of, free=lambda d: None)
        for avals, implicit, operand_of in alternatives
    ]
    joined: list[Any] = []
    for p in range(nimplicit, len(types[0])):
        aval = types[0][p][0]
        per_alternative = [t[p][0] for t in types]
        if not all(a.dtype == aval.dtype and len(a.shape) == len(aval.shape) for a in per_alternative):
            raise JaxprTypeError(f"result {p - nimplicit} has different dtypes or ranks in the alternatives")
        shape = []
        for j in range(len(aval.shape)):
            dims = [a.shape[j] for a in per_alternative]
            inner = [avals[p - nimplicit].shape[j] for avals, _, _ in alternatives]
            shape.append(_join_dim(dims, inner, alternatives, same_operand, new, allow_new_implicit))
        joined.append(array_aval(shape, aval.dtype, aval.weak_type))
    total = nimplicit + len(new[0])
    out_type = tuple([(DIM_AVAL, False)] * total + [(a, True) for a in joined])
    return out_type, new


def _join_dim(dims, inner, alternatives, same_operand, new, allow_new) -> Any:
    first = dims[0]
    if all(type(d) is int for d in dims) and len(set(dims)) == 1:
        return first
    if all(type(d) is InDBIdx for d in dims) and all(same_operand(first.val, d.val) for d in dims):
        return first
    nimplicit = len(alternatives[0][1])
    candidates = [[*alt[1], *atoms] for alt, atoms in zip(alternatives, new)]  # implicit, then new
    for k in range(len(candidates[0])):
        if all(size_matches(d, atoms[k]) for d, atoms in zip(inner, candidates)):
            return OutDBIdx(k)
    if not allow_new:
        raise JaxprTypeError(f"a result size differs between the alternatives ({dims})")
    for d, atoms in zip(inner, new):
        atoms.append(d)
    return OutDBIdx(nimplicit + len(new[0]) - 1)
