"""StableHLO lowering of dynamically-shaped jaxprs (the JAX-internals side of ``QJIT.mlir``).

JAX 0.7 still lowers most primitives correctly when a shape holds dimension variables (it emits
``stablehlo.dynamic_broadcast_in_dim``, ``stablehlo.dynamic_iota`` and ``tensor<?x...>`` types),
but its top-level driver and two helpers rotted. This module

- repairs the helpers with two scoped :class:`~.patches.Patch` es (active only in the calling
  thread, inside :func:`~.tracing.dynamic_tracing`);
- replaces the driver by :func:`lower_jaxpr_to_stablehlo`, which builds one public ``func.func
  @main`` whose arguments are the jaxpr's inputs (implicit dimension arguments are ``tensor<i64>``)
  and lowers the body with ``mlir.jaxpr_subcomp``;
- offers what the lowering rules of catalyst_lite's own primitives need
  (:func:`register_lowering`, :func:`lower_nested_jaxpr`, :func:`ir_types`, ...), so that those
  rules never import ``jax._src`` themselves.

>>> import jax.numpy as jnp
>>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
>>> from catalyst_lite.jax_extras import ClosedJaxpr
>>> import numpy as np
>>> with dynamic_tracing():
...     in_type = make_input_type([np.int64(3)], [{}])
...     jaxpr, _, consts = trace_to_jaxpr(lambda n: [jnp.ones((n,))], in_type, "f")
>>> text = lower_jaxpr_to_stablehlo(ClosedJaxpr(jaxpr, consts), "f")
>>> "stablehlo.dynamic_broadcast_in_dim" in text and "tensor<?xf64>" in text
True
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np
from jax._src import core, sharding_impls, source_info_util
from jax._src.interpreters import mlir
from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import func as func_dialect
from jax._src.lib.mlir.dialects import hlo

from .patches import Patch, is_active, register_patch
from .shapes import SHAPE_PARAMS
from .tracing import dynamic_tracing

__all__ = [
    "lower_jaxpr_to_stablehlo",
    "check_parses",
    "register_lowering",
    "register_dynamic_lowering",
    "opaque_call",
    "LoweringRuleContext",
    "lower_nested_jaxpr",
    "ir_types",
    "carried_types",
    "while_op",
    "case_op",
    "counted_loop_condition",
    "add",
    "first_true_index",
]

LoweringRuleContext = mlir.LoweringRuleContext
IrValue = Any  # ir.Value, or a tuple of them for multi-value avals (not used by catalyst_lite)


# --- 1. Scoped repairs of JAX's lowering helpers --------------------------------------------------


def _shape_vars(atom: Any) -> list[core.Var]:
    """The dimension variables in the shape of ``atom``'s aval."""
    shape = getattr(getattr(atom, "aval", None), "shape", ())
    return [d for d in shape if isinstance(d, core.Var)]


def _make_last_used(original: Callable) -> Callable:
    # `jaxpr_subcomp` frees a variable after the last equation that has it as an *operand*, and
    # reads the dimension variables of each equation's operand *types* (`axis_size_env`). A size
    # `n` used only by `broadcast_in_dim` and later only in types (`f64[n]`) was freed too early:
    # KeyError. Here a use in a type counts as a use.
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


def _make_multi_broadcast_in_dim(original: Callable) -> Callable:
    # Elementwise rules broadcast scalar operands to the result shape through
    # `multi_broadcast_in_dim`, which builds a `ShapedArray` of that shape and so rejects
    # dimension variables ("Shapes must be 1D sequences of integer scalars"). A `DShapedArray`
    # result type makes `mlir.broadcast_in_dim` emit `stablehlo.dynamic_broadcast_in_dim`.
    # `out_sharding` (and anything after it) passes through untouched: it is optional in jax 0.7.1
    # (some rules omit it) and required in 0.7.2, and a dynamic shape has no sharding to apply.
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


LOWERING_PATCHES: tuple[Patch, ...] = (
    register_patch(
        Patch(
            "type_uses_keep_dimensions_alive",
            core,
            "last_used",
            _make_last_used,
            "jaxpr_subcomp keeps a dimension variable while a later equation's type mentions it",
        )
    ),
    register_patch(
        Patch(
            "dynamic_multi_broadcast_in_dim",
            mlir,
            "multi_broadcast_in_dim",
            _make_multi_broadcast_in_dim,
            "elementwise rules broadcast scalars to dynamically-shaped results",
        )
    ),
)


# --- 2. The driver --------------------------------------------------------------------------------


