"""Overloads for ``for`` and ``while`` in converted code (what each becomes: docs/autograph.md).

A ``for`` over a range or an array becomes :func:`~catalyst_lite.for_loop`, a ``while``
:func:`~catalyst_lite.while_loop`, carrying the dynamic leaves of the state variables (:mod:`.state`).
The body is traced and checked against the state it started from: a Python number takes the type
the body gives it, an array that changes size makes the loop resizing (each traced again), any
other change is an :class:`~catalyst_lite.errors.AutoGraphError` naming the variable. A loop that
cannot be compiled but whose iterations are known while tracing runs in Python, with a warning.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import textwrap
import warnings
from typing import Any, Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
from malt.operators.variables import Undefined

from ..compiler.specialize import trip_count
from ..control_flow import for_loop, while_loop
from ..control_flow.common import traced_value
from ..debug import callback
from ..errors import AutoGraphError, AutoGraphWarning, DimensionError, RetrySignal, UninitializedVariableError
from ..jax_extras.frames import user_line_of_traceback
from ..trace_context import current as current_context
from ..jax_extras import Tracer, is_tracing
from ..jax_extras.patches import NeedsCallSizes, error_standing_for
from ..jax_extras.dimensions import decide_size_comparison
from .builtins import (
    IterationSpace, compiles_lists, iteration_space, strict_conversion, strict_iteration_array,
)
from .conditionals import if_stmt, scope_fills_return_value
from .state import (
    AttributesAssigned, ContainerCheckpoint, GetState, Location, QueuedOperations, SetState, Snapshot,
    VariableRecord, at, carrying_attributes, check_not_recording, display_name, innermost_user_line,
    predicate, recording_operators,
)

_MAX_RETRACES = 4  # promotions and resizing settle in one or two more tracings


class _Promote(Exception):
    """Trace the body again with the carried leaves promoted (``args``: dtypes by position)."""


class _Returned(Exception):
    """The body returns from the function: trace again with a stand-in return value before the loop
    (``args``: its position, and a :class:`VariableRecord` of its type)."""


def for_stmt(
    iter_: Any, extra_test: Callable[[], Any] | None, body: Callable[[Any], None], get_state: GetState,
    set_state: SetState, symbol_names: Sequence[str], opts: dict,
) -> None:
    """``for target in iter_: body(target)``; ``extra_test`` is malt's form of ``break``/``return``."""
    statement = functools.partial(_for_stmt, iter_, extra_test, body, opts=opts)
    carrying_attributes(statement, get_state, set_state, symbol_names)


def _for_stmt(
    iter_: Any, extra_test: Callable[[], Any] | None, body: Callable[[Any], None], get_state: GetState,
    set_state: SetState, symbol_names: Sequence[str], opts: dict,
) -> None:
    where = innermost_user_line()
    space = iteration_space(iter_)
    state = (get_state, set_state, symbol_names)
    if space is None and compiles_lists():
        space = iteration_space(strict_iteration_array(iter_, where))
    if space is None or not is_tracing():  # outside qjit, converted code is plain Python
        _python_for(iter_, extra_test, body, state)
        return
    # the variables carried without a value yet (by position), when the loop has a target
    iterate_names, values = opts.get("iterate_names", ""), get_state()
    unassigned = {
        name: k for k, name in enumerate(symbol_names) if iterate_names and isinstance(values[k], Undefined)
    }
    if _runs_no_iteration(space, ask_sizes=bool(unassigned)):
        return  # known while tracing: nothing runs, and the target stays unassigned, as in Python
    if recording_operators():
        # (in qml.adjoint/qml.ctrl the operations must be known while tracing: see state.py)
        if not space.concrete:
            check_not_recording("`for` loop", where)
        _python_for(space.python_items(), extra_test, body, state)
        return

    started = _start_loop_targets(space, iterate_names, unassigned, get_state, set_state)
    unassigned_after = [name for name in started if name in opts.get("live_after", "").split()]
    if unassigned_after and not space.concrete:
        # Python leaves them unassigned when the loop runs no iteration: known when it runs
        callback(functools.partial(_fail_if_no_iteration, names=unassigned_after, where=where))(
            trip_count(space.lower, space.upper, space.step)
        )
    containers = ContainerCheckpoint(body, carried=symbol_names)

    def compiled(snapshot: Snapshot, carried: list[Any], resize: bool, finished: list[bool]) -> Any:
        def loop_body(i: Any, values: list[Any]) -> list[Any]:
            set_state(snapshot.rebuild(values))
            body(space.item(i))
            return _checked_iteration(snapshot, get_state(), symbol_names, where, "for", finished, containers)

        loop_body.__name__ = loop_body.__qualname__ = f"for loop{at(where)}"
        if extra_test is not None:
            restore = lambda values: set_state(snapshot.rebuild(values))  # noqa: E731
            return _stoppable_for(space, extra_test, restore, loop_body, resize, where)(carried)
        return for_loop(space.lower, space.upper, space.step, allow_array_resizing=resize)(loop_body)(carried)

    def python_loop(error: Exception, warn: Callable[[bool], None]) -> None:
        warn()
        _python_for(space.python_items(), extra_test, body, state)

    fallback = python_loop if space.concrete else None
    _run(compiled, fallback, containers, get_state, set_state, symbol_names, where, "for")


