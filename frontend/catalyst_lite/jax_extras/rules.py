"""One :class:`PrimitiveSpec` per primitive (registered by the primitive's own module, read by the
compiler with :func:`spec_of`), and the JAX rules of catalyst_lite's nested primitives made from it
(:func:`register_nested_primitive`): with known sizes JAX transforms an equation's specialization,
with symbolic ones the primitive is bound again with bodies traced by :func:`~.nested.retrace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config, core, source_info_util
from jax._src.interpreters import ad, batching, mlir
from jax._src.interpreters import partial_eval as pe

from ..errors import CompileError
from .autodiff import is_reverse_mode_value
from .dynshape import OutputType, array_aval, has_symbolic_shape, same_dim
from .host_callbacks import keep_when_unused
from .lowering import register_compiled_lowering, register_dynamic_lowering, register_lowering
from .nested import interleave
from .tracing import InDBIdx, Jaxpr, OutDBIdx, Var, constant_value, dimension_value, emit_equation, get_aval

__all__ = [
    "Feeds", "NeedsHost", "PrimitiveSpec", "Zero", "batch_call", "bind_known", "deferred_vjp",
    "instantiate_zeros", "jvp_call", "move_batch_axis", "nested_primitives", "not_mapped",
    "register_nested_primitive", "register_primitive", "result_avals", "same_atoms", "size_check_primitive",
    "spec_of", "specialized", "unknown_results", "zero_tangent",
]

Zero = ad.Zero
not_mapped = batching.not_mapped
instantiate_zeros = ad.instantiate_zeros  # a tangent as an array (zeros for a Zero)
zero_tangent = Zero.from_primal_value

# params -> for each nested jaxpr, the operand that feeds each of its binders (on entry)
Feeds = Callable[[dict[str, Any]], list[tuple[Jaxpr, list[int]]]]
# (params, same_operand(i, j)) -> the output type, with InDBIdx/OutDBIdx
OutputTypeRule = Callable[[dict[str, Any], Callable[[int, int], bool]], OutputType]


# --- abstract evaluation and staging -------------------------------------------------------------


def _sizes_from_types(avals: Sequence[Any], feeds: list[tuple[Jaxpr, list[int]]]) -> dict[int, Any]:
    """Operand sizes read from the other operands' types (``e:f64[d]`` fed ``f64[4]``: ``d`` is 4)."""
    sizes: dict[int, Any] = {}
    for jaxpr, feed in feeds:
        fed_by = dict(zip(jaxpr.invars, feed))
        for v, k in zip(jaxpr.invars, feed):
            for d_binder, d_operand in zip(getattr(v.aval, "shape", ()), getattr(avals[k], "shape", ())):
                if isinstance(d_binder, Var) and d_binder in fed_by:
                    sizes.setdefault(fed_by[d_binder], d_operand)
    return sizes


def _resolve_output_type(
    out_type: OutputType, sizes: Mapping[int, Any], result_sizes: Sequence[Any] = ()
) -> list[Any]:
    """The result avals: ``InDBIdx(k)`` is ``sizes[k]``, ``OutDBIdx(k)`` ``result_sizes[k]`` (if given)."""

    def size(d: Any) -> Any:
        if type(d) is InDBIdx and sizes.get(d.val) is not None:
            value = sizes[d.val]
            return int(value) if isinstance(value, np.integer) else value  # a shape holds ints
        if type(d) is OutDBIdx and d.val < len(result_sizes) and result_sizes[d.val] is not None:
            return result_sizes[d.val]
        return d

    return [
        array_aval([size(d) for d in a.shape], a.dtype, a.weak_type) if has_symbolic_shape(a) else a
        for a, _ in out_type
    ]


def result_avals(
    output_type: OutputTypeRule,
    params: dict[str, Any],
    operands: Sequence[Any],
    feeds: Feeds,
    results: Sequence[Any] = (),
) -> list[Any]:
    """The result avals of an equation: sizes from operand (and ``results``) values if known, else types."""
    sizes = _sizes_from_types([get_aval(x) for x in operands], feeds(params))
    sizes.update({k: v for k, x in enumerate(operands) if (v := dimension_value(x)) is not None})
    out_type = output_type(params, _same_size(sizes))
    return _resolve_output_type(out_type, sizes, [dimension_value(r) for r in results])


