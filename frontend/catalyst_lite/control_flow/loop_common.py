"""What the two loop primitives share: their JVP, batching and partial-evaluation rules on symbolic
sizes, and how they run.

A loop body is a :class:`~catalyst_lite.compiler.loop_body.LoopBody` (binders ``*consts *implicit
*prefix *carried``, results ``*implicit *carried``); a loop's results have the types of its carried
binders, whatever the number of iterations. The rules bind the loop again with transformed bodies;
each primitive says how its operands are grouped and how an equation is rebuilt (:class:`Loop`).
Both loops run one iteration at a time (:func:`step_by_step`), from the host (:func:`loop_host`)
or unrolled into one XLA program (:func:`loop_unrolled`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np

from ..compiler.capacity import Prediction, run_compiled
from ..compiler.loop_body import LoopBody, split_groups
from ..compiler.runner import record_replay, runner_for
from ..compiler.specialize import Mode, NeedsHost, eval_jaxpr, to_dim
from ..errors import ControlFlowError
from ..jax_extras import Jaxpr, OutputType, Tracer
from ..jax_extras.dynshape import JaxprTypeError
from ..jax_extras.nested import interleave
from ..jax_extras.rules import Zero, bind_known, instantiate_zeros, move_batch_axis
from ..jax_extras.rules import not_mapped, result_avals, unknown_results, zero_tangent
from .common import fed_dimension_operands


def is_inexact(aval: Any) -> bool:
    """A type with tangents (floating point or complex)."""
    return getattr(aval, "dtype", None) is not None and aval.dtype.kind in "fc"


def jvp_results(outs: list[Any], nimplicit: int, nonzero: list[bool]) -> tuple[list[Any], list[Any]]:
    """A JVP rule's primals and tangents from the primitive bound again returning ``*implicit *values``,
    then the tangents of the values marked ``nonzero`` (zeros for the others and for the sizes)."""
    n = nimplicit + len(nonzero)
    primals, dots = outs[:n], outs[n:]
    zeros = [zero_tangent(x) for x, nz in zip(primals[nimplicit:], nonzero) if not nz]
    return primals, [*map(zero_tangent, primals[:nimplicit]), *interleave(nonzero, dots, zeros)]


@dataclass(frozen=True)
class LoopOperands:
    """A loop equation's operands (or anything in their layout), grouped."""

    pred_consts: list[Any]  # the predicate's constants (while_loop)
    consts: list[Any]  # the body's constants
    implicit: list[Any]  # the carried sizes
    bounds: list[Any]  # lower, upper, step, start (for_loop)
    carried: list[Any]


