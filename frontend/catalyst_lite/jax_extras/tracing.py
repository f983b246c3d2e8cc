"""Tracing with JAX's dynamic-shape API, in the design documents' terms (input type, expanded
arguments, inner trace): thin named wrappers over JAX 0.7 internals.

>>> import jax.numpy as jnp
>>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, trace_to_jaxpr, make_input_type
>>> import numpy as np
>>> with dynamic_tracing():
...     in_type = make_input_type([np.int64(3)], [{}])
...     jaxpr, out_type, consts = trace_to_jaxpr(lambda n: [jnp.ones((n,))], in_type, "f")
>>> [eqn.primitive.name for eqn in jaxpr.eqns]
['broadcast_in_dim']
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Hashable, Iterator, Sequence

import numpy as np
from jax._src import ad_util, api_util, config, core, source_info_util
from jax._src import pjit
from jax._src.core import (
    ClosedJaxpr, DBIdx, DropVar, DShapedArray, InDBIdx, Jaxpr, Literal, OutDBIdx, ShapedArray, Tracer, Var
)
from jax._src.interpreters import partial_eval as pe
from jax._src.interpreters.partial_eval import DynamicJaxprTrace, DynamicJaxprTracer
from jax._src.lax import control_flow as lax_control_flow

from ..trace_context import current as current_context, scope as context_scope
from .host_callbacks import kept_when_unused
from .patches import is_active, patched_jax

InputType = tuple  # tuple[tuple[AbstractValue, bool], ...]
OutputType = tuple


@contextlib.contextmanager
def dynamic_tracing() -> Iterator[None]:
    """Dynamic shapes, 64-bit types and :mod:`.patches`' repairs for this thread only (not ``jax.config``)."""
    with config.dynamic_shapes(True), config.enable_x64(True), patched_jax():
        yield


@contextlib.contextmanager
def dynamic_jaxprs() -> Iterator[None]:
    """JAX's interpreters evaluate and transform catalyst_lite's jaxprs in this block (this thread):
    64-bit types and the repairs of :mod:`.patches`, but *not* dynamic shapes: sizes are numbers
    here, so every shape is static once they are known.

    >>> from catalyst_lite import dynamic_jaxprs
    >>> import jax, jax.numpy as jnp
    >>> from catalyst_lite import qjit
    >>> @qjit
    ... def f(n: int):
    ...     return jnp.ones((n + 1,)) * 2
    >>> with dynamic_jaxprs():
    ...     jax.core.eval_jaxpr(f.jaxpr.jaxpr, f.jaxpr.consts, 2)[-1].tolist()
    [2.0, 2.0, 2.0]
    """
    with config.dynamic_shapes(False), config.enable_x64(True), patched_jax():
        yield


def current_trace() -> Any:
    """The innermost trace of the calling thread (``EvalTrace`` when nothing is being traced)."""
    return core.trace_ctx.trace


def is_tracing(*, under_transformations: bool = False) -> bool:
    """True when the calling thread traces a catalyst_lite program (not hosting another capture);
    ``under_transformations``: also under a JAX transformation inside it (``jax.grad``)."""
    return (
        is_active()
        and not current_context().hosted_captures
        and (under_transformations or isinstance(current_trace(), DynamicJaxprTrace))
        and config.dynamic_shapes.value
    )


def hosted_capture() -> contextlib.AbstractContextManager:
    """Within the block the calling thread's trace hosts another framework's capture (PennyLane's,
    see ``catalyst_lite.capture``): the repairs stay in effect, but :func:`is_tracing` is False,
    so that code asking (PennyLane's compiler dispatch, QNode calls) records its own primitives.

    >>> with hosted_capture():
    ...     is_tracing()
    False
    """
    return context_scope(hosted_captures=current_context().hosted_captures + 1)


def inside_program_trace() -> bool:
    """True while the calling thread traces a catalyst_lite program (even under a JAX transformation)."""
    return is_active() and config.dynamic_shapes.value


def under_jax_transformation() -> bool:
    """True while a JAX transformation inside a catalyst_lite program is the current trace."""
    return is_tracing(under_transformations=True) and not isinstance(current_trace(), DynamicJaxprTrace)


