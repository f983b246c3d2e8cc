"""Symbolic sizes inside JAX's own shape logic, written for Python ints (or ``jax.export``
polynomials) where a size here is an ``int64[]`` dimension tracer of the program being traced:

1. ``min_dim``/``max_dim`` stage ``min``/``max``, so the result is again a dimension;
2. a comparison used as a Python boolean is decided at generic, large, distinct sizes
   (:func:`generic_values`), or at a guiding call's, and recorded as a fact of the program
   (:mod:`.size_facts`), checked before a call runs; inside a loop body, as an ``assume_size``
   equation checked at specialization (:class:`~catalyst_lite.errors.SizeAssumptionError`).
   Sizes computed separately (``x[1:]``, ``x[:-1]``) are equal when equal at every assignment;
3. a size tracer takes jax.numpy's paths for ``jax.export`` symbolic dimensions.

JAX's own comparisons are assumed when computed from sizes and integer arguments; the user's only
when computed from sizes of abstracted axes: ``if n > 3:`` on an integer argument keeps JAX's
``TracerBoolConversionError``, as under ``jax.jit`` (docs/architecture.md, "How a call picks its
program").
"""

from __future__ import annotations

import contextlib
import operator
import sys
import weakref
from typing import Any, Callable, Iterator

import jax.numpy as jnp
import numpy as np
from jax import errors
from jax._src import core, dtypes
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax
from jax._src.numpy import indexing as jnp_indexing

from ..errors import SizeAssumptionError, SymbolicShapeError
from ..trace_context import current as current_context, scope as context_scope
from .frames import is_library_file
from .rules import size_check_primitive
from .patches import NeedsCallSizes, error_standing_for, is_active, repair
from .patches import symbolic_trace
from .size_expressions import COMPARISON_NAMES, NEGATED, SizeExpr, evaluate
from .size_facts import SizeScope, current_scope, is_scalar_int_or_bool

# Generic sizes: large (so that `n >= 1`, `n - 1 >= 0` hold, as for any non-trivial size),
# distinct (so that two unrelated sizes are never assumed equal) and multiples of every number up
# to 16 (so that `(n // 3) * 3` is `n`, as it is whenever a reshape to `(-1, 3)` is valid: such
# divisions are checked at call time, see `requirements`).
_GENERIC_STRIDE = 720720  # lcm(1, ..., 16)
_GENERIC_SIZE = 1024 * _GENERIC_STRIDE

# Iterations a for_loop's index also takes, counted from its first and from its last value.
_LOOP_OFFSETS = (1, 2, 3)

# comparison primitive -> its Python spelling -> the Python operator
_COMPARISONS = {getattr(lax, f"{name}_p"): spelled for name, spelled in COMPARISON_NAMES.items()}
_OPERATORS = {spelled: getattr(operator, name) for name, spelled in COMPARISON_NAMES.items()}


# --- Sizes as values ---------------------------------------------------------------------------


class GenericSizes:
    """Generic values of size-expression leaves (numbered as met) and of terms: two assignments order
    the leaves oppositely (``ascending``); inputs in ``point`` (a guiding call's) take its values."""

    def __init__(self, ascending: bool, point: dict[int, int] | None = None, loop_starts: bool = False,
                 loop_offset: int = 0):
        self.step = _GENERIC_STRIDE if ascending else -_GENERIC_STRIDE
        self.point = point if point is not None else {}
        # (and `loop_starts`, `loop_offset`: what loop binders take, see `_loop_value`)
        self.ascending = ascending
        self.loop_starts = loop_starts
        self.loop_offset = loop_offset
        self.index: dict[Any, int] = {}
        # Values by term: terms share subexpressions, and walking trees would be exponential.
        self.computed: dict[Any, Any] = {}

    def __getitem__(self, leaf: Any) -> int:
        if leaf in self.point:
            return self.point[leaf]
        return _GENERIC_SIZE + self.step * self.index.setdefault(leaf, len(self.index))

    def _leaf(self, key: Any) -> int:
        # an input's position, or a free leaf's variable (a loop's index may tell its value)
        value = None if isinstance(key, int) else _loop_value(key, self)
        return self[key] if value is None else value

    def value(self, term: SizeExpr) -> Any:
        """The value of ``term`` in this assignment."""
        if term.op == "literal":
            return term.value
        return evaluate(term, self._leaf, self.computed, oversized=self.__getitem__)


