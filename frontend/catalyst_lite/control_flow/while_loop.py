"""``while_loop``: a loop that runs while a predicate of its carried values holds.

The equation::

    outs = while_loop[cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, num_implicit_inputs,
                      preserve_dimensions] *cond_consts *body_consts *implicit *carried

``cond_jaxpr`` takes ``*cond_consts *implicit *carried`` and returns a ``bool[]``; ``body_jaxpr``
takes ``*body_consts *implicit *carried`` and returns ``*implicit *carried``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import tree_unflatten

from ..compiler.loop_body import LoopBody, resizes_arrays, split_groups, with_batch_axis
from ..compiler.specialize import NeedsHost, reverse_mode_requested
from ..trace_context import refuse_under_capture
from ..errors import ControlFlowError
from ..jax_extras import ClosedJaxpr, Tracer, lowering
from ..jax_extras.dynshape import input_type_of
from ..jax_extras.dimensions import note_loop_carries
from ..jax_extras.size_facts import runs_only_if, value_at
from ..jax_extras.nested import Body, DynshapePrimitive, Equation, NestedSpec, bind_nested, retrace
from ..jax_extras.rules import PrimitiveSpec, batch_call, move_batch_axis, not_mapped, register_nested_primitive
from .common import WhileLoopCallable, active_control_flow_handler, ambient_carries, check_predicate
from .common import expansion_strategy, flatten_values, loop_errors, normalize_results, tracing_mode
from .common import checked_function, unwrapped
from .loop_common import Loop, LoopOperands, loop_host

__all__ = ["while_loop", "while_loop_p"]

while_loop_p = DynshapePrimitive("while_loop")


def while_loop(cond_fn: Callable[..., Any], allow_array_resizing: bool = False, *,
               experimental_preserve_dimensions: bool | None = None
               ) -> Callable[[Callable], WhileLoopCallable]:
    """Decorator turning ``body(*carry) -> carry`` into a loop that runs while ``cond_fn(*carry)``.

    The decorated function takes the initial carried values and returns the final ones (one value
    unwrapped, several as a tuple). See :func:`~catalyst_lite.for_loop` for
    ``allow_array_resizing``.

    >>> from catalyst_lite import qjit, while_loop
    >>> @qjit
    ... def doublings(limit: float):
    ...     @while_loop(lambda x, k: x < limit)
    ...     def grow(x, k):
    ...         return x * 2.0, k + 1
    ...     return grow(1.0, 0)[1]
    >>> int(doublings(100.0))
    7
    """
    checked_function(cond_fn, "while_loop", "the condition function first",
                     "@while_loop(lambda *carried: condition) above def body(*carried)")
    strategy = expansion_strategy(allow_array_resizing, experimental_preserve_dimensions)
    refuse_under_capture("while_loop")  # as Catalyst does: captured programs use qml.while_loop

    def decorator(body: Callable) -> WhileLoopCallable:
        usage = "@while_loop(lambda *carried: condition) above def body(*carried): the condition comes first"
        checked_function(body, "while_loop(cond_fn)", "the loop body function", usage)

        def loop(*init: Any) -> Any:
            if tracing_mode("while_loop", body) == "eager":
                return _run_eagerly(cond_fn, body, init)
            handler = active_control_flow_handler()
            if handler is None:
                return _bind(cond_fn, body, init, strategy)
            # e.g. a loop inside qml.adjoint, applied reversed
            return handler.while_loop(cond_fn, body, init, lambda c, b, i: _bind(c, b, i, strategy))

        return WhileLoopCallable(loop, body)

    return decorator


def _run_eagerly(cond_fn: Callable, body: Callable, init: tuple) -> Any:
    carry = init
    while check_predicate(cond_fn(*carry), "while_loop", cond_fn):
        out = body(*carry)
        carry = () if len(init) == 0 else (out,) if len(init) == 1 else tuple(out)
    return unwrapped(carry, len(init))


def _bind(cond_fn: Callable, body: Callable, init: tuple, strategy) -> Any:
    """The design documents' ``bindNested`` for ``while_loop``: a predicate and a body of one type."""
    flat_init, in_tree = flatten_values(init)
    # Whether the body runs at all: the predicate at the initial values, when that is a size
    # expression (`k < len(x)` from k = 0). The body's facts need hold only then (`x[k]` of an
    # empty `x`), as a for_loop's (see size_facts.runs_only_if_loop_runs); when it is not (it reads
    # data), the body's size checks are made where it runs.
    runs: list[Any] = []
    traced_pred: list[bool] = []

    def flat_body(*carried: Any) -> list[Any]:
        note_loop_carries(carried, flat_init)
        guard = runs[-1] if runs else None
        with runs_only_if(guard, at_run_time=guard is None and any(traced_pred)):
            results = body(*tree_unflatten(in_tree, list(carried)))
        return normalize_results(results, len(init), in_tree, "while_loop", body)

    def flat_cond(*carried: Any) -> list[Any]:
        note_loop_carries(carried, flat_init)
        pred = check_predicate(cond_fn(*tree_unflatten(in_tree, list(carried))), "while_loop", cond_fn)
        runs.append(value_at(pred, carried, flat_init))
        traced_pred.append(isinstance(pred, Tracer))
        return [pred]

    def equation(bodies: list, implicit: list, carried: list) -> Equation:
        traced_cond, traced_body = bodies
        ops = LoopOperands(traced_cond.consts, traced_body.consts, implicit, [], carried)
        preserve = {"preserve_dimensions": strategy.preserve_dimensions}
        return Equation(*_loop.equation(preserve, traced_body.jaxpr, traced_cond.jaxpr, ops), len(implicit))

    spec = NestedSpec(while_loop_p, equation, strategy, threaded=ambient_carries())
    bodies = [Body(flat_cond, "while_loop condition", "predicate"), Body(flat_body, "while_loop body", "carried")]
    with loop_errors(strategy, "while_loop", body):
        outs = bind_nested(spec, bodies, flat_init)
    return unwrapped(tree_unflatten(in_tree, outs), len(init))