@dataclass(frozen=True)
class Loop:
    """A loop primitive as its rules see it, its operands ``*pred_consts *consts *implicit *bounds
    *carried`` (a ``while_loop`` has no bounds, a ``for_loop`` no predicate)."""

    primitive: Any
    nbounds: int  # lower, upper, step, start (for_loop); the body's index is fed by start
    new_params: Callable[[dict[str, Any], Jaxpr, Jaxpr | None, LoopOperands], dict[str, Any]]
    batched_predicate: Callable[..., tuple[list[Any], list[Any]]] | None = None
    # ``(trip count, first index, step)`` of a ``for_loop`` (traced or known); ``()`` for a ``while_loop``
    counting: Callable[[LoopOperands, dict[str, Any]], tuple[Any, ...]] = lambda ops, params: ()

    def operands(self, values: Sequence[Any], params: dict[str, Any]) -> LoopOperands:
        """``values``, in the layout of the operands, grouped."""
        nimplicit = params["num_implicit_inputs"]
        sizes = [params.get("cond_nconsts", 0), params["body_nconsts"], nimplicit, self.nbounds]
        return LoopOperands(*split_groups(values, sizes))

    def body(self, params: dict[str, Any]) -> LoopBody:
        nprefix = min(self.nbounds, 1)
        return LoopBody(params["body_jaxpr"].jaxpr, params["body_nconsts"], params["num_implicit_inputs"],
                        nprefix, f"{self.primitive.name} body")

    def predicate(self, params: dict[str, Any]) -> LoopBody | None:
        if "cond_jaxpr" not in params:
            return None
        return LoopBody(params["cond_jaxpr"].jaxpr, params["cond_nconsts"], params["num_implicit_inputs"], 0,
                        f"{self.primitive.name} condition", predicate=True)

    def feeds(self, params: dict[str, Any]) -> list[tuple[Any, list[int]]]:
        """The operand feeding each binder of the predicate and of the body on entry."""
        body, pred = self.body(params), self.predicate(params)
        count = params.get("cond_nconsts", 0) + len(body.jaxpr.invars) + self.nbounds - body.nprefix
        ops = self.operands(range(count), params)
        feeds = [] if pred is None else [(pred.jaxpr, [*ops.pred_consts, *ops.implicit, *ops.carried])]
        return [*feeds, (body.jaxpr, [*ops.consts, *ops.implicit, *ops.bounds[3:], *ops.carried])]

    def output_type(self, params: dict[str, Any], same_operand: Callable[[int, int], bool]) -> OutputType:
        """Constant ``k`` of the body and carried size ``k`` are operands (see :meth:`operands`)."""
        ncc, nbc = params.get("cond_nconsts", 0), params["body_nconsts"]
        return self.body(params).output_type(lambda k: ncc + k, lambda k: ncc + nbc + k, same_operand)

    def check(self, atoms: list[Any], params: dict[str, Any]) -> None:
        """The programs take the operands; the bounds are integers; the body returns its carried types."""
        ops, pred = self.operands(atoms, params), self.predicate(params)
        if not all(b.aval.shape == () and np.issubdtype(b.aval.dtype, np.integer) for b in ops.bounds):
            avals = [b.aval for b in ops.bounds]
            raise JaxprTypeError(f"{self.primitive.name} bounds must be integer scalars, got {avals}")
        if pred is not None:
            pred.typecheck([*ops.pred_consts, *ops.implicit, *ops.carried])
        self.body(params).typecheck([*ops.consts, *ops.implicit, *ops.bounds[3:], *ops.carried])

    def dimension_operands(self, params: dict[str, Any]) -> set[int]:
        """The constants and carried sizes that size the body or predicate."""
        parts = [p for p in (self.predicate(params), self.body(params)) if p is not None]  # the feeds' order
        return fed_dimension_operands(self.feeds(params), [p.nconsts + p.nimplicit for p in parts])

    def equation(self, params: dict[str, Any], body: Jaxpr, pred: Jaxpr | None, ops: LoopOperands
                 ) -> tuple[list[Any], dict[str, Any]]:
        """The operands and parameters of a loop of ``body`` and ``pred`` (``params``: its options)."""
        operands = [*ops.pred_consts, *ops.consts, *ops.implicit, *ops.bounds, *ops.carried]
        return operands, self.new_params(params, body, pred, ops)

    def rebound(self, params: dict[str, Any], body: Jaxpr, pred: Jaxpr | None, ops: LoopOperands) -> list:
        """The loop bound again with other body and predicate jaxprs."""
        operands, new_params = self.equation(params, body, pred, ops)
        return self.primitive.bind(*operands, **new_params)

    def staged(self, invals: list[Any], params: dict[str, Any], stage: Callable[..., Sequence[Any] | None]) -> list[Any]:
        """Inside one XLA program: ``stage(ops, run_body, run_predicate | None)`` stages the loop, or gives
        ``None`` when it does not run; a resizing loop is unrolled (:func:`loop_unrolled`)."""
        ops, body, pred = self.operands(invals, params), self.body(params), self.predicate(params)
        if body.resizes_arrays:
            return loop_unrolled(self, invals, params)
        implicit = [to_dim(d) for d in ops.implicit]

        def run_body(prefix: list[Any], carry: Sequence[Any]) -> tuple[Any, ...]:
            args = [*ops.consts, *implicit, *prefix, *carry]
            return tuple(eval_jaxpr(body.jaxpr, args, Mode.STAGED)[body.nimplicit :])

        def run_predicate(carry: Sequence[Any]) -> Any:
            return eval_jaxpr(pred.jaxpr, [*ops.pred_consts, *implicit, *carry], Mode.STAGED)[0]

        out = stage(ops, run_body, None if pred is None else run_predicate)
        # Arrays, as the loop would give (a carried literal is a Python number on JAX 0.7.1).
        return [*implicit, *(map(jnp.asarray, ops.carried) if out is None else out)]

    def jvp(self, primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list, list]:
        """The loop carrying the tangents of the carried values that get some (constants' as constants)."""
        body, pred = self.body(params), self.predicate(params)
        p, t = self.operands(primals, params), self.operands(tangents, params)
        consts_nz, carried_nz = ([type(x) is not Zero for x in xs] for xs in (t.consts, t.carried))
        carried_nz = body.carried_fixpoint(consts_nz, carried_nz, keep=is_inexact)
        if not any(carried_nz):
            outs = self.primitive.bind(*primals, **params)
            return outs, [zero_tangent(o) for o in outs]
        new = body.jvp(consts_nz, carried_nz)
        consts = [*new.consts, *p.consts, *(x for x, nz in zip(t.consts, consts_nz) if nz)]
        carried = [*p.carried, *(instantiate_zeros(x) for x, nz in zip(t.carried, carried_nz) if nz)]
        ops = replace(p, consts=consts, carried=carried)
        new_pred = pred and pred.ignoring_tangents(carried_nz)
        return jvp_results(self.rebound(params, new.jaxpr, new_pred, ops), body.nimplicit, carried_nz)

    def batching(self, axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list, list]:
        """The loop over a batch: batched constants and carried values get a batch axis; sizes are shared."""
        name = self.primitive.name
        body, pred = self.body(params), self.predicate(params)
        a, d = self.operands(args, params), self.operands(dims, params)
        if any(x is not not_mapped for x in (*d.implicit, *d.bounds)):
            raise ControlFlowError(
                f"jax.vmap of a {name} whose bounds or array sizes differ between examples is not "
                "supported; vmap the loop body instead, or loop over the examples."
            )
        size = axis_data.size
        groups = (d.pred_consts, d.consts, d.carried)
        pred_b, consts_b, carried_b = ([x is not not_mapped for x in g] for g in groups)
        carried_b = body.carried_fixpoint(consts_b, carried_b)
        if pred is not None and pred.depends_on(pred_b, carried_b):
            return self.batched_predicate(axis_data, args, dims, **params)
        if body.depends_on(consts_b, carried_b):
            raise ControlFlowError(f"jax.vmap of a {name} whose array sizes depend on the batched values")
        new_body = body.batched(consts_b, carried_b, size)
        new_pred = pred and pred.batched(pred_b, carried_b, size)

        def moved(values: list[Any], batch_dims: list[Any], batched: list[bool]) -> list[Any]:
            return [move_batch_axis(x, bd, size, b) for x, bd, b in zip(values, batch_dims, batched)]

        pred_consts = [*(new_pred.consts if new_pred else ()), *moved(a.pred_consts, d.pred_consts, pred_b)]
        consts = [*new_body.consts, *moved(a.consts, d.consts, consts_b)]
        carried = moved(a.carried, d.carried, carried_b)
        ops = replace(a, pred_consts=pred_consts, consts=consts, carried=carried)
        outs = self.rebound(params, new_body.jaxpr, new_pred and new_pred.jaxpr, ops)
        return outs, [*[not_mapped] * body.nimplicit, *[0 if b else not_mapped for b in carried_b]]

    def partial_eval(self, trace: Any, *tracers: Any, **params: Any) -> list[Any]:
        """Known carried values are computed now by a loop of their own; the whole loop is staged for
        the unknown ones (as JAX's ``while_loop`` rule). Unknown sizes, bounds or predicate: all is."""
        body, pred = self.body(params), self.predicate(params)
        known = self.operands([t.pval.is_known() for t in tracers], params)
        values = self.operands([t.pval.get_known() for t in tracers], params)
        consts_uk = [not k for k in known.consts]
        carried_uk = body.carried_fixpoint(consts_uk, [not k for k in known.carried])
        pred_uk = pred is not None and pred.depends_on([not k for k in known.pred_consts], carried_uk)
        sizes_known = all(known.implicit) and all(known.bounds) and not body.depends_on(consts_uk, carried_uk)
        if pred_uk or not sizes_known or all(carried_uk):
            avals = result_avals(self.output_type, params, tracers, self.feeds)
            return unknown_results(trace, self.primitive, tracers, params, avals)
        carried_known = [not u for u in carried_uk]
        body_jaxpr, body_taken = body.known_part(known.consts, carried_known)
        pred_jaxpr, pred_taken = pred.known_part(known.pred_consts, carried_known) if pred else (None, [])
        ops = replace(values, pred_consts=[c for c, taken in zip(values.pred_consts, pred_taken) if taken],
                      consts=[c for c, taken in zip(values.consts, body_taken) if taken],
                      carried=[x for x, k in zip(values.carried, carried_known) if k])
        operands, known_params = self.equation(params, body_jaxpr, pred_jaxpr, ops)
        outs_known = bind_known(trace, self.primitive, operands, known_params)
        implicit_out = outs_known[: body.nimplicit]
        avals = result_avals(self.output_type, params, tracers, self.feeds, implicit_out)
        outs_unknown = unknown_results(trace, self.primitive, tracers, params, avals)
        unknown_carried = [o for o, u in zip(outs_unknown[body.nimplicit :], carried_uk) if u]
        return [*implicit_out, *interleave(carried_known, outs_known[body.nimplicit :], unknown_carried)]