# JAX's own lowering rules that take dynamic sizes as trailing operands (the dynamic-shape API's
# convention, which ours follows).
_JAX_UNDERSTANDS_TRAILING_SIZES = frozenset(
    {
        lax_internal.broadcast_in_dim_p,
        lax_internal.iota_p,
        lax_internal.reshape_p,
        slicing.dynamic_slice_p,
    }
)


# Lowering rules for the dynamic program only (`QJIT.mlir`), for primitives that JAX cannot lower
# with symbolic sizes (see `register_dynamic_lowering`).
_DYNAMIC_ONLY_RULES: dict[core.Primitive, Callable] = {}


def register_dynamic_lowering(prim: core.Primitive, rule: Callable[..., Sequence[IrValue]]) -> None:
    """Lower ``prim`` with ``rule`` in the dynamic program (``QJIT.mlir``) only; specializations,
    where every size is known, keep its own lowering."""
    _DYNAMIC_ONLY_RULES[prim] = rule


def opaque_call(ctx: mlir.LoweringRuleContext, name: str, operands: Sequence[IrValue], config: str) -> list[IrValue]:
    """``stablehlo.custom_call @catalyst_lite.<name>``: an operation of the dynamic program whose
    body is only chosen at specialization (its operands and result types are the equation's)."""
    op = mlir.custom_call(
        f"catalyst_lite.{name}", result_types=ir_types(ctx.avals_out), operands=list(operands),
        backend_config=config,
    )
    return list(op.results)


def _sizes_as_operands_rules() -> tuple[tuple[core.Primitive, Callable], ...]:
    """Lowering rules for primitives whose dynamic sizes we carry as trailing operands.

    Our convention (:data:`~.shapes.SHAPE_PARAMS`) puts ``None`` in a size parameter and the size
    as an extra operand, e.g. ``gather[slice_sizes=(None,)] x idx n``. JAX's own rule for
    ``broadcast_in_dim``, ``iota``, ``reshape`` and ``dynamic_slice`` already understands this;
    for the others (``gather``) the override puts the operand's IR value back in the parameter,
    which JAX's rule then lowers with its dynamic-shape path (``stablehlo.dynamic_gather``).
    Overrides are scoped to this module context, unlike ``mlir.register_lowering``.
    """
    rules = list(_DYNAMIC_ONLY_RULES.items())
    for prim, param in SHAPE_PARAMS.items():
        if prim in _JAX_UNDERSTANDS_TRAILING_SIZES or prim in _DYNAMIC_ONLY_RULES:
            continue
        rules.append((prim, _with_sizes_in_param(mlir._lowerings[prim].rule, param)))
    return tuple(rules)


def _with_sizes_in_param(rule: Callable, param: str) -> Callable:
    def lower(ctx: mlir.LoweringRuleContext, *operands: Any, **params: Any) -> Any:
        sizes = params[param]
        ndyn = sum(d is None for d in sizes)
        if ndyn == 0:
            return rule(ctx, *operands, **params)
        dyn = iter(operands[len(operands) - ndyn :])
        filled = tuple(next(dyn) if d is None else d for d in sizes)
        ctx = ctx.replace(avals_in=ctx.avals_in[: len(operands) - ndyn])
        return rule(ctx, *operands[: len(operands) - ndyn], **dict(params, **{param: filled}))

    return lower




def _module_context(name: str) -> mlir.ModuleContext:
    """A fresh module context for the CPU; ``sym_name`` is the sanitized ``name``."""
    ctx = mlir.ModuleContext(
        platforms=("cpu",),
        backend=None,
        axis_context=sharding_impls.ShardingContext(1),
        keepalives=[],
        channel_iterator=itertools.count(1),  # HLO channels start at 1
        host_callbacks=[],
        lowering_parameters=mlir.LoweringParameters(
            override_lowering_rules=_sizes_as_operands_rules()
        ),
    )
    with ctx.context, ir.Location.unknown(ctx.context):
        module_name = mlir.sanitize_name(name).rstrip("_") or "jit_fn"
        ctx.module.operation.attributes["sym_name"] = ir.StringAttr.get(module_name)
    return ctx


def ir_types(avals: Sequence[core.AbstractValue]) -> list[ir.Type]:
    """IR types of ``avals``; a size that is not a number is a ``?`` dimension, and a PRNG key is
    its physical ``uint32`` array."""
    return [mlir.aval_to_ir_type(core.physical_aval(a)) for a in avals]


def _check_lowerable(closed_jaxpr: core.ClosedJaxpr) -> None:
    if not isinstance(closed_jaxpr, core.ClosedJaxpr):
        raise TypeError(f"expected a ClosedJaxpr, got {type(closed_jaxpr).__name__}")
    if closed_jaxpr.effects:
        effects = sorted(map(str, closed_jaxpr.effects))
        raise ValueError(f"cannot show the StableHLO of a program with side effects {effects}")


