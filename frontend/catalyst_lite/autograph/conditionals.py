"""Overloads for ``if``, ``x if c else y`` and ``and``/``or``/``not`` in converted code.

On a concrete condition each does what Python does. On a traced one, ``if`` becomes
:func:`~catalyst_lite.cond`, each branch returning the state variables it may change (:mod:`.state`):
branches may disagree on sizes and dtypes (promoted as JAX does) and on whether the function
returned (the return value filled with zeros); anything else is an AutoGraphError naming the
variable. ``and``/``or`` on a traced scalar give Python's value, ``not`` is ``logical_not``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from malt.operators.variables import UndefinedReturnValue

from ..trace_context import current as current_context, scope as context_scope
from ..control_flow import cond
from ..control_flow.common import traced_value
from ..debug import debug_assert
from ..errors import AutoGraphError, ControlFlowError
from ..jax_extras import Tracer
from ..jax_extras.dimensions import compares_counts, python_truth_of_sizes
from ..jax_extras.size_facts import implied_condition, note_implied
from .state import (
    ContainerCheckpoint, GetState, Location, SetState, Snapshot, VariableRecord, at, carrying_attributes,
    check_not_recording, display_name, innermost_user_line, predicate,
)


def if_stmt(
    condition: Any, body: Callable[[], None], orelse: Callable[[], None], get_state: GetState,
    set_state: SetState, symbol_names: Sequence[str], nouts: int,
) -> None:
    """``if condition: body else: orelse`` (malt's functional form; the state holds exactly the
    variables used after the statement, whatever ``nouts`` says)."""
    _if(condition, (body, orelse), get_state, set_state, symbol_names, "`if`")


def if_exp(condition: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], expr_repr: str) -> Any:
    """``if_true() if condition else if_false()``."""
    value: Any = None  # the expression's one state variable (not a container: see ContainerCheckpoint)

    def branch(value_fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            nonlocal value
            value = value_fn()

        return run

    def set_state(values: tuple) -> None:
        nonlocal value
        (value,) = values

    branches = (branch(if_true), branch(if_false))
    _if(condition, branches, lambda: (value,), set_state, (expr_repr,), "conditional expression")
    return value


def _if(
    condition: Any, branches: Sequence[Callable[[], None]], get_state: GetState, set_state: SetState,
    names: Sequence[str], construct: str,
) -> None:
    condition = _condition(condition)
    if not isinstance(condition, Tracer):
        branches[0 if condition else 1]()
        return
    where = innermost_user_line()
    check_not_recording(construct, where)
    pred = predicate(condition, construct, where)

    def statement(get_state: GetState, set_state: SetState, names: Sequence[str]) -> None:
        set_state(_compiled_branches(pred, branches, get_state, set_state, names, where))

    carrying_attributes(statement, get_state, set_state, names)


def _condition(condition: Any) -> Any:
    """The condition of an ``if`` (or ``and``/``or``/``not``): a question about sizes of abstracted
    axes (``x.shape[0] > 2``) answered in Python, as without autograph; a traced value otherwise."""
    return python_truth_of_sizes(traced_value(condition))


def _compiled_branches(
    pred: Any, branches: Sequence[Callable[[], None]], get_state: GetState, set_state: SetState,
    names: Sequence[str], where: Location | None,
) -> tuple:
    """The state after a ``cond`` of the branches, traced again if dtypes or return values must agree."""
    init = get_state()
    containers = ContainerCheckpoint(*branches, carried=names)
    dtypes, placeholders = {}, {}  # (see _unify: nothing to cast or fill in the first time)

    def traced(branch: Callable[[], None], k: int) -> Callable[[], list[Any]]:
        """Branch ``k`` as a ``cond`` branch: from the state before the statement, the dynamic
        leaves of the state it leaves (cast or filled in as :func:`_unify` says)."""

        def run() -> list[Any]:
            set_state(init)
            branch()
            side_effects = containers.side_effects()
            if side_effects:  # raised inside the branch's tracing, so that cond's own cleanup runs
                containers.carry_attributes()
                containers.restore()
                raise AutoGraphError(
                    f"A branch of the `if`{at(where)} {side_effects}, but the condition is traced: "
                    "every branch runs once, while tracing. Assign the values to variables (or "
                    "arrays, `x[i] = v`) in the branches instead, returning them from the functions "
                    "that compute them."
                )
            snapshot = Snapshot.of(get_state(), names)
            outcomes[k] = snapshot
            leaves = []
            for j, record in enumerate(snapshot.variables):
                if j in placeholders and record.kind in ("no_return", "undefined"):
                    leaves += [r.zeros() for r in placeholders[j].leaves if r.dynamic]
                    continue
                values = Snapshot([record], [snapshot.values[j]]).dynamic_leaves()
                dynamic = [i for i, r in enumerate(record.leaves) if r.dynamic]
                for i, value in zip(dynamic, values):
                    dtype = dtypes.get((j, i))
                    if dtype is not None or not isinstance(value, (Tracer, jax.Array)):
                        value = jnp.asarray(value, dtype)
                    leaves.append(value)
            return leaves

        run.__name__ = run.__qualname__ = getattr(branch, "__name__", "branch")
        return run

    for attempt in (1, 2):
        outcomes: list[Snapshot | None] = [None] * len(branches)
        runs = [traced(branch, k) for k, branch in enumerate(branches)]
        failure = None
        try:
            with context_scope(traced_branches=(*current_context().traced_branches, where)):
                results = cond(pred)(runs[0]).otherwise(runs[1])()
        except ControlFlowError as error:
            if any(o is None for o in outcomes):
                raise  # a branch itself failed
            failure = error
        finally:
            set_state(init)
        needed = _unify(outcomes, names, where)
        if attempt == 1 and any(needed):
            dtypes, placeholders = needed
        elif failure is not None:
            raise _size_mismatch(outcomes, names, where) or failure
        else:  # the cond's results in the shape of the branches' state
            variables = [placeholders.get(j, r) for j, r in enumerate(outcomes[0].variables)]
            return Snapshot(variables, outcomes[0].values).rebuild(results)


def _unify(outcomes: Sequence[Snapshot], names: Sequence[str], where: Location | None) -> tuple[dict, dict]:
    """How a second tracing of the branches makes their states agree: per (variable, leaf), the dtype
    to cast to; per variable, the record whose zeros stand in for a missing value. An
    :class:`AutoGraphError` if they cannot agree."""
    dtypes: dict[tuple[int, int], np.dtype] = {}
    placeholders: dict[int, VariableRecord] = {}
    for j, name in enumerate(names):
        records = [o.variables[j] for o in outcomes]
        kinds = {r.kind for r in records}
        if kinds == {"undefined"} or kinds == {"no_return"}:
            continue
        if "undefined" in kinds and not _undefined_only_where_returned(outcomes, j, names):
            raise AutoGraphError(
                f"{display_name(name).capitalize()} is assigned in only some branches of the `if`"
                f"{at(where)}, whose condition is traced: every branch must give it a value (or "
                "assign it before the `if`), since which branch runs is known only at run time."
            )
        values = [r for r in records if r.kind == "value"]
        if "no_return" in kinds:
            scope_fills_return_value(where)
        if "no_return" in kinds or "undefined" in kinds:
            placeholders[j] = values[0]
        ref = values[0]
        for other in values[1:]:
            difference = ref.difference(other)
            if difference is not None:
                raise _mismatch(name, ref, other, where, difference[0])
        for i, leaf in enumerate(ref.leaves):
            if leaf.dynamic:
                leaves = [v.leaves[i] for v in values]
                if len({l.dtype for l in leaves}) > 1:
                    dtypes[(j, i)] = np.dtype(jnp.result_type(*(l.promotion_type() for l in leaves)))
    return dtypes, placeholders


def _undefined_only_where_returned(outcomes: Sequence[Snapshot], j: int, names: Sequence[str]) -> bool:
    """Whether variable ``j`` lacks a value only in branches that returned (``else: return 0.0``): malt
    runs what follows the ``if`` only if the function has not returned, so nothing reads it."""
    flags = [k for k, name in enumerate(names) if name.startswith("do_return")]
    undefined = [o for o in outcomes if o.variables[j].kind == "undefined"]
    return bool(flags) and all(o.values[flags[0]] is True for o in undefined)


def _size_mismatch(
    outcomes: Sequence[Snapshot], names: Sequence[str], where: Location | None
) -> AutoGraphError | None:
    """The error naming the variable whose known size differs between branches (``jnp.ones(3)`` and
    ``jnp.zeros(4)``), if one does: ``cond`` can only say which of its results it is."""
    for j, name in enumerate(names):
        values = [o.variables[j] for o in outcomes if o.variables[j].kind == "value"]
        for other in values[1:]:
            for a, b in zip(values[0].leaves, other.leaves):
                known = [(m, n) for m, n in zip(a.shape, b.shape) if m is not None and n is not None]
                if a.dynamic and any(m != n for m, n in known):
                    return _mismatch(name, values[0], other, where, "size")
    return None


def _mismatch(
    name: str, a: VariableRecord, b: VariableRecord, where: Location | None, what: str
) -> AutoGraphError:
    if _holds_measurement(a) or _holds_measurement(b):
        what = "measurement"
    fix = {
        "structure": "give it the same structure (tuple, list, dict, None...) in every branch",
        "value": "a Python value that is not an array must be the same in every branch",
        "rank": "sizes may differ between branches, the number of dimensions may not",
        "size": (
            "a size known while tracing must be the same number in every branch (sizes computed from "
            "traced values may differ); give the arrays one size, masking the rest with jnp.where"
        ),
        "measurement": (
            "a QNode makes the same measurements whatever happens at run time; apply the branches' "
            "gates in the `if` (a basis rotation, say) and measure once after it, or return the "
            "measurements of every branch and choose between their values outside the QNode"
        ),
    }[what]
    consistent = "array shape per result" if what == "size" else "return structure"
    # (two functions, say, differ in value, not in type)
    other = f"another {b.describe()}" if a.describe() == b.describe() else _article(b.describe())
    return AutoGraphError(
        f"Control flow requires a consistent {consistent} across all branches. "
        f"{display_name(name).capitalize()} is {_article(a.describe())} in one branch of the `if`"
        f"{at(where)} and {other} in another; the condition is traced, so the branches must agree: {fix}."
    )


def _article(description: str) -> str:
    """``a function`` (a Python object's type name); anything else (``float64[3]``) as it is."""
    if not description.isidentifier() or description == "None":
        return description
    return f"an {description}" if description[0] in "aeiou" else f"a {description}"


def _holds_measurement(record: VariableRecord) -> bool:
    """Whether a branch's value of a variable holds a PennyLane measurement (``qml.expval(...)``)."""
    qml = sys.modules.get("pennylane")
    if record.kind != "value" or qml is None:
        return False
    try:
        value = record.stand_in()
    except Exception:  # a pytree that cannot be rebuilt from stand-in leaves
        return False
    is_measurement = lambda x: isinstance(x, qml.measurements.MeasurementProcess)  # noqa: E731
    return any(is_measurement(leaf) for leaf in jax.tree_util.tree_leaves(value, is_leaf=is_measurement))


class FunctionScope:
    """``ag__.FunctionScope``, around a converted function's body: whether every path ends in ``return``
    and whether a compiled ``if`` filled in a return value for a branch that did not return."""

    def __init__(self, function_name: str, scope_name: str, options: Any, always_returns: bool = True):
        self.function_name = function_name
        self.name = scope_name  # (malt's name: its super()/eval/locals() find the caller's frame by it)
        self.always_returns = always_returns
        self.filled_at: Location | None = None
        self.filled = False

    def __enter__(self) -> "FunctionScope":
        self._scope = context_scope(function_scopes=(*current_context().function_scopes, self))
        self._scope.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._scope.__exit__(*exc)

    def ret(self, value: Any, did_return: Any) -> Any:
        """The function's result: ``None`` when it did not return a value."""
        if isinstance(value, UndefinedReturnValue):
            return None
        if self.filled and not self.always_returns:
            raise AutoGraphError(
                f"{self.function_name} returns a value in some branches of the `if`{at(self.filled_at)} "
                "but its condition is traced and not every path of the function ends in `return`: "
                "the compiled function would return a value or None depending on run-time data. "
                f"End every path of {self.function_name} with a `return`."
            )
        return value


def scope_fills_return_value(where: Location | None) -> None:
    """Note in the innermost converted function that a compiled ``if`` filled in its return value."""
    stack = current_context().function_scopes
    if stack:
        stack[-1].filled = True
        stack[-1].filled_at = stack[-1].filled_at or where


def with_function_scope(thunk: Callable[[FunctionScope], Any], scope_name: str, options: Any) -> Any:
    """``ag__.with_function_scope``: a converted lambda's body."""
    with FunctionScope("lambda", scope_name, options) as scope:
        return thunk(scope)


def assert_stmt(test: Any, message: Callable[[], Any]) -> None:
    """``assert test, message``: Python's on a concrete ``test``; on a traced one, an assertion
    checked when the program runs (:func:`~catalyst_lite.debug_assert`)."""
    test = traced_value(test)
    if not isinstance(test, Tracer):
        if not test:
            text = message()
            raise AssertionError(*(() if text is None else (text,)))
        return
    where = innermost_user_line()
    text = message()
    if not isinstance(text, str):  # no message, or one computed from traced values
        text = f"`assert` failed{at(where)}"
    debug_assert(predicate(test, "`assert`", where), text)


def and_(a: Callable[[], Any], b: Callable[[], Any]) -> Any:
    """``a and b``."""
    return _logical(jnp.logical_and, a, b, "`and`")


def or_(a: Callable[[], Any], b: Callable[[], Any]) -> Any:
    """``a or b``."""
    return _logical(jnp.logical_or, a, b, "`or`")


def not_(a: Any) -> Any:
    """``not a``."""
    a = _condition(a)
    if not isinstance(a, Tracer):
        return not a
    if jnp.ndim(a):  # an array: elementwise, as for `and`/`or` (Catalyst's meaning)
        return jnp.logical_not(a)
    return jnp.logical_not(predicate(a, "`not`", innermost_user_line()))


def _logical(
    op: Callable[[Any, Any], Any], a: Callable[[], Any], b: Callable[[], Any], construct: str
) -> Any:
    """Python's value of ``a() and b()`` or ``a() or b()``; for a traced scalar ``a()``,
    ``logical_and``/``logical_or`` on booleans, the operand itself on numbers (``2.0 and 3.0``)."""
    left = _condition(a())
    if not isinstance(left, Tracer):
        return (left and b()) if op is jnp.logical_and else (left or b())
    if jnp.ndim(left):  # arrays: elementwise, as Catalyst computes them
        return op(left, traced_value(b()))
    truth = predicate(left, construct, innermost_user_line())
    takes_right = truth if op is jnp.logical_and else jnp.logical_not(truth)
    condition = implied_condition(takes_right)
    if condition is None and not compares_counts(left):  # on data: both operands are evaluated
        return _combined(op, left, truth, takes_right, traced_value(b()))
    # A condition on sizes (`i < len(x) and x[i] > 0`): Python evaluates `b` only when it decides
    # the value, so it is a cond branch, and what it needs (a non-empty `x`) need hold only then.
    right: list[Any] = []  # `b()`, for the other branch (traced after this one) to take its type

    def taken() -> Any:
        right.append(traced_value(b()))
        return _combined(op, left, truth, takes_right, right[0])

    def not_taken() -> Any:  # `left` decides: any right operand of the same type gives its value
        value = right[0]
        if _is_object(value):
            return op(truth, False)
        return left if _is_number_pair(left, value) else op(left, jnp.zeros_like(value))

    result = cond(takes_right)(taken).otherwise(not_taken)()
    if op is jnp.logical_and and condition is not None:
        note_implied(result, condition)  # (an `if` on it reads `x[i]` only where `i < len(x)`)
    return result


def _is_object(value: Any) -> bool:
    """A Python object that is no number (a list, a string): only its truth counts."""
    return not (isinstance(value, (bool, int, float, complex, np.generic)) or hasattr(value, "dtype"))


def _is_number_pair(left: Any, right: Any) -> bool:
    """Scalars not both booleans: ``left and right`` is one of them (``2.0 and 3.0`` is ``3.0``)."""
    if jnp.ndim(right) or _is_object(right):
        return False
    return not all(np.dtype(getattr(v, "dtype", type(v))) == np.bool_ for v in (left, right))


def _combined(op: Callable[[Any, Any], Any], left: Any, truth: Any, takes_right: Any, right: Any) -> Any:
    """``left and right`` (``op``: logical_and) or ``left or right``: elementwise on an array, the
    operand taken on numbers (``2.0 and 3.0``), the truth otherwise."""
    if _is_object(right):
        return op(truth, bool(right))  # a Python object (a list, a string): its truth, for an `if`
    if jnp.ndim(right):  # arrays: elementwise, as Catalyst computes them
        return op(left, right)
    return jnp.where(takes_right, right, left) if _is_number_pair(left, right) else op(left, right)