def _runs_no_iteration(space: IterationSpace, ask_sizes: bool) -> bool:
    """Known while tracing to run no iteration: known bounds, or (``ask_sizes``) sizes whose comparison
    the trace decides (as a fact of the program)."""
    count = trip_count(space.lower, space.upper, space.step)
    if not isinstance(count, Tracer):
        return count == 0
    if not (ask_sizes and isinstance(space.step, int) and space.step != 0):
        return False
    comparison = "<=" if space.step > 0 else ">="
    return decide_size_comparison(space.upper, space.lower, comparison) is True


def _start_loop_targets(
    space: IterationSpace, iterate_names: str, unassigned: dict[str, int], get_state: GetState,
    set_state: SetState,
) -> list[str]:
    """The loop's targets (``i`` of ``for i in ...``) carried without a value yet start as zeros of
    their items' types (their names are returned); each iteration assigns them before any read."""
    if not unassigned:
        return []
    values = list(get_state())
    first = space.item(jnp.asarray(space.lower, _index_dtype(space)))
    targets = _target_values(ast.parse(iterate_names, mode="eval").body, jax.tree.map(jnp.zeros_like, first))
    started = [name for name in unassigned if name in targets]
    for name in started:
        values[unassigned[name]] = targets[name]
    set_state(tuple(values))
    return started


def _fail_if_no_iteration(count: Any, names: list[str], where: Location | None) -> None:
    """When the program runs: Python's ``UnboundLocalError`` if the loop ran no iteration."""
    if int(count) <= 0:
        name = names[0]
        raise UninitializedVariableError(
            f"The variable {name!r} is potentially uninitialized: the `for` loop{at(where)} ran no "
            f"iteration, so {name!r}, first assigned by the loop, has no value after it (Python's "
            "UnboundLocalError). Assign it before the loop."
        )


def _target_values(node: ast.expr, value: Any) -> dict[str, Any]:
    """The value each name of a ``for`` target (``i`` or ``(i, (a, b))``) takes from ``value``."""
    if isinstance(node, ast.Name):
        return {node.id: value}
    if isinstance(node, (ast.Tuple, ast.List)):
        return {n: v for k, elt in enumerate(node.elts) for n, v in _target_values(elt, value[k]).items()}
    return {}


def _python_for(
    items: Iterable[Any], extra_test: Callable[[], Any] | None, body: Callable[[Any], None],
    state: tuple[GetState, SetState, Sequence[str]],
) -> None:
    """Python's own ``for``, with malt's ``break``/``return`` test before each iteration (once it is
    traced, each remaining iteration runs under a compiled ``if`` on it)."""
    for item in items:
        go_on = True if extra_test is None else extra_test()
        if isinstance(go_on, Tracer):

            def iteration(item: Any = item) -> None:
                body(item)

            if_stmt(go_on, iteration, lambda: None, *state, 0)
        elif not go_on:
            break
        else:
            body(item)