get_aval = core.get_aval  # a tracer's shape may hold dimension tracers


def constant_value(tracer: Any) -> Any:
    """The value of a trace's constant ``tracer`` or ``None`` (0.7.2 stores ``Constants(canonical, ...)``)."""
    const = tracer._trace.frame.constvar_to_val.get(tracer.val)
    return getattr(const, "canonical", const)


def register_stand_in(cls: type) -> None:
    """Values of ``cls`` (and its subclasses) stand for the traced array their ``__jax_array__`` gives:
    JAX abstractifies them as that array, without the deprecation warning of ``__jax_array__``
    (``lax.select(m, ...)`` of a mid-circuit outcome), and binds that array (``patches.to_jaxpr_tracer``)."""
    # Registered once, not as a gated patch: it is JAX's table of how to abstractify a Python type,
    # and this entry is for our own class only, whose values exist only inside our traces. No value
    # of any other type is abstractified differently, so no behaviour of JAX changes; a gated patch
    # (a dict entry added and removed around each trace) would add work per trace for no isolation.
    core.pytype_aval_mappings[cls] = lambda x: core.get_aval(x.__jax_array__())


def debug_info_for(fn: Callable, name: str, args: Sequence[Any] = ()) -> core.DebugInfo:
    """JAX debug info naming ``fn`` (used in JAX's own error messages)."""
    try:
        dbg = api_util.debug_info(name, fn, tuple(args), {})
    except Exception:  # non-inspectable callables
        dbg = core.DebugInfo(name, getattr(fn, "__name__", repr(fn)), None, None)
    # We flatten results: no paths to resolve (`()`, unknown: jax 0.7.1 rejects None, 0.7.2 the sentinel).
    return dbg._replace(result_paths=())


def make_input_type(avals_or_args: Sequence[Any], axes_specs: Sequence[dict[int, Hashable]]) -> InputType:
    """Input type of a top-level program: one implicit ``i64[]`` per distinct abstracted axis name,
    first, then each explicit argument with ``DBIdx`` in its abstracted axes.

    >>> from jax import ShapeDtypeStruct as S
    >>> t = make_input_type([S((3,), 'float64'), S((3, 2), 'float64')], [{0: 'n'}, {0: 'n'}])
    >>> [(str(a), e) for a, e in t]
    [('~int64[]', False), ('f64[DBIdx(val=0)]', True), ('f64[DBIdx(val=0),2]', True)]
    """
    avals = [_abstractify(x) for x in avals_or_args]
    name_to_index: dict[Hashable, DBIdx] = {}
    for aval, spec in zip(avals, axes_specs):
        for _, name in sorted(spec.items()):
            name_to_index.setdefault(name, DBIdx(len(name_to_index)))
    # Weakly typed, as a Python int: a size used as a value (`x.shape[0] - idx`) then has the
    # dtype jax.jit gives it with static shapes (int32 with int32 operands, not int64).
    dim_aval = ShapedArray((), np.dtype("int64"), weak_type=True)
    implicit = [(dim_aval, False)] * len(name_to_index)
    explicit = []
    for aval, spec in zip(avals, axes_specs):
        if spec:
            shape = tuple(name_to_index[spec[i]] if i in spec else d for i, d in enumerate(aval.shape))
            aval = DShapedArray(shape, aval.dtype, False)
        explicit.append((aval, True))
    return (*implicit, *explicit)


def _abstractify(x: Any) -> core.AbstractValue:
    if isinstance(x, core.AbstractValue):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__jax_array__"):
        if not isinstance(x, (np.ndarray, np.generic)) and not hasattr(x, "aval"):
            return ShapedArray(tuple(x.shape), np.dtype(x.dtype))  # e.g. jax.ShapeDtypeStruct
    return core.get_aval(x)


def collapse(typ: Sequence[tuple[Any, bool]], expanded: Sequence[Any]) -> list[Any]:
    """The explicit entries of an expanded list (the ones a Python function sees)."""
    return [x for x, (_, explicit) in zip(expanded, typ) if explicit]