def _same_size(sizes: Mapping[int, Any]) -> Callable[[int, int], bool]:
    """``same_operand`` when only the operands' sizes are known: one operand, or equal sizes."""
    return lambda i, j: i == j or (
        sizes.get(i) is not None and sizes.get(j) is not None and same_dim(sizes[i], sizes[j])
    )


def same_atoms(values: Sequence[Any]) -> Callable[[int, int], bool]:
    """``same_operand(i, j)``: ``values[i]`` and ``values[j]`` are one variable, or equal literals."""

    def atom(x: Any) -> Any:
        return x.val if isinstance(x, pe.DynamicJaxprTracer) else x

    def same(i: int, j: int) -> bool:
        a, b = atom(values[i]), atom(values[j])
        if isinstance(a, core.Literal) and isinstance(b, core.Literal):
            return bool(a.val == b.val)
        return a is b

    return same


def _staging_rule(primitive: core.Primitive, output_type: OutputTypeRule) -> Callable[..., list[Any]]:
    """With dynamic shapes, one equation typed against the operand tracers; otherwise (``jax.jit`` of
    numbers) its specialization, on the operands' values where the trace knows them."""

    def rule(trace: pe.DynamicJaxprTrace, source_info: Any, *tracers: Any, **params: Any) -> list[Any]:
        if config.dynamic_shapes.value:
            out_type = output_type(params, same_atoms(tracers))
            with source_info_util.user_context(source_info.traceback):
                return emit_equation(primitive, tracers, out_type, params, trace)
        values = [_known_value(t) for t in tracers]
        with core.set_current_trace(trace):
            outs = _specialized_or_error(primitive, values, params, "staged with static shapes")
            return [trace.to_jaxpr_tracer(x, source_info) for x in outs]

    return rule


def _known_value(x: Any) -> Any:
    """The value of ``x`` when its trace knows it (a literal or a constant), else ``x`` itself."""
    if isinstance(x, pe.DynamicJaxprTracer) and x._trace.is_valid():
        const = x.val.val if isinstance(x.val, core.Literal) else constant_value(x)
        return x if const is None else const
    return x


# --- one specification per primitive ------------------------------------------------------------


class NeedsHost(Exception):
    """Raised while staging when a size is only known at run time. ``equation``: ``(jaxpr,
    index)`` of the outermost equation it was raised from (set by the compiler's interpreter)."""

    equation: tuple[Jaxpr, int] | None = None


# rule(operands, params) -> results, at concrete sizes
Rule = Callable[[list[Any], dict[str, Any]], Sequence[Any]]


@dataclass(frozen=True)
class PrimitiveSpec:
    """What catalyst_lite knows of one primitive beyond JAX's own tables."""

    # JAX's rules of a nested primitive (jvp, batching, partial_eval: for symbolic sizes)
    output_type: OutputTypeRule | None = None
    feeds: Feeds | None = None  # which operands feed which body
    check: Callable[[list[Any], dict[str, Any]], None] | None = None  # raises for ill-typed operands
    jvp: Callable[..., Any] | None = None
    batching: Callable[..., Any] | None = None
    partial_eval: Callable[..., Any] | None = None
    # At concrete sizes (compiler/specialize.py): inside one XLA program (raises NeedsHost when a size is
    # known only at run time), driven from Python (also the impl), the operands a specialization keys on.
    staged: Rule | None = None
    host: Rule | None = None
    dimension_operands: Callable[[dict[str, Any]], set[int]] | None = None
    # On capacity buffers (compiler/capacity.py): masked(eqn, invals, env, checks); the bodies a masked
    # loop looks into for sizes known only in its iteration; the traced flag of a size check.
    masked: Callable[..., list[Any]] | None = None
    bodies: Callable[[dict[str, Any]], Sequence[Jaxpr]] | None = None
    size_check: Callable[..., Any] | None = None
    # The StableHLO of the dynamic program, and (JAX operations, impl(*operands, **params)) the
    # lowering of equations inside a JAX primitive that specialization binds whole (a fori_loop).
    lowering: Callable[..., Any] | None = None
    compiled_lowering: Callable[..., Sequence[Any]] | None = None
    # JAX's differentiation keeps the equation (transposed by deferred_vjp), not its specialization.
    kept_under_differentiation: Callable[[Sequence[Any], dict[str, Any]], bool] | None = None
    kept_when_unused: bool = False  # a pruned program keeps its equations (a host callback)