def generic_values(*sizes: Any, at_point: bool = True) -> list[tuple[Any, ...]] | None:
    """The values of ``sizes`` (tracers or ints) under each :class:`GenericSizes` assignment (at the
    guiding call's sizes, if any and ``at_point``), or ``None`` if one is no size expression."""
    scope = current_scope()
    terms = [_term(d, scope) for d in sizes]
    if any(t is None for t in terms):
        return None
    at_point = at_point and scope is not None and scope.decides_at_point()
    assignments = [(True, False, 0), (False, False, 0)]
    if scope is not None and scope.loop_carries:
        # while_loop's carried integers at their initial values (`k = 0`) too: generic ones say
        # nothing of how small they are.
        assignments.append((True, True, 0))
    if scope is not None and _depends_on_loop_values(sizes, scope):
        # A for_loop's index near its first and last values too, a while_loop's integers a few
        # steps up from their initial ones: a size clamped by a constant (`x[i // 2:i]` of a
        # fixed-length `x`) may agree at both ends and differ in between.
        assignments += [(ascending, False, k) for k in _LOOP_OFFSETS for ascending in (True, False)]
        if scope.loop_carries:
            assignments += [(True, True, k) for k in _LOOP_OFFSETS]
    points = [tuple(_assignment(scope, ascending, at_point, starts, offset).value(t) for t in terms)
              for ascending, starts, offset in assignments]
    if at_point and _depends_on_loop_values(sizes, scope):
        # A loop's index or counter at this call's sizes takes this call's values only; a program
        # traced for the call also serves others, whose loops run over other values, and whose
        # decisions about those values nothing checks: they must hold at generic sizes too.
        points += generic_values(*sizes, at_point=False)
    return points


def _term(d: Any, scope: Any) -> SizeExpr | None:
    """A size tracer's term (see :meth:`~.size_facts.SizeScope.term`), an int as a literal."""
    if isinstance(d, (int, np.integer)):
        return SizeExpr.literal(int(d))
    return (scope if scope is not None else SizeScope([])).term(d)


def _depends_on_loop_values(sizes: tuple, scope: Any) -> bool:
    """One of ``sizes`` is computed from a loop body's index or carried integer."""
    if not scope.loop_values:
        return False
    for size in sizes:
        if isinstance(size, pe.DynamicJaxprTracer) and not isinstance(size.val, core.Literal):
            known = scope.loop_dependent.get(size.val)
            if known is None:
                known = scope.loop_dependent[size.val] = any(
                    t.val in scope.loop_values for t in (size, *_ancestors(size)))
            if known:
                return True
    return False


def _assignment(scope: Any, ascending: bool, at_point: bool, loop_starts: bool = False,
                loop_offset: int = 0) -> GenericSizes:
    """The scope's assignment of generic values (per ordering, at its point or not), kept for the
    trace: each question about a chain of sizes (``x[::2]`` ten times) evaluates only what is new."""
    if scope is None:
        return GenericSizes(ascending, None, loop_starts, loop_offset)
    key = (ascending, at_point, loop_starts, loop_offset)
    symbols = scope.generic_assignments.get(key)
    if symbols is None:
        point = {p: v for p, v in enumerate(scope.point) if v is not None} if at_point else None
        symbols = scope.generic_assignments[key] = GenericSizes(ascending, point, loop_starts, loop_offset)
    return symbols


def _loop_value(var: Any, symbols: GenericSizes) -> Any:
    """A loop binder's value in this assignment, if the loop tells it (a ``for_loop`` index: its first or
    last value; a ``while_loop`` carried integer: its initial value in a third assignment)."""
    scope = current_scope()
    entry = scope.loop_values.get(var) if scope is not None else None
    if entry is None:
        return None
    if entry[0] == "while":
        start = _size_value(entry[1], symbols) if symbols.loop_starts else None
        return None if start is None else start + symbols.loop_offset
    lower, upper, step = (_size_value(b, symbols) for b in entry[1:])
    if lower is None or upper is None or not step:
        return None
    count = len(range(lower, upper, step))
    if not count:
        return None  # the loop does not run at these sizes: nothing to tell
    iteration = min(symbols.loop_offset, count - 1)
    return lower + (iteration if symbols.ascending else count - 1 - iteration) * step


def note_loop_index(index: Any, lower: Any, upper: Any, step: Any) -> None:
    """``index`` (a ``for_loop`` body's tracer) runs over ``range(lower, upper, step)``."""
    scope = current_scope()
    if scope is not None and isinstance(index, pe.DynamicJaxprTracer):
        scope.loop_values[index.val] = ("for", lower, upper, step)