class InnerTrace:
    """A ``DynamicJaxprTrace`` nested in the current one (``newTracingContext``), outer values constants."""

    def __init__(self, debug_info: core.DebugInfo):
        self.debug_info = debug_info
        self.trace = DynamicJaxprTrace(debug_info, parent_trace=current_trace())
        self.source_info = source_info_util.current()

    def lift(self, x: Any) -> Tracer:
        """The tracer of this trace standing for ``x`` (a constant when ``x`` is from outside)."""
        return self.trace.to_jaxpr_tracer(x, self.source_info)

    def arguments(self, in_type: InputType) -> list[Tracer]:
        """The expanded argument tracers (``initialize``): ``DBIdx(k)`` is the k-th; outer tracers lifted."""
        tracers: list[Tracer] = []
        for aval, _ in in_type:
            if type(aval) is DShapedArray:
                shape = tuple(
                    tracers[d.val] if type(d) is DBIdx else self.lift(d) if isinstance(d, Tracer) else d
                    for d in aval.shape
                )
                aval = aval.update(shape=shape)
            tracers.append(self.trace.new_arg(aval, self.source_info))
        return tracers

    def call(self, fn: Callable, *args: Any) -> Any:
        with core.set_current_trace(self.trace), source_info_util.reset_name_stack():
            return fn(*args)

    def to_jaxpr(self, results: Sequence[Any], keep_alive: Sequence[Any] = ()) -> tuple[Jaxpr, list[Any]]:
        """The jaxpr with its constants as leading arguments, and their values (``keep_alive``'s kept)."""
        out = [self.lift(r) for r in results]
        extra = [self.lift(k) for k in keep_alive]
        jaxpr, consts = self.trace.frame.to_jaxpr(self.trace, out + extra, self.debug_info, self.source_info)
        jaxpr = jaxpr.replace(outvars=jaxpr.outvars[: len(out)])
        return pe.convert_constvars_jaxpr(jaxpr), list(consts)

    def close(self) -> None:
        self.trace.invalidate()


def trace_to_jaxpr(
    flat_fn: Callable, in_type: InputType, name: str, on_arguments: Callable | None = None
) -> tuple[Jaxpr, OutputType, list[Any]]:
    """Trace a flat top-level function (new sizes first); ``on_arguments`` gets the argument tracers."""
    dbg = debug_info_for(flat_fn, name)
    inner = InnerTrace(dbg)
    try:
        expanded = inner.arguments(in_type)
        if on_arguments is not None:
            on_arguments(expanded)
        args = collapse(in_type, expanded)
        results = inner.call(flat_fn, *args)
        out = [inner.lift(r) for r in results]
        jaxpr, out_type, consts = inner.trace.frame.to_jaxpr2(out, dbg)
    finally:
        inner.close()
    # Without the equations nothing uses (the `params[i]` a QNode's gates read, once one gather
    # computes their matrices): every later stage would pay for them.
    pruned, _ = prune_jaxpr(jaxpr, [True] * len(jaxpr.outvars), [True] * len(jaxpr.invars))
    return pruned, out_type, list(consts)


def prune_jaxpr(
    jaxpr: Jaxpr, used_outputs: Sequence[bool], keep_inputs: Sequence[bool]
) -> tuple[Jaxpr, list[bool]]:
    """``jaxpr`` with only its used outputs, the equations they need (and those without results, with
    effects or :func:`.host_callbacks.keep_when_unused`) and the inputs used or kept; which it takes."""
    live: set = set()

    def use(v: Any) -> None:
        if isinstance(v, core.Var) and v not in live:
            live.add(v)
            for d in getattr(v.aval, "shape", ()):
                use(d)

    outvars = [v for v, used in zip(jaxpr.outvars, used_outputs) if used]
    for v in outvars:
        use(v)
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or not eqn.outvars or kept_when_unused(eqn.primitive) or any(v in live for v in eqn.outvars):
            if eqn.primitive in _JAX_DCE and not eqn.effects:
                # JAX's own loop or conditional (a JVP's, carrying primals and tangents): pruned
                # of the results not used here, and of the operands only they needed.
                _, eqn = pe.dce_rules[eqn.primitive]([v in live for v in eqn.outvars], eqn)
                if eqn is None:
                    continue
            kept.append(eqn)
            for v in (*eqn.invars, *eqn.outvars):  # (a result's sizes come from earlier equations)
                use(v)
    for v, keep in zip(jaxpr.invars, keep_inputs):
        if keep:
            use(v)
    taken = [v in live for v in jaxpr.invars]
    invars = [v for v, t in zip(jaxpr.invars, taken) if t]
    dbg = jaxpr.debug_info
    if isinstance(dbg.arg_names, tuple) and len(dbg.arg_names) == len(taken):
        dbg = dbg._replace(arg_names=tuple(n for n, t in zip(dbg.arg_names, taken) if t))
    if isinstance(dbg.result_paths, tuple) and len(dbg.result_paths) == len(used_outputs):
        dbg = dbg._replace(result_paths=tuple(p for p, u in zip(dbg.result_paths, used_outputs) if u))
    return jaxpr.replace(invars=invars, outvars=outvars, eqns=kept[::-1], debug_info=dbg), taken


