"""StableHLO lowering of dynamically-shaped jaxprs (``QJIT.mlir``, IREE): who reads it
(:class:`LoweringTarget`, the running one :func:`current_target`), scoped repairs of JAX's lowering
helpers that rotted or never handled symbolic sizes, a driver (:func:`lower_jaxpr_to_stablehlo`)
replacing JAX's, and what the lowering rules of catalyst_lite's primitives need.

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

import contextlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from jax._src import core, sharding_impls, source_info_util
from jax._src import linear_util as lu
from jax._src.interpreters import mlir
from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import func as func_dialect
from jax._src.lib.mlir.dialects import hlo

from ..trace_context import current, scope
from .patches import repair
from .shapes import SHAPE_PARAMS, fill_sizes
from .tracing import dynamic_tracing

__all__ = [
    "UnsupportedLowering", "LoweringTarget", "DISPLAY", "current_target", "lowering_for", "size_vars",
    "expanding_dimensions", "display_rule", "lower_jaxpr_to_stablehlo", "check_parses", "register_lowering",
    "register_dynamic_lowering", "register_compiled_lowering", "opaque_call", "LoweringRuleContext",
    "lower_nested_jaxpr", "ir_types", "while_op", "case_op", "counted_loop_condition", "add",
    "first_true_index", "index_vector",
]


# --- lowering targets ----------------------------------------------------------------------------


class UnsupportedLowering(NotImplementedError):
    """The program uses what the lowering target cannot express (IREE: a resizing loop)."""


@dataclass(frozen=True)
class LoweringTarget:
    """What the StableHLO is for and what its reader needs beyond JAX's lowering (:data:`DISPLAY`:
    nothing; IREE: :mod:`.iree_lowering`): rules, reshape and broadcast forms, tied sizes, loops."""

    name: str
    rules: tuple[tuple[core.Primitive, Callable[..., Any]], ...] = ()
    dynamic_reshape: Callable[..., ir.Value] | None = None
    dynamic_broadcast: Callable[..., ir.Value] | None = None
    tie_sizes: bool = False
    resizing_loops: bool = True
    foreign_ops: bool = False


DISPLAY = LoweringTarget("display")


def current_target() -> LoweringTarget:
    """The target of the lowering running in this thread (:data:`DISPLAY` outside one)."""
    return current().lowering_target or DISPLAY


def lowering_for(target: LoweringTarget) -> contextlib.AbstractContextManager:
    """Lower for ``target`` in this thread during the block."""
    return scope(lowering_target=target)


# --- repairs of JAX's lowering helpers (each a scoped Patch) -------------------------------------


def size_vars(atom: Any) -> list[core.Var]:
    """The size variables in the type of ``atom``."""
    shape = getattr(getattr(atom, "aval", None), "shape", ())
    return [d for d in shape if isinstance(d, core.Var)]


@repair(core, "last_used",
        "jaxpr_subcomp keeps a dimension variable while a later equation's type mentions it")
def _last_used(original: Callable, jaxpr: core.Jaxpr) -> dict[core.Var, Any]:
    # `jaxpr_subcomp` frees a variable after its last use as an *operand*, yet reads the sizes in
    # operand *types* (`axis_size_env`): a size later used only in types was freed too early
    # (KeyError). Here a use in a type counts as a use.
    uses: dict[core.Var, Any] = {}
    for v in jaxpr.outvars:
        for u in [v, *size_vars(v)] if isinstance(v, core.Var) else []:
            uses.setdefault(u, None)
    for eqn in reversed(jaxpr.eqns):
        operands = [v for v in eqn.invars if isinstance(v, core.Var)]
        in_types = [d for v in (*eqn.invars, *eqn.outvars) for d in size_vars(v)]
        for u in (*operands, *in_types):
            uses.setdefault(u, eqn)
    return uses


@repair(mlir, "multi_broadcast_in_dim", "elementwise rules broadcast scalars to dynamically-shaped results")
def _multi_broadcast_in_dim(original: Callable, ctx, ops, ops_avals, out_shape, *args, **kwargs):
    # Elementwise rules broadcast scalars through `multi_broadcast_in_dim`, whose `ShapedArray`
    # rejects dimension variables; a `DShapedArray` result type makes `mlir.broadcast_in_dim` emit
    # `stablehlo.dynamic_broadcast_in_dim`. `out_sharding` (optional in jax 0.7.1, required in
    # 0.7.2) and what follows pass through: a dynamic shape has no sharding to apply.
    if core.is_constant_shape(out_shape):
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


@repair(mlir, "broadcast_in_dim",
        "stablehlo.dynamic_broadcast_in_dim records its expanding and kept dimensions")
def _broadcast_in_dim(original: Callable, ctx, op, aval_out, *, broadcast_dimensions):
    # IREE cannot lower a `stablehlo.dynamic_broadcast_in_dim` without knowing which dimensions
    # expand (1 -> n); a jaxpr only expands static 1s, so the operand's type tells: record it.
    target = current_target()
    if target.dynamic_broadcast and not core.is_constant_shape(aval_out.shape):
        return target.dynamic_broadcast(ctx, op, aval_out, broadcast_dimensions)
    out = original(ctx, op, aval_out, broadcast_dimensions=broadcast_dimensions)
    if out.owner.name == "stablehlo.dynamic_broadcast_in_dim":
        dims = broadcast_dimensions
        expanding = expanding_dimensions(ir.RankedTensorType(op.type), aval_out.shape, dims)
        kept = [i for i in range(len(dims)) if i not in expanding]
        out.owner.attributes["known_expanding_dimensions"] = ir.DenseI64ArrayAttr.get(expanding)
        out.owner.attributes["known_nonexpanding_dimensions"] = ir.DenseI64ArrayAttr.get(kept)
    return out


def expanding_dimensions(
    operand_type: ir.RankedTensorType, out_shape: Sequence[Any], dims: Sequence[int]
) -> list[int]:
    """The operand dimensions a broadcast expands: static 1s whose result size is not a static 1."""
    return [
        i for i, d in enumerate(dims)
        if operand_type.shape[i] == 1 and not (type(out_shape[d]) is int and out_shape[d] == 1)
    ]


@repair(lu, "annotate", "helpers lowered with mlir.lower_fun take int64 dimensions, used or not")
def _annotate(original: Callable, fun: Any, in_type: Any) -> Any:
    # `mlir.lower_fun` (`cumsum`, `argmax`, `sort`'s comparator...) re-traces a helper with one
    # implicit argument per dimension in scope, typed int32 while ours are int64 (its size
    # arithmetic failed), and `annotate` insists that an explicit argument's shape uses each (a
    # comparator's scalars never do). Here they are int64 and may go unused.
    if in_type is None:
        return original(fun, in_type)
    in_type = tuple(
        (_INDEX_AVAL, keep) if not keep and aval == _INT32_AVAL else (aval, keep)
        for aval, keep in in_type
    )
    return lu.WrappedFun(
        fun.f, fun.f_transformed, fun.transforms, fun.stores, fun.params, in_type, fun.debug_info
    )


_INT32_AVAL = core.ShapedArray((), np.dtype("int32"))
_INDEX_AVAL = core.ShapedArray((), np.dtype("int64"))


@repair(mlir, "reshape", "a reshape to symbolic sizes takes the form the lowering target needs")
def _reshape(original: Callable, ctx, op, aval_out):
    # A target may need another form than `stablehlo.dynamic_reshape` (IREE does not lower it).
    target = current_target()
    if target.dynamic_reshape and not core.is_constant_shape(aval_out.shape):
        return target.dynamic_reshape(ctx, op, aval_out)
    return original(ctx, op, aval_out)


LoweringRuleContext = mlir.LoweringRuleContext
IrValue = Any  # ir.Value, or a tuple of them for multi-value avals (not used by catalyst_lite)


# --- the driver ----------------------------------------------------------------------------------

# JAX's own lowering rules that take dynamic sizes as trailing operands (our convention too).
_JAX_UNDERSTANDS_TRAILING_SIZES = frozenset(
    {lax_internal.broadcast_in_dim_p, lax_internal.iota_p, lax_internal.reshape_p, slicing.dynamic_slice_p}
)

# Lowering rules for the dynamic program only (see `register_dynamic_lowering`).
_DYNAMIC_ONLY_RULES: dict[core.Primitive, Callable] = {}


def register_dynamic_lowering(prim: core.Primitive, rule: Callable[..., Sequence[IrValue]]) -> None:
    """Lower ``prim`` with ``rule`` in the dynamic program (``QJIT.mlir``) only, not specializations."""
    _DYNAMIC_ONLY_RULES[prim] = rule


def register_compiled_lowering(prim: core.Primitive, impl: Callable[..., Sequence[Any]]) -> None:
    """Lower ``prim`` in compiled programs as ``impl(*operands, **params)`` (JAX operations): for
    its equations inside a JAX primitive that specialization binds whole (``lax.fori_loop``)."""
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=True))


def opaque_call(ctx: mlir.LoweringRuleContext, name: str, operands: Sequence[IrValue], config: str,
                has_side_effect: bool = False) -> list[IrValue]:
    """``stablehlo.custom_call @catalyst_lite.<name>``: an operation of the dynamic program whose
    body is only chosen at specialization (its operands and result types are the equation's)."""
    op = mlir.custom_call(
        f"catalyst_lite.{name}", result_types=ir_types(ctx.avals_out), operands=list(operands),
        backend_config=config, has_side_effect=has_side_effect,
    )
    return list(op.results)


def _display_rules() -> tuple[tuple[core.Primitive, Callable], ...]:
    """Our overrides of JAX's rules: trailing size operands put back in their parameter, and static
    operand types for ``reduce`` and ``sort`` (which read only ranks and dtypes)."""
    rules = list(_DYNAMIC_ONLY_RULES.items())
    for prim in SHAPE_PARAMS:
        if prim not in _JAX_UNDERSTANDS_TRAILING_SIZES and prim not in _DYNAMIC_ONLY_RULES:
            rules.append((prim, _with_sizes_in_param(mlir._lowerings[prim].rule, prim)))
    for prim in (lax_internal.reduce_p, lax_internal.sort_p):
        rules.append((prim, _with_static_operand_types(mlir._lowerings[prim].rule)))
    return tuple(rules)


def _with_static_operand_types(rule: Callable) -> Callable:
    def static(aval: core.AbstractValue) -> core.AbstractValue:
        if type(aval) is not core.DShapedArray:
            return aval
        shape = tuple(d if type(d) is int else 1 for d in aval.shape)
        return core.ShapedArray(shape, aval.dtype, aval.weak_type)

    def lower(ctx: mlir.LoweringRuleContext, *operands: Any, **params: Any) -> Any:
        return rule(ctx.replace(avals_in=[static(a) for a in ctx.avals_in]), *operands, **params)

    return lower


def display_rule(prim: core.Primitive) -> Callable[..., Any]:
    """The lowering rule of ``prim`` for :data:`DISPLAY` (JAX's for the CPU, or our repair of it)."""
    rule = next((rule for p, rule in _display_rules() if p is prim), None)
    if rule is not None:
        return rule
    cpu_rules = mlir._platform_specific_lowerings.get("cpu", {})
    return (cpu_rules.get(prim) or mlir._lowerings[prim]).rule


def _with_sizes_in_param(rule: Callable, prim: core.Primitive) -> Callable:
    def lower(ctx: mlir.LoweringRuleContext, *operands: Any, **params: Any) -> Any:
        operands, params = fill_sizes(prim, list(operands), params, lambda size: size)
        return rule(ctx.replace(avals_in=ctx.avals_in[: len(operands)]), *operands, **params)

    return lower


def _module_context(name: str, target: LoweringTarget) -> mlir.ModuleContext:
    ctx = mlir.ModuleContext(
        platforms=("cpu",),
        backend=None,
        axis_context=sharding_impls.ShardingContext(1),
        keepalives=[],
        channel_iterator=itertools.count(1),  # HLO channels start at 1
        host_callbacks=[],
        lowering_parameters=mlir.LoweringParameters(
            # The first rule listed for a primitive wins: the target's own come first.
            override_lowering_rules=(*target.rules, *_display_rules())
        ),
    )
    ctx.context.allow_unregistered_dialects = target.foreign_ops
    with ctx.context, ir.Location.unknown(ctx.context):
        module_name = mlir.sanitize_name(name).rstrip("_") or "jit_fn"
        ctx.module.operation.attributes["sym_name"] = ir.StringAttr.get(module_name)
    return ctx


def ir_types(avals: Sequence[core.AbstractValue]) -> list[ir.Type]:
    """IR types of ``avals`` (a symbolic size is ``?``; a PRNG key its physical ``uint32`` array)."""
    return [mlir.aval_to_ir_type(core.physical_aval(a)) for a in avals]


def lower_jaxpr_to_stablehlo(
    closed_jaxpr: core.ClosedJaxpr, name: str, target: LoweringTarget = DISPLAY
) -> str:
    """StableHLO text of ``closed_jaxpr`` as one public, verified ``@main``, sizes kept symbolic,
    for ``target`` (:class:`UnsupportedLowering` when it cannot express the program)."""
    if not isinstance(closed_jaxpr, core.ClosedJaxpr):
        raise TypeError(f"expected a ClosedJaxpr, got {type(closed_jaxpr).__name__}")
    if closed_jaxpr.effects:
        effects = sorted(map(str, closed_jaxpr.effects))
        raise ValueError(f"cannot show the StableHLO of a program with side effects {effects}")
    jaxpr = closed_jaxpr.jaxpr
    with dynamic_tracing(), lowering_for(target):
        ctx = _module_context(name, target)
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
    module_ctx: mlir.ModuleContext, jaxpr: core.Jaxpr, consts: Sequence[IrValue], args: Sequence[IrValue],
    dim_var_values: Sequence[ir.Value], const_lowering: dict, name_stack: Any = None,
) -> list[IrValue]:
    name_stack = source_info_util.new_name_stack() if name_stack is None else name_stack
    outs, _ = mlir.jaxpr_subcomp(
        module_ctx, jaxpr, name_stack, mlir.TokenSet(), list(consts), *args,
        dim_var_values=list(dim_var_values), const_lowering=const_lowering,
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


# --- for the lowering rules of catalyst_lite's primitives ----------------------------------------


def register_lowering(prim: core.Primitive, rule: Callable[..., Sequence[IrValue]]) -> None:
    """Register ``rule(ctx, *operands, **params) -> results`` as the lowering of ``prim``."""

    def lower(ctx: mlir.LoweringRuleContext, *operands: Any, **params: Any) -> Sequence[IrValue]:
        results = rule(ctx, *operands, **params)
        if not current_target().tie_sizes:
            return results
        # tied to the sizes in scope (not to a size the equation itself returns)
        return [_tied(x, aval, ctx.axis_size_env or {}) for x, aval in zip(results, ctx.avals_out)]

    mlir.register_lowering(prim, lower)


def _tied(x: ir.Value, aval: core.AbstractValue, env: dict) -> ir.Value:
    """``x`` re-sliced to its full extent with the sizes its type names read from ``env`` (when all are)."""
    if type(aval) is not core.DShapedArray or not all(type(d) is int or d in env for d in aval.shape):
        return x
    sizes = [mlir.ir_constant(np.int64(d)) if type(d) is int else env[d] for d in aval.shape]
    zeros, ones = (mlir.ir_constant(np.full((len(sizes),), v, np.int64)) for v in (0, 1))
    return hlo.real_dynamic_slice(x.type, x, zeros, index_vector(sizes), ones)


def lower_nested_jaxpr(
    ctx: mlir.LoweringRuleContext, jaxpr: core.Jaxpr | core.ClosedJaxpr, args: Sequence[IrValue]
) -> list[IrValue]:
    """Inline ``jaxpr(*args)`` at the insertion point (``args``: all its inputs, implicit ones first)."""
    consts: list[IrValue] = []
    if isinstance(jaxpr, core.ClosedJaxpr):
        consts = [mlir.ir_constant(c) for c in jaxpr.consts]
        jaxpr = jaxpr.jaxpr
    if current_target().tie_sizes:
        args = _tied_to_their_sizes(jaxpr, args)
    return _jaxpr_subcomp(
        ctx.module_context, jaxpr, consts, args, ctx.dim_var_values, ctx.const_lowering, ctx.name_stack
    )


def _tied_to_their_sizes(jaxpr: core.Jaxpr, args: Sequence[IrValue]) -> list[IrValue]:
    """``args`` tied to the body's earlier dimension arguments (else IREE cannot tell a nested loop's
    carried sizes: "dynamic dimensions must have been resolved")."""
    env: dict[core.Var, IrValue] = {}
    out = []
    for v, x in zip(jaxpr.invars, args):
        out.append(_tied(x, v.aval, env))
        env[v] = x
    return out


def index_vector(scalars: Sequence[ir.Value]) -> ir.Value:
    """A ``tensor<Nxi64>`` of ``N`` integer scalars (any integer type)."""
    i64 = mlir.dtype_to_ir_type(np.dtype("int64"))
    one = ir.RankedTensorType.get([1], i64)
    parts = [
        hlo.reshape(one, s if ir.RankedTensorType(s.type).element_type == i64
                    else hlo.convert(ir.RankedTensorType.get([], i64), s))
        for s in scalars
    ]
    if not parts:
        return mlir.ir_constant(np.zeros((0,), np.int64))
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, 0)