def note_loop_carries(carried: Any, initial: Any) -> None:
    """``carried`` (a ``while_loop`` body's or predicate's tracers) start from ``initial``."""
    scope = current_scope()
    if scope is None:
        return
    for binder, init in zip(carried, initial):
        if isinstance(binder, pe.DynamicJaxprTracer) and is_scalar_int_or_bool(binder):
            scope.loop_values[binder.val] = ("while", init)
            scope.loop_carries = True


def _size_value(d: Any, symbols: GenericSizes) -> Any:
    """The value of a size tracer or int in ``symbols`` (``None``: no size expression)."""
    term = _term(d, current_scope()) if isinstance(d, (pe.DynamicJaxprTracer, int, np.integer)) else None
    return None if term is None else symbols.value(term)


def computed_from_sizes(x: Any) -> bool:
    """``x`` is a scalar tracer of a catalyst_lite trace computed from sizes and numbers only
    (``n + 1``, ``x.shape[0] / 2``: a number under ``jax.jit``)."""
    return isinstance(x, pe.DynamicJaxprTracer) and _term(x, current_scope()) is not None


def compares_counts(x: Any) -> bool:
    """``x`` compares integers computed from sizes, integer arguments and loop counters (``i <
    len(x)``, ``i > 0`` of a while loop's counter ``i``): what guards an index."""
    if not (isinstance(x, pe.DynamicJaxprTracer) and x.parent is not None and x.parent.primitive in _COMPARISONS):
        return False
    scope = current_scope()
    return all(is_scalar_int_or_bool(t) and _term(t, scope) is not None for t in x.parent.in_tracers)


def is_size_expression(x: Any) -> bool:
    """``x`` is an integer tracer of a catalyst_lite trace computed from sizes and numbers only."""
    return computed_from_sizes(x) and is_scalar_int_or_bool(x)


# --- Assumptions, checked at specialization ----------------------------------------------------


def _check_assumption(
    lhs: Any, rhs: Any, *, comparison: str, holds: bool, where: str, statement: str = "", refusal: str = ""
) -> list:
    """Raise if ``(lhs comparison rhs) != holds`` for these concrete sizes (``refusal``: JAX's
    ``IndexError`` at such sizes, which the error then is)."""
    op = _OPERATORS[comparison]
    lhs, rhs = np.asarray(lhs).item(), np.asarray(rhs).item()
    if bool(op(lhs, rhs)) != holds:
        comparison = comparison if holds else NEGATED[comparison]
        stated = f"{statement} ({lhs} {comparison} {rhs})" if statement else f"{lhs} {comparison} {rhs}"
        if refusal:
            raise error_standing_for(SizeAssumptionError, IndexError)(
                f"{where}: {refusal} (traced assuming {stated}, false for these arguments), "
                "as jax.jit raises."
            )
        raise SizeAssumptionError(
            f"{where}: the program was traced with symbolic sizes assuming that {stated}, which "
            "is false for these arguments. The sizes are computed inside a loop, so the call "
            "cannot be given a program traced for them; JAX takes a different path for such "
            "sizes (e.g. an empty array or a negative index): avoid the case, or make the size "
            "static."
        )
    return []


def _assumption_holds(lhs: Any, rhs: Any, *, comparison: str, holds: bool, **_: Any) -> Any:
    """Whether the assumption holds, as a flag (traced, on a loop's capacity buffers)."""
    answer = _OPERATORS[comparison](lhs, rhs)
    return answer if holds else jnp.logical_not(answer)


assume_size_p = size_check_primitive("assume_size", _check_assumption, _assumption_holds)


# frame of a trace -> the assumptions already recorded in it
_recorded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _assume(
    lhs: Any, rhs: Any, comparison: str, holds: bool, in_program: bool = True, refusal: str = ""
) -> None:
    """Record ``(lhs comparison rhs) == holds`` as a fact and (``in_program``) an ``assume_size``
    equation (``refusal``: see :func:`_check_assumption`)."""
    where = user_call_site()
    scope = current_scope()
    staged = in_program and all(is_scalar_int_or_bool(x) for x in (lhs, rhs))
    # In a branch taken on run-time values, no fact: checked only where the branch runs (by the
    # equation, or by JAX's shape rule at the sizes there, which re-runs).
    fact = None
    if scope is not None and not (scope.run_time_guards and (staged or _in_shape_rule())):
        fact = scope.record(lhs, rhs, comparison, holds, where)
    if not staged:
        return  # (a comparison of floats computed from size inputs is a fact: checked before a call)
    trace = next(x._trace for x in (lhs, rhs) if isinstance(x, pe.DynamicJaxprTracer))
    if scope is not None and scope.run_time_guards and isinstance(core.trace_ctx.trace, pe.DynamicJaxprTrace):
        trace = core.trace_ctx.trace  # the branch's: checked where it runs
    recorded = _recorded.setdefault(trace.frame, set())
    key = (_identity(lhs), _identity(rhs), comparison, holds)
    if key in recorded:
        return
    recorded.add(key)
    statement = fact.statement(scope.names) if fact is not None else ""
    with core.set_current_trace(trace):
        assume_size_p.bind(lhs, rhs, comparison=comparison, holds=holds, where=where, statement=statement,
                           refusal=refusal)


