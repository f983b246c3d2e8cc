"""Differentiation inside (and outside) ``@qjit``: ``grad``, ``value_and_grad``, ``jacobian``,
``jvp`` and ``vjp`` with Catalyst's signatures.

Inside a trace the function is traced once, with the enclosing sizes symbolic, into one equation::

    outs = differentiate[fn_jaxpr, nconsts, nargs, nimplicit_out, wrt, transform, method, h]
               *consts *args *extra

``fn_jaxpr`` returns ``*implicit *results``; ``extra`` are tangents (``"jvp"``) or cotangents
(``"vjp"``). The equation returns the implicit sizes, then the results and their tangents
(``"jvp"``), the results and the cotangents of the ``wrt`` arguments (``"vjp"``), or one Jacobian
block per (result, argument) (``"jacobian"``). Differentiation happens at specialization, sizes
known: ``jax.jvp``/``jax.vjp``/``jax.jacrev`` of the evaluated body, or forward finite differences
(``method="fd"``). Loops in reverse mode: :mod:`catalyst_lite.compiler.specialize`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure, tree_unflatten, treedef_is_leaf

from ..trace_context import pennylane_capture_enabled
from ..quantum.gradients import differentiating
from ..compiler.executable import compile_function, uncompiled
from ..compiler.runner import runner_for
from ..compiler.specialize import Mode, dimension_inputs, eval_jaxpr, reverse_mode, to_dim
from ..callbacks import host_callback_p
from ..errors import ArgumentIndexError, ArgumentTypeError, ArgumentValueError, CompileError
from ..errors import DifferentiationError
from ..errors import function_name
from ..jax_extras import ClosedJaxpr, get_aval, is_tracing
from ..jax_extras.tracing import under_jax_transformation
from ..jax_extras.patches import NeedsCallSizes, error_standing_for
from ..jax_extras.dynshape import ExpansionStrategy, JaxprTypeError, array_aval, output_type_of, same_dim
from ..jax_extras.lowering import opaque_call
from ..jax_extras.nested import Body, DynshapePrimitive, Equation, NestedBody, NestedSpec, bind_nested
from ..jax_extras.rules import PrimitiveSpec, deferred_vjp, register_nested_primitive
from ..jax_extras.typecheck import check_nested
from ..jax_extras.tracing import first_differentiated

__all__ = ["grad", "value_and_grad", "jacobian", "jvp", "vjp", "differentiate_p"]

DEFAULT_STEP = 1e-7  # Catalyst's default finite-difference step


differentiate_p = DynshapePrimitive("differentiate")


@dataclass(frozen=True)
class Options:
    """``method`` (``"auto"``, or ``"fd"``: finite differences of step ``h``) and ``argnums``."""

    method: str
    h: float
    argnums: int | tuple[int, ...] | None

    @staticmethod
    def checked(api: str, method: str | None, h: float | None, argnums: Any) -> "Options":
        """Validated options; :class:`~catalyst_lite.errors.ArgumentValueError` names the bad one."""
        method = "auto" if method is None else method
        if method not in ("auto", "fd"):
            raise ArgumentValueError(  # Catalyst's phrase first, then ours
                f"Invalid differentiation method {method!r}. Supported methods are: auto fd ({api}: "
                "method must be 'auto' or 'fd')."
            )
        # As in Catalyst, a step is accepted (and unused) with method="auto", and may be negative.
        if h is not None and (isinstance(h, bool) or not isinstance(h, (int, float)) or not np.isfinite(h) or h == 0):
            raise ArgumentValueError(  # Catalyst's phrase first, then ours
                f"Invalid h value ({h!r}). {api}: h (the finite-difference step) must be a finite "
                "non-zero number."
            )
        if argnums is not None and not (
            isinstance(argnums, int)
            or isinstance(argnums, (list, tuple)) and all(isinstance(k, int) for k in argnums)
        ):
            raise ArgumentValueError(  # Catalyst's phrase first, then ours
                f"argnums should be an integer or a Sequence of integers, not {argnums!r}: {api}: "
                "give argnums=0 for the first argument, argnums=(0, 2) for several."
            )
        argnums = tuple(argnums) if isinstance(argnums, list) else argnums
        return Options(method, float(DEFAULT_STEP if h is None else h), argnums)


@dataclass
class Selection:
    """The arguments of a call, flattened, and which of them are differentiated."""

    flat_args: list[Any]
    wrt: tuple[int, ...]  # flat positions of the differentiated leaves (each once)
    trees: list[PyTreeDef]  # structure of each argument argnums names
    single: bool  # argnums was an int: one result instead of a tuple
    leaves: tuple[int, ...]  # each leaf's index in wrt (argnums may name an argument twice)

    def unflatten(self, values: Sequence[Any]) -> Any:
        """Values of the differentiated leaves (in :attr:`wrt`'s order) as the arguments named."""
        values = [values[i] for i in self.leaves]
        ends = np.cumsum([t.num_leaves for t in self.trees]).tolist()
        out = [tree_unflatten(t, values[end - t.num_leaves : end]) for t, end in zip(self.trees, ends)]
        return out[0] if self.single else tuple(out)


def argument_name(fn: Callable, k: int) -> str:
    try:
        parameters = inspect.signature(fn).parameters.values()
        params = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return repr(params[k]) if k < len(params) else f"#{k}"


def select_arguments(api: str, fn: Callable, args: tuple, argnums: int | tuple[int, ...]) -> Selection:
    """Flatten ``args``; ``argnums`` (negative: from the end) must name floating-point ones."""
    indices = (argnums,) if isinstance(argnums, int) else argnums
    for k in indices:
        if not -len(args) <= k < len(args):
            raise ArgumentIndexError(
                f"{api}: argnums={argnums!r} names argument {k}, but {function_name(fn)} is called "
                f"with {len(args)} positional argument(s)."
            )
    indices = tuple(k % len(args) for k in indices)
    flat_args = tree_flatten(args)[0]
    starts = np.cumsum([0, *(tree_structure(a).num_leaves for a in args)]).tolist()
    requested, trees = [], []
    for k in indices:
        tree = tree_structure(args[k])
        for j in range(tree.num_leaves):
            aval = get_aval(flat_args[starts[k] + j])
            if not jnp.issubdtype(aval.dtype, jnp.inexact):
                raise DifferentiationError(
                    f"{api} only supports differentiation on floating-point arguments: argument "
                    f"{argument_name(fn, k)} of {function_name(fn)} is {aval.str_short()} "
                    "(complex ones can be differentiated too). Leave it out of argnums."
                )
            requested.append(starts[k] + j)
        trees.append(tree)
    wrt = tuple(dict.fromkeys(requested))
    return Selection(flat_args, wrt, trees, isinstance(argnums, int), tuple(wrt.index(p) for p in requested))


@dataclass
class TracedFunction:
    """A function traced with the enclosing program's sizes, ready to be differentiated."""

    api: str
    body: NestedBody
    selection: Selection
    out_tree: PyTreeDef

    @property
    def result_avals(self) -> list[Any]:
        return [v.aval for v in self.body.jaxpr.outvars[self.body.nimplicit_out :]]

    def check_differentiable_results(self) -> None:
        for k, aval in enumerate(self.result_avals):
            if not jnp.issubdtype(aval.dtype, jnp.inexact):
                raise DifferentiationError(  # Catalyst's phrase first (users' match= strings)
                    f"{self.api} only supports differentiation on floating-point results: result {k} "
                    f"is {aval.str_short()}; floating-point and complex results can be differentiated."
                )

    def check_real_scalar_result(self) -> None:
        avals = self.result_avals
        if len(avals) == 1 and avals[0].shape == () and not jnp.issubdtype(avals[0].dtype, jnp.floating):
            raise DifferentiationError(  # a complex or integer scalar: jax.grad rejects it too
                f"{self.api} only supports differentiation on floating-point results: the function "
                f"returns {avals[0].str_short()}, and a gradient needs one real scalar (return its "
                "real part, or use jacobian)."
            )
        if len(avals) != 1 or avals[0].shape != ():
            got = ", ".join(a.str_short() for a in avals) or "nothing"
            raise DifferentiationError(
                f"{self.api} only supports scalar-output functions: the function must return one "
                f"real scalar, but it returns {got}. Use jacobian (or reduce the result, e.g. with "
                "jnp.sum) for other results."
            )


def differentiate(api: str, fn: Callable, args: tuple, transform: str, options: Options,
                  operands_for: Callable[[TracedFunction], Sequence[Any]], kwargs: dict | None = None
                  ) -> tuple[TracedFunction, list[Any]]:
    """Trace ``fn(*args, **kwargs)`` with the enclosing sizes and bind its ``differentiate`` equation;
    ``operands_for(traced)`` checks it and gives the (co)tangents (keyword arguments: not differentiated)."""
    argnums = 0 if options.argnums is None else options.argnums
    selection = select_arguments(api, fn, args, argnums)
    in_tree = tree_structure(args)
    trees: list[PyTreeDef] = []
    kwargs = kwargs or {}
    traced: list[TracedFunction] = []

    def flat_fn(*flat: Any) -> list[Any]:
        results, tree = tree_flatten(fn(*tree_unflatten(in_tree, list(flat)), **kwargs))
        trees.append(tree)
        return results

    def equation(bodies: list[NestedBody], implicit: list, explicit: list) -> Equation:
        (body,) = bodies
        traced.append(TracedFunction(api, body, selection, trees[-1]))
        if options.method == "auto":
            _check_callbacks_have_derivatives(body, selection.wrt)
        extra = list(operands_for(traced[-1]))
        params = dict(fn_jaxpr=ClosedJaxpr(body.jaxpr, ()), nconsts=body.nconsts, nargs=len(explicit),
                      nimplicit_out=body.nimplicit_out, wrt=selection.wrt, transform=transform,
                      method=options.method, h=options.h)
        return Equation([*body.consts, *explicit, *extra], params, body.nimplicit_out)

    spec = NestedSpec(differentiate_p, equation, ExpansionStrategy(preserve_dimensions=True))
    with differentiating(options.method):  # QNodes check their diff_method (quantum/gradients.py)
        outs = bind_nested(spec, [Body(flat_fn, f"{api} of {function_name(fn)}", "sized")], selection.flat_args)
    return traced[-1], outs


def _check_callbacks_have_derivatives(body: NestedBody, wrt: tuple[int, ...]) -> None:
    """A pure callback without ``.fwd``/``.bwd`` on the derivative's path: Catalyst's error while
    tracing (those inside loops and conditionals: when the derivative is computed)."""
    marked = [k - body.nconsts in wrt for k in range(len(body.jaxpr.invars))]
    found = first_differentiated(
        body.jaxpr, marked, lambda eqn: eqn.primitive is host_callback_p and eqn.params["call"].underived
    )
    if found is not None:
        raise found.params["call"].no_derivative_error()


def _result_avals(params: dict[str, Any]) -> list[Any]:
    """The equation's explicit results, typed inside ``fn_jaxpr`` (see the module docstring)."""
    fn, n = params["fn_jaxpr"].jaxpr, params["nimplicit_out"]
    results = [v.aval for v in fn.outvars[n:]]
    wrt = [fn.invars[params["nconsts"] + k].aval for k in params["wrt"]]
    if params["transform"] == "jvp":
        return results * 2
    if params["transform"] == "vjp":
        return [*results, *wrt]
    return [array_aval((*r.shape, *a.shape), r.dtype) for r in results for a in wrt]  # d r / d a


def _feeds(params: dict[str, Any]) -> list[tuple[Any, list[int]]]:
    return [(params["fn_jaxpr"].jaxpr, list(range(params["nconsts"] + params["nargs"])))]


def _output_type(params: dict[str, Any], same_operand: Any = None) -> tuple:
    """The implicit results, then :func:`_result_avals`, sized by the operands feeding the function."""
    fn, n = params["fn_jaxpr"].jaxpr, params["nimplicit_out"]
    return output_type_of(_result_avals(params), fn.outvars[:n], {v: k for k, v in enumerate(fn.invars)})


def _check(atoms: list[Any], params: dict[str, Any]) -> None:
    """The function's operands, then one tangent per ``wrt`` argument or one cotangent per result."""
    fn, ninputs = params["fn_jaxpr"].jaxpr, params["nconsts"] + params["nargs"]
    check_nested(fn, atoms[:ninputs], f"differentiate ({params['transform']})")
    nresults = len(fn.outvars) - params["nimplicit_out"]
    expected = {"jvp": len(params["wrt"]), "vjp": nresults, "jacobian": 0}[params["transform"]]
    if len(atoms) - ninputs != expected or (params["transform"], params["method"]) not in TRANSFORMS:
        raise JaxprTypeError(f"differentiate[{params['transform']}, {params['method']}] with "
                             f"{len(atoms) - ninputs} extra operands (expected {expected})")


class _Transformed:
    """``grad(fn)``, ``value_and_grad(fn)`` or ``jacobian(fn)``: a ``differentiate`` equation inside qjit;
    outside, as Catalyst, what ``jax.grad``... computes (exact derivatives), compiled with qjit once."""

    def __init__(self, fn: Callable, kind: str, options: Options, *, as_jax: bool = False):
        if not callable(fn):  # jax.grad rejects it too (a TypeError)
            raise DifferentiationError(
                f"Non-differentiable object passed to {kind}: {fn!r} is not a function ({kind} "
                "takes the function to differentiate)."
            )
        self.fn, self.kind, self.options = uncompiled(fn), kind, options
        self.as_jax = as_jax  # outside qjit: JAX's rules (a gradient needs a bare scalar result)
        self.__name__ = self.__qualname__ = f"{kind}({function_name(self.fn)})"
        self.__doc__ = getattr(self.fn, "__doc__", None)
        # fn's parameters, as Catalyst's wrappers show them: qjit(grad(f)) binds and reads f's
        with contextlib.suppress(TypeError, ValueError):  # annotations and static_argnames
            self.__signature__ = inspect.signature(self.fn)
        self._compiled: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not is_tracing() and pennylane_capture_enabled():
            method, h, argnums = self.options.method, self.options.h, self.options.argnums
            h = h if method == "fd" else None
            return _pennylane(self.kind)(self.fn, method=method, h=h, argnums=argnums)(*args, **kwargs)
        if not is_tracing():
            if self._compiled is None:
                self._compiled = compile_function(
                    _Transformed(self.fn, self.kind, replace(self.options, method="auto"), as_jax=True)
                )
            return self._compiled(*args, **kwargs)
        if self.kind == "jacobian":
            traced, blocks = differentiate(self.__name__, self.fn, args, "jacobian", self.options,
                                           lambda traced: traced.check_differentiable_results() or [], kwargs)
            n, m = len(traced.selection.wrt), len(traced.result_avals)
            per_result = [traced.selection.unflatten(blocks[i * n : (i + 1) * n]) for i in range(m)]
            return tree_unflatten(traced.out_tree, per_result)

        def seed(traced: TracedFunction) -> list[Any]:
            """The cotangent 1 of the scalar result; in a container (``{"v": y}``), the gradient comes
            in it, as Catalyst's inside qjit (``as_jax``: an error, as ``jax.grad`` raises)."""
            traced.check_real_scalar_result()
            if self.as_jax and not treedef_is_leaf(traced.out_tree):
                raise DifferentiationError(
                    f"{self.__name__}: Gradient only defined for scalar-output functions; the function "
                    f"returns {traced.out_tree}. Return the scalar itself."
                )
            return [np.ones((), traced.result_avals[0].dtype)]

        traced, outs = differentiate(self.__name__, self.fn, args, "vjp", self.options, seed, kwargs)
        value = tree_unflatten(traced.out_tree, outs[:1])
        grads = tree_unflatten(traced.out_tree, [traced.selection.unflatten(outs[1:])])
        return (value, grads) if self.kind == "value_and_grad" else grads


def _transformation(fn: Callable | None, kind: str, options: Options) -> Any:
    """``kind(fn)``, or a decorator making it (``@grad(argnums=1)``) when ``fn`` is ``None``."""
    transformed = functools.partial(_Transformed, kind=kind, options=options)
    return transformed if fn is None else transformed(fn)


def grad(fn: Callable | None = None, *, method: str | None = None, h: float | None = None, argnums: Any = None):
    """The gradient of a function returning one real scalar, w.r.t. argument ``argnums`` (default
    0; negative counts from the end; a sequence gives a tuple of gradients). ``method="fd"``:
    forward finite differences ``(f(x + h) - f(x)) / h`` with step ``h`` (default ``1e-7``).
    Usable as ``grad(fn)`` or ``@grad(argnums=1)``, inside qjit, nested, and outside (exact, as
    ``jax.grad``).

    >>> from catalyst_lite import grad
    >>> import jax.numpy as jnp
    >>> df = grad(lambda x: jnp.sum(x ** 2))
    >>> df(jnp.arange(3.0)).tolist()
    [0.0, 2.0, 4.0]
    """
    return _transformation(fn, "grad", Options.checked("grad", method, h, argnums))


def value_and_grad(fn: Callable | None = None, *, method: str | None = None, h: float | None = None, argnums: Any = None):
    """Like :func:`grad`, returning ``(value, gradient)``.

    >>> from catalyst_lite import value_and_grad
    >>> value, g = value_and_grad(lambda x: x * x)(3.0)
    >>> float(value), float(g)
    (9.0, 6.0)
    """
    return _transformation(fn, "value_and_grad", Options.checked("value_and_grad", method, h, argnums))


def jacobian(fn: Callable | None = None, *, method: str | None = None, h: float | None = None, argnums: Any = None):
    """The Jacobian of ``fn`` w.r.t. argument ``argnums`` (default 0), computed in reverse mode:
    for each result, an array of shape ``result.shape + argument.shape`` (a complex result's:
    ``d result / d Re(argument)``, as ``jax.jacfwd``).

    >>> from catalyst_lite import jacobian
    >>> import jax.numpy as jnp
    >>> jacobian(lambda x: x * jnp.arange(1.0, 3.0))(jnp.ones(2)).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    """
    return _transformation(fn, "jacobian", Options.checked("jacobian", method, h, argnums))


def _pennylane(transform: str) -> Callable:
    """``qml.<transform>``, whose primitive ``catalyst_lite.capture`` compiles with the functions here."""
    return getattr(importlib.import_module("pennylane"), transform)


def _params_tuple(api: str, params: Any, what: str) -> tuple:
    if not isinstance(params, (list, tuple)):
        raise ArgumentValueError(
            f"{api} '{what}' argument must be a Sequence, not {type(params)}: pass a list or a tuple."
        )
    return tuple(params)


def _outside_qjit(transform: Callable, fn: Callable, params: tuple, rest: Any, options: dict) -> Any:
    """Outside qjit: ``qml.<transform>`` while PennyLane captures; otherwise, as Catalyst, what
    ``jax.<transform>`` computes whatever ``options`` say (every argument), compiled with qjit."""
    if pennylane_capture_enabled():
        return _pennylane(transform.__name__)(fn, params, rest, **options)
    argnums = tuple(range(len(params)))

    def entry(values, rest):  # unannotated: qjit traces annotated functions ahead of time
        return transform(fn, tuple(values), rest, argnums=argnums)

    entry.__name__ = entry.__qualname__ = f"{transform.__name__}({function_name(fn)})"
    return compile_function(entry)(params, rest)


def _checked_like(traced: TracedFunction, what: str, values: Any, avals: Sequence[Any], of: str) -> list[Any]:
    """The leaves of ``values``: one (co)tangent per differentiated argument (result), of its dtype and
    known sizes, as Catalyst checks (a wrong count or dtype is a ``TypeError``, a shape a ``ValueError``)."""
    traced.check_differentiable_results()
    api, flat = traced.api, tree_flatten(values)[0]
    count_phrase, dtype_phrase, shape_phrase = _CATALYST_PHRASES[what]
    if len(flat) != len(avals):
        raise ArgumentTypeError(
            f"{count_phrase}: {api} got {len(flat)} {what} for {len(avals)} {of}; give one array "
            f"per {of[:-1]} (in any structure: a list, a tuple, a dict...)."
        )
    for k, (value, aval) in enumerate(zip(flat, avals)):
        got = get_aval(value)
        if np.dtype(got.dtype) != np.dtype(aval.dtype):
            raise ArgumentTypeError(
                f"{dtype_phrase}: in {api}, {what[:-1]} {k} is {got.str_short()} but {of[:-1]} {k} "
                f"is {aval.str_short()}."
            )
        if len(got.shape) != len(aval.shape) or not all(map(_same_or_symbolic, got.shape, aval.shape)):
            raise ArgumentValueError(
                f"{shape_phrase}: in {api}, {what[:-1]} {k} has shape {got.str_short()} but "
                f"{of[:-1]} {k} has shape {aval.str_short()}; shapes must be equal."
            )
    return flat


# Catalyst's words for the three checks (count, dtype, shape), which its users' tests match.
_CATALYST_PHRASES = {
    "tangents": (
        "number of tangents and number of differentiable parameters in catalyst.jvp do not match",
        "function params and tangents arguments to catalyst.jvp do not match; dtypes must be equal",
        "catalyst.jvp called with different function params and tangent shapes",
    ),
    "cotangents": (
        "number of cotangent and number of function output parameters in catalyst.vjp do not match",
        "function output params and cotangents arguments to catalyst.vjp do not match; dtypes must be equal",
        "catalyst.vjp called with different function output params and cotangent shapes",
    ),
}


def _same_or_symbolic(d1: Any, d2: Any) -> bool:
    return same_dim(d1, d2) or not (isinstance(d1, (int, np.integer)) and isinstance(d2, (int, np.integer)))


def jvp(f: Callable, params: Sequence[Any], tangents: Sequence[Any], *, method: str | None = None,
        h: float | None = None, argnums: Any = None) -> tuple[Any, Any]:
    """Forward mode: ``(f(*params), tangent of the results)`` along ``tangents``: one array per
    leaf of the arguments in ``argnums`` (default 0, as in Catalyst), of its dtype and shape.
    Outside qjit, as ``jax.jvp``: every argument, exact derivatives.

    >>> from catalyst_lite import jvp
    >>> results, tangents = jvp(lambda x: x ** 2, [3.0], [1.0])
    >>> float(results), float(tangents)
    (9.0, 6.0)
    """
    params, tangents = _params_tuple("jvp", params, "params"), _params_tuple("jvp", tangents, "tangents")
    if not is_tracing():
        return _outside_qjit(jvp, f, params, tangents, dict(method=method, h=h, argnums=argnums))
    options = Options.checked("jvp", method, h, argnums)

    def flat_tangents(traced: TracedFunction) -> list[Any]:
        selection = traced.selection
        if len(selection.leaves) != len(selection.wrt):
            raise ArgumentValueError(
                f"{traced.api}: argnums={options.argnums!r} names an argument twice; name each once."
            )
        wrt_avals = [get_aval(selection.flat_args[k]) for k in selection.wrt]  # the caller's sizes
        return _checked_like(traced, "tangents", tangents, wrt_avals, "differentiated arguments")

    traced, outs = differentiate(f"jvp({function_name(f)})", f, params, "jvp", options, flat_tangents)
    n = len(traced.result_avals)
    return tree_unflatten(traced.out_tree, outs[:n]), tree_unflatten(traced.out_tree, outs[n:])


def vjp(f: Callable, params: Sequence[Any], cotangents: Any, *, method: str | None = None,
        h: float | None = None, argnums: Any = None) -> tuple[Any, Any]:
    """Reverse mode: ``(f(*params), cotangents of the arguments in argnums)`` for ``cotangents``
    of the results: one array per result leaf, in any structure (a single array, a list, a dict).
    ``argnums`` defaults to 0, as in Catalyst; an int gives that argument's cotangent, a sequence
    a tuple. Outside qjit, as ``jax.vjp``: a tuple for every argument, exact derivatives.

    >>> from catalyst_lite import vjp
    >>> from catalyst_lite import qjit
    >>> results, ct = qjit(lambda x: vjp(lambda v: v ** 2, [x], 1.0))(3.0)
    >>> float(results), float(ct)
    (9.0, 6.0)
    >>> results, (ct,) = vjp(lambda v: v ** 2, [3.0], 1.0)  # outside qjit, as jax.vjp
    >>> float(ct)
    6.0
    """
    params = _params_tuple("vjp", params, "params")
    if not is_tracing():
        return _outside_qjit(vjp, f, params, cotangents, dict(method=method, h=h, argnums=argnums))
    options = Options.checked("vjp", method, h, argnums)

    def flat_cotangents(traced: TracedFunction) -> list[Any]:
        return _checked_like(traced, "cotangents", cotangents, traced.result_avals, "results")

    traced, outs = differentiate(f"vjp({function_name(f)})", f, params, "vjp", options, flat_cotangents)
    n = len(traced.result_avals)
    return tree_unflatten(traced.out_tree, outs[:n]), traced.selection.unflatten(outs[n:])


def _deferred_vjp(fn: Callable, points: list[Any], cotangents: list[Any]) -> list[Any]:
    """Cotangents of ``fn``'s inputs at ``points``, at specialization (JAX cannot transpose the equation)."""
    transformed = under_jax_transformation()
    if transformed:
        cts = _vjp_by_jacobian(fn, points, cotangents)
        if cts is not None:
            return cts
    try:
        _, cts = vjp(fn, points, cotangents, argnums=tuple(range(len(points))))
    except NeedsCallSizes as err:
        if not transformed:
            raise
        # Still the signal (a trace at the call's sizes may know the trip count), explained.
        error = error_standing_for(DifferentiationError, NeedsCallSizes)(
            "JAX transforms again (jax.hessian, jax.grad of jax.grad, jax.jvp of jax.vjp, jax.vmap "
            "of jax.grad) the reverse-mode derivative of a loop whose trip count is only known at "
            "run time (a while_loop), which is taken when the program runs. Use catalyst_lite."
            "jacobian(catalyst_lite.grad(f)) for second derivatives of such loops, and a Python loop "
            "over the examples of a batch.")
        error.site = err.site
        raise error from None
    return list(cts)


def _vjp_by_jacobian(fn: Callable, points: list[Any], cotangents: list[Any]) -> list[Any] | None:
    """Where JAX transforms the cotangents (``jax.jacrev`` batches them), the Jacobian of ``fn`` at
    ``points`` contracted with them by JAX; ``None`` when complex, or when the Jacobian's equation
    would be transformed too (``jax.grad`` of ``jax.grad``)."""
    if any(jnp.iscomplexobj(x) for x in (*points, *cotangents)):
        return None
    options = Options.checked("jacobian", None, None, tuple(range(len(points))))
    try:
        _, blocks = differentiate(f"jacobian({function_name(fn)})", fn, tuple(points), "jacobian", options,
                                  lambda traced: [])
    except CompileError:  # the equation itself is transformed: it needs its sizes (refused)
        return None
    per_result = [blocks[k * len(points) : (k + 1) * len(points)] for k in range(len(cotangents))]
    return [
        sum(jnp.tensordot(ct, jac[j], axes=jnp.ndim(ct)) for ct, jac in zip(cotangents, per_result))
        for j in range(len(points))
    ]


deferred_vjp.append(_deferred_vjp)


class SpecializedFunction:
    """The differentiated function at concrete sizes, ``f(*wrt_values)``, keeping its implicit sizes."""

    def __init__(self, jaxpr: Any, inputs: Sequence[Any], positions: Sequence[int], nimplicit: int, mode: Mode):
        self.jaxpr, self.inputs, self.positions = jaxpr, list(inputs), list(positions)
        self.nimplicit, self.mode = nimplicit, mode
        self.implicit_dims: list[int] = []

    def __call__(self, *wrt_values: Any) -> list[Any]:
        values = list(self.inputs)
        for position, v in zip(self.positions, wrt_values):
            values[position] = v
        staged = self.mode is Mode.STAGED
        if staged:
            outs = eval_jaxpr(self.jaxpr, values, self.mode)
        else:  # compiled per size signature, split around its host steps if it has any
            outs = runner_for(self.jaxpr, "differentiated function")(*values)
        self.implicit_dims = [(to_dim if staged else int)(d) for d in outs[: self.nimplicit]]
        # Arrays of the results' types: a result that is a literal of the jaxpr, or an input
        # passed through a loop that does not run, is a Python number on JAX 0.7.1.
        avals = [v.aval for v in self.jaxpr.outvars[self.nimplicit :]]
        return [jnp.asarray(o, a.dtype) if isinstance(o, (int, float, complex)) else o
                for o, a in zip(outs[self.nimplicit :], avals)]


def _jvp_auto(f: SpecializedFunction, primals: list[Any], tangents: list[Any], h: float) -> list[Any]:
    tangents = [jnp.asarray(t, dtype=jnp.result_type(p)) for p, t in zip(primals, tangents)]
    outs, touts = jax.jvp(f, tuple(primals), tuple(tangents))
    return [*outs, *touts]


def _vjp_auto(f: SpecializedFunction, primals: list[Any], cotangents: list[Any], h: float) -> list[Any]:
    with reverse_mode():
        outs, pullback = jax.vjp(f, *primals)
        cts = pullback([jnp.asarray(c, dtype=o.dtype) for o, c in zip(outs, cotangents)])
    return [*outs, *cts]


def _jacobian_auto(f: SpecializedFunction, primals: list[Any], _: list[Any], h: float) -> list[Any]:
    """``jax.jacrev``; a complex result's block is ``jax.jacfwd``'s, ``d f / d Re(x)``, which reverse
    mode gives as the real parts of the Jacobians of its real and imaginary parts."""
    def parts(*p: Any) -> list[Any]:
        return [part for o in f(*p) for part in ((jnp.real(o), jnp.imag(o)) if jnp.iscomplexobj(o) else (o,))]

    with reverse_mode():
        jac = iter(jax.jacrev(parts, argnums=tuple(range(len(primals))))(*primals))
    blocks = []
    for v in f.jaxpr.outvars[f.nimplicit :]:
        per_argument = next(jac)
        if jnp.issubdtype(v.aval.dtype, jnp.complexfloating):
            per_argument = [jnp.real(re) + 1j * jnp.real(im) for re, im in zip(per_argument, next(jac))]
        blocks.extend(per_argument)
    return blocks


def _columns_last(rows: Any, p: Any) -> Any:
    """Rows ``k`` (one per scalar of ``p``) as a block of shape ``row.shape + p.shape``."""
    return jnp.moveaxis(rows, 0, -1).reshape((*rows.shape[1:], *p.shape))


def _map_rows(fn: Callable[[Any], list[Any]], rows: Any, mode: Mode) -> list[Any]:
    """``lax.map(fn, rows)`` staged; a Python loop when host-driven (rows may need their own sizes)."""
    if mode is Mode.STAGED:
        return list(lax.map(fn, rows))
    return [jnp.stack(column) for column in zip(*(fn(row) for row in rows))]


# Forward finite differences, as Catalyst computes them: the Jacobian column by column, one difference
# ``(f(x + h e_k) - f(x)) / h`` per scalar input, that jvp and vjp contract (one difference along the
# tangent would add terms of order ``h``). ``f(x)`` is the first row (a shift of 0) of the mapped
# evaluation, rounded as the shifted points are: an independent result's difference is exactly 0.
# A complex input has two columns per scalar, along ``h`` and ``i h`` (``Jx``, ``Jy``): a function
# of ``z`` need not be holomorphic. JAX's conventions, that ``method="auto"`` follows: the tangent
# ``Jx Re(t) + Jy Im(t)``, the cotangent ``Re(c Jx) - i Re(c Jy)``.


def _fd_jacobian(f: SpecializedFunction, primals: list[Any], h: float) -> tuple[list[Any], list[list[Any]]]:
    """``f(x)`` and ``J[i][j] = (Jx, Jy)``, each of shape ``result_i.shape + primal_j.shape``
    (``Jy`` is ``None`` for a real ``primal_j``), column by column."""
    values, per_argument = None, []
    for j, p in enumerate(primals):
        p = jnp.asarray(p)
        basis = jnp.eye(p.size, dtype=p.dtype).reshape((p.size, *p.shape))
        steps = [basis, 1j * basis] if jnp.iscomplexobj(p) else [basis]
        directions = jnp.concatenate([jnp.zeros((1, *p.shape), p.dtype), *steps])

        def shifted(e: Any, j: int = j) -> list[Any]:
            return f(*[q + h * e if k == j else q for k, q in enumerate(primals)])

        rows = _map_rows(shifted, directions, f.mode)
        values = [r[0] for r in rows]
        blocks = [[_columns_last((c - r[:1]) / h, p) for c in jnp.split(r[1:], len(steps))] for r in rows]
        per_argument.append([(b[0], b[1] if len(b) > 1 else None) for b in blocks])
    if values is None:
        values = f(*primals)
    return values, [[blocks[i] for blocks in per_argument] for i in range(len(values))]


def _fd_tangent(jac: tuple[Any, Any], t: Any) -> Any:
    jx, jy = jac
    if jy is None:
        return jnp.tensordot(jx, t, axes=jnp.ndim(t))
    return jnp.tensordot(jx, jnp.real(t), axes=jnp.ndim(t)) + jnp.tensordot(jy, jnp.imag(t), axes=jnp.ndim(t))


def _fd_cotangent(ct: Any, jac: tuple[Any, Any], dtype: Any) -> Any:
    jx, jy = jac
    real = jnp.real(jnp.tensordot(ct, jx, axes=jnp.ndim(ct)))
    if jy is None:
        return real.astype(dtype)
    return (real - 1j * jnp.real(jnp.tensordot(ct, jy, axes=jnp.ndim(ct)))).astype(dtype)


def _jvp_fd(f: SpecializedFunction, primals: list[Any], tangents: list[Any], h: float) -> list[Any]:
    outs, jac = _fd_jacobian(f, primals, h)
    touts = [
        sum((_fd_tangent(jac[i][j], t) for j, t in enumerate(tangents)), jnp.zeros_like(o)).astype(o.dtype)
        for i, o in enumerate(outs)
    ]
    return [*outs, *touts]


def _vjp_fd(f: SpecializedFunction, primals: list[Any], cotangents: list[Any], h: float) -> list[Any]:
    outs, jac = _fd_jacobian(f, primals, h)
    cts = []
    for j, p in enumerate(primals):
        terms = [_fd_cotangent(ct, jac[i][j], p.dtype) for i, ct in enumerate(cotangents)]
        cts.append(sum(terms) if terms else jnp.zeros_like(p))
    return [*outs, *cts]


def _jacobian_fd(f: SpecializedFunction, primals: list[Any], _: list[Any], h: float) -> list[Any]:
    """As :func:`_jacobian_auto`: a real result's rows are cotangents, a complex result's tangents."""
    outs, jac = _fd_jacobian(f, primals, h)
    return [
        jx if jnp.iscomplexobj(o) or jy is None else jx - 1j * jy
        for o, per_result in zip(outs, jac) for jx, jy in per_result
    ]


TRANSFORMS: dict[tuple[str, str], Callable[..., list[Any]]] = {
    ("jvp", "auto"): _jvp_auto,
    ("vjp", "auto"): _vjp_auto,
    ("jacobian", "auto"): _jacobian_auto,
    ("jvp", "fd"): _jvp_fd,
    ("vjp", "fd"): _vjp_fd,
    ("jacobian", "fd"): _jacobian_fd,
}


def _rule(mode: Mode) -> Callable[[list[Any], dict[str, Any]], list[Any]]:
    def rule(invals: list[Any], params: dict[str, Any]) -> list[Any]:
        ninputs = params["nconsts"] + params["nargs"]
        inputs, extra = invals[:ninputs], invals[ninputs:]
        positions = [params["nconsts"] + k for k in params["wrt"]]
        f = SpecializedFunction(params["fn_jaxpr"].jaxpr, inputs, positions, params["nimplicit_out"], mode)
        transform = TRANSFORMS[params["transform"], params["method"]]
        # Arrays: a differentiated input that is a literal is a Python number (JAX 0.7.1), which
        # jax.vjp would return unchanged as the value of an identity.
        results = transform(f, [jnp.asarray(inputs[p]) for p in positions], list(extra), params["h"])
        return [*f.implicit_dims, *results]

    return rule


def _lower(ctx: Any, *operands: Any, wrt: tuple, transform: str, method: str, h: float, **_: Any) -> list:
    """StableHLO (in ``.mlir``, where derivatives do not exist yet): an opaque ``stablehlo.custom_call
    @catalyst_lite.<transform>`` of the equation's operands and results, options in ``backend_config``."""
    return opaque_call(ctx, transform, operands, f"method={method} h={h} wrt={list(wrt)}")


# A derivative is taken when the equation is specialized (the sizes known), and so are its own
# derivatives and its batched version: JAX transforms the specialization. With symbolic sizes
# (inside a qjit program), nest catalyst_lite's transformations instead.
register_nested_primitive(differentiate_p, PrimitiveSpec(
    output_type=_output_type, feeds=_feeds, check=_check, staged=_rule(Mode.STAGED), host=_rule(Mode.HOST),
    dimension_operands=lambda params: set(dimension_inputs(params["fn_jaxpr"].jaxpr)), lowering=_lower,
    compiled_lowering=lambda *operands, **params: _rule(Mode.STAGED)(list(operands), params),
))