_specs: dict[core.Primitive, PrimitiveSpec] = {}  # filled at import by the primitives' modules


def spec_of(primitive: core.Primitive) -> PrimitiveSpec | None:
    """The :class:`PrimitiveSpec` of ``primitive`` (``None``: JAX's rules alone)."""
    return _specs.get(primitive)


def register_primitive(primitive: core.Primitive, spec: PrimitiveSpec) -> None:
    """Register ``spec`` as what catalyst_lite knows of ``primitive`` (one record a primitive):
    its ``host`` rule becomes its ``impl``, its ``lowering`` its lowering in dynamic programs.

    >>> from jax import lax
    >>> spec_of(lax.concatenate_p).masked is not None  # registered by compiler/capacity.py
    True
    """
    _specs[primitive] = spec
    if spec.kept_when_unused:
        keep_when_unused(primitive)  # what prune_jaxpr reads (tracing.py is below this module)
    if spec.host is not None:
        primitive.def_impl(lambda *invals, **params: spec.host(list(invals), params))
    if spec.compiled_lowering is not None:
        register_dynamic_lowering(primitive, spec.lowering)
        register_compiled_lowering(primitive, spec.compiled_lowering)
    elif spec.lowering is not None:
        register_lowering(primitive, spec.lowering)


def size_check_primitive(name: str, check: Callable[..., list], holds: Callable[..., Any]) -> core.Primitive:
    """A primitive of no results whose ``check(lhs, rhs, **params)`` raises at specialization for
    sizes that fail it; ``holds``: the same test as a traced flag (on a loop's capacity buffers)."""
    primitive = core.Primitive(name)
    primitive.multiple_results = True
    primitive.def_impl(check)
    primitive.def_abstract_eval(lambda *args, **params: [])
    mlir.register_lowering(primitive, lambda ctx, *args, **params: [])
    # Both sides are sizes: a specialization is keyed on them, and they are ints when checked.
    register_primitive(primitive, PrimitiveSpec(dimension_operands=lambda params: {0, 1}, size_check=holds))
    return primitive


# deferred_vjp(fn, points, cotangents) -> cotangents of fn's inputs: a reverse-mode derivative
# taken when the program is specialized, registered by catalyst_lite.transforms.differentiation.
deferred_vjp: list[Callable[[Callable, list[Any], list[Any]], list[Any]]] = []


def _kept(primitive: core.Primitive, operands: Sequence[Any], params: dict[str, Any]) -> bool:
    kept = _specs[primitive].kept_under_differentiation
    return kept is not None and kept(operands, params)


def specialized(primitive: core.Primitive, operands: Sequence[Any], params: dict) -> list[Any] | None:
    """The equation's staged rule, when operands have static shapes and known sizes; else ``None``."""
    spec, operands = _specs[primitive], list(operands)
    if any(has_symbolic_shape(get_aval(x)) for x in operands):
        return None
    sizes = {k: dimension_value(operands[k]) for k in spec.dimension_operands(params)}
    if any(v is None or isinstance(v, core.Tracer) for v in sizes.values()):
        return None
    try:
        return list(spec.staged([sizes.get(k, v) for k, v in enumerate(operands)], params))
    except NeedsHost:
        return None


def _specialized_or_error(primitive: core.Primitive, operands: Sequence, params: dict, what: str) -> list:
    outs = specialized(primitive, operands, params)
    if outs is None:
        raise CompileError(
            f"{primitive.name} cannot be {what} here: its sizes (or, for a resizing loop, its trip "
            "count) are only known while it runs. Run the program with qjit, or evaluate its jaxpr "
            "with concrete sizes (see catalyst_lite.dynamic_jaxprs)."
        )
    return outs


# --- registration --------------------------------------------------------------------------------

nested_primitives: set[core.Primitive] = set()  # registered by register_nested_primitive