def _identity(x: Any) -> Any:
    """What a side of an assumption is: its variable (kept alive by the trace) or its value."""
    if isinstance(x, pe.DynamicJaxprTracer):
        return ("value", int(x.val.val)) if isinstance(x.val, core.Literal) else x.val
    return ("value", int(x))


_JAX_WRAPPERS = ("jax._src.traceback_util", "jax._src.pjit", "jax._src.api", "jax._src.linear_util")


def user_call_site() -> str:
    """``file:line (in jax function)``: the user's line and the JAX function it called, if any."""
    frame, jax_function = sys._getframe(1), ""
    while frame is not None and is_library_file(frame.f_code.co_filename):
        module = frame.f_globals.get("__name__", "")
        if module.startswith("jax.") and not module.startswith(_JAX_WRAPPERS):
            jax_function = f"{module.removeprefix('jax._src.')}.{frame.f_code.co_name}"
        frame = frame.f_back
    if frame is None:
        return jax_function or "?"
    called = f" (in {jax_function})" if jax_function else ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}{called}"


def _in_shape_rule() -> bool:
    """Shape rules (the eval trace current) decide facts but no equations: jax.jit re-runs them."""
    return isinstance(core.trace_ctx.trace, core.EvalTrace)


# Libraries whose NumPy shape arithmetic on a size keeps it as a boxed tracer (see _array).
# PennyLane and its device plugins (`pennylane_lightning`) ask too: "pennylane" without its dot.
_LIBRARIES = ("jax.", "numpy.", "scipy.", "pennylane", "autoray.", "catalyst_lite.")


def _asked_by_library(libraries: tuple[str, ...] = ("jax.",)) -> bool:
    """Whether the caller of the patched ``__bool__``/``__index__``/``__array__`` is ``libraries``' code:
    the one decision read from a frame (JAX asks from some forty places; tests/test_layering.py),
    the caller's caller's caller: past the patched method and :func:`.patches.repair`'s wrapper."""
    module = sys._getframe(3).f_globals.get("__name__", "")
    return module.startswith(libraries)


def _answers(points: list[tuple[Any, ...]], comparison: str) -> set[bool]:
    """The answers of ``lhs comparison rhs`` at each ``(lhs, rhs)`` of ``points``."""
    return {bool(_OPERATORS[comparison](a, b)) for a, b in points}


def decide_size_comparison(
    lhs: Any, rhs: Any, comparison: str, generic_answer: bool | None = None, in_program: bool = True
) -> bool | None:
    """Decide ``lhs comparison rhs`` of size expressions, record it as a fact and return it; ``None``
    if undecided. ``generic_answer``: the answer at generic sizes (a guided trace uses the call's);
    ``in_program``: also as an ``assume_size`` equation (checked where it runs)."""
    scope = current_scope()
    points = generic_values(lhs, rhs)
    if points is None or not (_checkable(lhs, scope) and _checkable(rhs, scope)):
        return None
    answers = _answers(points, comparison)
    if generic_answer is not None and (scope is None or not scope.decides_at_point()):
        answers = {generic_answer}
    if len(answers) != 1:
        if scope is not None:
            scope.undecided += 1  # it depends on how unrelated sizes compare: a call can say
        return None
    (answer,) = answers
    if scope is not None and not scope.decides_at_point():
        scope.decided_generically = True
    _assume(lhs, rhs, comparison, answer, in_program=in_program and not _in_shape_rule())
    if scope is not None and (comparison, answer) in (("==", False), ("!=", True)):
        scope.note_disagreement(lhs, rhs)  # `if a.shape != b.shape: raise`: a call may say equal
    return answer


def _checkable(side: Any, scope: Any) -> bool:
    """A side of a comparison whose answer can be a fact: a size, or a number computed from size
    inputs alone (``x.shape[0] / 2``: facts are checked before a call; no loop index is known then)."""
    if not isinstance(side, core.Tracer) or is_scalar_int_or_bool(side):
        return True
    return scope is not None and scope.expression(side) is not None


