"""Scoped repairs (:class:`~.patches.Patch`) of JAX's lowering helpers that rotted or never handled
symbolic sizes; two also give the lowering target (:mod:`.lowering_targets`) its say on reshapes
and broadcasts to symbolic sizes.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from jax._src import core
from jax._src import linear_util as lu
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir

from .lowering_targets import current_target
from .patches import Patch, is_active, register_patch

__all__ = ["expanding_dimensions"]


def _shape_vars(atom: Any) -> list[core.Var]:
    shape = getattr(getattr(atom, "aval", None), "shape", ())
    return [d for d in shape if isinstance(d, core.Var)]


def _make_last_used(original: Callable) -> Callable:
    # `jaxpr_subcomp` frees a variable after its last use as an *operand*, yet reads the sizes in
    # operand *types* (`axis_size_env`): a size later used only in types was freed too early
    # (KeyError). Here a use in a type counts as a use.
    def last_used(jaxpr: core.Jaxpr) -> dict[core.Var, Any]:
        if not is_active():
            return original(jaxpr)
        uses: dict[core.Var, Any] = {}
        for v in jaxpr.outvars:
            for u in [v, *_shape_vars(v)] if isinstance(v, core.Var) else []:
                uses.setdefault(u, None)
        for eqn in reversed(jaxpr.eqns):
            operands = [v for v in eqn.invars if isinstance(v, core.Var)]
            in_types = [d for v in (*eqn.invars, *eqn.outvars) for d in _shape_vars(v)]
            for u in (*operands, *in_types):
                uses.setdefault(u, eqn)
        return uses

    return last_used


register_patch(Patch(
    "type_uses_keep_dimensions_alive", core, "last_used", _make_last_used,
    "jaxpr_subcomp keeps a dimension variable while a later equation's type mentions it",
))


def _make_multi_broadcast_in_dim(original: Callable) -> Callable:
    # Elementwise rules broadcast scalars through `multi_broadcast_in_dim`, whose `ShapedArray`
    # rejects dimension variables; a `DShapedArray` result type makes `mlir.broadcast_in_dim` emit
    # `stablehlo.dynamic_broadcast_in_dim`. `out_sharding` (optional in jax 0.7.1, required in
    # 0.7.2) and what follows pass through: a dynamic shape has no sharding to apply.
    def multi_broadcast_in_dim(ctx, ops, ops_avals, out_shape, *args, **kwargs):
        if not is_active() or core.is_constant_shape(out_shape):
            return original(ctx, ops, ops_avals, out_shape, *args, **kwargs)
        out = []
        for op, aval in zip(ops, ops_avals):
            if core.definitely_equal_shape(aval.shape, out_shape):
                out.append(op)
                continue
            out_aval = core.DShapedArray(tuple(out_shape), aval.dtype, aval.weak_type)
            dims = list(range(len(out_shape) - len(aval.shape), len(out_shape)))
            out.append(mlir.broadcast_in_dim(ctx, op, out_aval, broadcast_dimensions=dims))
        return out

    return multi_broadcast_in_dim


register_patch(Patch(
    "dynamic_multi_broadcast_in_dim", mlir, "multi_broadcast_in_dim", _make_multi_broadcast_in_dim,
    "elementwise rules broadcast scalars to dynamically-shaped results",
))


def _make_broadcast_in_dim(original: Callable) -> Callable:
    # IREE cannot lower a `stablehlo.dynamic_broadcast_in_dim` without knowing which dimensions
    # expand (1 -> n); a jaxpr only expands static 1s, so the operand's type tells: record it.
    def broadcast_in_dim(ctx, op, aval_out, *, broadcast_dimensions):
        target = current_target()
        if is_active() and target.dynamic_broadcast and not core.is_constant_shape(aval_out.shape):
            return target.dynamic_broadcast(ctx, op, aval_out, broadcast_dimensions)
        out = original(ctx, op, aval_out, broadcast_dimensions=broadcast_dimensions)
        if is_active() and out.owner.name == "stablehlo.dynamic_broadcast_in_dim":
            dims = broadcast_dimensions
            expanding = expanding_dimensions(ir.RankedTensorType(op.type), aval_out.shape, dims)
            kept = [i for i in range(len(dims)) if i not in expanding]
            out.owner.attributes["known_expanding_dimensions"] = ir.DenseI64ArrayAttr.get(expanding)
            out.owner.attributes["known_nonexpanding_dimensions"] = ir.DenseI64ArrayAttr.get(kept)
        return out

    return broadcast_in_dim


register_patch(Patch(
    "dynamic_broadcasts_say_what_expands", mlir, "broadcast_in_dim", _make_broadcast_in_dim,
    "stablehlo.dynamic_broadcast_in_dim records its expanding and kept dimensions",
))


def expanding_dimensions(
    operand_type: ir.RankedTensorType, out_shape: Sequence[Any], dims: Sequence[int]
) -> list[int]:
    """The operand dimensions a broadcast expands: those of static size 1 whose result size is
    not a static 1 (a jaxpr never broadcasts a symbolic size)."""
    return [
        i for i, d in enumerate(dims)
        if operand_type.shape[i] == 1 and not (type(out_shape[d]) is int and out_shape[d] == 1)
    ]


def _make_annotate(original: Callable) -> Callable:
    # `mlir.lower_fun` (`cumsum`, `argmax`, `sort`'s comparator...) re-traces a helper with one
    # implicit argument per dimension in scope, typed int32 while ours are int64 (its size
    # arithmetic failed), and `annotate` insists that an explicit argument's shape uses each (a
    # comparator's scalars never do). Here they are int64 and may go unused.
    def annotate(fun: Any, in_type: Any) -> Any:
        if not is_active() or in_type is None:
            return original(fun, in_type)
        in_type = tuple(
            (_INDEX_AVAL, keep) if not keep and aval == _INT32_AVAL else (aval, keep)
            for aval, keep in in_type
        )
        return lu.WrappedFun(
            fun.f, fun.f_transformed, fun.transforms, fun.stores, fun.params, in_type, fun.debug_info
        )

    return annotate


register_patch(Patch(
    "lower_fun_dimensions_are_int64", lu, "annotate", _make_annotate,
    "helpers lowered with mlir.lower_fun take int64 dimensions, used or not",
))


_INT32_AVAL = core.ShapedArray((), np.dtype("int32"))
_INDEX_AVAL = core.ShapedArray((), np.dtype("int64"))


def _make_reshape(original: Callable) -> Callable:
    # A target may need another form than `stablehlo.dynamic_reshape` (IREE does not lower it).
    def reshape(ctx, op, aval_out):
        target = current_target()
        if is_active() and target.dynamic_reshape and not core.is_constant_shape(aval_out.shape):
            return target.dynamic_reshape(ctx, op, aval_out)
        return original(ctx, op, aval_out)

    return reshape


register_patch(Patch(
    "reshape_for_the_target", mlir, "reshape", _make_reshape,
    "a reshape to symbolic sizes takes the form the lowering target needs",
))
