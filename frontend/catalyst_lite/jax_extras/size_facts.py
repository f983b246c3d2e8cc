"""Size facts: what a traced program assumed about its sizes, checked before a call runs it.

A trace decides JAX's comparisons of symbolic sizes (see :mod:`.dimensions`); each decision is a
*fact* (a :class:`~.size_expressions.Fact`) about the program's **size inputs**, the lengths of
its abstracted axes and its integer arguments: ``n - 1 >= 0``, ``n == m``. A :class:`SizeScope`
keeps, for the program being traced, which variables are its size inputs and their names (a size
reads ``max(n - 1, 0)`` in messages), optionally a *point* (the sizes of one call, at which a
trace *guided* by it decides every comparison, see :mod:`catalyst_lite.compiler.assumptions`),
and the facts decided so far.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np
from jax._src import core, dtypes
from jax._src.interpreters import partial_eval as pe

from ..trace_context import current as current_context, scope as context_scope
from .size_expressions import NEGATED, Fact, SizeExpr, evaluate, same_expression, simplified
from .tracing import constant_value


def is_scalar_int_or_bool(x: Any) -> bool:
    """An integer or boolean scalar (``dtypes.issubdtype``: a PRNG key's dtype is not NumPy's)."""
    aval = core.get_aval(x)
    return aval.shape == () and (
        dtypes.issubdtype(aval.dtype, np.integer) or dtypes.issubdtype(aval.dtype, np.bool_)
    )


def _is_scalar_real(x: Any) -> bool:
    """An integer, boolean or floating scalar: what size arithmetic is made of (``x.shape[0] / 2``,
    ``jnp.ceil(n * 0.5).astype(int)``: a number under ``jax.jit``)."""
    aval = core.get_aval(x)
    return is_scalar_int_or_bool(x) or (aval.shape == () and dtypes.issubdtype(aval.dtype, np.floating))


# --- The scope of one top-level trace ------------------------------------------------------------


class SizeScope:
    """A program being traced: its size inputs (``names``), the guiding call's sizes (``point``), the
    facts decided so far; ``symbolic``: JAX failing on a size raises ``NeedsCallSizes``."""

    def __init__(self, names: Sequence[str], point: Sequence[Any] | None = None, symbolic: bool = True):
        self.names = list(names)
        self.point = None if point is None else list(point)
        self.symbolic = symbolic
        self.nested_jax_traces = 0  # JAX's own nested traces of symbolically-shaped functions open
        # Exceptions that left the user's functions JAX called back (patches.raised_in_users_code).
        self.users_exceptions: list[BaseException] = []
        # The site of the last NeedsCallSizes the user's code caused (dimensions._users_signal).
        self.signalled: str | None = None
        self.inputs: dict[Any, int] = {}  # variable of the trace -> input position
        # (ascending, at the point, loop starts) -> dimensions.GenericSizes, kept for the trace.
        self.generic_assignments: dict[tuple[bool, bool, bool, int], Any] = {}
        # Loop binders whose values the loop tells (their bounds, initial values): dimensions._loop_value
        self.loop_values: dict[Any, tuple] = {}
        self.loop_carries = False  # some of them are a while_loop's
        self.loop_dependent: dict[Any, bool] = {}  # variable -> computed from one of them
        # Slice bounds of run-time sign as staged (dimensions): no size stands for them.
        self.staged_slice_bounds: set[Any] = set()
        self.axis_inputs: set[int] = set()  # positions of sizes of abstracted axes
        self.facts: list[Fact] = []
        self._fact_keys: set[tuple] = set()
        self._terms: dict[Any, SizeExpr | None] = {}  # variable -> its term (see `term`)
        # Sizes JAX asked to be equal that are not (at the point): what "incompatible shapes" is
        # about; the last one, if JAX asked nothing about sizes since.
        self.disagreements: list[tuple[SizeExpr, SizeExpr]] = []
        self.last_disagreement: tuple[SizeExpr, SizeExpr] | None = None
        # JAX's code just took a branch the call's sizes take and generic ones do not (`n > 1`).
        self.last_branch_at_point = False
        self.undecided = 0  # comparisons only a call's sizes decide (`n < m`)
        self.decided_generically = False  # some comparison was decided at generic sizes
        # Conditions the code being traced runs under (enclosing for_loop bodies): facts need hold then.
        self.guards: list[SizeExpr] = []
        # Inside cond branches taken on a condition no size expression states (`i < n` of a while
        # loop's counter `i`): their static indices are checked where they run (dimensions).
        self.run_time_guards = 0
        self._guard_at_point: dict[int, tuple[SizeExpr, bool]] = {}  # id -> (guard, its value there)
        self.implied: dict[Any, SizeExpr] = {}  # boolean variable (`i < n and x[i] > 0`) -> what it implies

    def bind_inputs(self, tracers: Sequence[Any]) -> None:
        """The argument tracers of the trace, in input order (called once the trace creates them)."""
        in_shapes = {
            d.val if isinstance(d, core.Tracer) else d
            for t in tracers for d in getattr(t.aval, "shape", ()) if not isinstance(d, (int, np.integer))
        }
        for position, tracer in enumerate(tracers):
            if not is_scalar_int_or_bool(tracer):
                continue
            if tracer.val in in_shapes:
                self.axis_inputs.add(position)
            self.inputs[tracer.val] = position

    def term(self, tracer: Any) -> SizeExpr | None:
        """``tracer`` over the size inputs and free leaves (a loop's index), or ``None``."""
        if not isinstance(tracer, pe.DynamicJaxprTracer) or not _is_scalar_real(tracer):
            return None
        if isinstance(tracer.val, core.Literal):
            return SizeExpr.literal(tracer.val.val)
        if tracer.val not in self._terms:
            self._terms[tracer.val] = self._build(tracer)
        return self._terms[tracer.val]

    def expression(self, tracer: Any) -> SizeExpr | None:
        """``tracer`` over the size inputs alone (no free leaf), or ``None``."""
        term = self.term(tracer)
        return None if term is None or term.free else term

    def expression_at(self, tracer: Any, values: dict[int, SizeExpr | None]) -> SizeExpr | None:
        """``tracer`` over the size inputs, tracers in ``values`` (by ``id``) standing for its expressions."""
        memo: dict[int, SizeExpr | None] = dict(values)

        def term(t: Any) -> SizeExpr | None:
            if id(t) not in memo:
                if not _is_scalar_real(t):  # an array (`jnp.sum(jnp.full(n, 1.5))`): data, not a size
                    memo[id(t)] = None
                elif not isinstance(t, pe.DynamicJaxprTracer) or t.parent is None:
                    memo[id(t)] = self.term(t)
                else:
                    memo[id(t)] = self._build(t, term)
            return memo[id(t)]

        found = term(tracer)
        return None if found is None or found.free else found

    def _build(self, tracer: Any, term: Any = None) -> SizeExpr | None:
        term = term or self.term
        eqn = tracer.parent
        if eqn is None:
            const = constant_value(tracer)
            if const is not None and not isinstance(const, core.Tracer):
                return SizeExpr.literal(const)
            if isinstance(const, pe.DynamicJaxprTracer) and const._trace.is_valid():
                # A size captured from an enclosing program (a loop body using `x.shape[0] * 3`
                # from outside) is the expression it is there, relating to the body's sizes.
                return self.term(const)
            position = self.inputs.get(tracer.val)
            return SizeExpr("leaf", value=tracer.val) if position is None else SizeExpr.input(position)
        subprograms = any(isinstance(p, (core.Jaxpr, core.ClosedJaxpr)) for p in eqn.params.values())
        if subprograms or not eqn.in_tracers:
            return None  # control flow; or computed from nothing, not sizes (PennyLane's qubit allocation)
        args = [term(t) if isinstance(t, core.Tracer) else SizeExpr.literal(t) for t in eqn.in_tracers]
        if any(a is None for a in args):
            return None
        index = eqn.outvars.index(tracer.val) if eqn.primitive.multiple_results else 0
        is_bool = np.dtype(tracer.aval.dtype) == np.bool_
        is_float = dtypes.issubdtype(tracer.aval.dtype, np.floating)
        expr = SizeExpr(eqn.primitive.name, tuple(args), index, eqn.primitive, dict(eqn.params), is_bool,
                        is_float)
        return simplified(expr)

    def of_axes_only(self, tracer: Any) -> bool:
        """``tracer`` is computed from sizes of abstracted axes alone: a number under ``jax.jit``."""
        expr = self.expression(tracer) if isinstance(tracer, core.Tracer) else None
        return expr is not None and expr.inputs() <= self.axis_inputs

    def name(self, tracer: Any) -> str | None:
        """``n + 1``: a size tracer named by the inputs it is computed from (else ``None``)."""
        expr = self.expression(tracer)
        return None if expr is None else expr.render(self.names)

    def record(self, lhs: Any, rhs: Any, comparison: str, holds: bool, where: str) -> Fact | None:
        """Record ``(lhs comparison rhs) == holds`` over the size inputs (once); the fact, or ``None``."""
        lhs_expr, rhs_expr = self._side(lhs), self._side(rhs)
        if lhs_expr is None or rhs_expr is None:
            return None
        self.last_disagreement = None
        self.last_branch_at_point = False
        comparison = comparison if holds else NEGATED[comparison]
        if comparison in ("==", "<=", ">=") and same_expression(lhs_expr, rhs_expr):
            return None  # true whatever the sizes (two computations of one size)
        guard = self.guards[-1] if self.guards else None
        key = (id(lhs_expr), id(rhs_expr), comparison, id(guard))
        fact = Fact(lhs_expr, rhs_expr, comparison, where, guard)
        if key not in self._fact_keys:
            self._fact_keys.add(key)
            self.facts.append(fact)
        return fact

    def decides_at_point(self) -> bool:
        """Whether comparisons are decided at the guiding call's sizes: not inside a loop body the
        call does not run (its guard is false there), traced as for the sizes it runs at."""
        if self.point is None:
            return False
        if not self.guards:
            return True
        guard = self.guards[-1]
        if id(guard) not in self._guard_at_point:
            # a guard that reads sizes the call does not know may hold
            known = all(self.point[p] is not None for p in guard.inputs())
            holds = not known or bool(evaluate(guard, self.point.__getitem__, {}))
            self._guard_at_point[id(guard)] = (guard, holds)
        return self._guard_at_point[id(guard)][1]

    def _side(self, x: Any) -> SizeExpr | None:
        if isinstance(x, core.Tracer):
            return self.expression(x)
        numbers = (int, bool, float, np.integer, np.bool_, np.floating)
        return SizeExpr.literal(x) if isinstance(x, numbers) else None

    def note_disagreement(self, x: Any, y: Any) -> None:
        """JAX asked whether two sizes are equal, and they are not (at the point, or at generic
        sizes). Asking whether a size is -1, 0 or 1 (to broadcast it, say) is no disagreement."""
        pair = (self._side(x), self._side(y))
        if None in pair:
            return
        literals = [e.value for e in pair if e.op == "literal"]
        self.last_disagreement = None if len(literals) == 2 or {-1, 0, 1} & set(literals) else pair
        if self.last_disagreement is not None:
            self.disagreements.append(pair)


@contextlib.contextmanager
def runs_only_if_loop_runs(lower: Any, upper: Any, step: Any) -> Iterator[None]:
    """Trace a ``for_loop`` body: its facts (``len(x) >= 1`` for ``x[i]``) are guarded by "the loop
    runs" (when the bounds and step are size expressions)."""
    scope = current_scope()
    sides = [scope._side(x) for x in (lower, upper, step)] if scope is not None else [None]
    guard = None
    if None not in sides and any(side.op != "literal" for side in sides):
        lo, hi, by = sides
        zero = SizeExpr.literal(0)

        def both(a: SizeExpr, b: SizeExpr) -> SizeExpr:
            return simplified(SizeExpr("and", (simplified(a), simplified(b)), is_bool=True))

        up = both(SizeExpr.apply_op("gt", by, zero), SizeExpr.apply_op("lt", lo, hi))
        down = both(SizeExpr.apply_op("lt", by, zero), SizeExpr.apply_op("gt", lo, hi))
        guard = simplified(SizeExpr("or", (up, down), is_bool=True))
    with runs_only_if(guard):
        yield


@contextlib.contextmanager
def runs_only_if_chosen(preds: Sequence[Any], k: int) -> Iterator[None]:
    """Trace branch ``k`` of a ``cond`` (``len(preds)``: its ``otherwise``): the facts decided in it
    (``len(x) >= 1`` for ``x[i]`` under ``if i < len(x)``) are guarded by its predicate (or by the
    others failing), needed only by calls that take it. Predicates no size expressions add none."""
    if k < len(preds):
        guard = implied_condition(preds[k])
    else:  # every predicate fails: each one on sizes is false
        exprs = [value_at(p, (), ()) for p in preds]
        failing = [SizeExpr("not", (e,), is_bool=True) for e in exprs if e is not None]
        guard = failing[0] if failing else None
        for other in failing[1:]:
            guard = SizeExpr("and", (guard, other), is_bool=True)
    at_run_time = guard is None and any(isinstance(p, core.Tracer) for p in preds)
    with runs_only_if(None if guard is None else simplified(guard), at_run_time):
        yield


_CONVERSIONS = ("reshape", "convert_element_type")  # what makes a boolean a predicate


def implied_condition(x: Any) -> SizeExpr | None:
    """A condition on sizes that holds wherever the boolean ``x`` does: ``x`` itself when it is one
    (``i < n``), or the one noted of it by :func:`note_implied` (``i < n and x[i] > 0``: ``i < n``)."""
    scope, exact = current_scope(), value_at(x, (), ())
    while exact is None and scope is not None and isinstance(x, pe.DynamicJaxprTracer):
        if x.val in scope.implied:
            return scope.implied[x.val]
        eqn = x.parent  # through the conversions to a predicate (`reshape`, `convert_element_type`)
        if eqn is None or eqn.primitive.name not in _CONVERSIONS or len(eqn.in_tracers) != 1:
            return None
        x = eqn.in_tracers[0]
    return exact


def note_implied(x: Any, condition: SizeExpr | None) -> None:
    """Note that the boolean ``x`` holds only where ``condition`` (on sizes) does."""
    scope = current_scope()
    if scope is not None and condition is not None and isinstance(x, pe.DynamicJaxprTracer):
        scope.implied[x.val] = condition


def value_at(x: Any, binders: Sequence[Any], values: Sequence[Any]) -> SizeExpr | None:
    """``x`` (a loop's predicate) over the size inputs, ``binders`` standing for ``values``; or ``None``."""
    scope = current_scope()
    if scope is None or not isinstance(x, core.Tracer):
        return None
    standing = {id(b): scope._side(v) for b, v in zip(binders, values) if isinstance(b, core.Tracer)}
    return scope.expression_at(x, standing)


@contextlib.contextmanager
def runs_only_if(guard: SizeExpr | None, at_run_time: bool = False) -> Iterator[None]:
    """Trace code running only when ``guard`` holds (and enclosing guards): its facts are guarded by it.
    ``at_run_time`` (no guard): it runs only under a condition on run-time values (``i < n`` of a
    while loop's counter): its checks of sizes are made where it runs, not before the call."""
    scope = current_scope()
    if at_run_time and scope is not None:
        scope.run_time_guards += 1
        try:
            yield
        finally:
            scope.run_time_guards -= 1
        return
    if guard is None or scope is None:
        yield
        return
    if scope.guards:
        guard = SizeExpr("and", (scope.guards[-1], guard), is_bool=True)
    scope.guards.append(guard)
    try:
        yield
    finally:
        scope.guards.pop()


def describe_aval(aval: Any) -> str:
    """``f64[n + 1,3]``: an aval for messages, sizes named by the inputs they come from (``?``: unknown)."""
    scope = current_scope()
    names = [str(d) if not isinstance(d, core.Tracer) else scope.name(d) if scope is not None else None
             for d in aval.shape]
    dtype = np.dtype(aval.dtype)
    kind = {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}[dtype.kind]
    short = kind if kind == "bool" else f"{kind}{dtype.itemsize * 8}"
    return f"{short}[{','.join('?' if n is None else n for n in names)}]"


def size_scope(scope: SizeScope) -> contextlib.AbstractContextManager:
    """Make ``scope`` the calling thread's current one for the block (a trace of a program)."""
    return context_scope(size_scopes=(*current_context().size_scopes, scope))


def current_scope() -> SizeScope | None:
    """The scope of the program the calling thread is tracing (``None`` outside one)."""
    stack = current_context().size_scopes
    return stack[-1] if stack else None
