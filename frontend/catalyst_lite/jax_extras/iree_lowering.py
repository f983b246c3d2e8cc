"""StableHLO for IREE (:data:`IREE`), which lacks some dynamic forms JAX emits: a reshape to symbolic
sizes is ``tensor.reshape``; a symbolic ``dot_general`` is in batch-matmul form (a product and a
sum for vector products); a no-op broadcast is dropped, a broadcast of a broadcast is one; a slice
of symbolic size is ``stablehlo.real_dynamic_slice``; nested bodies re-derive their sizes from the
dimension values in scope. A loop that resizes its carried arrays is refused (IREE 3.x assumes
carried sizes never change).

>>> import jax.numpy as jnp
>>> import numpy as np
>>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
>>> from catalyst_lite.jax_extras import ClosedJaxpr
>>> with dynamic_tracing():
...     in_type = make_input_type([np.zeros(3)], [{0: "n"}])
...     jaxpr, _, consts = trace_to_jaxpr(lambda x: [x.reshape(-1, 1) @ x[None]], in_type, "f")
>>> text = lower_for_iree(ClosedJaxpr(jaxpr, consts), "f")
>>> "tensor.reshape" in text and "stablehlo.dynamic_reshape" not in text
True
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
from jax._src import core
from jax._src.interpreters import mlir
from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

from .lowering import LoweringTarget, display_rule, expanding_dimensions, index_vector
from .lowering import lower_jaxpr_to_stablehlo
from .shapes import product

__all__ = ["IREE", "lower_for_iree"]

Size = Any  # a Python int (static) or an integer scalar ir.Value (symbolic)


def lower_for_iree(closed_jaxpr: core.ClosedJaxpr, name: str) -> str:
    """StableHLO of ``closed_jaxpr`` for IREE."""
    return lower_jaxpr_to_stablehlo(closed_jaxpr, name, IREE)


# --- sizes as values -----------------------------------------------------------------------------


def _sizes(ctx: mlir.LoweringRuleContext, aval: core.AbstractValue) -> list[Size]:
    """The sizes of ``aval``: ints, or the ``i64`` values of its dimension variables."""
    return list(mlir.eval_dynamic_shape(ctx, aval.shape))


# a product of sizes, staged where a size is symbolic
_product = functools.partial(product, symbolic=lambda d: type(d) is not int, multiply=hlo.multiply,
                             constant=lambda c: mlir.ir_constant(np.int64(c)))


def _tensor_type(sizes: Sequence[Size], element_type: ir.Type) -> ir.RankedTensorType:
    dynamic = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([d if type(d) is int else dynamic for d in sizes], element_type)


def _as_value(size: Size) -> ir.Value:
    return mlir.ir_constant(np.int64(size)) if type(size) is int else size


def _reshape(x: ir.Value, sizes: Sequence[Size]) -> ir.Value:
    out_type = _tensor_type(sizes, ir.RankedTensorType(x.type).element_type)
    if all(type(d) is int for d in sizes):
        return hlo.reshape(out_type, x)
    shape = index_vector([_as_value(d) for d in sizes])
    return ir.Operation.create("tensor.reshape", results=[out_type], operands=[x, shape]).result


# --- dot_general in batch-matmul form ------------------------------------------------------------


def _dot_general(ctx: mlir.LoweringRuleContext, lhs: ir.Value, rhs: ir.Value, **params: Any) -> Any:
    lhs_aval, rhs_aval = ctx.avals_in
    (out_aval,) = ctx.avals_out
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    static = all(core.is_constant_shape(a.shape) for a in (lhs_aval, rhs_aval, out_aval))
    if static or _is_batch_matmul(lhs_aval.ndim, rhs_aval.ndim, lc, rc, lb, rb):
        return display_rule(lax_internal.dot_general_p)(ctx, lhs, rhs, **params)
    lf = [d for d in range(lhs_aval.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs_aval.ndim) if d not in rc and d not in rb]
    lhs_sizes, rhs_sizes = _sizes(ctx, lhs_aval), _sizes(ctx, rhs_aval)
    element = mlir.dtype_to_ir_type(np.dtype(out_aval.dtype))

    def grouped(x: ir.Value, sizes: list[Size], groups: Sequence[Sequence[int]]) -> ir.Value:
        if ir.RankedTensorType(x.type).element_type != element:
            x = hlo.convert(_tensor_type(sizes, element), x)
        order = [d for group in groups for d in group]
        if order != list(range(len(order))):
            x = hlo.transpose(x, mlir.dense_int_array(order))
        return _reshape(x, [_product([sizes[d] for d in group]) for group in groups])

    lhs3 = grouped(lhs, lhs_sizes, [lb, lf, lc])
    rhs3 = grouped(rhs, rhs_sizes, [rb, rc, rf])
    b, m, k = (_product([lhs_sizes[d] for d in g]) for g in (lb, lf, lc))
    n = _product([rhs_sizes[d] for d in rf])
    if 1 in (m, n):
        out3 = _multiply_and_sum(lhs3, rhs3, [b, m, n, k], np.dtype(out_aval.dtype))
    else:
        dnums = hlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=[0], rhs_batching_dimensions=[0],
            lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
        )
        out3 = hlo.dot_general(_tensor_type([b, m, n], element), lhs3, rhs3, dnums)
    out_sizes = [*(lhs_sizes[d] for d in (*lb, *lf)), *(rhs_sizes[d] for d in rf)]
    return [_reshape(out3, out_sizes)]


def _multiply_and_sum(lhs3: ir.Value, rhs3: ir.Value, sizes: list[Size], dtype: np.dtype) -> ir.Value:
    """``[B, M, K] x [B, K, N]`` with ``M`` or ``N`` of 1 (IREE refuses it) as a broadcast product summed."""
    b, m, n, k = sizes
    element = mlir.dtype_to_ir_type(dtype)
    full = _tensor_type(sizes, element)
    shape = _vector(sizes)
    lhs4 = _broadcast(lhs3, full, shape, dims=[0, 1, 3], expanding=[])
    rhs4 = _broadcast(rhs3, full, shape, dims=[0, 3, 2], expanding=[])
    product = hlo.multiply(lhs4, rhs4)
    zero = mlir.ir_constant(np.zeros((), dtype))
    reduce = hlo.ReduceOp([_tensor_type([b, m, n], element)], [product], [zero], mlir.dense_int_array([3]))
    scalar = ir.RankedTensorType.get([], element)
    block = reduce.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([hlo.add(*block.arguments)])
    return reduce.result


def _broadcast(x: ir.Value, result: ir.Type, shape: ir.Value, dims: Sequence[int], expanding: Sequence[int]):
    kept = [i for i in range(len(dims)) if i not in expanding]
    return hlo.dynamic_broadcast_in_dim(
        result, x, shape, mlir.dense_int_array(list(dims)),
        known_expanding_dimensions=mlir.dense_int_array(list(expanding)),
        known_nonexpanding_dimensions=mlir.dense_int_array(kept),
    )


def _is_batch_matmul(lhs_rank: int, rhs_rank: int, lc, rc, lb, rb) -> bool:
    """``[M, K] x [K, N]`` or ``[B, M, K] x [B, K, N]``: the forms IREE lowers at any sizes."""
    nb = len(lb)
    return (
        nb in (0, 1)
        and (lhs_rank, rhs_rank) == (nb + 2, nb + 2)
        and tuple(lb) == tuple(rb) == tuple(range(nb))
        and tuple(lc) == (nb + 1,)
        and tuple(rc) == (nb,)
    )


# --- broadcasts ----------------------------------------------------------------------------------

_DYNAMIC_BROADCAST = "stablehlo.dynamic_broadcast_in_dim"


def _dynamic_broadcast(
    ctx: mlir.LoweringRuleContext, x: ir.Value, aval_out: Any, broadcast_dimensions: Sequence[int]
) -> ir.Value:
    """A broadcast to symbolic sizes in forms IREE tracks (its rewrites drop expansion attributes): none
    for ``f64[n] -> f64[n]``, one op for a broadcast of a broadcast (``x[:, None] * y``)."""
    sizes = _sizes(ctx, aval_out)
    dims = list(broadcast_dimensions)
    x_type = ir.RankedTensorType(x.type)
    out_type = _tensor_type(sizes, x_type.element_type)
    expanding = expanding_dimensions(x_type, sizes, dims)
    if dims == list(range(len(sizes))) and not expanding:
        return x if x.type == out_type else hlo.convert(out_type, x)
    inner = x.owner
    if isinstance(inner, ir.Operation) and inner.name == _DYNAMIC_BROADCAST:
        inner_dims = list(ir.DenseI64ArrayAttr(inner.attributes["broadcast_dimensions"]))
        inner_grows = list(ir.DenseI64ArrayAttr(inner.attributes["known_expanding_dimensions"]))
        expanding = [i for i, d in enumerate(inner_dims) if i in inner_grows or d in expanding]
        x, dims = inner.operands[0], [dims[d] for d in inner_dims]
    return _broadcast(x, out_type, _vector(sizes), dims, expanding)


# --- gathers that are slices ---------------------------------------------------------------------


def _gather(ctx: mlir.LoweringRuleContext, operand: ir.Value, indices: ir.Value, *sizes: Any, **params: Any) -> Any:
    """``x[start:start + size]`` along some axes: a clamped ``real_dynamic_slice`` (IREE's gather of an
    operand of symbolic size does not clamp its start as StableHLO's does: ``x[5]`` of 3 elements
    read past the array where ``jax.jit`` reads ``x[2]``)."""
    operand_aval, indices_aval = ctx.avals_in[:2]
    dnums, slice_sizes = params["dimension_numbers"], params["slice_sizes"]
    if not _is_slice(dnums, indices_aval, params["mode"]):
        _refuse_unbounded(ctx, "gather")
        return display_rule(slicing.gather_p)(ctx, operand, indices, *sizes, **params)
    dynamic = iter(sizes)
    widths = [next(dynamic) if d is None else d for d in slice_sizes]
    extents = _sizes(ctx, operand_aval)
    starts: list[Size] = [0] * operand_aval.ndim
    index_type = ir.RankedTensorType.get([], ir.RankedTensorType(indices.type).element_type)
    for k, axis in enumerate(dnums.start_index_map):
        start = hlo.slice(indices, *(mlir.dense_int_array([i]) for i in (k, k + 1, 1)))
        starts[axis] = _clamped_start(hlo.reshape(index_type, start), extents[axis], widths[axis])
    limits = [s + w if type(s) is int and type(w) is int else hlo.add(_as_value(s), _as_value(w))
              for s, w in zip(starts, widths)]
    ones = mlir.ir_constant(np.ones((operand_aval.ndim,), np.int64))
    result_type = _tensor_type(widths, ir.RankedTensorType(operand.type).element_type)
    window = hlo.real_dynamic_slice(result_type, operand, _vector(starts), _vector(limits), ones)
    kept = [w for axis, w in enumerate(widths) if axis not in dnums.collapsed_slice_dims]
    return [_reshape(window, kept)]


def _refuse_unbounded(ctx: mlir.LoweringRuleContext, what: str) -> None:
    """IREE neither clamps a gather's indices into an operand of symbolic size nor drops a scatter's
    out of it, as StableHLO and XLA do: it reads or writes past the array (wrong values, a crash).
    Such a program is not IREE's: each size compiles with XLA."""
    if any(type(d) is not int for d in ctx.avals_in[0].shape):
        raise NotImplementedError(
            f"a {what} into an array of symbolic size (IREE does not bound its indices)"
        )


