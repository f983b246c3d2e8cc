"""The layout of a loop body, read by the loop primitives' rules and by :mod:`.capacity`.

A loop body's binders are ``*consts *implicit *prefix *carried`` (``prefix``: ``for_loop``'s index),
its results ``*implicit *carried`` (carried sizes, when the loop may resize arrays, and values);
``while_loop``'s predicate takes ``*consts *implicit *carried`` and returns one boolean."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..jax_extras import Jaxpr, OutputType, Var
from ..jax_extras.dynshape import JaxprTypeError, array_aval, input_type_of, output_type_of
from ..jax_extras.nested import NestedBody, interleave, retrace
from ..jax_extras.rules import batch_call, instantiate_zeros, jvp_call, zero_tangent
from ..jax_extras.tracing import forward_dependence, prune_jaxpr
from ..jax_extras.typecheck import check_carry, check_nested

__all__ = ["LoopBody", "resizes_arrays", "split_groups", "with_batch_axis"]


def split_groups(values: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    """Split ``values`` into consecutive groups of the given sizes (the last takes the rest)."""
    bounds = [0, *itertools.accumulate(sizes), len(values)]
    return [list(values[start:end]) for start, end in zip(bounds, bounds[1:])]


def resizes_arrays(body: Any, nconsts: int, nimplicit: int) -> bool:
    """Whether a loop ``body`` may resize the arrays it carries (returns a size other than its binder)."""
    return list(body.outvars[:nimplicit]) != list(body.invars[nconsts : nconsts + nimplicit])


@dataclass(frozen=True)
class LoopBody:
    """A loop body (or predicate) jaxpr with its binder layout, type analyses and transformed bodies."""

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

    @property
    def resizes_arrays(self) -> bool:
        return resizes_arrays(self.jaxpr, self.nconsts, self.nimplicit)

    def _inputs(self, const_marks: Sequence[bool], carried_marks: Sequence[bool]) -> list[bool]:
        return [*const_marks, *[False] * (self.nimplicit + self.nprefix), *carried_marks]

    def output_type(self, const_operand: Callable[[int], int], implicit_operand: Callable[[int], int],
                    same_operand: Callable[[int, int], bool]) -> OutputType:
        """The loop's output type, from the operands feeding each constant and carried size (as in
        Catalyst, an unchanged size keeps its operand; sizes equal at every iteration are one)."""
        consts, implicit, _, carried = self.groups
        operand_of = {v: const_operand(k) for k, v in enumerate(consts)}
        same, invariant = self.size_classes(lambda i, j: same_operand(implicit_operand(i), implicit_operand(j)))
        operand_of.update({v: implicit_operand(k) for k, v in enumerate(implicit) if invariant[k]})
        returned = [v if same[k] == k and not invariant[k] else None for k, v in enumerate(implicit)]
        position = {v: k for k, v in enumerate(implicit)}
        return output_type_of([v.aval for v in carried], returned, operand_of,
                              free=lambda v: same[position[v]])

    def size_classes(self, same_operand: Callable[[int, int], bool]) -> tuple[list[int], list[bool]]:
        """For each carried size the first of its class equal at every iteration, and whether no
        iteration changes it (classes refined until stable)."""
        n = self.nimplicit
        _, implicit, _, _ = self.groups
        returned = self.jaxpr.outvars[:n]
        binder = {v: k for k, v in enumerate(implicit)}
        same = [next(j for j in range(k + 1) if same_operand(j, k)) for k in range(n)]

        def key(k: int) -> tuple:
            out = returned[k]
            if not isinstance(out, Var):
                return same[k], "literal", int(out.val)
            return (same[k], "binder", same[binder[out]]) if out in binder else (same[k], "var", out)

        while True:
            keys = [key(k) for k in range(n)]
            refined = [keys.index(keys[k]) for k in range(n)]
            if refined == same:
                break
            same = refined
        unchanged = [k_[1] == "binder" and k_[2] == same[k] for k, k_ in enumerate(keys)]
        return same, unchanged

    def typecheck(self, operands: Sequence[Any]) -> None:
        """The body takes ``operands`` and returns its carried types (a predicate: one boolean)."""
        check_nested(self.jaxpr, operands, self.name)
        if self.predicate:
            outs = self.jaxpr.outvars
            if len(outs) != 1 or outs[0].aval.shape != () or outs[0].aval.dtype != bool:
                raise JaxprTypeError(f"{self.name} returns {[v.aval for v in outs]}, not one bool[]")
            return
        _, implicit, _, carried = self.groups
        check_carry([*implicit, *carried], self.jaxpr.outvars, self.nimplicit, self.name)

    def carried_fixpoint(self, const_marks: Sequence[bool], carried_marks: Sequence[bool],
                         keep: Callable[[Any], bool] = lambda a: True) -> list[bool]:
        """Which carried values depend, at some iteration, on the marked ones (of a type ``keep`` accepts)."""
        _, _, _, carried = self.groups
        marks = [m and keep(v.aval) for m, v in zip(carried_marks, carried)]
        while True:  # marks only grow: at most one pass per carried value
            out = forward_dependence(self.jaxpr, self._inputs(const_marks, marks))[self.nimplicit :]
            new = [m or (o and keep(v.aval)) for m, o, v in zip(marks, out, carried)]
            if new == marks:
                return marks
            marks = new

    def depends_on(self, const_marks: Sequence[bool], carried_marks: Sequence[bool]) -> bool:
        """Whether a carried size (a predicate: the predicate) depends on the marked values."""
        out = forward_dependence(self.jaxpr, self._inputs(const_marks, carried_marks))
        return any(out) if self.predicate else any(out[: self.nimplicit])

    def jvp(self, consts_nz: Sequence[bool], carried_nz: Sequence[bool]) -> NestedBody:
        """The body carrying the tangents of the ``carried_nz`` values (binders ``*consts *const_tangents
        *implicit *prefix *carried *carried_tangents``)."""
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

        return retrace(jvp_body, in_type, f"{self.name} (JVP)", self.nimplicit, like=self.jaxpr)

    def ignoring_tangents(self, carried_nz: Sequence[bool]) -> Jaxpr:
        """A predicate taking the tangents of the ``carried_nz`` values too (and ignoring them)."""
        _, _, _, carried = self.groups
        extra = [Var(v.aval) for v, nz in zip(carried, carried_nz) if nz]
        dbg = self.jaxpr.debug_info
        if isinstance(dbg.arg_names, tuple):
            dbg = dbg._replace(arg_names=dbg.arg_names + ("",) * len(extra))
        return self.jaxpr.replace(invars=[*self.jaxpr.invars, *extra], debug_info=dbg)

    def batched(self, consts_b: Sequence[bool], carried_b: Sequence[bool], size: int) -> NestedBody:
        """The body (or predicate) on a batch, the ``consts_b`` and ``carried_b`` values batched."""
        batched = self._inputs(consts_b, carried_b)
        in_type = with_batch_axis(input_type_of(self.jaxpr.invars), batched, size)
        out_batched = [False] if self.predicate else [*[False] * self.nimplicit, *carried_b]

        def batched_body(*args: Any) -> list[Any]:
            return batch_call(self.jaxpr, args, batched, size, out_batched)

        nimplicit = 0 if self.predicate else self.nimplicit
        return retrace(batched_body, in_type, f"{self.name} (batched)", nimplicit, like=self.jaxpr)

    def known_part(self, consts_known: Sequence[bool], carried_known: Sequence[bool]) -> tuple[Jaxpr, list[bool]]:
        """The body computing only sizes and ``carried_known`` values; which constants it takes."""
        keep = [*[False] * self.nconsts, *[True] * (self.nimplicit + self.nprefix), *carried_known]
        used_outputs = [True] if self.predicate else [*[True] * self.nimplicit, *carried_known]
        jaxpr, taken = prune_jaxpr(self.jaxpr, used_outputs, keep)
        taken_consts = taken[: self.nconsts]
        assert all(k for t, k in zip(taken_consts, consts_known) if t), "known values need unknown constants"
        return jaxpr, taken_consts


def _with_zeros(primals: Sequence[Any], tangents: Sequence[Any], nonzero: Sequence[bool]) -> list[Any]:
    """One tangent per primal: symbolic zeros where not ``nonzero``."""
    return interleave(nonzero, tangents, [zero_tangent(p) for p, nz in zip(primals, nonzero) if not nz])


def with_batch_axis(in_type: tuple, batched: Sequence[bool], size: int) -> tuple:
    """``in_type`` with a leading axis of ``size`` on the ``batched`` entries."""
    return tuple(
        (array_aval((size, *aval.shape), aval.dtype, aval.weak_type) if b else aval, explicit)
        for (aval, explicit), b in zip(in_type, batched)
    )