def _note_branch_at_point(lhs: Any, rhs: Any, comparison: str, answer: bool | None) -> None:
    """In a guided trace, note when JAX's code takes a branch generic sizes do not (``n > 1`` false
    at n = 1): an error JAX raises next is its shape logic refusing that branch symbolically."""
    scope = current_scope()
    if answer is None or scope is None or not scope.decides_at_point():
        return
    generic = generic_values(lhs, rhs, at_point=False)
    if generic is not None and _answers(generic, comparison) == {not answer}:
        scope.last_branch_at_point = True


def _decide_truth(tracer: pe.DynamicJaxprTracer) -> tuple[bool | None, tuple | None]:
    """A size tracer's truth decided (a comparison, also returned, or an integer ``!= 0``), or ``None``."""
    if tracer.parent is not None and tracer.parent.primitive in _COMPARISONS:
        comparison = (*tracer.parent.in_tracers, _COMPARISONS[tracer.parent.primitive])
        return decide_size_comparison(*comparison), comparison
    if dtypes.issubdtype(tracer.aval.dtype, np.integer):
        return decide_size_comparison(tracer, 0, "!="), None
    return None, None


@repair(pe.DynamicJaxprTracer, "__bool__")
def _bool(original, self):
    """JAX's shape logic branching on comparisons of sizes (`if d < 0:`) or on sizes (`if x.size:`)
    gets an assumption, decided at generic sizes (or the guiding call's), checked for every call."""
    if _asked_by_library():
        answer, comparison = _decide_truth(self)
        if comparison is not None:
            _note_branch_at_point(*comparison, answer)
            if answer is None and _in_shape_rule():
                # Sizes a shape rule cannot relate: those of a nested JAX trace.
                raise NotImplementedError(
                    "a JAX shape rule compares symbolic sizes inside a nested JAX trace (a "
                    "jax.lax control-flow primitive), which JAX 0.7's dynamic-shape path cannot do"
                )
        if answer is not None:
            return answer
        with _needs_a_number(self, "JAX's code branching on sizes it cannot decide"):
            return original(self)
    answer = _decide_user_size_question(self, original)
    return original(self) if answer is None else answer


def python_truth_of_sizes(x: Any) -> Any:
    """``bool(x)`` when ``x`` asks about sizes of abstracted axes alone (``x.shape[0] > 2``), as a Python
    ``if`` would (for autograph, whose ``if`` traces both branches); ``x`` otherwise."""
    if not (is_active() and isinstance(x, pe.DynamicJaxprTracer) and np.shape(x) == ()):
        return x
    scope = current_scope()
    expr = scope.expression(x) if scope is not None else None
    # (A value computed from constants alone, a postselected measurement say, stays traced.)
    if expr is not None and expr.inputs() and expr.inputs() <= scope.axis_inputs:
        return bool(x)  # the patched __bool__, asked by us: the user's question
    return x


def _of_axes_only(tracer: Any) -> bool:
    scope = current_scope()
    return scope is not None and scope.of_axes_only(tracer)


@contextlib.contextmanager
def _needs_a_number(tracer: Any, site: str, a_number_under_jit: bool | None = None) -> Iterator[None]:
    """Code asking for the Python value of ``tracer``: when ``a_number_under_jit`` (default: it is a
    size), the call's sizes give it (the signal); otherwise JAX's error, as under ``jax.jit``."""
    asked_by_user = a_number_under_jit is not None
    try:
        yield
    except (errors.ConcretizationTypeError, errors.TracerIntegerConversionError,
            errors.TracerBoolConversionError, errors.TracerArrayConversionError) as err:
        if a_number_under_jit is None:
            a_number_under_jit = is_size_expression(tracer)
        if symbolic_trace() and a_number_under_jit:
            signal = _users_signal if asked_by_user else NeedsCallSizes.standing_for
            raise signal(err, site) from err
        scope = current_scope()
        if a_number_under_jit and scope is not None and _depends_on_loop_values((tracer,), scope):
            # Not a Python `if` of the user's: no call's sizes can give a loop's index.
            raise error_standing_for(SymbolicShapeError, type(err))(
                f"A size computed from a loop's index or counter is needed as a Python number "
                f"({site}), but its value is only known when the loop runs. Compute sizes "
                "inside a loop from sizes known before it (e.g. slice a fixed length with "
                "lax.dynamic_slice and mask the rest with jnp.where)."
            ) from err
        raise


