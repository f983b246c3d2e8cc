"""``while_loop``: a loop that runs while a predicate of its carried values holds.

The equation::

    outs = while_loop[cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, nimplicit,
                      preserve_dimensions] *cond_consts *body_consts *implicit *carried

``cond_jaxpr`` takes ``*cond_consts *implicit *carried`` and returns a ``bool[]``; ``body_jaxpr``
takes ``*body_consts *implicit *carried`` and returns ``*implicit *carried``.

>>> from catalyst_lite import qjit, while_loop
>>> @qjit
... def collatz_steps(n: int):
...     @while_loop(lambda n, steps: n != 1)
...     def step(n, steps):
...         return (n // 2) * (n % 2 == 0) + (3 * n + 1) * (n % 2 == 1), steps + 1
...     return step(n, 0)[1]
>>> int(collatz_steps(6))
8
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from jax import lax
from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from ..compiler.specialize import (
    Mode,
    NeedsHost,
    dimension_inputs,
    eval_jaxpr,
    register_specialization,
    runner_for,
    to_dim,
)
from ..capture.switch import refuse_under_capture
from ..jax_extras import ClosedJaxpr, collapse
from ..jax_extras.dynshape import DynshapePrimitive, NestedBody, trace_nested
from .common import (
    active_control_flow_handler,
    check_predicate,
    expansion_strategy,
    get_ambient_values,
    set_ambient_values,
    split_groups,
    tracing_mode,
    unwrap_results,
)
from .loop_common import dims_unchanged, loop_output_type, trace_loop

__all__ = ["while_loop", "while_loop_p"]


class WhileLoop(DynshapePrimitive):
    pass


while_loop_p = WhileLoop("while_loop")


# --- user API ------------------------------------------------------------------------------------


def while_loop(
    cond_fn: Callable[..., Any],
    allow_array_resizing: bool = False,
    *,
    experimental_preserve_dimensions: bool | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator turning ``body(*carry) -> carry`` into a loop that runs while ``cond_fn(*carry)``.

    The decorated function takes the initial carried values and returns the final ones (one value
    unwrapped, several as a tuple). See :func:`~catalyst_lite.for_loop` for
    ``allow_array_resizing``.
    """
    strategy = expansion_strategy(allow_array_resizing, experimental_preserve_dimensions)
    refuse_under_capture("while_loop")  # as Catalyst does: captured programs use qml.while_loop

    def decorator(body: Callable) -> Callable:
        @functools.wraps(body)
        def loop(*init: Any) -> Any:
            if tracing_mode("while_loop", body) == "eager":
                return _run_eagerly(cond_fn, body, init)
            handler = active_control_flow_handler()
            if handler is not None:  # e.g. a loop inside qml.adjoint, applied reversed

                def bind(cond_fn: Callable, body: Callable, init: tuple) -> Any:
                    return _bind(cond_fn, body, init, strategy)

                return handler.while_loop(cond_fn, body, init, bind)
            return _bind(cond_fn, body, init, strategy)

        return loop

    return decorator


def _run_eagerly(cond_fn: Callable, body: Callable, init: tuple) -> Any:
    carry = init
    while check_predicate(cond_fn(*carry), "while_loop", cond_fn):
        out = body(*carry)
        carry = () if len(init) == 0 else (out,) if len(init) == 1 else tuple(out)
    return None if len(init) == 0 else carry[0] if len(init) == 1 else carry


def _bind(cond_fn: Callable, body: Callable, init: tuple, strategy) -> Any:
    """The design documents' ``bindNested`` for ``while_loop`` (two nested programs)."""
    flat_init, in_tree = tree_flatten(init)
    nested, expanded, nimplicit = trace_loop(body, [], init, strategy, "while_loop")
    n_ambient = len(get_ambient_values())
    cond = _trace_cond(cond_fn, nested.in_type, in_tree, n_ambient)
    implicit, carried = expanded[:nimplicit], expanded[nimplicit:]
    operands = [*cond.consts, *nested.consts, *implicit, *carried]
    out_type = loop_output_type(nested, strategy, const_operand=lambda k: cond.nconsts + k)
    outs = while_loop_p.bind_nested(
        operands,
        out_type,
        cond_jaxpr=ClosedJaxpr(cond.jaxpr, ()),
        body_jaxpr=ClosedJaxpr(nested.jaxpr, ()),
        cond_nconsts=cond.nconsts,
        body_nconsts=nested.nconsts,
        nimplicit=nimplicit,
        preserve_dimensions=strategy.preserve_dimensions,
    )
    explicit = collapse(out_type, outs)
    set_ambient_values(explicit[len(flat_init) :])
    return unwrap_results(explicit[: len(flat_init)], len(init), in_tree)


def _trace_cond(cond_fn: Callable, in_type: tuple, in_tree: PyTreeDef, n_ambient: int) -> NestedBody:
    """Trace the predicate with the body's input type; it sees the user's carries only."""

    def flat_cond(*explicit: Any) -> list[Any]:
        user = explicit[: len(explicit) - n_ambient]
        pred = cond_fn(*tree_unflatten(in_tree, list(user)))
        return [check_predicate(pred, "while_loop", cond_fn)]

    return trace_nested(flat_cond, in_type, None, "while_loop condition", lambda args, res: (res, 0))