def _stoppable_for(
    space: IterationSpace, extra_test: Callable[[], Any], restore: Callable[[list[Any]], None],
    loop_body: Callable[[Any, list[Any]], list[Any]], resize: bool, where: Location | None,
) -> Callable[[list[Any]], list[Any]]:
    """A ``for`` with ``break`` or ``return`` (malt's ``extra_test``) as the ``while`` loop one would
    write: ``i = lower`` / ``while i < upper and extra_test(): body(i); i += step``."""
    lower, upper, step = (jnp.asarray(b, _index_dtype(space)) for b in (space.lower, space.upper, space.step))

    def condition(carry: list[Any]) -> Any:
        i, values = carry
        restore(values)  # the state extra_test reads (the `break` flag, whether it returned)
        if isinstance(space.step, Tracer):  # its sign is known at run time
            in_range = jnp.where(step > 0, i < upper, i > upper)
        else:
            in_range = i > upper if space.step < 0 else i < upper
        go_on = extra_test()
        go_on = go_on if isinstance(go_on, Tracer) else jnp.asarray(bool(go_on))
        return jnp.logical_and(in_range, predicate(go_on, "`for` loop", where))

    def body(carry: list[Any]) -> list[Any]:
        i, values = carry
        return [i + step, loop_body(i, values)]

    body.__name__ = body.__qualname__ = loop_body.__name__
    return lambda carried: while_loop(condition, allow_array_resizing=resize)(body)([lower, carried])[1]


def _index_dtype(space: IterationSpace) -> Any:
    return jnp.result_type(*(jnp.asarray(b).dtype for b in (space.lower, space.upper, space.step)))


def while_stmt(
    test: Callable[[], Any], body: Callable[[], None], get_state: GetState, set_state: SetState,
    symbol_names: Sequence[str], opts: dict,
) -> None:
    """``while test(): body()``."""
    statement = functools.partial(_while_stmt, test, body, opts=opts)
    carrying_attributes(statement, get_state, set_state, symbol_names)


def _while_stmt(
    test: Callable[[], Any], body: Callable[[], None], get_state: GetState, set_state: SetState,
    symbol_names: Sequence[str], opts: dict,
) -> None:
    where = innermost_user_line()
    raw_test = test
    test = lambda: traced_value(raw_test())  # noqa: E731 (a measurement value: its JAX value)
    if not is_tracing():  # outside qjit, converted code is plain Python
        _python_while(test(), test, body, where, None)
        return
    recording = recording_operators()  # in qml.adjoint/qml.ctrl: a Python loop or nothing (state.py)
    if recording or not _reads_any(raw_test, symbol_names):
        # Or the condition cannot see what the loop changes (`while queue:` popping a Python list):
        # known while tracing, it is a Python loop; a compiled one would never stop.
        value = test()
        if recording and isinstance(value, Tracer):
            check_not_recording("`while` loop", where)
        if not isinstance(value, Tracer):
            _python_while(value, test, body, where, None)
            return

    containers = ContainerCheckpoint(raw_test, body, carried=symbol_names)

    def compiled(snapshot: Snapshot, carried: list[Any], resize: bool, finished: list[bool]) -> Any:
        def condition(values: list[Any]) -> Any:
            set_state(snapshot.rebuild(values))
            value = test()
            if not isinstance(value, Tracer):
                # Known while tracing although it reads the loop's variables (the length of a list
                # they hold, say): compiled, the loop would never stop.
                raise AutoGraphError(
                    f"The condition of the `while` loop{at(where)} does not depend on the values "
                    "the loop changes, as far as a compiled loop can see (they are arrays and "
                    "numbers): a compiled loop would never stop."
                )
            return predicate(value, "`while` loop", where)

        def loop_body(values: list[Any]) -> list[Any]:
            set_state(snapshot.rebuild(values))
            body()
            after = get_state()
            return _checked_iteration(snapshot, after, symbol_names, where, "while", finished, containers)

        loop_body.__name__ = loop_body.__qualname__ = f"while loop{at(where)}"
        return while_loop(condition, allow_array_resizing=resize)(loop_body)(carried)

    def python_loop(error: Exception, warn: Callable[[bool], None]) -> None:
        value = test()
        if isinstance(value, Tracer):  # traced from the start: no Python loop can replace it
            _no_python_loop(error, where, "while", warn)
        warn()
        _python_while(value, test, body, where, error)

    _run(compiled, python_loop, containers, get_state, set_state, symbol_names, where, "while")


def _python_while(
    value: Any, test: Callable[[], Any], body: Callable[[], None], where: Location | None,
    error: Exception | None,
) -> None:
    """Python's own ``while``, from the condition's first value."""
    while value:
        body()
        value = test()
        if isinstance(value, Tracer):
            if error is not None:
                lines = str(error).strip().splitlines()
                summary = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
            raise AutoGraphError(
                f"The `while` loop{at(where)} runs as a Python loop"
                + (f" (it could not be compiled: {summary})" if error is not None else "")
                + " but its condition becomes traced after the first iterations."
            ) from error