def register_nested_primitive(primitive: core.Primitive, spec: PrimitiveSpec) -> None:
    """Register a nested primitive's :class:`PrimitiveSpec` and its JAX rules made from it (without
    ``spec.jvp``/``batching``/``partial_eval``, transforming symbolic sizes is an error)."""
    output_type = spec.output_type
    nested_primitives.add(primitive)

    def abstract_eval(*avals: Any, **params: Any) -> list[Any]:
        sizes = _sizes_from_types(avals, spec.feeds(params))
        return _resolve_output_type(output_type(params, _same_size(sizes)), sizes)

    def typecheck(_: Any, *atoms: Any, **params: Any) -> tuple[list[Any], Any]:
        spec.check(list(atoms), params)
        return [aval for aval, _ in output_type(params, same_atoms(atoms))], core.no_effects

    primitive.def_abstract_eval(abstract_eval)
    pe.custom_staging_rules[primitive] = _staging_rule(primitive, output_type)
    core.custom_typechecks[primitive] = typecheck
    ad.primitive_jvps[primitive] = _jvp_rule(primitive, spec.jvp)
    batching.fancy_primitive_batchers[primitive] = _batching_rule(primitive, spec.batching)
    pe.custom_partial_eval_rules[primitive] = _partial_eval_rule(primitive, spec.partial_eval)
    ad.primitive_transposes[primitive] = _transpose_rule(primitive, output_type)
    register_primitive(primitive, spec)


def _jvp_rule(primitive: core.Primitive, symbolic: Callable | None) -> Callable:
    def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        kept = symbolic is not None and _kept(primitive, primals, params)
        outs = None if kept else _jvp_of(lambda *xs: specialized(primitive, xs, params), primals, tangents)
        if outs is not None:
            return outs
        if symbolic is None:
            _specialized_or_error(primitive, primals, params, "differentiated")
        return symbolic(primals, tangents, **params)

    return jvp