def _carried_fixpoint(body: Jaxpr, fixed: list[bool], carried: list[bool], rest: list[bool]) -> tuple[list[bool], list[bool]]:
    """A loop body ``fixed, carried, rest -> carried, others``: the results depending on marked inputs."""
    for _ in range(len(carried) + 1):
        out = forward_dependence(body, [*fixed, *carried, *rest])
        new = [c or o for c, o in zip(carried, out[: len(carried)])]
        if new == carried:
            return carried, out[len(carried) :]
        carried = new
    raise AssertionError("the carried fixpoint was not reached")


def _scan_dependence(eqn: Any, marked: list[bool]) -> list[bool]:
    nconsts, ncarry = eqn.params["num_consts"], eqn.params["num_carry"]
    consts, carry, xs = marked[:nconsts], marked[nconsts : nconsts + ncarry], marked[nconsts + ncarry :]
    carry, ys = _carried_fixpoint(eqn.params["jaxpr"].jaxpr, consts, carry, xs)
    return [*carry, *ys]


def _while_dependence(eqn: Any, marked: list[bool]) -> list[bool]:
    cond_n, body_n = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    cond_consts, body_consts, carry = marked[:cond_n], marked[cond_n : cond_n + body_n], marked[cond_n + body_n :]
    carry, _ = _carried_fixpoint(eqn.params["body_jaxpr"].jaxpr, body_consts, carry, [])
    if any(forward_dependence(eqn.params["cond_jaxpr"].jaxpr, [*cond_consts, *carry])):
        return [True] * len(eqn.outvars)  # how many iterations run depends on the marked values
    return carry


def _cond_dependence(eqn: Any, marked: list[bool]) -> list[bool]:
    if marked[0]:  # the branch taken
        return [True] * len(eqn.outvars)
    per_branch = [forward_dependence(branch.jaxpr, marked[1:]) for branch in eqn.params["branches"]]
    return [any(column) for column in zip(*per_branch)]


_JAX_DCE = (lax_control_flow.scan_p, lax_control_flow.cond_p, pjit.jit_p)

# primitive -> rule(eqn, marked operands) -> marked results: which results of a nested primitive's
# equation depend on which operands (JAX's loops and conditionals under JVP carry primals and
# tangents; the primals must stay known to partial evaluation). Without a rule: all on all.
dependence_rules: dict[core.Primitive, Callable[[Any, list[bool]], list[bool]]] = {
    lax_control_flow.scan_p: _scan_dependence,
    lax_control_flow.while_p: _while_dependence,
    lax_control_flow.cond_p: _cond_dependence,
    pjit.jit_p: lambda eqn, marked: forward_dependence(eqn.params["jaxpr"].jaxpr, marked),
}


def _dependent_results(eqn: Any, operands: list[bool]) -> list[bool]:
    rule = dependence_rules.get(eqn.primitive)
    return rule(eqn, operands) if rule is not None else [True] * len(eqn.outvars)


def forward_dependence(jaxpr: Jaxpr, marked_inputs: Sequence[bool]) -> list[bool]:
    """Which outputs of ``jaxpr`` depend on the marked inputs (through any equation)."""
    marked = {v for v, m in zip(jaxpr.invars, marked_inputs) if m}
    for eqn in jaxpr.eqns:
        operands = [isinstance(v, core.Var) and v in marked for v in eqn.invars]
        if not any(operands):
            continue
        marked.update(v for v, m in zip(eqn.outvars, _dependent_results(eqn, operands)) if m)
    return [isinstance(v, core.Var) and v in marked for v in jaxpr.outvars]