def _run(
    compiled: Callable[[Snapshot, list[Any], bool, list[bool]], Any],
    python_loop: Callable[[Exception, Callable[[bool], None]], None] | None,
    containers: ContainerCheckpoint, get_state: GetState, set_state: SetState, names: Sequence[str],
    where: Location | None, kind: str,
) -> None:
    """Compile the loop (traced again to promote Python numbers or resize arrays); if it cannot be and
    ``python_loop`` is given, undo the attempt (variables, queued gates, ``containers``) and run that."""
    init = get_state()
    queued = QueuedOperations()
    try:
        set_state(_compiled_state(compiled, Snapshot.of(init, names), names, where, kind))
    except RetrySignal:
        raise  # not the loop's failure: what raised it runs again (and the loop is traced again)
    except Exception as error:
        set_state(init)
        queued.drop()
        containers.restore()
        if isinstance(error, AttributesAssigned):
            raise  # the statement runs again, carrying them
        package = sys.modules["catalyst_lite"]  # Catalyst's module flags (see its __init__)
        if strict_conversion():
            _raise_explained(error, where, kind)

        def warn(runs_in_python: bool = True) -> None:
            if not package.autograph_ignore_fallbacks:
                _warn_fallback(error, where, kind, runs_in_python)

        if python_loop is None:
            _no_python_loop(error, where, kind, warn)
        python_loop(error, warn)


_NEEDS_CONCRETE_VALUES = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)


def _compiled_state(
    compiled: Callable[[Snapshot, list[Any], bool, list[bool]], Any], snapshot: Snapshot,
    names: Sequence[str], where: Location | None, kind: str,
) -> tuple:
    for record in snapshot.variables:
        if record.kind == "undefined":
            raise AutoGraphError(
                f"The {display_name(record.name)} is potentially uninitialized. "
                f"{display_name(record.name).capitalize()} is first assigned inside the `{kind}` "
                f"loop{at(where)} and used after it (or in the next iteration): a compiled loop "
                "needs its initial value. Assign it before the loop, with the type and shape it "
                "has in the loop."
            )
    resize = False
    for _ in range(_MAX_RETRACES):
        carried = [jnp.asarray(v) if not hasattr(v, "dtype") else v for v in snapshot.dynamic_leaves()]
        finished = [False]
        try:
            return snapshot.rebuild(compiled(snapshot, carried, resize, finished))
        except _Promote as request:
            (promoted,) = request.args
            promoted = [jnp.asarray(v, promoted[k]) if k in promoted else v for k, v in enumerate(carried)]
            snapshot = Snapshot.of(snapshot.rebuild(promoted), names)
        except _Returned as request:
            # The loop carries the return value from the start; the function never returns the
            # stand-in, as long as every path of it ends in `return` (checked by its scope).
            scope_fills_return_value(where)
            values = list(snapshot.rebuild(carried))
            position, record = request.args
            values[position] = record.stand_in()
            snapshot = Snapshot.of(values, names)
        except DimensionError:
            if resize or not finished[0]:
                raise  # not a size our body changed (a nested loop's error), or already resizing
            resize = True
    raise AutoGraphError(f"The `{kind}` loop{at(where)} changes the types of its variables at every tracing.")


def _reads_any(fn: Callable, names: Sequence[str]) -> bool:
    """Whether a loop's function closes over any of its variables (``self`` for ``self.x``)."""
    roots = {re.match(r"\w*", name).group() for name in names}
    return bool(roots & set(fn.__code__.co_freevars))


