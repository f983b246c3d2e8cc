"""Scoped repairs to JAX 0.7's dynamic-shape path.

JAX 0.7's dynamic-shape machinery partly rotted when tracing became "stackless". Each repair is a
:class:`Patch` of a JAX attribute (why: its replacement's docstring) that behaves like
the original unless the *current thread* is inside :func:`patched_jax`; installed while some
catalyst_lite trace runs, so importing catalyst_lite changes nothing in JAX.

>>> from catalyst_lite.jax_extras.patches import patched_jax, is_active
>>> with patched_jax():
...     is_active()
True
>>> is_active()
False
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import jax.lax
import numpy as np
from jax import errors as jax_errors
from jax._src import core, custom_derivatives, pjit, xla_bridge
from jax._src.interpreters import ad, batching
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import control_flow
from jax._src.lax import lax as lax_internal
from jax._src.lax.control_flow import conditionals, loops
from jax._src.numpy import indexing, lax_numpy
from jax._src.numpy import util as numpy_util
from jax.tree_util import tree_flatten

from ..errors import CatalystLiteError, DataDependentSliceError, SymbolicShapeError
from ..trace_context import current, scope as context_scope
from .frames import user_line


@dataclass(frozen=True)
class Patch:
    """One replacement of ``owner.attr`` by ``make(original)`` while catalyst_lite traces."""

    name: str
    owner: Any
    attr: str
    make: Callable[[Any], Any]
    why: str


class PatchSet:
    """Patches installed while some thread is inside :meth:`scope` (reference-counted: the first
    thread in installs them, the last out removes them), in effect for the threads inside."""

    def __init__(self, patches: Sequence[Patch] = ()) -> None:
        self._patches: list[Patch] = list(patches)
        self._lock = threading.RLock()
        self._users = 0
        # The patches in effect and the attributes they replaced, in installation order (a list:
        # two patches may wrap the same attribute, one over the other).
        self._installed: list[tuple[Patch, Any]] = []

    def active(self) -> bool:
        """True when the calling thread is inside :meth:`scope` (and not :meth:`suspended`)."""
        return self in current().patch_sets

    def register(self, patch: Patch) -> Patch:
        """Add a patch to the set; applied at once while some thread is inside :meth:`scope`."""
        with self._lock:
            self._patches.append(patch)
            if self._users:
                self._apply(patch)
        return patch

    def unregister(self, patch: Patch) -> None:
        """Remove a patch from the set (it stays in effect until the current scopes end)."""
        with self._lock:
            self._patches.remove(patch)

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The patches in effect for the calling thread during the block (re-entrant)."""
        with self._lock:
            if self._users == 0:
                self._install()
            self._users += 1
        try:
            with context_scope(patch_sets=(*current().patch_sets, self)):
                yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._uninstall()

    def suspended(self) -> contextlib.AbstractContextManager:
        """The originals' behaviour for the calling thread in the block, even inside :meth:`scope`."""
        return context_scope(patch_sets=tuple(p for p in current().patch_sets if p is not self))

    def _apply(self, patch: Patch) -> None:
        # The owner's *own* entry, not an inherited one: writing that back on removal would leave
        # a copy behind in the subclass.
        own = vars(patch.owner).get(patch.attr, _ABSENT)
        setattr(patch.owner, patch.attr, patch.make(getattr(patch.owner, patch.attr, None)))
        self._installed.append((patch, own))

    def _install(self) -> None:
        try:
            for patch in self._patches:
                self._apply(patch)
        except BaseException:
            self._uninstall()  # all or nothing: a half-patched JAX must not outlive a failed install
            raise

    def _uninstall(self) -> None:
        # Undo exactly the patches applied, last first: an inherited attribute is inherited again.
        while self._installed:
            patch, own = self._installed.pop()
            if own is _ABSENT:
                delattr(patch.owner, patch.attr)
            else:
                setattr(patch.owner, patch.attr, own)


# An owner's own namespace lacked the attribute (it was inherited or absent).
_ABSENT = object()