def first_differentiated(
    jaxpr: Jaxpr, marked_inputs: Sequence[bool], select: Callable[[core.JaxprEqn], bool]
) -> core.JaxprEqn | None:
    """The first equation ``select`` picks among those taking a floating-point value that depends
    on the marked inputs (not through ``stop_gradient``), looking inside ``jax.jit`` calls only.

    >>> import jax
    >>> jaxpr = jax.make_jaxpr(lambda x, y: jax.numpy.sin(x) * jax.lax.stop_gradient(jax.numpy.cos(y)))(1.0, 2.0)
    >>> [first_differentiated(jaxpr.jaxpr, m, lambda e: e.primitive.name == "mul") is not None for m in ([1, 0], [0, 1])]
    [True, False]
    """
    marked = {v for v, m in zip(jaxpr.invars, marked_inputs) if m}

    def differentiable(v: Any) -> bool:
        return isinstance(v, core.Var) and v in marked and np.issubdtype(v.aval.dtype, np.inexact)

    for eqn in jaxpr.eqns:
        operands = [differentiable(v) for v in eqn.invars]
        if not any(operands) or eqn.primitive is ad_util.stop_gradient_p:
            continue
        if select(eqn):
            return eqn
        if eqn.primitive is pjit.jit_p:
            found = first_differentiated(eqn.params["jaxpr"].jaxpr, operands, select)
            if found is not None:
                return found
        marked.update(v for v, m in zip(eqn.outvars, _dependent_results(eqn, operands)) if m)
    return None


def dimension_value(x: Any) -> Any:
    """``x`` as a size: a Python int when its value is known (a number, a concrete array, a
    constant of a trace, the known part of a partially-evaluated value), the tracer itself when
    it is a symbolic size of a dynamic-shape trace, ``None`` when it is unknown.

    >>> dimension_value(np.int64(3)), dimension_value(None)
    (3, None)
    """
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    aval = get_aval(x) if isinstance(x, Tracer) or hasattr(x, "dtype") else None
    if aval is None or getattr(aval, "shape", None) != () or not np.issubdtype(aval.dtype, np.integer):
        return None
    if isinstance(x, pe.JaxprTracer):
        known = x.pval.get_known()
        return None if known is None else dimension_value(known)
    if isinstance(x, DynamicJaxprTracer):
        if isinstance(x.val, Literal):
            return dimension_value(x.val.val)
        if x._trace.is_valid() and x.val in x._trace.frame.constvar_to_val:
            return dimension_value(constant_value(x))
        return x if config.dynamic_shapes.value else None
    if isinstance(x, Tracer):
        return None
    return int(x)


def emit_equation(
    primitive: core.Primitive, operands: Sequence[Any], out_type: OutputType, params: dict, trace: Any = None
) -> list[Tracer]:
    """Append ``outs = primitive[params] operands`` to ``trace`` (default: the current one) and return
    the result tracers; in ``out_type``, ``InDBIdx(k)`` is operand ``k``, ``OutDBIdx(k)`` result ``k``."""
    trace = current_trace() if trace is None else trace
    src = source_info_util.current()
    in_tracers = [trace.to_jaxpr_tracer(x, src) for x in operands]
    out_tracers: list[Tracer] = []
    for aval, _ in out_type:
        if type(aval) is DShapedArray:
            shape = tuple(
                in_tracers[d.val] if type(d) is InDBIdx else out_tracers[d.val] if type(d) is OutDBIdx else d
                for d in aval.shape
            )
            aval = aval.update(shape=shape)
            if all(type(d) is int for d in shape):
                aval = ShapedArray(shape, aval.dtype, aval.weak_type)
        out_tracers.append(DynamicJaxprTracer(trace, aval, trace.frame.newvar(aval), src))
    eqn, _ = trace.make_eqn(in_tracers, [], primitive, params, core.no_effects, src)
    eqn.outvars = [t.val for t in out_tracers]
    for t in out_tracers:
        t.parent = eqn
    trace.frame.add_eqn(eqn)
    return out_tracers