def _scatter(prim: core.Primitive):
    def lower(ctx: mlir.LoweringRuleContext, *operands: Any, **params: Any) -> Any:
        _refuse_unbounded(ctx, "scatter")
        return display_rule(prim)(ctx, *operands, **params)

    return lower


_SCATTERS = (slicing.scatter_p, slicing.scatter_add_p, slicing.scatter_mul_p, slicing.scatter_min_p,
             slicing.scatter_max_p)


def _is_slice(dnums: Any, indices_aval: Any, mode: Any) -> bool:
    """One start index per sliced axis, no batching: the gather is one window of the operand."""
    return (
        not dnums.operand_batching_dims
        and tuple(indices_aval.shape) == (len(dnums.start_index_map),)
        and mode in (slicing.GatherScatterMode.CLIP, slicing.GatherScatterMode.PROMISE_IN_BOUNDS)
    )


def _clamped_start(start: ir.Value, extent: Size, width: Size) -> ir.Value:
    """``clamp(0, start, extent - width)``, as ``i64``: where a gather starts its window."""
    i64 = ir.RankedTensorType.get([], mlir.dtype_to_ir_type(np.dtype("int64")))
    if ir.RankedTensorType(start.type).element_type != i64.element_type:
        start = hlo.convert(i64, start)
    upper = hlo.subtract(_as_value(extent), _as_value(width))
    return hlo.clamp(mlir.ir_constant(np.int64(0)), start, upper)


def _vector(values: Sequence[Size]) -> ir.Value:
    return index_vector([_as_value(v) for v in values])


IREE = LoweringTarget(
    "IREE",
    rules=((lax_internal.dot_general_p, _dot_general), (slicing.gather_p, _gather),
           *((prim, _scatter(prim)) for prim in _SCATTERS)),
    dynamic_reshape=lambda ctx, x, aval_out: _reshape(x, _sizes(ctx, aval_out)),
    dynamic_broadcast=_dynamic_broadcast,
    tie_sizes=True,
    resizing_loops=False,
    foreign_ops=True,
)