def _params(params: dict[str, Any], body: Any, cond: Any, ops: LoopOperands) -> dict[str, Any]:
    """The parameters of a loop of ``body`` and ``cond`` (``params``: its options)."""
    return dict(cond_jaxpr=ClosedJaxpr(cond, ()), body_jaxpr=ClosedJaxpr(body, ()),
                cond_nconsts=len(ops.pred_consts), body_nconsts=len(ops.consts),
                num_implicit_inputs=len(ops.implicit), preserve_dimensions=params["preserve_dimensions"])


def _masked_batching(axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    """All carried values batched: the loop runs while some example's predicate holds (others keep theirs)."""
    body, cond, size = _loop.body(params), _loop.predicate(params), axis_data.size
    a, d = _loop.operands(args, params), _loop.operands(dims, params)
    cond_b, body_b = [x is not not_mapped for x in d.pred_consts], [x is not not_mapped for x in d.consts]
    if body.nimplicit:
        raise ControlFlowError("jax.vmap of a resizing while_loop whose trip count differs between examples")
    cond_consts = [move_batch_axis(x, bd, size, b) for x, bd, b in zip(a.pred_consts, d.pred_consts, cond_b)]
    body_consts = [move_batch_axis(x, bd, size, b) for x, bd, b in zip(a.consts, d.consts, body_b)]
    carried = [move_batch_axis(x, bd, size, True) for x, bd in zip(a.carried, d.carried)]
    new_cond, new_body = _masked_loop(cond, body, cond_b, body_b, size)
    ops = LoopOperands([*new_cond.consts, *cond_consts], [*new_body.consts, *cond_consts, *body_consts],
                       a.implicit, [], carried)
    return _loop.rebound(params, new_body.jaxpr, new_cond.jaxpr, ops), [0] * len(carried)


def _masked_loop(cond: LoopBody, body: LoopBody, cond_b: list[bool], body_b: list[bool], size: int):
    """A predicate that holds while it holds for some example, and a body that leaves the
    examples whose predicate does not hold unchanged (taking the predicate's constants first)."""
    carried_b = [True] * body.ncarried
    cond_in = [*cond_b, *carried_b]
    cond_type = with_batch_axis(input_type_of(cond.jaxpr.invars), cond_in, size)

    def any_pred(*args: Any) -> list[Any]:
        (pred,) = batch_call(cond.jaxpr, args, cond_in, size, [True])
        return [jnp.any(pred)]

    new_cond = retrace(any_pred, cond_type, "while_loop condition (batched)", 0)
    binders = [*cond.jaxpr.invars[: cond.nconsts], *body.jaxpr.invars]
    body_type = with_batch_axis(input_type_of(binders), [*cond_b, *body_b, *carried_b], size)

    def masked_body(*args: Any) -> list[Any]:
        cc, bc, x = split_groups(args, [cond.nconsts, body.nconsts])
        (pred,) = batch_call(cond.jaxpr, [*cc, *x], cond_in, size, [True])
        new = batch_call(body.jaxpr, [*bc, *x], [*body_b, *carried_b], size, carried_b)
        return [jnp.where(pred.reshape(pred.shape + (1,) * (n.ndim - 1)), n, old) for n, old in zip(new, x)]

    return new_cond, retrace(masked_body, body_type, "while_loop body (batched)", 0)


_loop = Loop(while_loop_p, 0, _params, _masked_batching)


def _staged(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: a ``lax.while_loop`` (in reverse mode the loop runs on the host instead)."""
    if reverse_mode_requested():
        raise NeedsHost("reverse-mode differentiation of a while_loop")
    return _loop.staged(invals, params, _while_loop)


def _while_loop(ops: LoopOperands, run_body: Callable, run_predicate: Callable) -> tuple[Any, ...] | None:
    first = run_predicate(ops.carried)
    if isinstance(first, (bool, np.bool_)) and not first:
        return None
    return lax.while_loop(run_predicate, lambda carry: run_body([], carry), tuple(ops.carried))


def _lower(ctx: Any, *operands: Any, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
           body_nconsts: int, num_implicit_inputs: int, **_) -> list[Any]:
    """StableHLO (in ``.mlir``): one ``stablehlo.while`` carrying the carried sizes and values."""
    cond_consts, body_consts, carry = split_groups(list(operands), [cond_nconsts, body_nconsts])
    body_types = lowering.ir_types([v.aval for v in body_jaxpr.jaxpr.outvars])

    def cond(state: list[Any]) -> Any:
        return lowering.lower_nested_jaxpr(ctx, cond_jaxpr, [*cond_consts, *state])[0]

    def body(state: list[Any]) -> list[Any]:
        return lowering.lower_nested_jaxpr(ctx, body_jaxpr, [*body_consts, *state])

    resizes = resizes_arrays(body_jaxpr.jaxpr, body_nconsts, num_implicit_inputs)
    return lowering.while_op(carry, body_types, cond, body, resizes)


register_nested_primitive(while_loop_p, PrimitiveSpec(
    output_type=_loop.output_type, feeds=_loop.feeds, check=_loop.check, jvp=_loop.jvp,
    batching=_loop.batching, partial_eval=_loop.partial_eval, staged=_staged,
    host=functools.partial(loop_host, _loop), dimension_operands=_loop.dimension_operands, lowering=_lower,
    # Its trip count is never known while tracing: JAX's own reverse mode (jax.grad inside qjit) keeps
    # the loop, transposed at specialization as catalyst_lite.grad differentiates it (host-driven).
    kept_under_differentiation=lambda operands, params: True,
))