# The repairs of JAX's dynamic-shape path, and those other catalyst_lite modules register (at import
# time: a module imported lazily while another thread traces gets its patch applied at once).
_JAX_REPAIRS = PatchSet()
register_patch, unregister_patch = _JAX_REPAIRS.register, _JAX_REPAIRS.unregister
is_active = _JAX_REPAIRS.active  # the calling thread is inside patched_jax()
patched_jax = _JAX_REPAIRS.scope  # the registered patches in effect for the calling thread in the block
suspended = _JAX_REPAIRS.suspended  # JAX's own behaviour for the calling thread in the block


def repair(owner: Any, attr: str, why: str = "", as_property: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated ``replacement(original, *args, **kwargs)`` as the patch of ``owner.attr``
    (a property's getter with ``as_property``; why: ``why`` or its docstring), called only in the
    threads inside :func:`patched_jax`: the others get the original."""
    def register(replacement: Callable) -> Callable:
        def make(original: Any) -> Any:
            def repaired(*args: Any, **kwargs: Any) -> Any:
                if is_active():
                    return replacement(original, *args, **kwargs)
                if not as_property:
                    return original(*args, **kwargs)
                if original is None:  # an attribute the owner lacks
                    raise AttributeError(attr)
                return original.fget(*args)

            return property(repaired) if as_property else repaired

        name = replacement.__name__.lstrip("_")
        register_patch(Patch(name, owner, attr, make, why or replacement.__doc__ or ""))
        return replacement

    return register


# --- The dynamic-shape path ------------------------------------------------------------------------


@repair(lax_internal, "_dyn_shape_staging_rule")
def _dyn_shape_staging_rule(original, trace, source_info, prim, out_aval, *args, **params):
    """Emit a ``TracingEqn``: ``lax._dyn_shape_staging_rule`` (``jnp.ones((n,))``) builds a ``JaxprEqn``,
    which the stackless frame refuses."""
    (out,) = trace.emit_eqn(list(args), [out_aval], prim, params, core.no_effects, source_info)
    return out


@repair(pe.DynamicJaxprTrace, "make_eqn")
def _make_eqn(original, self, in_tracers, out_avals, primitive, params, effects, source_info=None, ctx=None):
    """Output tracers keep dimension *tracers* in their shapes, which jax.numpy needs:
    ``DynamicJaxprTrace.make_eqn`` builds them from their variables' avals, whose shapes hold ``Var``s."""
    if any(type(a) is core.DShapedArray and any(isinstance(d, core.Var) for d in a.shape) for a in out_avals):
        # A result size that is a variable of JAX's nested trace (custom_jvp/custom_vjp's
        # results: JAX relates no sizes across them): symbolic here, it would be unbound.
        raise NeedsCallSizes(f"a size of {primitive.name}'s results escaped JAX's nested trace")
    eqn, out_tracers = original(self, in_tracers, out_avals, primitive, params, effects, source_info, ctx)
    out_tracers = [
        pe.DynamicJaxprTracer(self, aval, t.val, t._line_info, eqn) if type(aval) is core.DShapedArray else t
        for aval, t in zip(out_avals, out_tracers)
    ]
    return eqn, out_tracers


@repair(core, "mapped_aval")
def _mapped_aval(original, size, axis, aval):
    """An element of an array mapped over its symbolic axis (``jax.vmap`` over ``jnp.arange(n)``)
    has static sizes: JAX's static type, not a ``DShapedArray`` of numbers, which jax.numpy's
    checks (``isinstance(aval, ShapedArray)``: ``x[i]``) refuse as "Indexing mode not yet supported"."""
    out = original(size, axis, aval)
    if type(out) is core.DShapedArray and all(type(d) is int for d in out.shape):
        return core.ShapedArray(out.shape, out.dtype, out.weak_type)
    return out


@repair(pjit, "_python_pjit_helper")
def _python_pjit_helper(original, fun, jit_info, *args, **kwargs):
    """Nested ``jax.jit`` calls (most of jax.numpy) are inlined, semantically the identity: under
    dynamic shapes their input type, from tracers whose shapes hold tracers, fails its check."""
    trace = staging_trace(tree_flatten((args, kwargs))[0])
    if trace is None:
        return original(fun, jit_info, *args, **kwargs)
    with core.set_current_trace(trace):
        outs = fun(*args, **kwargs)
    out_flat, out_tree = tree_flatten(outs)
    args_flat, _ = tree_flatten((args, kwargs))
    no_jaxpr = types.SimpleNamespace(effects=core.no_effects, consts=[])
    return outs, out_flat, out_tree, args_flat, no_jaxpr, None, None, []


def staging_trace(args: Sequence[Any]) -> pe.DynamicJaxprTrace | None:
    """The catalyst_lite trace operations on ``args`` belong to (``None``: evaluate them): the current
    one, or in a shape rule (the eval trace current) that of their dimension tracers."""
    current = core.trace_ctx.trace
    if not isinstance(current, core.EvalTrace):
        return current
    for x in args:
        if isinstance(x, pe.DynamicJaxprTracer) and x._trace.is_valid():
            return x._trace
    return None


@repair(core.EvalTrace, "process_primitive")
def _process_primitive(original, self, primitive, args, params):
    """Arithmetic on dimension tracers in shape rules (``max(0, d - 1)``) is staged, not refused."""
    trace = staging_trace(args)
    if trace is None:
        return original(self, primitive, args, params)
    with core.set_current_trace(trace):
        return primitive.bind_with_trace(trace, args, params)


@repair(batching.BatchTrace, "process_primitive")
def _batch_process_primitive(original, self, primitive, tracers, params):
    """With dynamic shapes on, ``BatchTrace`` first checks a primitive's abstract evaluation, which
    a primitive staged by its own rule lacks (PennyLane's ``qnode``): ``jax.vmap`` of a QNode under
    ``qjit(capture=True)`` was "Abstract evaluation for 'qnode' not implemented". Such a primitive
    goes to its batching rule unchecked, as it does without dynamic shapes."""
    rule = batching.primitive_batchers.get(primitive)
    if not (rule and primitive.multiple_results and primitive in pe.custom_staging_rules
            and "abstract_eval" not in vars(primitive)):
        return original(self, primitive, tracers, params)
    vals, dims = tuple(zip(*map(self.to_batch_info, tracers))) or ((), ())
    with core.set_current_trace(self.parent_trace):
        if all(d is batching.not_mapped for d in dims):
            return primitive.bind_with_trace(self.parent_trace, vals, params)
        outs, out_dims = rule(vals, dims, **params)
        return [x if d is batching.not_mapped else batching.BatchTracer(self, x, d)
                for x, d in zip(outs, out_dims)]


@repair(pe.DynamicJaxprTrace, "to_jaxpr_tracer")
def _to_jaxpr_tracer(original, self, x, source_info):
    """Captures go through every enclosing trace: a value of the outermost program captured two levels
    deep, unseen by the level between, has sizes differing there (``a + x``: "Incompatible shapes").
    A value standing for a traced array (``__jax_array__``: a mid-circuit outcome) bound as such
    (``lax.select(m, ...)``, ``jax.debug.print``) is that array, not a constant holding the object."""
    if not isinstance(x, core.Tracer) and hasattr(x, "__jax_array__"):
        x = x.__jax_array__()
    parent = getattr(self, "parent_trace", None)
    if (
        isinstance(x, pe.DynamicJaxprTracer)
        and x._trace is not self
        and isinstance(parent, pe.DynamicJaxprTrace)
        and x._trace is not parent
    ):
        x = parent.to_jaxpr_tracer(x, source_info)
    return original(self, x, source_info)


@repair(pjit, "_infer_params_impl")
def _infer_params_impl(original, *args, **kwargs):
    """``jax.make_jaxpr`` inside a trace (PennyLane's program capture) builds ``PjitParams`` whose
    ``consts`` is a tuple, then adds a list to it: "can only concatenate tuple (not "list")"."""
    p, args_flat = original(*args, **kwargs)
    if isinstance(p.consts, tuple):
        p = p._replace(consts=list(p.consts))
    return p, args_flat


@repair(control_flow, "platform_dependent")
def _platform_dependent(original, *args, default=None, **per_platform):
    """``lax.platform_dependent`` (jnp.diagonal's TPU variant) takes the default backend's branch
    at once, as lowering would: its staged ``switch`` does not carry symbolic shapes."""
    branch = per_platform.get(xla_bridge.get_backend().platform, default)
    if branch is None:
        return original(*args, default=default, **per_platform)
    return branch(*args)


@repair(pe.JaxprTrace, "new_arg")
def _new_arg(original, self, pval):
    """``JaxprTrace.new_arg`` (``jax.linearize``'s unknown tangents) finds sizes of enclosing traces by
    ``d._trace.level``, gone with stackless tracing: they are the sizes not of this trace."""
    aval = pval.get_aval() if pval.get_known() is None else None
    if type(aval) is not core.DShapedArray:
        return original(self, pval)
    shape = tuple(
        self.new_instantiated_const(d) if isinstance(d, core.Tracer) and d._trace is not self else d
        for d in aval.shape
    )
    return pe.JaxprTracer(self, pe.PartialVal.unknown(aval.update(shape=shape)), pe.LambdaBinding())


@repair(pe, "_drop_unused_vars")
def _drop_unused_vars(original, constvars, constvals, eqns, outvars):
    """A size used only in an equation's result type (``_:f64[d] = hessenberg b``) is kept: JAX would
    drop ``d``'s own equation, leaving ``d`` unbound."""
    def names(atom):
        if isinstance(atom, core.Literal):
            return []
        shape = atom.aval.shape if type(atom.aval) is core.DShapedArray else ()
        return [atom, *(d for d in shape if isinstance(d, core.Var))]

    used = {v for atom in outvars for v in names(atom)}
    for eqn in eqns[::-1]:
        eqn.outvars = [v if v in used else core.DropVar(v.aval) for v in eqn.outvars]
        used.update(v for atom in eqn.invars for v in names(atom))
        used.update(d for v in eqn.outvars for d in names(v)[1:])
    kept = [(v, val) for v, val in zip(constvars, constvals) if v in used]
    return [v for v, _ in kept], [val for _, val in kept]


# --- Where JAX meets a symbolic size it cannot handle: one typed signal ----------------------------


class NeedsCallSizes(Exception):
    """The signal raised where a trace with symbolic sizes needs the call's sizes (``site`` says
    where: ``len(x)`` of an abstracted axis, an undecided comparison, a layer of JAX failing on a
    symbolic size); the program is traced again with them, as ``jax.jit`` would. :meth:`standing_for`
    makes it an instance of the error it stands for too, so code catching that class still does.

    >>> from catalyst_lite.jax_extras.patches import NeedsCallSizes
    >>> signal = NeedsCallSizes.standing_for(TypeError("len() of a traced size"), "len(x)")
    >>> isinstance(signal, NeedsCallSizes), isinstance(signal, TypeError), signal.site
    (True, True, 'len(x)')
    """

    def __init__(self, site: str = "") -> None:
        super().__init__(site)
        self.site = site

    @classmethod
    def standing_for(cls, err: BaseException, site: str) -> "NeedsCallSizes":
        signal = error_standing_for(cls, type(err))(*err.args)
        signal.site = site
        return signal


@functools.cache
def error_standing_for(ours: type[Exception], theirs: type[BaseException]) -> type[Exception]:
    """``ours`` that is also ``theirs`` (JAX's error class, say): code catching either catches it.

    >>> error_standing_for(NeedsCallSizes, TypeError)("message").args
    ('message',)
    """
    if issubclass(theirs, ours):
        return theirs

    def __init__(self, *args: Any) -> None:  # JAX's classes take a tracer, not a message
        Exception.__init__(self, *args)

    return type(ours.__name__, (ours, theirs), {"__init__": __init__, "__module__": ours.__module__,
                                                 "__doc__": ours.__doc__, "__str__": Exception.__str__})


class ShapeBroadcastError(ValueError, TypeError):
    """Shapes that do not broadcast: a ``ValueError`` (JAX's dynamic-shape path) and a ``TypeError`` (as
    under ``jax.jit``), so that code catching either keeps working."""


class NonIntegerSizeError(TypeError):
    """A size computed from a value that is not an integer (``jnp.ones(x)`` of a float ``x``)."""


def symbolic_trace() -> bool:
    """The calling thread traces a catalyst_lite program with symbolic sizes (see :mod:`.size_facts`)."""
    scopes = current().size_scopes
    return is_active() and bool(scopes) and scopes[-1].symbolic


# Errors that already say what happened: not a layer's failure to be signalled again.
_SETTLED = (NeedsCallSizes, ShapeBroadcastError, NonIntegerSizeError, CatalystLiteError)


def _signal_at(site: Callable[..., str]) -> Callable:
    # A layer of JAX failing during a symbolic trace is the signal (the user's exceptions pass).
    def at_site(original, *args, **kwargs):
        try:
            return original(*args, **kwargs)
        except Exception as err:
            if isinstance(err, _SETTLED) or not symbolic_trace() or raised_in_users_code(err):
                raise
            raise NeedsCallSizes.standing_for(err, site(*args)) from err

    return at_site


for _owner, _attr, _site in (
    (core.Primitive, "bind_with_trace", lambda p, *_: f"JAX's rules of primitive {p.name!r}"),
    *((trace, "process_custom_jvp_call", lambda *_: "JAX's differentiation of a custom_jvp function")
      for trace in (ad.JVPTrace, ad.LinearizeTrace)),
    (ad, "backward_pass", lambda *_: "JAX's reverse mode"),
    (loops, "_check_carry_type", lambda name, *_: f"JAX's check of a {name}'s carry"),
    (conditionals, "_check_branch_outputs", lambda name, *_: f"JAX's check of {name}'s branch types"),
):
    repair(_owner, _attr, "a failure of this layer of JAX on symbolic sizes signals")(_signal_at(_site))


@repair(lax_internal, "broadcast_shapes")
@repair(numpy_util, "_broadcast_to")
def _broadcast(original, *args, **kwargs):
    """Shapes that do not broadcast are our typed error; in JAX's own nested trace, the signal."""
    try:
        return original(*args, **kwargs)
    except ValueError as err:
        if isinstance(err, _SETTLED):
            raise
        error = ShapeBroadcastError(*err.args)
        scopes = current().size_scopes
        if symbolic_trace() and scopes[-1].nested_jax_traces > 0:
            raise NeedsCallSizes.standing_for(error, "broadcasting in JAX's nested trace") from err
        raise error.with_traceback(err.__traceback__) from None


@repair(core, "_invalid_shape_error")
def _invalid_shape_error(original, shape, context=""):
    """A shape holding a jaxpr variable (a size escaped JAX's nested trace) signals; a non-integer errs."""
    error = original(shape, context)
    if any(isinstance(d, core.Var) for d in shape):
        return NeedsCallSizes.standing_for(error, "a size escaped JAX's nested trace")
    return NonIntegerSizeError(*error.args)


@repair(jax.lax, "associative_scan")
def _associative_scan(original, fn, elems, reverse=False, axis=0):
    """``lax.associative_scan`` refuses an axis of symbolic size: it is traced with the call's sizes."""
    leaves = tree_flatten(elems)[0]
    scanned = np.shape(leaves[0])[axis:][:1] if leaves else ()
    if symbolic_trace() and any(isinstance(d, core.Tracer) for d in scanned):
        raise NeedsCallSizes("lax.associative_scan over an axis of symbolic size")
    return original(fn, elems, reverse=reverse, axis=axis)


def _no_symbolic_result(call: str, fix: str, jax_error: type[BaseException] | None = None) -> SymbolicShapeError:
    """Our error; ``jax_error``: the class JAX raises for the same program under ``jax.jit``, which
    it is too (code catching that keeps working)."""
    error = SymbolicShapeError if jax_error is None else error_standing_for(SymbolicShapeError, jax_error)
    return error(f"{call} cannot have a symbolic result shape: {fix}.")


@repair(lax_numpy, "_squeeze")
def _squeeze(original, a, axis):
    """``jnp.squeeze(x)`` of symbolic shape: which axes have length 1 is only known at run time."""
    if axis is None and any(isinstance(d, core.Tracer) for d in np.shape(a)):
        raise _no_symbolic_result("jnp.squeeze(x) without axis", "which axes have length 1 is only "
                                  "known at run time; pass the axes, e.g. jnp.squeeze(x, axis=1)")
    return original(a, axis)


@repair(indexing, "_expand_bool_indices")
def _expand_bool_indices(original, idx, shape):
    """``x[mask]`` of a traced mask: the result's length is only known at run time."""
    masks = (isinstance(i, core.Tracer) and np.ndim(i) and i.dtype == np.bool_ for i in idx)
    if any(masks):
        raise _no_symbolic_result("boolean-mask indexing x[mask]", "the result's length depends "
                                  "on the data; use jnp.where(mask, x, fill) to keep the size, or "
                                  "jnp.nonzero(mask, size=k, fill_value=...) with a bound k",
                                  jax_errors.NonConcreteBooleanIndexError)
    return original(idx, shape)


@repair(indexing, "_is_slice_element_none_or_constant_or_symbolic")
def _is_slice_element_none_or_constant_or_symbolic(original, elt):
    """``x[:k]`` of a ``k`` computed from the data (``jnp.sum(x > 0)``): JAX's words, then which
    function and value, and the ways to keep the size known (a size input, or a mask)."""
    allowed = original(elt)
    if allowed or not isinstance(elt, core.Tracer):
        return allowed
    where = user_line(2)
    raise DataDependentSliceError(
        "Array slice indices must have static start/stop/step to be used with NumPy indexing "
        f"syntax: {where.function + ': ' if where else ''}a slice bound ({elt.aval.str_short()}) "
        "is computed from array data, so the slice's length would only be known when the "
        "program runs. Make the bound a size (an int argument of the qjit function, or a "
        "length of an abstracted axis: abstracted_axes), keep the length and mask the rest "
        "(jnp.where(jnp.arange(x.shape[0]) < k, x, 0)), or take a window of known length "
        "with lax.dynamic_slice(x, (start,), (length,))"
    )


@repair(core, "dimension_as_value")
def _dimension_as_value(original, d):
    """A jaxpr variable where JAX wants a size's value is a size that escaped JAX's nested trace."""
    if isinstance(d, core.Var) and symbolic_trace():
        raise NeedsCallSizes("a size escaped JAX's nested trace")
    return original(d)


def jax_nested_trace_depth() -> int:
    """How many functions JAX is tracing itself in the calling thread while catalyst_lite traces
    (``lax.cond``'s branches, ``jax.jit``'s function...): a circuit detects gates queued there."""
    return current().jax_nested_traces


@repair(pe, "trace_to_jaxpr_dynamic")
def _trace_to_jaxpr_dynamic(original, fun, in_avals, *args, **kwargs):
    """JAX's own nested traces (lax.cond's branches, custom_jvp functions) do not relate their sizes
    to ours: JAX's conversion errors there signal (the user's exceptions pass)."""
    scopes = current().size_scopes
    signals = symbolic_trace() and any(type(a) is core.DShapedArray for a in in_avals)
    if signals:
        scopes[-1].nested_jax_traces += 1
    try:
        with context_scope(jax_nested_traces=jax_nested_trace_depth() + 1):
            return original(fun, in_avals, *args, **kwargs)
    except jax_errors.JAXTypeError as err:
        if not signals or isinstance(err, NeedsCallSizes):
            raise
        raise NeedsCallSizes.standing_for(err, "JAX's nested trace of a function") from err
    finally:
        if signals:
            scopes[-1].nested_jax_traces -= 1


# --- The user's functions that JAX calls back are marked -------------------------------------------


def _users(fn: Callable | None) -> Callable | None:
    """``fn``, recording in the size scope what it raises (see :func:`raised_in_users_code`)."""
    if fn is None:
        return None

    @functools.wraps(fn)
    def users_code(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            scopes = current().size_scopes
            if scopes:
                scopes[-1].users_exceptions.append(err)
            raise

    return users_code


def raised_in_users_code(err: BaseException) -> bool:
    """Whether ``err`` left a function of the user's that JAX called back (``custom_jvp``/``custom_vjp``)
    during the current trace: the very object its marker recorded, never judged by text or frames."""
    return any(err is e for scope in current().size_scopes for e in scope.users_exceptions)


@repair(custom_derivatives.custom_jvp, "__call__")
@repair(custom_derivatives.custom_vjp, "__call__")
def _mark_users(original, self, *args, **kwargs):
    """The user's functions of a ``custom_jvp``/``custom_vjp`` are marked as the user's code: the call
    runs on a copy holding them marked."""
    marked = copy.copy(self)
    jvp = isinstance(self, custom_derivatives.custom_jvp)
    for name in ("fun", "jvp") if jvp else ("fun", "fwd", "bwd"):
        setattr(marked, name, _users(getattr(self, name)))
    return original(marked, *args, **kwargs)
