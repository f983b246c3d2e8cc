"""What the JAX rules of catalyst_lite's nested primitives share, so that the primitive modules never
touch ``jax._src`` (each registers its rules with :func:`register_nested_primitive`).

- :func:`staging_rule`: in catalyst_lite's dynamic-shape trace the output type
  (:func:`~.dynshape.output_type_of`) is resolved against the operands and the equation emitted; in
  a static trace (``jax.jit``) the equation is specialized at once, so the program holds JAX's loops.
- :func:`abstract_eval_rule`: result avals from operand avals.
- Transforming an equation: with symbolic sizes the primitive is bound again with bodies traced by
  :func:`~.nested.retrace` (:func:`jvp_call`, :func:`batch_call`); with static shapes JAX transforms
  its specialization (its :class:`PrimitiveSpec`'s staged rule: :func:`jvp_of`, :func:`batch_of`,
  partial evaluation, ``jax.vjp``), since JAX transforms its own loops best.

Everything catalyst_lite knows of a primitive beyond JAX's own tables (its rules at concrete sizes,
on capacity buffers, its lowering) is one :class:`PrimitiveSpec`, registered by the primitive's
own module; the compiler reads it with :func:`spec_of` and never names a primitive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config, core, source_info_util
from jax._src.interpreters import ad, batching
from jax._src.interpreters import partial_eval as pe

from ..errors import CompileError
from .dynshape import OutputType, array_aval, has_symbolic_shape, same_dim
from .host_callbacks import keep_when_unused
from .lowering import register_compiled_lowering, register_dynamic_lowering, register_lowering
from .nested import interleave
from .tracing import (
    InDBIdx,
    Jaxpr,
    OutDBIdx,
    Var,
    dimension_value,
    emit_equation,
    get_aval,
)

__all__ = [
    "custom_staging_rules",
    "custom_typechecks",
    "custom_partial_eval_rules",
    "primitive_jvps",
    "primitive_transposes",
    "fancy_primitive_batchers",
    "no_effects",
    "Zero",
    "UndefinedPrimal",
    "not_mapped",
    "Feeds",
    "staging_rule",
    "NeedsHost",
    "PrimitiveSpec",
    "spec_of",
    "register_primitive",
    "deferred_vjp",
    "specialized",
    "specialized_or_error",
    "register_nested_primitive",
    "nested_primitives",
    "abstract_eval_rule",
    "sizes_from_types",
    "resolve_output_type",
    "result_avals",
    "same_atoms",
    "jvp_of",
    "jvp_call",
    "instantiate_zeros",
    "zero_tangent",
    "batch_call",
    "batch_of",
    "move_batch_axis",
    "is_linear",
    "known_value",
    "dimension_value",
    "bind_known",
    "unknown_results",
]

# JAX's tables of rules; catalyst_lite's primitive modules fill them for their own primitives.
custom_staging_rules = pe.custom_staging_rules
custom_typechecks = core.custom_typechecks
custom_partial_eval_rules = pe.custom_partial_eval_rules
primitive_jvps = ad.primitive_jvps
primitive_transposes = ad.primitive_transposes
fancy_primitive_batchers = batching.fancy_primitive_batchers

no_effects = core.no_effects
Zero = ad.Zero
UndefinedPrimal = ad.UndefinedPrimal
not_mapped = batching.not_mapped

# params -> for each nested jaxpr, the operand that feeds each of its binders (on entry)
Feeds = Callable[[dict[str, Any]], list[tuple[Jaxpr, list[int]]]]
# (params, same_operand(i, j)) -> the output type, with InDBIdx/OutDBIdx
OutputTypeRule = Callable[[dict[str, Any], Callable[[int, int], bool]], OutputType]


# --- abstract evaluation and staging -------------------------------------------------------------


def sizes_from_types(avals: Sequence[Any], feeds: list[tuple[Jaxpr, list[int]]]) -> dict[int, Any]:
    """Which sizes the operands that are sizes hold, read from the types of the other operands.

    A binder ``e:f64[d]`` of a nested jaxpr, fed by an operand of type ``f64[4]`` while ``d`` is
    fed by operand ``k``, tells that operand ``k`` is 4 (or, in a dynamic-shape trace, the size
    tracer in the operand's type).
    """
    sizes: dict[int, Any] = {}
    for jaxpr, feed in feeds:
        fed_by = dict(zip(jaxpr.invars, feed))
        for v, k in zip(jaxpr.invars, feed):
            for d_binder, d_operand in zip(getattr(v.aval, "shape", ()), getattr(avals[k], "shape", ())):
                if isinstance(d_binder, Var) and d_binder in fed_by:
                    sizes.setdefault(fed_by[d_binder], d_operand)
    return sizes


def resolve_output_type(
    out_type: OutputType, sizes: Mapping[int, Any], result_sizes: Sequence[Any] = ()
) -> list[Any]:
    """The result avals of an output type: ``InDBIdx(k)`` is ``sizes[k]`` and ``OutDBIdx(k)``
    is ``result_sizes[k]`` (numbers, or size tracers in a dynamic-shape trace). A size whose value
    is not given stays a de Bruijn index: there is no value to put there."""

    def size(d: Any) -> Any:
        if type(d) is InDBIdx and sizes.get(d.val) is not None:
            value = sizes[d.val]
            return int(value) if isinstance(value, np.integer) else value  # a shape holds ints
        if type(d) is OutDBIdx and d.val < len(result_sizes) and result_sizes[d.val] is not None:
            return result_sizes[d.val]
        return d

    avals = []
    for aval, _ in out_type:
        if has_symbolic_shape(aval):
            aval = array_aval([size(d) for d in aval.shape], aval.dtype, aval.weak_type)
        avals.append(aval)
    return avals


def result_avals(
    output_type: OutputTypeRule,
    params: dict[str, Any],
    operands: Sequence[Any],
    feeds: Feeds,
    results: Sequence[Any] = (),
) -> list[Any]:
    """The result avals of an equation whose operands (and implicit ``results``) may have values:
    sizes from the values where they are known (:func:`~.tracing.dimension_value`), else from the
    types (:func:`sizes_from_types`)."""
    sizes = sizes_from_types([get_aval(x) for x in operands], feeds(params))
    sizes.update({k: v for k, x in enumerate(operands) if (v := dimension_value(x)) is not None})
    out_type = output_type(params, _same_size(sizes))
    return resolve_output_type(out_type, sizes, [dimension_value(r) for r in results])


def abstract_eval_rule(output_type: OutputTypeRule, feeds: Feeds) -> Callable[..., list[Any]]:
    """``Primitive.abstract_eval`` of a nested primitive: its output type, resolved with the sizes
    the operand types give (:func:`sizes_from_types`)."""

    def abstract_eval(*avals: Any, **params: Any) -> list[Any]:
        sizes = sizes_from_types(avals, feeds(params))
        return resolve_output_type(output_type(params, _same_size(sizes)), sizes)

    return abstract_eval


def _same_size(sizes: Mapping[int, Any]) -> Callable[[int, int], bool]:
    """``same_operand`` when only the operands' sizes are known: one operand, or equal sizes."""
    return lambda i, j: i == j or (
        sizes.get(i) is not None and sizes.get(j) is not None and same_dim(sizes[i], sizes[j])
    )


def same_atoms(values: Sequence[Any]) -> Callable[[int, int], bool]:
    """``same_operand(i, j)``: operands ``i`` and ``j`` (tracers of a dynamic-shape trace, or the
    atoms of an equation) are one variable, or equal literals."""

    def atom(x: Any) -> Any:
        return x.val if isinstance(x, pe.DynamicJaxprTracer) else x

    def same(i: int, j: int) -> bool:
        a, b = atom(values[i]), atom(values[j])
        if isinstance(a, core.Literal) and isinstance(b, core.Literal):
            return bool(a.val == b.val)
        return a is b

    return same


def staging_rule(primitive: core.Primitive, output_type: OutputTypeRule) -> Callable[..., list[Any]]:
    """The staging rule (``custom_staging_rules``) of a nested primitive.

    With dynamic shapes on (catalyst_lite's traces, or a user's ``jax.make_jaxpr`` with
    ``jax_dynamic_shapes``): the output type from the primitive's jaxprs, sizes resolved against
    the operand tracers, and one equation. Otherwise (``jax.jit`` of a program whose sizes are
    numbers): the equation's specialization at those sizes, in the trace, with the operands whose
    values the trace knows replaced by them.
    """

    def rule(trace: pe.DynamicJaxprTrace, source_info: Any, *tracers: Any, **params: Any) -> list[Any]:
        if config.dynamic_shapes.value:
            out_type = output_type(params, same_atoms(tracers))
            with source_info_util.user_context(source_info.traceback):
                return emit_equation(primitive, tracers, out_type, params, trace)
        values = [known_value(t) for t in tracers]
        with core.set_current_trace(trace):
            outs = specialized_or_error(primitive, values, params, "staged with static shapes")
            return [trace.to_jaxpr_tracer(x, source_info) for x in outs]

    return rule


def known_value(x: Any) -> Any:
    """The value of ``x`` when its trace knows it (a literal or a constant), else ``x`` itself."""
    if isinstance(x, pe.DynamicJaxprTracer) and x._trace.is_valid():
        if isinstance(x.val, core.Literal):
            return x.val.val
        const = x._trace.frame.constvar_to_val.get(x.val)
        if const is not None:
            return getattr(const, "canonical", const)
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
    """What catalyst_lite knows of one primitive beyond JAX's own tables, registered once by the
    primitive's own module (:func:`register_nested_primitive`, :func:`register_primitive`).

    JAX's rules of a nested primitive: ``output_type`` (its type rule), ``feeds`` (which operands
    feed which body), ``check`` (raises for ill-typed operands), and with symbolic sizes ``jvp``,
    ``batching``, ``partial_eval`` (JAX's signatures; with static shapes JAX transforms the
    staged rule's program instead). At concrete sizes (``compiler/specialize.py``): ``staged``
    (inside one XLA program; raises :class:`NeedsHost` when a size is known only at run time),
    ``host`` (driven from Python; also the primitive's ``impl``) and ``dimension_operands(params)``
    (the operands whose values a specialization needs, keyed on). On capacity buffers
    (``compiler/capacity.py``): ``masked(eqn, invals, env, checks)``; ``bodies(params)``: the
    bodies a masked loop looks into for sizes known only in its iteration (the masked rule then
    also runs an equation whose staging alone needs the host); ``size_check(lhs, rhs, **params)``:
    for an equation that only checks sizes, its condition (a traced flag on buffers).
    ``lowering``: its StableHLO in the dynamic program (``QJIT.mlir``, IREE); with
    ``compiled_lowering`` (JAX operations, ``impl(*operands, **params)``), the former is for the
    dynamic program only and the latter lowers the equations XLA compiles inside a JAX
    primitive's body that specialization binds whole (a ``lax.fori_loop`` body, ``shard_map``).
    ``kept_under_differentiation(operands, params)``: JAX's differentiation keeps the equation
    as it is (JVP and partial evaluation by its symbolic rules, transposition as a derivative
    taken at specialization: :data:`deferred_vjp`), not its specialization, which JAX could not
    transpose (a for_loop whose trip count is traced becomes a ``while``).
    ``kept_when_unused``: its equations stay in a pruned program although nothing reads their
    results (a host callback runs whenever the program runs).
    """

    output_type: OutputTypeRule | None = None
    feeds: Feeds | None = None
    check: Callable[[list[Any], dict[str, Any]], None] | None = None
    jvp: Callable[..., Any] | None = None
    batching: Callable[..., Any] | None = None
    partial_eval: Callable[..., Any] | None = None
    staged: Rule | None = None
    host: Rule | None = None
    dimension_operands: Callable[[dict[str, Any]], set[int]] | None = None
    masked: Callable[..., list[Any]] | None = None
    bodies: Callable[[dict[str, Any]], Sequence[Jaxpr]] | None = None
    size_check: Callable[..., Any] | None = None
    lowering: Callable[..., Any] | None = None
    compiled_lowering: Callable[..., Sequence[Any]] | None = None
    kept_under_differentiation: Callable[[Sequence[Any], dict[str, Any]], bool] | None = None
    kept_when_unused: bool = False


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


# deferred_vjp(fn, points, cotangents) -> cotangents of fn's inputs: a reverse-mode derivative
# of `fn` taken when the program is specialized (catalyst_lite.vjp), registered by
# catalyst_lite.transforms.differentiation (a higher layer).
deferred_vjp: list[Callable[[Callable, list[Any], list[Any]], list[Any]]] = []


def _kept(primitive: core.Primitive, operands: Sequence[Any], params: dict[str, Any]) -> bool:
    spec = _specs.get(primitive)
    return spec is not None and spec.kept_under_differentiation is not None and spec.kept_under_differentiation(
        operands, params)


def specialized(primitive: core.Primitive, operands: Sequence[Any], params: dict[str, Any]) -> list[Any] | None:
    """The equation's staged rule in the current trace, when every operand has a static shape
    and the values of the operands that size it are known (numbers, concrete, or known in the
    trace); ``None`` otherwise (symbolic sizes: the equation stays one equation)."""
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


def specialized_or_error(primitive: core.Primitive, operands: Sequence[Any], params: dict, what: str) -> list[Any]:
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
    """Register a nested primitive's :class:`PrimitiveSpec`, and from it its JAX rules, as JAX's
    ``loops.py`` does for its own.

    ``spec.output_type`` is its type rule (abstract evaluation, staging and type checking use it);
    ``spec.check(atoms, params)`` raises :class:`~.dynshape.JaxprTypeError` for ill-typed operands
    or nested jaxprs. With known sizes and static shapes, JVP, batching, partial evaluation and
    transposition transform the equation's specialization (its staged rule), which JAX
    transforms as its own loops and conditionals. With symbolic sizes, ``spec.jvp``,
    ``spec.batching`` and ``spec.partial_eval`` (JAX's signatures) bind the primitive again with
    transformed bodies; without them it is an error.
    """
    output_type = spec.output_type
    nested_primitives.add(primitive)
    primitive.def_abstract_eval(abstract_eval_rule(output_type, spec.feeds))
    custom_staging_rules[primitive] = staging_rule(primitive, output_type)
    custom_typechecks[primitive] = _typecheck_rule(spec.check, output_type)
    primitive_jvps[primitive] = _jvp_rule(primitive, spec.jvp)
    fancy_primitive_batchers[primitive] = _batching_rule(primitive, spec.batching)
    custom_partial_eval_rules[primitive] = _partial_eval_rule(primitive, spec.partial_eval)
    primitive_transposes[primitive] = _transpose_rule(primitive, output_type)
    register_primitive(primitive, spec)


def _typecheck_rule(check: Callable, output_type: OutputTypeRule) -> Callable:
    def typecheck(_: Any, *atoms: Any, **params: Any) -> tuple[list[Any], Any]:
        check(list(atoms), params)
        return [aval for aval, _ in output_type(params, same_atoms(atoms))], no_effects

    return typecheck


def _jvp_rule(primitive: core.Primitive, symbolic: Callable | None) -> Callable:
    def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        kept = symbolic is not None and _kept(primitive, primals, params)
        outs = None if kept else jvp_of(lambda *xs: specialized(primitive, xs, params), primals, tangents)
        if outs is not None:
            return outs
        if symbolic is None:
            specialized_or_error(primitive, primals, params, "differentiated")
        return symbolic(primals, tangents, **params)

    return jvp


def _batching_rule(primitive: core.Primitive, symbolic: Callable | None) -> Callable:
    def batch(axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        outs = batch_of(axis_data, lambda *xs: specialized(primitive, xs, params), args, dims)
        if outs is not None:
            return outs
        if symbolic is None:
            specialized_or_error(primitive, args, params, "batched")
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
    """The transpose of the equation's specialization (known sizes): for its linear operands, the
    cotangents of a ``jax.vjp`` of it. JAX transposes the loops and conditionals it becomes (a
    ``for_loop`` with known bounds is a ``scan`` whose iterations JAX stores; a ``while_loop``
    is refused, as JAX refuses ``lax.while_loop``)."""

    def transpose(cts: list[Any], *args: Any, **params: Any) -> list[Any]:
        nimplicit = sum(not explicit for _, explicit in output_type(params, lambda i, j: i == j))
        linear = [is_linear(x) for x in args]
        fixed = [x for x, lin in zip(args, linear) if not lin]

        def fn(*linear_values: Any) -> list[Any]:
            operands = interleave(linear, linear_values, fixed)
            return specialized_or_error(primitive, operands, params, "transposed")[nimplicit:]

        points = [jnp.zeros(x.aval.shape, x.aval.dtype) for x in args if is_linear(x)]
        cts_out = [instantiate_zeros(ct) for ct in cts[nimplicit:]]
        if deferred_vjp and _kept(primitive, args, params):
            # Only results with tangents are differentiated (not an ambient PRNG key).
            inexact = [jnp.issubdtype(ct.dtype, jnp.inexact) for ct in cts_out]

            def equation(*linear_values: Any) -> list[Any]:
                operands = interleave(linear, linear_values, fixed)
                outs = primitive.bind(*operands, **params)[nimplicit:]
                return [out for out, keep in zip(outs, inexact) if keep]

            cts_linear = deferred_vjp[0](equation, points, [ct for ct, keep in zip(cts_out, inexact) if keep])
        else:
            _, pullback = jax.vjp(fn, *points)
            cts_linear = pullback(cts_out)
        return interleave(linear, cts_linear, [None] * len(fixed))

    return transpose


# --- JVP -----------------------------------------------------------------------------------------


def jvp_of(
    fn: Callable[..., Sequence[Any] | None], primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[list[Any], list[Any]] | None:
    """``fn``'s results and their tangents (a tangent may be :class:`Zero`: none); ``None`` when
    ``fn`` returns ``None`` (it cannot be evaluated here)."""
    return _under(
        lambda parent: ad.JVPTrace(parent, core.TraceTag()),
        lambda trace: [ad.maybe_jvp_tracer(trace, p, t) for p, t in zip(primals, tangents)],
        lambda trace, out: trace.to_primal_tangent_pair(out),
        fn,
    )


def _under(make_trace: Callable, inputs: Callable, split: Callable, fn: Callable) -> tuple[list, list] | None:
    """Run ``fn`` on the ``inputs`` of a new transformation trace over the current one; split each
    result into (value, transformation data)."""
    with core.take_current_trace() as parent:
        trace = make_trace(parent)
        with core.set_current_trace(trace):
            outs = fn(*inputs(trace))
        if outs is None:
            return None
        pairs = [split(trace, o) for o in outs]
    return [a for a, _ in pairs], [b for _, b in pairs]


def jvp_call(jaxpr: Jaxpr, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """``jaxpr``'s results and their tangents (see :func:`jvp_of`)."""
    return jvp_of(lambda *xs: core.eval_jaxpr(jaxpr, (), *xs), primals, tangents)


def instantiate_zeros(tangent: Any) -> Any:
    """A tangent as an array (zeros for :class:`Zero`)."""
    return ad.instantiate_zeros(tangent)


def zero_tangent(primal: Any) -> Any:
    """The symbolic zero tangent of ``primal``."""
    return Zero.from_primal_value(primal)


# --- batching ------------------------------------------------------------------------------------


def batch_of(
    axis_data: Any, fn: Callable[..., Sequence[Any] | None], args: Sequence[Any], dims: Sequence[Any]
) -> tuple[list[Any], list[Any]] | None:
    """``fn`` applied to each example of the batched ``args`` (batch axes ``dims``): its results
    and their batch axes; ``None`` when ``fn`` returns ``None`` (it cannot be evaluated here)."""
    return _under(
        lambda parent: batching.BatchTrace(parent, core.TraceTag(), axis_data),
        lambda trace: [x if d is not_mapped else batching.BatchTracer(trace, x, d) for x, d in zip(args, dims)],
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
    """``jaxpr`` applied to each example of the batched ``args`` (batch axis first); the outputs
    in ``out_batched`` have a batch axis first, the others must not depend on the batch."""
    in_axes = [0 if b else None for b in batched]
    out_axes = [0 if b else None for b in out_batched]
    fn = jax.vmap(lambda *xs: core.eval_jaxpr(jaxpr, (), *xs), in_axes=in_axes, out_axes=out_axes, axis_size=size)
    return list(fn(*args))


# --- transposition -------------------------------------------------------------------------------


def is_linear(x: Any) -> bool:
    """An operand that a transposition computes the cotangent of."""
    return type(x) is UndefinedPrimal


# --- partial evaluation --------------------------------------------------------------------------


def bind_known(trace: pe.JaxprTrace, primitive: core.Primitive, values: Sequence[Any], params: dict) -> list[Any]:
    """Bind ``primitive`` on known values, in the trace a partial evaluation stages into."""
    return primitive.bind_with_trace(trace.parent_trace, list(values), params)


def unknown_results(
    trace: pe.JaxprTrace,
    primitive: core.Primitive,
    tracers: Sequence[Any],
    params: dict[str, Any],
    out_avals: Sequence[Any],
) -> list[Any]:
    """Stage ``primitive`` with results of types ``out_avals`` as unknown (the equation runs when
    the unknown values are known); known operands become constants of the staged program."""
    tracers = [trace.instantiate_const(trace.to_jaxpr_tracer(t)) for t in tracers]
    out_tracers = [pe.JaxprTracer(trace, pe.PartialVal.unknown(a), None) for a in out_avals]
    recipe = pe.new_eqn_recipe(trace, tracers, out_tracers, primitive, params, core.no_effects,
                               source_info_util.current())
    for t in out_tracers:
        t.recipe = recipe
    return out_tracers

