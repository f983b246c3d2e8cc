"""``for_loop``: a counted loop whose carried values may have dynamic shapes.

The equation (as in the design documents)::

    outs = for_loop[body_jaxpr, body_nconsts, num_implicit_inputs, preserve_dimensions,
                    apply_reverse_transform] *consts *implicit lower upper step start *carried

``body_jaxpr`` takes ``*consts *implicit i *carried`` and returns ``*implicit *carried``;
``num_implicit_inputs`` (Catalyst 0.15's name; the design documents' ``nimplicit``) is the number of
carried dimensions (0 when they are preserved); ``apply_reverse_transform`` is False.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np
import jax.numpy as jnp
from jax import lax
from jax.tree_util import tree_unflatten

from ..compiler.capacity import Checks, Unmaskable, conformed, masked_eval
from ..compiler.loop_body import resizes_arrays, split_groups
from ..compiler.specialize import NeedsHost, reverse_mode_requested, trip_count
from ..trace_context import refuse_under_capture
from ..errors import ArgumentOverflowError, ArgumentValueError, ControlFlowError, SizeAssumptionError
from ..errors import UnsupportedOperationError
from ..errors import function_name
from ..jax_extras import ClosedJaxpr, Tracer, get_aval, lowering
from ..jax_extras.tracing import dependence_rules, dimension_value, is_tracing
from ..jax_extras.dimensions import is_size_expression, note_loop_index
from ..jax_extras.patches import Patch, register_patch
from ..jax_extras.size_facts import runs_only_if_loop_runs
from ..jax_extras.nested import Body, DynshapePrimitive, Equation, NestedSpec, bind_nested
from ..jax_extras.rules import PrimitiveSpec, register_nested_primitive
from .common import ForLoopCallable, active_control_flow_handler, ambient_carries, expansion_strategy
from .common import checked_function, flatten_values, loop_errors, normalize_results, tracing_mode, unwrapped
from .loop_common import Loop, LoopOperands, loop_host

__all__ = ["for_loop", "for_loop_p"]

for_loop_p = DynshapePrimitive("for_loop")


def for_loop(lower_bound: Any, upper_bound: Any, step: Any, allow_array_resizing: bool = False, *,
             experimental_preserve_dimensions: bool | None = None) -> Callable[[Callable], ForLoopCallable]:
    """Decorator turning ``body(i, *carry) -> carry`` into a loop over
    ``range(lower_bound, upper_bound, step)`` (Catalyst's names and meaning).

    The decorated function takes the initial carried values and returns the final ones (one value
    unwrapped, several as a tuple). Bounds may be traced integers; carried values may be pytrees
    of arrays with dynamic sizes. ``allow_array_resizing=True`` lets the body return arrays of
    other sizes than it receives, at the price of not sharing sizes with captured arrays.

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, for_loop
    >>> @qjit
    ... def powers(n: int):
    ...     @for_loop(lower_bound=0, upper_bound=n, step=1)
    ...     def body(i, x):
    ...         return x * 2.0
    ...     return body(jnp.ones(3))
    >>> powers(4).tolist()
    [16.0, 16.0, 16.0]
    """
    bounds = (lower_bound, upper_bound, step)
    strategy = expansion_strategy(allow_array_resizing, experimental_preserve_dimensions)
    refuse_under_capture("for_loop")  # as Catalyst does: captured programs use qml.for_loop

    def decorator(body: Callable) -> ForLoopCallable:
        checked_function(body, "for_loop(lower, upper, step)", "the loop body function",
                         "@for_loop(0, n, 1) above def body(i, *carried)")

        def loop(*init: Any) -> Any:
            _check_bounds(body, bounds)
            if tracing_mode("for_loop", body) == "eager":
                return _run_eagerly(body, bounds, init)
            handler = active_control_flow_handler()
            if handler is None:
                return _bind(body, init, bounds, strategy)
            # e.g. a loop inside qml.adjoint, applied reversed
            return handler.for_loop(body, bounds, init, lambda b, i: _bind(b, i, bounds, strategy))

        loop_callable = ForLoopCallable(loop, body)
        # It takes the carried values: the body's signature without the index (which qjit binds).
        with contextlib.suppress(TypeError, ValueError):  # (ValueError: no signature, or no index)
            index, *carried = inspect.signature(body).parameters.values()
            if index.kind in (index.POSITIONAL_ONLY, index.POSITIONAL_OR_KEYWORD):
                loop_callable.__signature__ = inspect.Signature(carried)
        return loop_callable

    return decorator


def _run_eagerly(body: Callable, bounds: tuple, init: tuple) -> Any:
    carry, (lower, upper, step) = init, bounds
    for i in range(int(lower), int(upper), _checked_step(step, function_name(body))):
        out = body(i, *carry)
        carry = () if len(init) == 0 else (out,) if len(init) == 1 else tuple(out)
    return unwrapped(carry, len(init))


def _check_bounds(body: Callable, bounds: tuple) -> None:
    """Integer scalars: a float bound would be truncated eagerly and fail deep in XLA compiled."""
    for name, bound in zip(("lower", "upper", "step"), bounds):
        if isinstance(bound, (int, np.integer)) and not isinstance(bound, bool):
            if not np.iinfo(np.int64).min <= bound <= np.iinfo(np.int64).max:
                raise ArgumentOverflowError(
                    f"for_loop ({function_name(body)}): the {name} bound {bound} does not fit in a "
                    "64-bit integer, the type of loop indices. Pass a smaller bound."
                )
            continue
        numeric = not isinstance(bound, bool) and (
            isinstance(bound, (float, complex)) or hasattr(bound, "dtype")
        )
        aval = get_aval(bound) if numeric else None  # (None, a str or a list is none)
        if aval is None or np.shape(aval) != () or not np.issubdtype(aval.dtype, np.integer):
            found = aval.str_short() if aval is not None else f"{bound!r:.40} ({type(bound).__name__})"
            raise ControlFlowError(
                f"for_loop ({function_name(body)}): the {name} bound must be an integer scalar, got "
                f"{found}. Pass Python/NumPy ints or integer arguments; convert with x.astype(int)."
            )


def _checked_step(step: Any, where: str) -> int:
    """A known step as an int; zero would loop forever (Python) or divide by zero (XLA)."""
    if int(step) == 0:
        raise ArgumentValueError(
            f"for_loop ({where}): step must not be zero, and it is 0 here: a loop of step 0 never ends "
            "(Python's range refuses it too). Pass a nonzero step (positive counts up, negative down)."
        )
    return int(step)


def _bind(body: Callable, init: tuple, bounds: tuple, strategy) -> Any:
    """The design documents' ``bindNested`` for ``for_loop`` (``lower`` stands for the index)."""
    if isinstance(bounds[2], (int, np.integer)):
        _checked_step(bounds[2], function_name(body))
    lower, upper, step = (np.int64(x) if isinstance(x, (int, np.integer)) else x for x in bounds)
    flat_init, in_tree = flatten_values(init)

    def flat_body(i: Any, *carried: Any) -> list[Any]:
        note_loop_index(i, lower, upper, step)
        results = body(i, *tree_unflatten(in_tree, list(carried)))
        return normalize_results(results, len(init), in_tree, "for_loop", body)

    flat_body.__wrapped__ = body  # its jaxpr's debug info names the user's function (see _body_name)

    def equation(bodies: list, implicit: list, explicit: list) -> Equation:
        (traced,) = bodies
        start, *carried = explicit
        ops = LoopOperands([], traced.consts, implicit, [lower, upper, step, start], carried)
        preserve = {"preserve_dimensions": strategy.preserve_dimensions}
        return Equation(*_loop.equation(preserve, traced.jaxpr, None, ops), len(implicit))

    spec = NestedSpec(for_loop_p, equation, strategy, nprefix=1, threaded=ambient_carries())
    with loop_errors(strategy, "for_loop", body), runs_only_if_loop_runs(lower, upper, step):
        outs = bind_nested(spec, [Body(flat_body, "for_loop body", "carried")], [lower, *flat_init])
    return unwrapped(tree_unflatten(in_tree, outs), len(init))


def _params(params: dict[str, Any], body: Any, pred: None, ops: LoopOperands) -> dict[str, Any]:
    """The parameters of a loop of ``body`` (``params``: its options)."""
    return dict(body_jaxpr=ClosedJaxpr(body, ()), body_nconsts=len(ops.consts),
                num_implicit_inputs=len(ops.implicit), preserve_dimensions=params["preserve_dimensions"],
                apply_reverse_transform=False)


def _counting(ops: LoopOperands, params: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The trip count, first index and step (traced or known)."""
    lower, upper, step, _ = ops.bounds
    if not isinstance(step, Tracer):
        step = _checked_step(step, _body_name(params))
    return trip_count(lower, upper, step), lower, step


def _body_name(params: dict[str, Any]) -> str:
    """The user's body function, as its jaxpr's debug info names it (a step of 0 known only at run time)."""
    info = params["body_jaxpr"].jaxpr.debug_info
    name = info.func_name if info is not None else "<unknown>"
    return "its body" if name in ("<unknown>", "flat") else name


_loop = Loop(for_loop_p, 4, _params, counting=_counting)


def _fori_loop(params: dict[str, Any], ops: LoopOperands, run_body: Callable, run_predicate: None
               ) -> tuple[Any, ...] | None:
    """Inside one XLA program (``Loop.staged``): a ``lax.fori_loop`` over the trip count."""
    count, lower, step = _counting(ops, params)  # a known step: see _dimension_operands
    if isinstance(count, int) and count == 0:
        return None
    # JAX transposes a fori_loop of a static trip count (a scan); with traced bounds the loop runs
    # on the host in reverse mode (see compiler/specialize.py).
    if reverse_mode_requested() and not isinstance(count, int):
        raise NeedsHost("reverse-mode differentiation of a for_loop whose bounds are traced")
    try:
        return lax.fori_loop(0, count, lambda k, carry: run_body([lower + k * step], carry), tuple(ops.carried))
    except (UnsupportedOperationError, SizeAssumptionError) as err:
        if not isinstance(count, Tracer):
            raise
        # The body may hold only when the loop runs (`x[i]` of an empty `x`): the host knows
        # the trip count, and runs the body (reporting this error) only if it is not zero.
        raise NeedsHost("a for_loop body that cannot run at these sizes, its trip count known at run time") from err


def _dimension_operands(params: dict[str, Any]) -> set[int]:
    """What sizes the body, and the step: known, it makes a known trip count (zero: an error, not XLA's)."""
    step = params["body_nconsts"] + params["num_implicit_inputs"] + 2
    return _loop.dimension_operands(params) | {step}


def _masked(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """Inside a loop running on capacity buffers (``compiler/capacity.py``), a loop that keeps its
    carried sizes: a ``lax.fori_loop`` on buffers too, its iterations' size checks carried out."""
    params = eqn.params
    if params["num_implicit_inputs"]:
        raise Unmaskable("a nested resizing loop")
    ops = _loop.operands(invals, params)
    lower, upper, step, _ = ops.bounds
    body = params["body_jaxpr"].jaxpr

    def one(k: Any, state: tuple) -> tuple:
        carry, fits, valid, learned = state
        sub = Checks(checks.capacity, checks.caps)
        outs = masked_eval(body, [*ops.consts, lower + k * step, *carry], sub)
        outs = [conformed(jnp.asarray(x, np.result_type(c)), np.shape(c)) for x, c in zip(outs, carry)]
        return (outs, fits & sub.all(sub.fits), valid & sub.all(sub.valid), learned & sub.all(sub.fits_learned))

    ok = jnp.bool_(True)
    carry, fits, valid, learned = lax.fori_loop(0, trip_count(lower, upper, step), one, (list(ops.carried), ok, ok, ok))
    checks.fits.append(fits)
    checks.valid.append(valid)
    checks.fits_learned.append(learned)
    return list(carry)


def _lower(ctx: Any, *operands: Any, body_jaxpr: ClosedJaxpr, body_nconsts: int, num_implicit_inputs: int,
           **_) -> list:
    """StableHLO (in ``.mlir``): one ``stablehlo.while`` carrying the index, carried sizes and values."""
    nimplicit = num_implicit_inputs
    groups = split_groups(list(operands), [body_nconsts, nimplicit, 4])
    consts, implicit, (_, upper, step, start), carried = groups
    body_types = [start.type, *lowering.ir_types([v.aval for v in body_jaxpr.jaxpr.outvars])]

    def cond(state: list[Any]) -> Any:
        return lowering.counted_loop_condition(state[0], upper, step)

    def body(state: list[Any]) -> list[Any]:
        i, *rest = state
        dims, values = rest[:nimplicit], rest[nimplicit:]
        outs = lowering.lower_nested_jaxpr(ctx, body_jaxpr, [*consts, *dims, i, *values])
        return [lowering.add(i, step), *outs]

    resizes = resizes_arrays(body_jaxpr.jaxpr, body_nconsts, nimplicit)
    _, *results = lowering.while_op([start, *implicit, *carried], body_types, cond, body, resizes)
    return results


def _trip_count_traced(operands: Sequence[Any], params: dict[str, Any]) -> bool:
    """Bounds unknown where the loop is transformed: JAX's reverse mode cannot transpose it then."""
    lower, upper, step, _ = _loop.operands(list(operands), params).bounds
    return any(not isinstance(dimension_value(b), int) for b in (lower, upper, step))


def _dependence(eqn: Any, marked: list[bool]) -> list[bool]:
    """The results that depend on the marked operands at some iteration (all, through bounds or sizes)."""
    ops, body = _loop.operands(marked, eqn.params), _loop.body(eqn.params)
    if any(ops.bounds) or any(ops.implicit) or body.depends_on(ops.consts, ops.carried):
        return [True] * len(eqn.outvars)
    return [*[False] * body.nimplicit, *body.carried_fixpoint(ops.consts, ops.carried)]


register_nested_primitive(for_loop_p, PrimitiveSpec(
    output_type=_loop.output_type, feeds=_loop.feeds, check=_loop.check, jvp=_loop.jvp,
    batching=_loop.batching, partial_eval=_loop.partial_eval,
    staged=lambda invals, params: _loop.staged(invals, params, functools.partial(_fori_loop, params)),
    host=functools.partial(loop_host, _loop),
    dimension_operands=_dimension_operands, masked=_masked,
    bodies=lambda params: [params["body_jaxpr"].jaxpr], lowering=_lower, kept_under_differentiation=_trip_count_traced,
))
dependence_rules[for_loop_p] = _dependence


def _make_fori_loop(original: Callable) -> Callable:
    # lax.fori_loop with a traced bound is JAX's while_loop, which reverse mode cannot transpose:
    # jax.grad of a qjit function looping over x.shape[0] (or an int size argument) failed, where
    # jax.jit, whose bound is a number, runs a scan. Our for_loop is transposed at specialization.
    def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, *, unroll: Any = None) -> Any:
        if unroll is None and is_tracing() and any(is_size_expression(b) for b in (lower, upper)):
            dtype = jnp.result_type(lower, upper)
            body = functools.wraps(body_fun)(lambda i, val: body_fun(lax.convert_element_type(i, dtype), val))
            return for_loop(lower, upper, 1)(body)(init_val)
        return original(lower, upper, body_fun, init_val, unroll=unroll)

    return fori_loop


register_patch(Patch("fori_loop_over_sizes", lax, "fori_loop", _make_fori_loop,
                     "lax.fori_loop over sizes is our for_loop: differentiable in reverse mode"))