def _checked_iteration(
    snapshot: Snapshot, values: tuple, names: Sequence[str], where: Location | None, kind: str,
    finished: list[bool], containers: ContainerCheckpoint,
) -> list[Any]:
    """The dynamic leaves an iteration leaves, checked against those it started with, and that it
    had no side effect (raised from the body's tracing, so that the loop's own cleanup runs)."""
    side_effects = containers.side_effects()
    if side_effects:
        containers.carry_attributes()
        raise AutoGraphError(
            f"The `{kind}` loop{at(where)} {side_effects}: a compiled loop runs its body once, "
            "while tracing. Collect the values in an array (`x[i] = v`) or in a loop variable "
            "instead, returning them from the functions that compute them."
        )
    after = Snapshot.of(values, names)
    promote: dict[int, Any] = {}
    out: list[Any] = []
    variables = zip(snapshot.variables, after.variables, after.values)
    for j, (before_var, after_var, value) in enumerate(variables):
        if before_var.kind == "no_return":
            if after_var.kind == "value":
                raise _Returned(j, after_var)
            continue
        _check_variable(before_var, after_var, where, kind)
        leaves = Snapshot([after_var], [value]).dynamic_leaves()
        dynamic = [(b, a) for b, a in zip(before_var.leaves, after_var.leaves) if b.dynamic]
        for (before, after_leaf), leaf in zip(dynamic, leaves):
            dtype = before.dtype
            if after_leaf.dtype != before.dtype:
                dtype = jnp.result_type(before.promotion_type(), after_leaf.promotion_type())
            if dtype != before.dtype:
                if not before.python_number:
                    raise AutoGraphError(
                        f"{display_name(before_var.name).capitalize()} is {before.describe()} before "
                        f"the `{kind}` loop{at(where)} but {after_leaf.describe()} after an iteration: a "
                        "compiled loop keeps the types of its variables. Start it with the type it gets "
                        f"in the loop (e.g. .astype({after_leaf.dtype.name}))."
                    )
                promote[len(out)] = dtype
            as_carried = dtype == after_leaf.dtype and hasattr(leaf, "dtype")
            out.append(leaf if as_carried else jnp.asarray(leaf, before.dtype))
    if promote:
        raise _Promote(promote)
    finished[0] = True
    return out


def _check_variable(before: VariableRecord, after: VariableRecord, where: Location | None, kind: str) -> None:
    name = display_name(before.name).capitalize()
    what, b, a = before.difference(after) or (None, None, None)
    if what == "structure":
        # (Catalyst's phrase first for a variable that starts as a value JAX cannot carry, a string)
        static = [l.value for l in before.leaves if not l.dynamic and l.value is not None]
        not_a_jax_type = (
            f"The variable {before.name!r} was initialized with type {type(static[0])}, which is not "
            "compatible with JAX. " if before.kind == "value" and static else ""
        )
        raise AutoGraphError(
            not_a_jax_type
            + f"{name} is {before.describe()} before the `{kind}` loop{at(where)} but {after.describe()} "
            "after an iteration: a compiled loop keeps the structure of its variables (tuple, list, "
            "dict, None...)."
        )
    if what == "value":
        raise AutoGraphError(
            f"{name} is {b.value!r} before the `{kind}` loop{at(where)} and {a.value!r} after an "
            "iteration: a compiled loop can only change arrays and numbers."
        )
    if what == "rank":
        raise AutoGraphError(
            f"{name} is {b.describe()} before the `{kind}` loop{at(where)} but {a.describe()} after "
            "an iteration: a compiled loop keeps the number of dimensions of its arrays."
        )


def _no_python_loop(error: Exception, where: Location | None, kind: str, warn: Callable[[bool], None]):
    """A loop that cannot be compiled nor run in Python (its range or condition is traced). Where its
    body needed a concrete value, Catalyst first warns that it falls back to Python: so do we."""
    if isinstance(error, _NEEDS_CONCRETE_VALUES):
        warn(False)
    _raise_explained(error, where, kind)


def _raise_explained(error: Exception, where: Location | None, kind: str) -> None:
    """A loop that must be compiled and cannot: a traced value used as a Python value in its body is
    explained in terms of the loop (an AutoGraphError that is also the body's JAX error and the one
    Python's loop raises on a traced range or condition, as Catalyst raises); others are the body's."""
    if not isinstance(error, _NEEDS_CONCRETE_VALUES):
        raise error
    because = "its range or array" if kind == "for" else "its condition"
    python_loop_error = (
        jax.errors.TracerIntegerConversionError if kind == "for" else jax.errors.TracerBoolConversionError
    )
    jax_line = (str(error).strip().splitlines() or [""])[0]
    needs = user_line_of_traceback(error.__traceback__)
    raise error_standing_for(error_standing_for(AutoGraphError, python_loop_error), type(error))(
        f"{jax_line}: the `{kind}` loop{at(where)} is compiled ({because} is traced), so the loop "
        "index and the loop's variables are traced values inside it, but "
        f"{needs.described() if needs else 'its body'} needs a concrete value. "
        "Index arrays with them (jnp.asarray(python_list)[i]) rather than Python lists, and "
        "compute Python values outside the loop."
    ) from error