def _carried_types(operand_types: Sequence[ir.Type], body_types: Sequence[ir.Type]) -> list[ir.Type]:
    """A loop's carried types: a size differing between operand and body result is ``?``."""
    out = []
    for a, b in zip(operand_types, body_types):
        if ir.RankedTensorType.isinstance(a) and ir.RankedTensorType.isinstance(b) and a != b:
            a, b = ir.RankedTensorType(a), ir.RankedTensorType(b)
            shape = [x if x == y else ir.ShapedType.get_dynamic_size() for x, y in zip(a.shape, b.shape)]
            a = ir.RankedTensorType.get(shape, a.element_type)
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
    resizes: bool = False,
) -> list[ir.Value]:
    """Emit ``stablehlo.while`` over ``init`` (``cond(carry) -> tensor<i1>``, ``body(carry) -> carry``);
    a size that ``body_types`` change is ``?``; ``resizes``: refused by targets without such loops."""
    if resizes and not current_target().resizing_loops:
        raise UnsupportedLowering(
            f"a loop that resizes its carried arrays (lowering for {current_target().name})"
        )
    types = _carried_types([v.type for v in init], body_types)
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
    index: ir.Value, result_types: Sequence[ir.Type], branches: Sequence[Callable[[], Sequence[ir.Value]]]
) -> list[ir.Value]:
    """Emit ``stablehlo.case`` choosing ``branches[index]``; each branch emits and returns results."""
    op = hlo.CaseOp(list(result_types), index=index, num_branches=len(branches))
    for region, branch in zip(op.regions, branches):
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            hlo.return_([_fit(v, t) for v, t in zip(branch(), result_types)])
    return list(op.results)