def _batching_rule(primitive: core.Primitive, symbolic: Callable | None) -> Callable:
    def batch(axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        if all(d is not_mapped for d in dims):  # nothing batched (JAX's batch trace asks all the same)
            outs = primitive.bind(*args, **params)
            return outs, [not_mapped] * len(outs)
        # Under reverse mode, a kept equation stays one (its specialization, a lax.while_loop, JAX
        # could not transpose): jax.grad of a vmapped while_loop.
        reverse = any(map(is_reverse_mode_value, args))
        kept = symbolic is not None and reverse and _kept(primitive, args, params)
        outs = None if kept else _batch_of(axis_data, lambda *xs: specialized(primitive, xs, params),
                                           args, dims)
        if outs is not None:
            return outs
        if symbolic is None:
            _specialized_or_error(primitive, args, params, "batched")
        return symbolic(axis_data, args, dims, **params)

    return batch


def _partial_eval_rule(primitive: core.Primitive, symbolic: Callable | None) -> Callable:
    def partial_eval(trace: pe.JaxprTrace, *tracers: Any, **params: Any) -> list[Any]:
        if all(t.pval.is_known() for t in tracers):
            return bind_known(trace, primitive, [t.pval.get_known() for t in tracers], params)
        outs = None
        if not (symbolic is not None and _kept(primitive, tracers, params)):
            with core.set_current_trace(trace):  # JAX's own rules split the specialization
                outs = specialized(primitive, tracers, params)
        if outs is not None:
            return outs
        if symbolic is None:
            return trace.default_process_primitive(primitive, tracers, params)
        return symbolic(trace, *tracers, **params)

    return partial_eval


def _transpose_rule(primitive: core.Primitive, output_type: OutputTypeRule) -> Callable:
    """For the linear operands, the cotangents of a ``jax.vjp`` of the specialization (known
    sizes): JAX transposes the loops it becomes (and refuses a ``while_loop``, as its own)."""

    def transpose(cts: list[Any], *args: Any, **params: Any) -> list[Any]:
        nimplicit = sum(not explicit for _, explicit in output_type(params, lambda i, j: i == j))
        linear = [type(x) is ad.UndefinedPrimal for x in args]
        fixed = [x for x, lin in zip(args, linear) if not lin]
        points = [jnp.zeros(x.aval.shape, x.aval.dtype) for x, lin in zip(args, linear) if lin]
        cts_out = [instantiate_zeros(ct) for ct in cts[nimplicit:]]
        if deferred_vjp and _kept(primitive, args, params):
            # Only results with tangents are differentiated (not an ambient PRNG key).
            inexact = [jnp.issubdtype(jnp.result_type(ct), jnp.inexact) for ct in cts_out]  # (1.0: a float)

            def equation(*linear_values: Any) -> list[Any]:
                outs = primitive.bind(*interleave(linear, linear_values, fixed), **params)[nimplicit:]
                return [out for out, keep in zip(outs, inexact) if keep]

            cts_linear = deferred_vjp[0](equation, points, [ct for ct, keep in zip(cts_out, inexact) if keep])
        else:

            def fn(*linear_values: Any) -> list[Any]:
                operands = interleave(linear, linear_values, fixed)
                return _specialized_or_error(primitive, operands, params, "transposed")[nimplicit:]

            cts_linear = jax.vjp(fn, *points)[1](cts_out)
        return interleave(linear, cts_linear, [None] * len(fixed))

    return transpose


# --- JVP and batching ----------------------------------------------------------------------------


def _under(make_trace: Callable, inputs: Callable, split: Callable, fn: Callable) -> tuple[list, list] | None:
    """Run ``fn`` on ``inputs`` of a new transformation trace, each result split (``None``: ``fn``'s)."""
    with core.take_current_trace() as parent:
        trace = make_trace(parent)
        with core.set_current_trace(trace):
            outs = fn(*inputs(trace))
        if outs is None:
            return None
        pairs = [split(trace, o) for o in outs]
    return [a for a, _ in pairs], [b for _, b in pairs]


def _jvp_of(fn: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list] | None:
    """``fn``'s results and their tangents (a tangent may be :class:`Zero`: none)."""
    return _under(
        lambda parent: ad.JVPTrace(parent, core.TraceTag()),
        lambda trace: [ad.maybe_jvp_tracer(trace, p, t) for p, t in zip(primals, tangents)],
        lambda trace, out: trace.to_primal_tangent_pair(out),
        fn,
    )


def jvp_call(jaxpr: Jaxpr, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """``jaxpr``'s results and their tangents (a tangent may be :class:`Zero`: none)."""
    return _jvp_of(lambda *xs: core.eval_jaxpr(jaxpr, (), *xs), primals, tangents)


def _batch_of(axis_data: Any, fn: Callable, args: Sequence[Any], dims: Sequence[Any]) -> tuple | None:
    """``fn`` applied to each example of the batched ``args``: its results and their batch axes."""
    return _under(
        lambda parent: batching.BatchTrace(parent, core.TraceTag(), axis_data),
        lambda t: [x if d is not_mapped else batching.BatchTracer(t, x, d) for x, d in zip(args, dims)],
        lambda trace, out: trace.to_batch_info(out),
        fn,
    )


def move_batch_axis(x: Any, dim: Any, size: int, batched: bool) -> Any:
    """``x`` with its batch axis first (broadcast when it has none but must be ``batched``)."""
    if dim is not_mapped:
        return batching.broadcast(x, size, 0, None) if batched else x
    return batching.moveaxis(x, dim, 0)


def batch_call(
    jaxpr: Jaxpr, args: Sequence[Any], batched: Sequence[bool], size: int, out_batched: Sequence[bool]
) -> list[Any]:
    """``jaxpr`` on each example of the batched ``args`` (batch axis first, ``out_batched`` too)."""
    in_axes = [0 if b else None for b in batched]
    out_axes = [0 if b else None for b in out_batched]
    fn = jax.vmap(lambda *xs: core.eval_jaxpr(jaxpr, (), *xs), in_axes, out_axes, axis_size=size)
    return list(fn(*args))


# --- partial evaluation --------------------------------------------------------------------------


def bind_known(trace: pe.JaxprTrace, primitive: core.Primitive, values: Sequence[Any], params: dict) -> list:
    """Bind ``primitive`` on known values, in the trace a partial evaluation stages into."""
    return primitive.bind_with_trace(trace.parent_trace, list(values), params)


def unknown_results(
    trace: pe.JaxprTrace,
    primitive: core.Primitive,
    tracers: Sequence[Any],
    params: dict[str, Any],
    out_avals: Sequence[Any],
) -> list[Any]:
    """Stage ``primitive`` with unknown results of types ``out_avals`` (known operands as constants)."""
    tracers = [trace.instantiate_const(trace.to_jaxpr_tracer(t)) for t in tracers]
    out_tracers = [pe.JaxprTracer(trace, pe.PartialVal.unknown(a), None) for a in out_avals]
    recipe = pe.new_eqn_recipe(trace, tracers, out_tracers, primitive, params, core.no_effects,
                               source_info_util.current())
    for t in out_tracers:
        t.recipe = recipe
    return out_tracers