def lower_jaxpr_to_stablehlo(closed_jaxpr: core.ClosedJaxpr, name: str) -> str:
    """StableHLO text of ``closed_jaxpr`` as one public ``@main``, sizes kept symbolic.

    The constants of ``closed_jaxpr`` become ``stablehlo.constant`` s; every input (implicit
    dimensions first, as in the jaxpr) is an argument of ``@main``. The module is verified, and
    JAX's global configuration is not changed (dynamic shapes and x64 are switched on for this
    thread only, for the duration of the call).
    """
    _check_lowerable(closed_jaxpr)
    jaxpr = closed_jaxpr.jaxpr
    with dynamic_tracing():
        ctx = _module_context(name)
        with ctx.context, ir.Location.unknown(ctx.context):
            in_types = ir_types([v.aval for v in jaxpr.invars])
            out_types = ir_types([v.aval for v in jaxpr.outvars])
            main = func_dialect.FuncOp("main", ir.FunctionType.get(in_types, out_types), ip=ctx.ip)
            main.attributes["sym_visibility"] = ir.StringAttr.get("public")
            entry = main.regions[0].blocks.append(*in_types)
            with ir.InsertionPoint(entry):
                consts = [mlir.ir_constant(c) for c in closed_jaxpr.consts]
                outs = _jaxpr_subcomp(ctx, jaxpr, consts, list(entry.arguments), [], {})
                func_dialect.ReturnOp(mlir.flatten_ir_values(outs))
            _verify(ctx.module, name)
            return str(ctx.module)


def _verify(module: ir.Module, name: str) -> None:
    # A module that does not verify is a bug in a lowering rule, not in the user's program.
    try:
        ok = module.operation.verify()
    except Exception as err:  # MLIRError in recent jaxlibs, which report instead of returning
        raise RuntimeError(f"the StableHLO of {name} does not verify: {err}") from err
    if not ok:
        raise RuntimeError(f"the StableHLO of {name} does not verify")


def _jaxpr_subcomp(
    module_ctx: mlir.ModuleContext,
    jaxpr: core.Jaxpr,
    consts: Sequence[IrValue],
    args: Sequence[IrValue],
    dim_var_values: Sequence[ir.Value],
    const_lowering: dict,
    name_stack: source_info_util.NameStack | None = None,
) -> list[IrValue]:
    outs, _ = mlir.jaxpr_subcomp(
        module_ctx,
        jaxpr,
        name_stack if name_stack is not None else source_info_util.new_name_stack(),
        mlir.TokenSet(),
        list(consts),
        *args,
        dim_var_values=list(dim_var_values),
        const_lowering=const_lowering,
    )
    return list(outs)


def check_parses(text: str) -> None:
    """Raise ``ValueError`` unless ``text`` parses as an MLIR module with JAX's dialects.

    >>> check_parses("module { }")
    >>> try:
    ...     check_parses("not mlir")
    ... except ValueError:
    ...     print("rejected")
    rejected
    """
    with mlir.make_ir_context():
        try:
            ir.Module.parse(text)
        except Exception as err:  # MLIRError; its type differs between jaxlib versions
            raise ValueError(f"not a valid MLIR module: {err}") from err


# --- 3. For the lowering rules of catalyst_lite's primitives --------------------------------------


def register_lowering(prim: core.Primitive, rule: Callable[..., Sequence[IrValue]]) -> None:
    """Register ``rule(ctx, *operands, **params) -> results`` as the lowering of ``prim``."""
    mlir.register_lowering(prim, rule)


def lower_nested_jaxpr(
    ctx: mlir.LoweringRuleContext, jaxpr: core.Jaxpr | core.ClosedJaxpr, args: Sequence[IrValue]
) -> list[IrValue]:
    """Inline ``jaxpr(*args)`` at the current insertion point (e.g. inside a loop body region).

    ``jaxpr``'s inputs are all explicit values here (a nested body's implicit dimensions and
    hoisted constants are its leading arguments), so each body binds its own dimension variables.
    """
    consts: list[IrValue] = []
    if isinstance(jaxpr, core.ClosedJaxpr):
        consts = [mlir.ir_constant(c) for c in jaxpr.consts]
        jaxpr = jaxpr.jaxpr
    if len(args) != len(jaxpr.invars):
        raise ValueError(f"nested jaxpr takes {len(jaxpr.invars)} values, got {len(args)}")
    return _jaxpr_subcomp(
        ctx.module_context,
        jaxpr,
        consts,
        args,
        ctx.dim_var_values,
        ctx.const_lowering,
        ctx.name_stack,
    )