def except_handler(handled: Any, name: str | None) -> None:
    """First statement of each ``except`` (``handled``: its classes; ``name``: of ``as name``): an error
    raised only because a traced value was asked for its Python value (``int(n)``) is not one Python
    raises, so a handler catching it by a broader class (``except Exception``) would run where Python's
    does not: it is raised, explained. A handler naming JAX's class (detecting tracing) catches it."""
    error = sys.exc_info()[1]
    classes = handled if isinstance(handled, tuple) else (handled,)
    if _python_raises_none(error) and not any(
        isinstance(c, type) and issubclass(c, jax.errors.JAXTypeError) and isinstance(error, c)
        for c in classes
    ):
        _raise_uncaught(error, "except")


def raised(error: Any) -> Any:
    """The error of a ``raise error`` statement in converted code. Raised while the branches of a
    traced ``if`` are traced, it is raised whatever the condition (every branch is traced): it is
    then explained, as an AutoGraphError that is also of the error's class."""
    branches = current_context().traced_branches
    error = error() if isinstance(error, type) and issubclass(error, BaseException) else error
    if not branches or not isinstance(error, Exception):
        return error
    try:
        explained = error_standing_for(AutoGraphError, type(error))
    except TypeError:  # (a class that cannot be combined with AutoGraphError's bases)
        return error
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return explained(
        f"{text}\nThe `raise`{at(innermost_user_line())} runs while the "
        f"branches of the `if`{at(branches[-1])} are traced: its condition is traced, so every branch "
        "is traced, whichever runs, and the error is raised for every input. To check a traced value "
        "when the program runs, use `assert` (checked at run time under autograph) or "
        "catalyst_lite.debug_assert."
    )


class WithContext:
    """A context manager of a ``with`` in converted code (``ag__.with_context(cm)``): what ``cm`` does,
    except suppress an error Python raises none for (``contextlib.suppress(TypeError)`` of ``int(n)``)."""

    def __init__(self, manager: Any):
        self.manager = manager

    def __enter__(self) -> Any:
        return self.manager.__enter__()

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        suppressed = self.manager.__exit__(kind, error, tb)
        if suppressed and _python_raises_none(error):
            _raise_uncaught(error, "with")
        return suppressed


def _python_raises_none(error: BaseException | None) -> bool:
    """An error raised only because a traced value was asked for its Python value (``int(n)``)."""
    concrete = _NEEDS_CONCRETE_VALUES + (jax.errors.TracerBoolConversionError,)
    # (a size's value is no such error: the trace is retried at the call's sizes)
    return isinstance(error, concrete) and not isinstance(error, NeedsCallSizes)


def _raise_uncaught(error: BaseException, statement: str) -> None:
    where, needs = innermost_user_line(), user_line_of_traceback(error.__traceback__)
    jax_line = (str(error).strip().splitlines() or [""])[0].rstrip(".")
    raise error_standing_for(AutoGraphError, type(error))(
        f"{jax_line}: the `{statement}`{at(where)} would catch it, but Python raises no error there: "
        f"{needs.described() if needs else 'the `try` body'} needs the Python value of a traced "
        "value. Compute it with JAX (jnp functions, an `if` on the traced value), or make the "
        "argument static (static_argnums), rather than catching the error."
    ) from error


def _warn_fallback(error: Exception, where: Location | None, kind: str, runs_in_python: bool = True) -> None:
    # Catalyst's wording first (its users' pytest.warns(match=...) read it), then what happens here.
    first_line = (str(error).strip().splitlines() or [""])[0]
    known = "range" if kind == "for" else "condition"
    message = (
        f"Tracing of an AutoGraph converted {kind} loop failed with an exception:\n"
        f"  {type(error).__name__}:{textwrap.indent(first_line, '    ')}\n\n"
        f"The error occurred within the body of the following {kind} loop statement:\n"
        f"{where.as_traceback_entry() if where is not None else '  (unknown line)'}\n"
        + (
            "With catalyst_lite, the loop runs as a Python loop instead, unrolled while tracing."
            if runs_in_python
            else f"It cannot run as a Python loop either: its {known} is traced (known when the program "
            "runs)."
        )
    )
    if where is None:
        warnings.warn(message, AutoGraphWarning, stacklevel=4)
    else:
        warnings.warn_explicit(message, AutoGraphWarning, where.filename, where.lineno)