def step_by_step(name: str, body: LoopBody, ops: LoopOperands, counted: tuple[int, ...], run_body: Callable,
                 run_predicate: Callable | None, size: Callable[[Any], Any], limit: int | None = None
                 ) -> tuple[list[Any], list[Any]]:
    """The carried sizes and values after the loop, iteration by iteration (``size`` makes a size to pass
    on); with a ``limit`` (unrolling), more iterations or an unknown predicate raise ``NeedsHost``."""
    implicit, carried = [size(d) for d in ops.implicit], list(ops.carried)
    k = 0
    while True:
        if run_predicate is None:
            more = k < counted[0]
        else:
            more = run_predicate(*ops.pred_consts, *implicit, *carried)[0]
            if limit is not None and not isinstance(more, (bool, np.bool_)):
                raise NeedsHost(f"{name} resizes arrays, its trip count known only at run time")
        if not more:
            return implicit, carried
        if limit is not None and k >= limit:
            raise NeedsHost(f"{name} resizes arrays in too many iterations to unroll")
        # np.int64, the same index type whether run from the host or unrolled: the same results.
        index = [np.int64(counted[1] + k * counted[2])] if run_predicate is None else []
        outs = run_body(*ops.consts, *implicit, *index, *carried)
        implicit, carried = [size(d) for d in outs[: body.nimplicit]], outs[body.nimplicit :]
        k += 1