def _join_dims(a: ir.RankedTensorType, b: ir.RankedTensorType) -> ir.Type:
    dynamic = ir.ShapedType.get_dynamic_size()
    shape = [x if x == y else dynamic for x, y in zip(a.shape, b.shape)]
    return ir.RankedTensorType.get(shape, a.element_type)


def carried_types(operand_types: Sequence[ir.Type], body_types: Sequence[ir.Type]) -> list[ir.Type]:
    """Types of values carried by a loop: a size that differs between the operand and the body's
    result (or is ``?`` in either) is ``?``."""
    out = []
    for a, b in zip(operand_types, body_types):
        if ir.RankedTensorType.isinstance(a) and ir.RankedTensorType.isinstance(b) and a != b:
            a, b = ir.RankedTensorType(a), ir.RankedTensorType(b)
            out.append(_join_dims(a, b))
        else:
            out.append(a)
    return out


def _fit(value: ir.Value, typ: ir.Type) -> ir.Value:
    """``value`` with type ``typ`` (only ever a static size made ``?``, which ``convert`` does)."""
    return value if value.type == typ else hlo.convert(typ, value)


def while_op(
    init: Sequence[ir.Value],
    body_types: Sequence[ir.Type],
    cond: Callable[[list[ir.Value]], ir.Value],
    body: Callable[[list[ir.Value]], Sequence[ir.Value]],
) -> list[ir.Value]:
    """Emit ``stablehlo.while`` over the carried values ``init``; return its results.

    ``body_types`` are the types the body returns (from its jaxpr), so that a size that the loop
    changes is ``?`` in the carried type. ``cond(carry)`` returns a ``tensor<i1>``; ``body(carry)``
    returns the next carry. Values of the enclosing function (loop constants) may be used directly
    inside both regions: StableHLO regions capture them implicitly.
    """
    types = carried_types([v.type for v in init], body_types)
    op = hlo.WhileOp(types, [_fit(v, t) for v, t in zip(init, types)])
    cond_block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        hlo.return_([cond(list(cond_block.arguments))])
    body_block = op.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        nxt = body(list(body_block.arguments))
        hlo.return_([_fit(v, t) for v, t in zip(nxt, types)])
    return list(op.results)


def case_op(
    index: ir.Value,
    result_types: Sequence[ir.Type],
    branches: Sequence[Callable[[], Sequence[ir.Value]]],
) -> list[ir.Value]:
    """Emit ``stablehlo.case`` choosing ``branches[index]`` (an ``i32`` scalar); each branch
    function emits its operations and returns its results (which may use enclosing values)."""
    op = hlo.CaseOp(list(result_types), index=index, num_branches=len(branches))
    for region, branch in zip(op.regions, branches):
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            hlo.return_([_fit(v, t) for v, t in zip(branch(), result_types)])
    return list(op.results)


def first_true_index(preds: Sequence[ir.Value]) -> ir.Value:
    """``tensor<i32>`` index of the first of the ``tensor<i1>`` predicates that holds, or
    ``len(preds)`` when none does (the ``otherwise`` branch of a ``stablehlo.case``)."""
    index = mlir.ir_constant(np.int32(len(preds)))
    for i in reversed(range(len(preds))):
        index = hlo.select(preds[i], mlir.ir_constant(np.int32(i)), index)
    return index


def _compare_signed(x: ir.Value, y: ir.Value, direction: str) -> ir.Value:
    return hlo.compare(
        x,
        y,
        hlo.ComparisonDirectionAttr.get(direction),
        compare_type=hlo.ComparisonTypeAttr.get("SIGNED"),
    )


def counted_loop_condition(i: ir.Value, upper: ir.Value, step: ir.Value) -> ir.Value:
    """``i < upper`` when ``step > 0``, else ``i > upper`` (``range`` semantics)."""
    zero = mlir.ir_constant(np.zeros((), dtype=_signed_int_dtype(step.type)))
    return hlo.select(
        _compare_signed(step, zero, "GT"),
        _compare_signed(i, upper, "LT"),
        _compare_signed(i, upper, "GT"),
    )


def add(x: ir.Value, y: ir.Value) -> ir.Value:
    """``x + y`` of two values of one type."""
    return hlo.add(x, y)


def _signed_int_dtype(typ: ir.Type) -> np.dtype:
    element = ir.RankedTensorType(typ).element_type
    for dtype in map(np.dtype, ("int64", "int32", "int16", "int8")):
        if mlir.dtype_to_ir_type(dtype) == element:
            return dtype
    raise TypeError(f"a loop counter must be a signed integer scalar, got {typ}")