def _decide_user_size_question(tracer: pe.DynamicJaxprTracer, original: Any) -> bool | None:
    """The user's own ``if x.shape[0] > 0:`` on sizes of abstracted axes alone (numbers under
    ``jax.jit``) is decided as JAX's questions are (how unrelated sizes compare: by the call's)."""
    scope = current_scope()
    if scope is None or not scope.of_axes_only(tracer):
        return None
    answer, comparison = _decide_truth(tracer)
    if answer is None and (comparison is not None or dtypes.issubdtype(tracer.aval.dtype, np.integer)):
        # The call's sizes answer it (see compiler.assumptions).
        try:
            return original(tracer)
        except errors.TracerBoolConversionError as err:
            raise _users_signal(err, "a comparison of unrelated sizes") from err
    return answer


def _users_signal(err: BaseException, site: str) -> NeedsCallSizes:
    """The signal for the user's code asking a size of abstracted axes for its Python value, noted
    in the size scope: code up to the trace's boundary may replace it (NumPy, the user's ``except``)."""
    scope = current_scope()
    if scope is not None:
        scope.signalled = site
    return NeedsCallSizes.standing_for(err, site)


@repair(core, "definitely_equal")
def _definitely_equal(original, x, y):
    """Sizes computed separately (`x[1:]` and `x[:-1]`) equal at generic sizes (or the guiding
    call's) are assumed equal (a fact); unequal ones are noted, to name them if the trace fails."""
    if original(x, y):
        return True
    if not (isinstance(x, core.Tracer) or isinstance(y, core.Tracer)):
        return False
    if current_context().static_index and any(_is_zero(v) for v in (x, y)):
        return _axis_is_empty(x, y)
    points = generic_values(x, y)
    if points is None:
        return False
    # No run reaches a negative size: `x[:n - k]` and `jnp.ones(n - k)` in a while_loop
    # counting `k` to `n` are equal wherever both are sizes (checked when the program runs).
    points = [(x_value, y_value) for x_value, y_value in points if min(x_value, y_value) >= 0]
    if not points or any(x_value != y_value for x_value, y_value in points):
        scope = current_scope()
        if scope is not None:
            scope.note_disagreement(x, y)
        return False
    _assume(x, y, "==", True, in_program=not _in_shape_rule())
    return True