# --- specialization rules ------------------------------------------------------------------------


def _operands(invals: list[Any], params: dict[str, Any]):
    return split_groups(invals, [params["cond_nconsts"], params["body_nconsts"], params["nimplicit"]])


def _staged(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: a ``lax.while_loop``."""
    _require_host_in_reverse_mode()
    cond_consts, body_consts, implicit, carried = _operands(invals, params)
    cond, body = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr
    nimplicit = params["nimplicit"]
    if nimplicit and not dims_unchanged(body, params["body_nconsts"], nimplicit):
        raise NeedsHost("while_loop resizes arrays")
    implicit = [to_dim(d) for d in implicit]

    def cond_fn(carry):
        return eval_jaxpr(cond, [*cond_consts, *implicit, *carry], Mode.STAGED)[0]

    def body_fn(carry):
        return tuple(eval_jaxpr(body, [*body_consts, *implicit, *carry], Mode.STAGED)[nimplicit:])

    return [*implicit, *lax.while_loop(cond_fn, body_fn, tuple(carried))]


def _host(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Driven from Python: predicate and body compiled per size signature."""
    cond_consts, body_consts, implicit, carried = _operands(invals, params)
    nimplicit = params["nimplicit"]
    run_cond = runner_for(params["cond_jaxpr"].jaxpr, "while_loop condition")
    run_body = runner_for(params["body_jaxpr"].jaxpr, "while_loop body")
    while bool(run_cond(*cond_consts, *implicit, *carried)[0]):
        outs = run_body(*body_consts, *implicit, *carried)
        implicit, carried = [int(d) for d in outs[:nimplicit]], outs[nimplicit:]
    return [*implicit, *carried]


def _dimension_operands(params: dict[str, Any]) -> set[int]:
    """Constants of either program and the carried dimensions that size them."""
    ncc, nbc, ni = params["cond_nconsts"], params["body_nconsts"], params["nimplicit"]
    cond_needed = dimension_inputs(params["cond_jaxpr"].jaxpr)
    body_needed = dimension_inputs(params["body_jaxpr"].jaxpr)
    needed = {k for k in cond_needed if k < ncc}
    needed |= {ncc + k for k in body_needed if k < nbc + ni}
    needed |= {ncc + nbc + (k - ncc) for k in cond_needed if ncc <= k < ncc + ni}
    return needed


register_specialization(while_loop_p, staged=_staged, host=_host, dimension_operands=_dimension_operands)


# --- lowering ------------------------------------------------------------------------------------
# `.mlir` shows the dynamic program: the loop stays one `stablehlo.while` carrying the carried
# dimensions and values; the constants of the predicate and of the body are captured.

from ..jax_extras import lowering  # noqa: E402  (the helpers of this section)


def _lower(
    ctx: lowering.LoweringRuleContext,
    *operands: Any,
    cond_jaxpr: ClosedJaxpr,
    body_jaxpr: ClosedJaxpr,
    cond_nconsts: int,
    body_nconsts: int,
    nimplicit: int,
    preserve_dimensions: bool,
) -> list[Any]:
    """StableHLO of ``while_loop``: ``while cond(carry): carry = body(carry)``."""
    del nimplicit, preserve_dimensions  # already reflected in the operands and the bodies' types
    cond_consts, body_consts, carry = split_groups(list(operands), [cond_nconsts, body_nconsts])
    body_types = lowering.ir_types([v.aval for v in body_jaxpr.jaxpr.outvars])

    def cond(state: list[Any]) -> Any:
        (pred,) = lowering.lower_nested_jaxpr(ctx, cond_jaxpr, [*cond_consts, *state])
        return pred

    def body(state: list[Any]) -> list[Any]:
        return lowering.lower_nested_jaxpr(ctx, body_jaxpr, [*body_consts, *state])

    return lowering.while_op(carry, body_types, cond, body)


lowering.register_lowering(while_loop_p, _lower)


# --- differentiation -----------------------------------------------------------------------------
# Forward mode (JVP) needs no rule of ours: JAX differentiates the staged `lax.while_loop`, and the
# host-driven loop (resizing carries) runs compiled bodies that JAX differentiates one by one.
# Reverse mode needs, for the backward pass, the trip count and every iteration's carries, in
# storage whose size is only known once the loop has run: JAX refuses to transpose a
# `lax.while_loop` for that reason. So, when reverse mode is requested, the loop runs host-driven:
# the predicate is evaluated on concrete values in Python, each body call is a compiled program that
# JAX differentiates, and JAX's tape records the iterations as they happen (storage sized at run
# time, the trip count being the tape's length).

from ..compiler.reverse_mode import reverse_mode_requested  # noqa: E402  (this section's own)


def _require_host_in_reverse_mode() -> None:
    """Leave staging for host-driven execution when the loop will be transposed."""
    if reverse_mode_requested():
        raise NeedsHost("reverse-mode differentiation of a while_loop")
