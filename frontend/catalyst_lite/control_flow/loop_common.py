"""What the two loop primitives share: the layout of a loop body, its output type and type check,
and their JVP, batching and partial-evaluation rules on symbolic sizes.

A loop body's binders are ``*consts *implicit *prefix *carried`` (``prefix``: ``for_loop``'s
index) and its results ``*implicit *carried``: the carried sizes (only when the loop may resize
arrays) and the carried values; ``while_loop``'s predicate takes ``*consts *implicit *carried``
and returns one boolean. A loop's results have the types of its carried binders, whatever the
number of iterations (none included): a carried size is an implicit result, a preserved one the
operand that feeds the constant binder.

The rules bind the loop again with transformed bodies (:class:`LoopBody`'s ``jvp``, ``batched``,
``known_part``); each primitive says how its operands are grouped and how an equation is rebuilt
(:class:`Loop`). Both loops run iteration by iteration with one step loop (:func:`step_by_step`):
from the host (:func:`loop_host`, each body compiled per size signature) and unrolled into one XLA
program (:func:`loop_unrolled`, each iteration staged at its own sizes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np

from ..compiler.capacity import LoopShape, Prediction, resizes_arrays, run_compiled
from ..compiler.runner import record_replay, runner_for
from ..compiler.specialize import Mode, NeedsHost, eval_jaxpr, to_dim
from ..errors import ControlFlowError
from ..jax_extras import Tracer
from ..jax_extras import Jaxpr, OutputType, Var
from ..jax_extras.dynshape import JaxprTypeError, array_aval, input_type_of, output_type_of
from ..jax_extras.nested import NestedBody, interleave, retrace
from ..jax_extras.rules import Feeds, Zero, batch_call, bind_known, instantiate_zeros, jvp_call, move_batch_axis
from ..jax_extras.rules import not_mapped, result_avals, unknown_results, zero_tangent
from ..jax_extras.tracing import forward_dependence, prune_jaxpr
from ..jax_extras.typecheck import check_carry, check_nested
from .common import fed_dimension_operands, split_groups

__all__ = [
    "LoopBody",
    "LoopOperands",
    "Loop",
    "loop_jvp",
    "loop_batching",
    "loop_partial_eval",
    "loop_host",
    "loop_unrolled",
    "step_by_step",
    "resizes_arrays",
    "is_inexact",
    "with_batch_axis",
]


def is_inexact(aval: Any) -> bool:
    """A type with tangents (floating point or complex)."""
    return getattr(aval, "dtype", None) is not None and aval.dtype.kind in "fc"


@dataclass(frozen=True)
class LoopBody:
    """A loop body (or ``while_loop``'s predicate) jaxpr with its binder layout."""

    jaxpr: Jaxpr
    nconsts: int
    nimplicit: int
    nprefix: int
    name: str
    predicate: bool = False

    @property
    def groups(self) -> list[list[Any]]:
        """The binders: ``[consts, implicit, prefix, carried]``."""
        return split_groups(self.jaxpr.invars, [self.nconsts, self.nimplicit, self.nprefix])

    @property
    def ncarried(self) -> int:
        return len(self.jaxpr.invars) - self.nconsts - self.nimplicit - self.nprefix

    def _inputs(self, const_marks: Sequence[bool], carried_marks: Sequence[bool]) -> list[bool]:
        return [*const_marks, *[False] * (self.nimplicit + self.nprefix), *carried_marks]

    # --- types -----------------------------------------------------------------------------------

    def output_type(
        self,
        const_operand: Callable[[int], int],
        implicit_operand: Callable[[int], int],
        same_operand: Callable[[int, int], bool],
    ) -> OutputType:
        """The loop's output type; ``const_operand(k)`` and ``implicit_operand(k)`` are the operands
        feeding constant ``k`` and carried size ``k``; ``same_operand(i, j)``: one value.

        A carried size that no iteration changes keeps its operand, and carried
        sizes that hold one value at every iteration are one implicit result (Catalyst's
        convention: an array whose size a resizing loop never changes keeps its dimension).
        """
        consts, implicit, _, carried = self.groups
        operand_of = {v: const_operand(k) for k, v in enumerate(consts)}
        same, invariant = self.size_classes(lambda i, j: same_operand(implicit_operand(i), implicit_operand(j)))
        operand_of.update({v: implicit_operand(k) for k, v in enumerate(implicit) if invariant[k]})
        returned = [v if same[k] == k and not invariant[k] else None for k, v in enumerate(implicit)]
        position = {v: k for k, v in enumerate(implicit)}
        return output_type_of(
            [v.aval for v in carried], returned, operand_of, free=lambda v: same[position[v]]
        )

    def size_classes(self, same_operand: Callable[[int, int], bool]) -> tuple[list[int], list[bool]]:
        """Which carried sizes hold one value at every iteration (for each, the first of its
        class), and which of them no iteration changes.

        Sizes are one value when their operands are (``same_operand(i, j)``) and the body returns
        one value for them: the same variable or literal, or the binders of sizes that are one
        value. The classes are refined until they are stable; a class is unchanged when the body
        returns, for every size in it, the binder of a size in it.
        """
        n = self.nimplicit
        _, implicit, _, _ = self.groups
        returned = self.jaxpr.outvars[:n]
        binder = {v: k for k, v in enumerate(implicit)}
        same = [next(j for j in range(k + 1) if same_operand(j, k)) for k in range(n)]

        def key(k: int) -> tuple:
            out = returned[k]
            if isinstance(out, Var) and out in binder:
                return same[k], "binder", same[binder[out]]
            if isinstance(out, Var):
                return same[k], "var", out
            return same[k], "literal", int(out.val)

        while True:
            keys = [key(k) for k in range(n)]
            refined = [keys.index(keys[k]) for k in range(n)]
            if refined == same:
                break
            same = refined
        unchanged = [k_[1] == "binder" and k_[2] == same[k] for k, k_ in enumerate(keys)]
        return same, unchanged

    def typecheck(self, operands: Sequence[Any]) -> None:
        """The body takes ``operands`` (atoms, one per binder) and returns its carried types (a
        predicate: one boolean scalar)."""
        check_nested(self.jaxpr, operands, self.name)
        if self.predicate:
            outs = self.jaxpr.outvars
            if len(outs) != 1 or outs[0].aval.shape != () or outs[0].aval.dtype != bool:
                raise JaxprTypeError(f"{self.name} returns {[v.aval for v in outs]}, not one bool[]")
            return
        _, implicit, _, carried = self.groups
        check_carry([*implicit, *carried], self.jaxpr.outvars, self.nimplicit, self.name)

    # --- analyses --------------------------------------------------------------------------------

    def carried_fixpoint(
        self, const_marks: Sequence[bool], carried_marks: Sequence[bool], keep: Callable[[Any], bool] = lambda a: True
    ) -> list[bool]:
        """Which carried values depend, at some iteration, on the marked constants or initial
        carried values (only values whose type ``keep`` accepts can be marked)."""
        _, _, _, carried = self.groups
        marks = [m and keep(v.aval) for m, v in zip(carried_marks, carried)]
        for _ in range(len(marks) + 1):
            out = forward_dependence(self.jaxpr, self._inputs(const_marks, marks))[self.nimplicit :]
            new = [m or (o and keep(v.aval)) for m, o, v in zip(marks, out, carried)]
            if new == marks:
                return marks
            marks = new
        raise AssertionError("the carried fixpoint was not reached")

    def depends_on(self, const_marks: Sequence[bool], carried_marks: Sequence[bool]) -> bool:
        """Whether a carried size (a predicate: the predicate) depends on the marked values."""
        out = forward_dependence(self.jaxpr, self._inputs(const_marks, carried_marks))
        return any(out) if self.predicate else any(out[: self.nimplicit])

    # --- transformed bodies ----------------------------------------------------------------------

    def jvp(self, consts_nz: Sequence[bool], carried_nz: Sequence[bool]) -> NestedBody:
        """The body carrying the tangents of the ``carried_nz`` values too, with the tangents of
        the ``consts_nz`` constants as constants: binders ``*consts *const_tangents *implicit
        *prefix *carried *carried_tangents``, results ``*implicit *carried *carried_tangents``."""
        consts, implicit, prefix, carried = self.groups
        tangent_consts = [v for v, nz in zip(consts, consts_nz) if nz]
        tangent_carried = [v for v, nz in zip(carried, carried_nz) if nz]
        in_type = input_type_of([*consts, *tangent_consts, *implicit, *prefix, *carried, *tangent_carried])
        sizes = [self.nconsts, len(tangent_consts), self.nimplicit, self.nprefix, self.ncarried]

        def jvp_body(*args: Any) -> list[Any]:
            c, c_dot, i, p, x, x_dot = split_groups(args, sizes)
            tangents = [*_with_zeros(c, c_dot, consts_nz), *map(zero_tangent, [*i, *p]), *_with_zeros(x, x_dot, carried_nz)]
            outs, outs_dot = jvp_call(self.jaxpr, [*c, *i, *p, *x], tangents)
            dots = [instantiate_zeros(t) for t, nz in zip(outs_dot[self.nimplicit :], carried_nz) if nz]
            return [*outs, *dots]

        return retrace(jvp_body, in_type, f"{self.name} (JVP)", self.nimplicit)

    def ignoring_tangents(self, carried_nz: Sequence[bool]) -> Jaxpr:
        """A predicate taking the tangents of the ``carried_nz`` values too (and ignoring them)."""
        _, _, _, carried = self.groups
        extra = [Var(v.aval) for v, nz in zip(carried, carried_nz) if nz]
        dbg = self.jaxpr.debug_info
        if isinstance(dbg.arg_names, tuple):
            dbg = dbg._replace(arg_names=dbg.arg_names + ("",) * len(extra))
        return self.jaxpr.replace(invars=[*self.jaxpr.invars, *extra], debug_info=dbg)

    def batched(self, consts_b: Sequence[bool], carried_b: Sequence[bool], size: int) -> NestedBody:
        """The body (or predicate, the same for every example) applied to a batch of ``size``
        examples: the ``consts_b`` constants and the ``carried_b`` values have a leading axis."""
        batched = self._inputs(consts_b, carried_b)
        in_type = with_batch_axis(input_type_of(self.jaxpr.invars), batched, size)
        out_batched = [False] if self.predicate else [*[False] * self.nimplicit, *carried_b]

        def batched_body(*args: Any) -> list[Any]:
            return batch_call(self.jaxpr, args, batched, size, out_batched)

        nimplicit = 0 if self.predicate else self.nimplicit
        return retrace(batched_body, in_type, f"{self.name} (batched)", nimplicit)

    def known_part(self, consts_known: Sequence[bool], carried_known: Sequence[bool]) -> tuple[Jaxpr, list[bool]]:
        """The body computing only the sizes and the ``carried_known`` values (a predicate: the
        predicate), from the known constants and values; and which constants it takes."""
        keep = [*[False] * self.nconsts, *[True] * (self.nimplicit + self.nprefix), *carried_known]
        used_outputs = [True] if self.predicate else [*[True] * self.nimplicit, *carried_known]
        jaxpr, taken = prune_jaxpr(self.jaxpr, used_outputs, keep)
        taken_consts = taken[: self.nconsts]
        assert all(k for t, k in zip(taken_consts, consts_known) if t), "known values need unknown constants"
        return jaxpr, taken_consts


def _with_zeros(primals: Sequence[Any], tangents: Sequence[Any], nonzero: Sequence[bool]) -> list[Any]:
    """One tangent per primal: the given ones where ``nonzero``, symbolic zeros elsewhere."""
    return interleave(nonzero, tangents, [zero_tangent(p) for p, nz in zip(primals, nonzero) if not nz])


def with_batch_axis(in_type: tuple, batched: Sequence[bool], size: int) -> tuple:
    """``in_type`` with a leading axis of ``size`` on the ``batched`` entries."""
    out = []
    for (aval, explicit), b in zip(in_type, batched):
        if b:
            aval = array_aval((size, *aval.shape), aval.dtype, aval.weak_type)
        out.append((aval, explicit))
    return tuple(out)


# --- the rules -----------------------------------------------------------------------------------


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
    """A loop primitive as its rules see it: how its operands are grouped (``operands``), its
    body and predicate (``None`` for ``for_loop``), and how an equation is rebuilt with other
    body and predicate jaxprs (``equation``: its operands and parameters). ``batched_predicate``
    batches a loop whose predicate differs between examples."""

    primitive: Any
    output_type: Callable[..., OutputType]
    feeds: Feeds
    operands: Callable[[Sequence[Any], dict[str, Any]], LoopOperands]
    body: Callable[[dict[str, Any]], LoopBody]
    predicate: Callable[[dict[str, Any]], LoopBody | None]
    equation: Callable[[dict[str, Any], Jaxpr, Jaxpr | None, LoopOperands], tuple[list[Any], dict[str, Any]]]
    batched_predicate: Callable[..., tuple[list[Any], list[Any]]] | None = None
    # for_loop: its trip count, first index and step from its operands (traced or known)
    counting: Callable[[LoopOperands], tuple[Any, Any, Any]] | None = None

    def counted(self, ops: LoopOperands) -> tuple[Any, ...]:
        """``(trip count, first index, step)`` of a ``for_loop``; ``()`` for a ``while_loop``."""
        return () if self.counting is None else self.counting(ops)

    def dimension_operands(self, params: dict[str, Any]) -> set[int]:
        """The constants and carried sizes that size the body or predicate."""
        parts = [p for p in (self.predicate(params), self.body(params)) if p is not None]  # the feeds' order
        return fed_dimension_operands(self.feeds(params), [p.nconsts + p.nimplicit for p in parts])

    def host(self, invals: list[Any], params: dict[str, Any]) -> list[Any]:
        return loop_host(self, invals, params)

    def unrolled(self, invals: list[Any], params: dict[str, Any]) -> list[Any]:
        return loop_unrolled(self, invals, params)

    def staged(self, invals: list[Any], params: dict[str, Any], stage: Callable[..., Sequence[Any] | None]) -> list[Any]:
        """Inside one XLA program: ``stage(ops, run_body, run_predicate)`` stages the loop over
        the carried values (``run_body(prefix, carry)``: one iteration, ``run_predicate(carry)``:
        whether to go on, ``None`` for a ``for_loop``), or returns ``None`` when it is known not
        to run at these sizes: then it is not even staged, as its body may be traced under facts
        that hold only when it runs (`x[i]` of an empty `x`: see
        ``size_facts.runs_only_if_loop_runs``). A resizing loop is unrolled (:func:`loop_unrolled`)."""
        ops, body, pred = self.operands(invals, params), self.body(params), self.predicate(params)
        if resizes_arrays(body.jaxpr, body.nconsts, body.nimplicit):
            return self.unrolled(invals, params)
        implicit = [to_dim(d) for d in ops.implicit]

        def run_body(prefix: list[Any], carry: Sequence[Any]) -> tuple[Any, ...]:
            args = [*ops.consts, *implicit, *prefix, *carry]
            return tuple(eval_jaxpr(body.jaxpr, args, Mode.STAGED)[body.nimplicit :])

        def run_predicate(carry: Sequence[Any]) -> Any:
            return eval_jaxpr(pred.jaxpr, [*ops.pred_consts, *implicit, *carry], Mode.STAGED)[0]

        out = stage(ops, run_body, None if pred is None else run_predicate)
        # Arrays, as the loop would give (a carried literal is a Python number on JAX 0.7.1).
        return [*implicit, *(map(jnp.asarray, ops.carried) if out is None else out)]

    def jvp(self, primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        return loop_jvp(self, primals, tangents, params)

    def batching(self, axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list, list]:
        return loop_batching(self, axis_data, args, dims, params)

    def partial_eval(self, trace: Any, *tracers: Any, **params: Any) -> list[Any]:
        return loop_partial_eval(self, trace, tracers, params)


def loop_jvp(loop: Loop, primals: list[Any], tangents: list[Any], params: dict[str, Any]) -> tuple[list, list]:
    """The loop carrying the tangents of the values that have some, with the constants' tangents
    as constants; a carried value gets a tangent once something it depends on has one."""
    body, pred = loop.body(params), loop.predicate(params)
    p, t = loop.operands(primals, params), loop.operands(tangents, params)
    consts_nz = [type(x) is not Zero for x in t.consts]
    carried_nz = body.carried_fixpoint(consts_nz, [type(x) is not Zero for x in t.carried], keep=is_inexact)
    if not any(carried_nz):
        outs = loop.primitive.bind(*primals, **params)
        return outs, [zero_tangent(o) for o in outs]
    new = body.jvp(consts_nz, carried_nz)
    ops = LoopOperands(
        p.pred_consts,
        [*new.consts, *p.consts, *(x for x, nz in zip(t.consts, consts_nz) if nz)],
        p.implicit,
        p.bounds,
        [*p.carried, *(instantiate_zeros(x) for x, nz in zip(t.carried, carried_nz) if nz)],
    )
    operands, new_params = loop.equation(params, new.jaxpr, pred and pred.ignoring_tangents(carried_nz), ops)
    outs = loop.primitive.bind(*operands, **new_params)
    n = body.nimplicit + len(p.carried)
    primals_out, dots = outs[:n], outs[n:]
    zeros = [zero_tangent(x) for x, nz in zip(primals_out[body.nimplicit :], carried_nz) if not nz]
    return primals_out, [*map(zero_tangent, primals_out[: body.nimplicit]), *interleave(carried_nz, dots, zeros)]


def loop_batching(loop: Loop, axis_data: Any, args: list[Any], dims: list[Any], params: dict[str, Any]) -> tuple[list, list]:
    """The loop over a batch: the batched constants and carried values (and what depends on them)
    get a leading batch axis; bounds and sizes must be the same for every example. A predicate
    that differs between examples is ``loop.batched_predicate``'s business."""
    name = loop.primitive.name
    body, pred = loop.body(params), loop.predicate(params)
    a, d = loop.operands(args, params), loop.operands(dims, params)
    if any(x is not not_mapped for x in (*d.implicit, *d.bounds)):
        raise ControlFlowError(
            f"jax.vmap of a {name} whose bounds or array sizes differ between examples is not "
            "supported; vmap the loop body instead, or loop over the examples."
        )
    size = axis_data.size
    pred_b, consts_b = [x is not not_mapped for x in d.pred_consts], [x is not not_mapped for x in d.consts]
    carried_b = body.carried_fixpoint(consts_b, [x is not not_mapped for x in d.carried])
    if pred is not None and pred.depends_on(pred_b, carried_b):
        return loop.batched_predicate(axis_data, args, dims, **params)
    if body.depends_on(consts_b, carried_b):
        raise ControlFlowError(f"jax.vmap of a {name} whose array sizes depend on the batched values")
    new_body = body.batched(consts_b, carried_b, size)
    new_pred = pred and pred.batched(pred_b, carried_b, size)

    def moved(values: list[Any], batch_dims: list[Any], batched: list[bool]) -> list[Any]:
        return [move_batch_axis(x, bd, size, b) for x, bd, b in zip(values, batch_dims, batched)]

    ops = LoopOperands(
        [*(new_pred.consts if new_pred else ()), *moved(a.pred_consts, d.pred_consts, pred_b)],
        [*new_body.consts, *moved(a.consts, d.consts, consts_b)],
        a.implicit,
        a.bounds,
        moved(a.carried, d.carried, carried_b),
    )
    operands, new_params = loop.equation(params, new_body.jaxpr, new_pred and new_pred.jaxpr, ops)
    outs = loop.primitive.bind(*operands, **new_params)
    return outs, [*[not_mapped] * body.nimplicit, *[0 if b else not_mapped for b in carried_b]]


def loop_partial_eval(loop: Loop, trace: Any, tracers: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    """Known carried values (those that depend on known values only) are computed by a loop of
    their own, now; the whole loop is staged for the unknown ones (recomputing the known ones
    alongside, as JAX's ``while_loop`` rule does). Unknown sizes, bounds or predicate: all is
    unknown."""
    body, pred = loop.body(params), loop.predicate(params)
    known = loop.operands([t.pval.is_known() for t in tracers], params)
    values = loop.operands([t.pval.get_known() for t in tracers], params)
    consts_uk = [not k for k in known.consts]
    carried_uk = body.carried_fixpoint(consts_uk, [not k for k in known.carried])
    pred_uk = pred is not None and pred.depends_on([not k for k in known.pred_consts], carried_uk)
    sizes_known = all(known.implicit) and all(known.bounds) and not body.depends_on(consts_uk, carried_uk)
    if pred_uk or not sizes_known or all(carried_uk):
        avals = result_avals(loop.output_type, params, tracers, loop.feeds)
        return unknown_results(trace, loop.primitive, tracers, params, avals)
    carried_known = [not u for u in carried_uk]
    body_jaxpr, body_taken = body.known_part(known.consts, carried_known)
    pred_jaxpr, pred_taken = pred.known_part(known.pred_consts, carried_known) if pred else (None, [])
    ops = LoopOperands(
        [c for c, taken in zip(values.pred_consts, pred_taken) if taken],
        [c for c, taken in zip(values.consts, body_taken) if taken],
        values.implicit,
        values.bounds,
        [x for x, k in zip(values.carried, carried_known) if k],
    )
    operands, known_params = loop.equation(params, body_jaxpr, pred_jaxpr, ops)
    outs_known = bind_known(trace, loop.primitive, operands, known_params)
    implicit_out = outs_known[: body.nimplicit]
    avals = result_avals(loop.output_type, params, tracers, loop.feeds, implicit_out)
    outs_unknown = unknown_results(trace, loop.primitive, tracers, params, avals)
    unknown_carried = [o for o, u in zip(outs_unknown[body.nimplicit :], carried_uk) if u]
    return [*implicit_out, *interleave(carried_known, outs_known[body.nimplicit :], unknown_carried)]


# --- running iteration by iteration ----------------------------------------------------------------


def step_by_step(
    name: str,
    body: LoopBody,
    ops: LoopOperands,
    counted: tuple[int, ...],
    run_body: Callable[[list[Any]], list[Any]],
    run_predicate: Callable[[list[Any]], list[Any]] | None,
    size: Callable[[Any], Any],
    limit: int | None = None,
) -> tuple[list[Any], list[Any]]:
    """The carried sizes and values after the loop, one iteration at a time: ``run_body(args)``
    and ``run_predicate(args)`` (``while_loop``) evaluate the body and predicate, ``size`` makes a
    carried size one to pass on; a ``for_loop`` (``counted``: its trip count, first index and
    step) gives the body its index. With a ``limit`` (unrolling), more iterations, or a predicate
    whose value is not known, raise :class:`NeedsHost`."""
    implicit, carried = [size(d) for d in ops.implicit], list(ops.carried)
    k = 0
    while True:
        if run_predicate is None:
            more = k < counted[0]
        else:
            more = run_predicate([*ops.pred_consts, *implicit, *carried])[0]
            if limit is not None and not isinstance(more, (bool, np.bool_)):
                raise NeedsHost(f"{name} resizes arrays, its trip count known only at run time")
        if not more:
            return implicit, carried
        if limit is not None and k >= limit:
            raise NeedsHost(f"{name} resizes arrays in too many iterations to unroll")
        # np.int64, the same index type whether run from the host or unrolled: the same results.
        index = [np.int64(counted[1] + k * counted[2])] if run_predicate is None else []
        outs = run_body([*ops.consts, *implicit, *index, *carried])
        implicit, carried = [size(d) for d in outs[: body.nimplicit]], outs[body.nimplicit :]
        k += 1


def loop_host(loop: Loop, invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """A loop driven from Python: compiled whole when it can be (on capacity buffers, or a bounded
    scan in reverse mode: see :mod:`~catalyst_lite.compiler.capacity`); otherwise each iteration
    runs the body (and predicate) compiled for its current sizes."""
    ops = loop.operands(invals, params)
    body, pred = loop.body(params), loop.predicate(params)
    counted = tuple(int(x) for x in loop.counted(ops))
    shape = LoopShape(loop.primitive, body.jaxpr, body.nconsts, body.nimplicit,
                      None if pred is None else pred.jaxpr, 0 if pred is None else pred.nconsts)

    def replayed(prediction: Prediction, invals: list[Any]) -> tuple[list[Any], Any]:
        """The loop staged again at the sizes the run on capacity buffers found (see
        :mod:`~catalyst_lite.compiler.runner`)."""
        again = loop.operands(invals, params)
        return prediction.stage(again.pred_consts, again.consts, again.implicit, again.carried, *loop.counted(again))

    outs = run_compiled(shape, invals, lambda ran: record_replay(params, functools.partial(replayed, ran)),
                        ops.pred_consts, ops.consts, ops.implicit, ops.carried, *counted)
    if outs is not None:
        return outs
    run_body = runner_for(body.jaxpr, body.name)
    run_pred = None if pred is None else runner_for(pred.jaxpr, pred.name)
    implicit, carried = step_by_step(loop.primitive.name, body, ops, counted, lambda args: run_body(*args),
                                     None if run_pred is None else lambda args: run_pred(*args), int)
    return [*implicit, *carried]


# A resizing loop with at most this many iterations, its trip count known when the program is
# staged, is unrolled into one XLA program (each iteration staged at its own sizes).
UNROLL_LIMIT = 32


def loop_unrolled(loop: Loop, invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: a resizing loop whose trip count is known when staged (known
    bounds; a predicate known at every iteration, as a counter against an ``int`` argument staged
    as a value, as ``jax.jit``'s ``static_argnums`` does), each iteration staged at its own
    sizes. This replaces one dispatch per iteration (host-driven execution) by one for the whole
    program. Otherwise (a trip count known only at run time, more than :data:`UNROLL_LIMIT`
    iterations, a size that depends on data: ``to_dim``) :class:`NeedsHost`."""
    ops = loop.operands(invals, params)
    body, pred, name = loop.body(params), loop.predicate(params), loop.primitive.name
    counted = loop.counted(ops)
    if any(isinstance(x, Tracer) for x in counted):
        raise NeedsHost(f"{name} resizes arrays, its trip count known only at run time")
    counted = tuple(int(x) for x in counted)
    if counted and counted[0] > UNROLL_LIMIT:
        raise NeedsHost(f"{name} resizes arrays in too many iterations to unroll")

    def staged(part: LoopBody | None) -> Callable[[list[Any]], list[Any]] | None:
        return None if part is None else lambda args: eval_jaxpr(part.jaxpr, args, Mode.STAGED)

    implicit, carried = step_by_step(name, body, ops, counted, staged(body), staged(pred), to_dim, UNROLL_LIMIT)
    # Arrays, as the loop gives them (a carried literal is a Python number on JAX 0.7.1).
    return [*implicit, *map(jnp.asarray, carried)]