def loop_host(loop: Loop, invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """A loop driven from Python: compiled whole if it can be, else iteration by iteration."""
    ops = loop.operands(invals, params)
    body, pred = loop.body(params), loop.predicate(params)
    counted = tuple(int(x) for x in loop.counting(ops, params))

    def replayed(prediction: Prediction, invals: list[Any]) -> tuple[list[Any], Any]:
        """The loop staged again at the sizes the run on capacity buffers found."""
        again = loop.operands(invals, params)
        return prediction.stage(again.pred_consts, again.consts, again.implicit, again.carried,
                                *loop.counting(again, params))

    outs = run_compiled(loop.primitive, body, pred, invals, lambda ran: record_replay(params, functools.partial(replayed, ran)),
                        ops.pred_consts, ops.consts, ops.implicit, ops.carried, *counted)
    if outs is not None:
        return outs
    run_body = runner_for(body.jaxpr, body.name)
    run_pred = None if pred is None else runner_for(pred.jaxpr, pred.name)
    implicit, carried = step_by_step(loop.primitive.name, body, ops, counted, run_body, run_pred, int)
    return [*implicit, *carried]


# A resizing loop with at most this many iterations, its trip count known when the program is
# staged, is unrolled into one XLA program (each iteration staged at its own sizes).
UNROLL_LIMIT = 32


def loop_unrolled(loop: Loop, invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: a resizing loop of a trip count known when staged, each iteration at its
    own sizes; else (over :data:`UNROLL_LIMIT` iterations, sizes from data) :class:`NeedsHost`."""
    ops = loop.operands(invals, params)
    body, pred, name = loop.body(params), loop.predicate(params), loop.primitive.name
    counted = loop.counting(ops, params)
    if any(isinstance(x, Tracer) for x in counted):
        raise NeedsHost(f"{name} resizes arrays, its trip count known only at run time")
    counted = tuple(int(x) for x in counted)
    if counted and counted[0] > UNROLL_LIMIT:
        raise NeedsHost(f"{name} resizes arrays in too many iterations to unroll")

    def staged(part: LoopBody | None) -> Callable[..., list[Any]] | None:
        return None if part is None else lambda *args: eval_jaxpr(part.jaxpr, list(args), Mode.STAGED)

    implicit, carried = step_by_step(name, body, ops, counted, staged(body), staged(pred), to_dim, UNROLL_LIMIT)
    # Arrays, as the loop gives them (a carried literal is a Python number on JAX 0.7.1).
    return [*implicit, *map(jnp.asarray, carried)]