add = hlo.add  # x + y, of two values of one type


def first_true_index(preds: Sequence[ir.Value]) -> ir.Value:
    """``tensor<i32>`` index of the first true ``tensor<i1>`` predicate, else ``len(preds)``."""
    index = mlir.ir_constant(np.int32(len(preds)))
    for i in reversed(range(len(preds))):
        index = hlo.select(preds[i], mlir.ir_constant(np.int32(i)), index)
    return index


def _compare_signed(x: ir.Value, y: ir.Value, direction: str) -> ir.Value:
    direction = hlo.ComparisonDirectionAttr.get(direction)
    return hlo.compare(x, y, direction, compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))


def counted_loop_condition(i: ir.Value, upper: ir.Value, step: ir.Value) -> ir.Value:
    """``i < upper`` when ``step > 0``, else ``i > upper`` (``range`` semantics)."""
    zero = mlir.ir_constant(np.zeros((), dtype=_signed_int_dtype(step.type)))
    return hlo.select(
        _compare_signed(step, zero, "GT"), _compare_signed(i, upper, "LT"), _compare_signed(i, upper, "GT")
    )


def _signed_int_dtype(typ: ir.Type) -> np.dtype:
    element = ir.RankedTensorType(typ).element_type
    for dtype in map(np.dtype, ("int64", "int32", "int16", "int8")):
        if mlir.dtype_to_ir_type(dtype) == element:
            return dtype
    raise TypeError(f"a loop counter must be a signed integer scalar, got {typ}")