def _is_zero(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and v == 0


def _axis_is_empty(x: Any, y: Any) -> bool:
    """JAX's indexing asking whether the axis of an integer index is empty (it then raises
    IndexError): decided as a fact, so that a call where it is empty is traced at its sizes and gets
    JAX's error; a size computed in a loop, or an index in a branch taken on run-time values, is
    checked where it runs, with JAX's error."""
    scope = current_scope()
    in_branch = scope is not None and scope.run_time_guards > 0  # (a fact would hold for every call)
    answer = None if in_branch else decide_size_comparison(x, y, "==", in_program=False)
    if answer is None and all(is_scalar_int_or_bool(v) for v in (x, y)) and not _in_shape_rule():
        _assume(x, y, "==", False, refusal="index is out of bounds for an axis of size 0")
    return bool(answer)


@repair(jnp_indexing, "index_to_gather")
def _index_to_gather(original, *args, **kwargs):
    """jax.numpy's indexing (reads, ``.at[...]`` updates) asks ``definitely_equal(axis, 0)`` of the
    axis of each integer index: only there is a size compared with 0 a fact (see definitely_equal)."""
    with context_scope(static_index=True):
        return original(*args, **kwargs)


@repair(pe.DynamicJaxprTracer, "_short_repr")
def _short_repr(original, self):
    """A size prints as the expression of the arguments it comes from (`n + 1`), not `JitTracer<...>`."""
    scope = current_scope()
    name = scope.name(self) if scope is not None else None
    return name if name is not None else original(self)


# --- Size expressions are symbolic dimensions -----------------------------------------------------


@repair(core, "is_symbolic_dim")
def _is_symbolic_dim(original, v):
    """jax.numpy's code paths for `jax.export`'s symbolic dimensions (`arange(n)`, slices,
    `linspace(0, 1, n)`) compute with overloaded operators, which dimension tracers have too."""
    return original(v) or is_size_expression(v)


@repair(core, "concrete_or_error")
def _concrete_or_error(original, force, val, context=""):
    """A size tracer passes `concrete_or_error(None, x)` unchanged, as a `jax.export` dimension
    does, and `concrete_or_error(operator.index, num)` (`jnp.geomspace`'s `num`, for `linspace`)."""
    if force in (None, operator.index) and is_size_expression(val):
        return val
    with _needs_a_number(val, "JAX's code needing a size as a Python value"):
        return original(force, val, context)


@repair(core.DShapedArray, "sharding", as_property=True)
def _sharding(original, self):
    """`DShapedArray.sharding` has an empty spec whatever the rank; jax.numpy indexing reads one
    entry per axis (`x_spec[axis]`): one unconstrained entry per axis, like `ShapedArray`."""
    from jax.sharding import NamedSharding, PartitionSpec

    unconstrained = PartitionSpec(*([None] * len(self.shape)))
    return NamedSharding(original.fget(self).mesh, unconstrained)


@repair(core.DShapedArray, "__init__")
def _init(original, self, shape, dtype, weak_type=False):
    """`DShapedArray`'s dtype is a NumPy dtype, as `ShapedArray`'s: some dtype rules give an aval
    for "its dtype" (`_lu_dtype_rule`), which would print as `f64[n,n]` and fail type promotion."""
    original(self, shape, dtypes.canonicalize_dtype(dtype, allow_extended_dtype=True), weak_type)


@repair(core.DShapedArray, "memory_space", as_property=True)
def _memory_space(original, self):
    """`core.typematch` (lax.switch comparing its branches' results, as jnp.piecewise does) reads
    `memory_space`, which ShapedArray has and DShapedArray lacks: arrays live on the device."""
    return core.MemorySpace.Device


@repair(pe.DynamicJaxprTracer, "__array__")
def _array(original, self, dtype=None, copy=None):
    """A size in libraries' NumPy shape arithmetic is a 0-d object array (as a `jax.export` dimension);
    the user's NumPy on a size of abstracted axes (or a float of them) asks for the call's sizes."""
    if not computed_from_sizes(self):
        return original(self, dtype, copy)
    by_jax = _asked_by_library(("jax.", "numpy."))
    by_library = by_jax or _asked_by_library(_LIBRARIES)
    of_axes = _of_axes_only(self)
    as_object = dtype is None or np.dtype(dtype) == np.dtype(object)
    if not is_scalar_int_or_bool(self):  # a float: no size, a number of the user's only
        with _needs_a_number(self, "NumPy on a size", None if by_library else of_axes):
            return original(self, dtype, copy)
    if as_object and (by_jax or (by_library and not of_axes)):
        boxed = np.empty((), dtype=object)
        boxed[()] = self
        return boxed
    with _needs_a_number(self, "NumPy on a size", None if by_jax else of_axes):
        return original(self, dtype, copy)


@repair(pe.DynamicJaxprTracer, "__hash__")
def _hash(original, self):
    """Libraries hash sizes by identity (`jax.jit`'s static arguments, PennyLane's wire labels); the
    user's hash (`{3: w}.get(x.shape[0])`) takes the size's `__index__`, as `int()` does."""
    if is_size_expression(self):
        if not _asked_by_library(_LIBRARIES):
            return hash(operator.index(self))  # the patched __index__
        return object.__hash__(self)
    return original(self)


@repair(pe.DynamicJaxprTracer, "__format__")
@repair(pe.DynamicJaxprTracer, "__str__")
def _text(original, self, *spec):
    """The user's ``str(x.shape[0])``, ``f"{x.shape[0] / 2}"`` of abstracted axes (a number's digits
    under jax.jit) take the number, as ``int()`` does: the size's name would read alike at every size."""
    if not _asked_by_library(_LIBRARIES) and _of_axes_only(self):
        as_number = {"b": bool, "f": float}.get(np.dtype(self.aval.dtype).kind, operator.index)
        return format(as_number(self), *spec)  # the patched __index__, __float__, __bool__
    return original(self, *spec)


@repair(pe.DynamicJaxprTracer, "__mul__")
@repair(pe.DynamicJaxprTracer, "__rmul__")
def _repeat_or_operate(original, self, other):
    """`[0.0] * x.shape[0]` repeats the list, as under jax.jit, by the size's `__index__`."""
    if type(other) in (list, tuple) and is_size_expression(self):
        return other * operator.index(self)
    return original(self, other)


@repair(pe.DynamicJaxprTracer, "__index__")
@repair(pe.DynamicJaxprTracer, "__int__")
@repair(pe.DynamicJaxprTracer, "__float__")
@repair(pe.DynamicJaxprTracer, "__complex__")
def _to_int(original, self):
    """`len(x)`, `range(x.shape[0])`, `int(x.shape[0])`, `complex(x.shape[0], 1)` on an abstracted
    axis (a number under jax.jit) need the call's sizes as constants; an integer argument keeps
    JAX's error."""
    by_jax = _asked_by_library()
    with _needs_a_number(self, "a size used as a Python number", None if by_jax else _of_axes_only(self)):
        return original(self)


# --- One tracer per size ---------------------------------------------------------------------------


def _ancestors(tracer: pe.DynamicJaxprTracer) -> list[pe.DynamicJaxprTracer]:
    """The non-literal tracers ``tracer`` is computed from (by scalar equations), nearest first."""
    seen: dict[int, pe.DynamicJaxprTracer] = {}
    frontier = [tracer]
    while frontier:
        t = frontier.pop(0)
        for parent_input in t.parent.in_tracers if t.parent is not None else ():
            if not isinstance(parent_input.val, core.Literal) and id(parent_input) not in seen:
                seen[id(parent_input)] = parent_input
                frontier.append(parent_input)
    return list(seen.values())


def _canonical_size(size: pe.DynamicJaxprTracer) -> pe.DynamicJaxprTracer:
    """The size ``size`` is computed from that equals it at every generic assignment, if any (else
    ``jnp.arange(n)`` and ``jnp.ones(n)`` differ in a ``cond`` branch); an assumption."""
    points = generic_values(size)
    if points is None:
        return size
    scope = current_scope()
    # In a trace guided by a call, equal there and at generic sizes: sizes that merely coincide at
    # the call (`max(n - 1, 0)` and `n` at `n = 0`) stay distinct, so the program stays general.
    generic = generic_values(size, at_point=False)
    for ancestor in reversed(_ancestors(size)):  # the farthest first: the size itself if it can
        if (
            ancestor.aval == size.aval
            and (scope is None or ancestor.val not in scope.staged_slice_bounds)
            and generic_values(ancestor) == points
            and generic_values(ancestor, at_point=False) == generic
        ):
            _assume(size, ancestor, "==", True)
            return ancestor
    return size


@repair(core, "_canonicalize_dimension")
def _canonicalize_dimension(original, dim):
    """A staged size equal to a size it is computed from is that size (see `_canonical_size`)."""
    dim = original(dim)
    if isinstance(dim, pe.DynamicJaxprTracer) and dim.parent is not None:
        return _canonical_size(dim)
    return dim


# --- min / max of sizes --------------------------------------------------------------------------


def _staged_extremum(staged: Callable) -> Callable:
    # `core.min_dim`/`max_dim` of a dimension tracer: a staged `min`/`max`, again a dimension tracer.
    def extremum(original, d1, d2):
        if isinstance(d1, core.Tracer) or isinstance(d2, core.Tracer):
            return staged(d1, d2)
        return original(d1, d2)

    return extremum


for _name, _staged in (("min", jnp.minimum), ("max", jnp.maximum)):
    _why = f"{_name} of symbolic sizes is a staged {_name} (a dimension tracer)"
    repair(core, f"{_name}_dim", _why)(_staged_extremum(_staged))


# --- slice bounds of unknown sign ------------------------------------------------------------------


def _sign_undecided(bound: Any) -> bool:
    """``bound`` is a size expression whose sign differs between assignments (``n - k``)."""
    if not isinstance(bound, pe.DynamicJaxprTracer):
        return False
    at_call = generic_values(bound)
    if at_call is None:
        return False
    points = at_call + (generic_values(bound, at_point=False) or [])
    return len({value >= 0 for (value,) in points}) > 1


@repair(core, "canonicalize_slice")
def _canonicalize_slice(original, s, axis_size):
    """A slice bound whose sign is known only at run time (`x[:n - k]` in a loop counting `k` up
    to `n`): JAX's `if bound >= 0` is staged instead, as a select, a min and a max."""
    if not (isinstance(s, slice) and isinstance(s.step, (int, type(None))) and s.step != 0
            and (_sign_undecided(s.start) or _sign_undecided(s.stop))):
        return original(s, axis_size)
    step = 1 if s.step is None else s.step
    low, high = (0, axis_size) if step > 0 else (-1, axis_size - 1)  # where a bound may point

    def clamped(bound: Any, default: Any) -> Any:
        if bound is None:
            return default
        # counted from the axis' start, as Python counts a negative bound from the end
        if isinstance(bound, core.Tracer):
            counted = lax.select(bound >= 0, bound, bound + axis_size)
        else:
            counted = bound if bound >= 0 else bound + axis_size
        lifted = core.max_dim(low, counted)
        bound = core.min_dim(high, lifted)
        scope = current_scope()
        if scope is not None:
            scope.staged_slice_bounds.update(
                t.val for t in (counted, lifted, bound) if isinstance(t, pe.DynamicJaxprTracer))
        return bound

    start, stop = clamped(s.start, low if step > 0 else high), clamped(s.stop, high if step > 0 else low)
    distance = stop - start if step > 0 else start - stop
    return start, step, core.max_dim(0, distance + abs(step) - 1) // abs(step)
