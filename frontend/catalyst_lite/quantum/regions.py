"""``qml.adjoint`` and ``qml.ctrl`` of quantum functions, including the control flow inside them.

Such a function's operations queue into a *region* and reach the circuit transformed when the
state is next needed. A :class:`CtrlRegion` hands each on controlled (its loops and branches are
traced where they stand). An :class:`AdjointRegion` keeps operations, loops and branches as items,
emitted reversed and adjointed (a loop over the reversed range or the iterations it ran, a
``cond`` of adjoint branches). A loop's carried values come from runs in a :class:`DiscardRegion`
(mid-circuit measurements are not allowed in regions, so gates cannot change them): iteration ``j``
of a reversed loop recomputes them by ``j`` discarded iterations. Loops and branches reach the
regions through :class:`RegionControlFlow`, the circuit's control-flow handler.

A circuit's own operators wait in its queuing context (:func:`recorder_class`) until the state is
next needed (see :mod:`.qnode`). Observables that are not gates stay queued until the terminal
measurements, which may take them; measuring an operator that was applied as a gate is an error.

>>> import pennylane as qml
>>> from catalyst_lite import qjit, for_loop
>>> dev = qml.device("default.qubit", wires=2)
>>> def ladder(x):
...     @for_loop(0, 2, 1)
...     def layer(i):
...         qml.RY(x * (i + 1), wires=i)
...         qml.CNOT([i, (i + 1) % 2])
...     layer()
>>> @qjit
... @qml.qnode(dev)
... def undone(x: float):
...     ladder(x)
...     qml.adjoint(ladder)(x)
...     return qml.probs()
>>> [round(float(p), 6) for p in undone(0.4)]
[1.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import contextlib
import functools
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..compiler.specialize import trip_count
from ..control_flow import cond, for_loop
from ..errors import QuantumOperationError, QuantumRegionError
from ..jax_extras.patches import jax_nested_trace_depth
from .gates import _qml, operators_dropped

__all__ = ["Region", "RegionControlFlow", "adjoint_transform", "RegionRun", "run_adjoint",
           "run_ctrl", "MEASUREMENT_IN_REGION", "recorder_class", "queue_class"]

MEASUREMENT_IN_REGION = "Mid-circuit measurements cannot be used within an adjoint() or ctrl() region."


@functools.cache
def queue_class():
    """The queuing context of a compiled circuit or region: it refuses an operator queued inside a
    function JAX traces itself (``jax.lax.cond``, ``fori_loop``, ``jax.jit``)."""
    qml = _qml()
    class CircuitQueue(qml.queuing.AnnotatedQueue):
        def __init__(self):
            super().__init__()
            self.jax_depth = jax_nested_trace_depth()  # that of the circuit's own code

        def append(self, obj: Any, **kwargs: Any) -> None:
            if isinstance(obj, qml.operation.Operator) and jax_nested_trace_depth() > self.jax_depth:
                raise QuantumOperationError(
                    f"{obj.name} was applied inside a function that JAX traces itself within the "
                    "circuit (a jax.lax.cond branch, a jax.lax.fori_loop/while_loop/scan body, a "
                    "jax.jit function): its gates cannot follow that control flow (JAX traces both "
                    "branches of a cond, and a loop's body once). Use catalyst_lite's "
                    "cond/for_loop/while_loop (or qml.cond/qml.for_loop/qml.while_loop) for "
                    "quantum control flow."
                )
            super().append(obj, **kwargs)

    return CircuitQueue


@functools.cache
def recorder_class():
    qml = _qml()
    observables = (qml.ops.Prod, qml.ops.Sum, qml.ops.SProd, qml.Hermitian, qml.Projector)  # not gates

    class CircuitRecorder(queue_class()):
        """``applied``: the operators applied as gates (by ``id``), which no measurement may take;
        ``deferred``: the observable-type operators a flush left queued."""

        def __init__(self):
            super().__init__()
            self.applied: dict[int, Any] = {}
            self.deferred: dict[int, Any] = {}

        def take_operations(self, final: bool = False) -> list:
            """The queued operators to apply now, removed from the queue (but observables before
            the last segment)."""
            ops = [o for o in self.queue if isinstance(o, qml.operation.Operator)]
            if not final:
                self.deferred.update((id(o), o) for o in ops if isinstance(o, observables))
                ops = [o for o in ops if not isinstance(o, observables)]
            for o in ops:
                if self.deferred.get(id(o)) is o:
                    raise QuantumOperationError(
                        f"{o} was built before a loop, branch or mid-circuit measurement and is "
                        "never measured, so it would be applied as a gate out of order: "
                        "catalyst_lite keeps observables (products, sums, Hamiltonians, Hermitian) "
                        "out of the gates applied before such a point. Queue its gates separately "
                        "or build it after the loop."
                    )
                self.remove(o)
                self.applied[id(o)] = o
            return ops

        def check_not_applied(self, mp: Any) -> None:
            """Raise if ``mp``'s observable, or an operator inside it, was applied as a gate."""
            for part in _operator_parts(getattr(mp, "obs", None)):
                if self.applied.get(id(part)) is part:
                    raise QuantumOperationError(
                        f"The observable {part} of {type(mp).__name__} was built before a loop, "
                        "branch or mid-circuit measurement, where catalyst_lite applied it as a "
                        "gate. Build the observable where it is measured, after the loop."
                    )

    return CircuitRecorder


def _operator_parts(op: Any) -> Iterator[Any]:
    """``op`` and, recursively, the operators it is built from (operands, bases)."""
    if op is None:
        return
    yield op
    for child in getattr(op, "operands", ()):
        yield from _operator_parts(child)
    if hasattr(op, "base"):
        yield from _operator_parts(op.base)


class Region:
    """A stretch of the circuit whose operations queue here and reach the enclosing circuit as
    ``release(ops)`` returns them (``None``: the region keeps them)."""

    def __init__(self):
        self.queue = queue_class()()

    def take(self) -> list:
        """The operators queued so far, removed from the queue."""
        qml = _qml()
        if any(isinstance(o, qml.measurements.MeasurementProcess) for o in self.queue.queue):
            raise QuantumRegionError(
                "Measurement process cannot be used within an adjoint() or ctrl() region."
            )
        ops = [o for o in self.queue.queue if isinstance(o, qml.operation.Operator)]
        for o in ops:
            self.queue.remove(o)
        return ops


class CtrlRegion(Region):
    """``qml.ctrl(fn, *options)``: options are control, control_values, work_wires, work_wire_type."""

    def __init__(self, options: tuple):
        super().__init__()
        self.options = options
        self.released: list = []  # the controlled operators handed on

    def release(self, ops: list) -> list:
        qml = _qml()
        with qml.QueuingManager.stop_recording():
            controlled = [qml.ops.op_math.controlled.create_controlled_op(op, *self.options) for op in ops]
        self.released += controlled
        return controlled


class DiscardRegion(Region):
    def release(self, ops: list) -> None:
        return None


@dataclass
class _Loop:
    """A loop recorded inside ``qml.adjoint``: ``body(i, *carried)`` ran ``count`` times, ``i``
    from ``lower`` by ``step`` (a ``while_loop``'s body ignores ``i``)."""

    body: Callable
    init: tuple
    lower: Any
    step: Any
    count: Any


@dataclass
class _Cond:
    """A ``cond`` recorded inside ``qml.adjoint``: each branch's run, as an adjoint region."""

    preds: list
    branches: list[AdjointRegion]
    otherwise: AdjointRegion | None


class AdjointRegion(Region):
    """``qml.adjoint(fn)``: items emitted reversed and adjointed by :meth:`emit`."""

    def __init__(self, state: Any, lazy: bool = True):
        super().__init__()
        self.state = state
        self.lazy = lazy
        self.items: list[Any] = []  # lists of operators, _Loop and _Cond, in program order

    def release(self, ops: list) -> None:
        if ops:
            self.items.append(ops)

    # Control flow (from RegionControlFlow, once the pending operations are items): the values
    # it returns come from a run that discards its gates.

    def record_for_loop(self, body: Callable, bounds: tuple, init: tuple, bind: Callable) -> Any:
        result = self._classically(bind, body, init) if init else None
        lower, upper, step = bounds
        self.items.append(_Loop(_as_at_call(body), init, lower, step, trip_count(lower, upper, step)))
        return result

    def record_while_loop(self, cond_fn: Callable, body: Callable, init: tuple, bind: Callable) -> Any:
        def counting_cond(*carried: Any) -> Any:
            return cond_fn(*carried[:-1])

        def counting_body(*carried: Any) -> tuple:
            *user, count = carried
            return (*_as_tuple(body(*user), len(user)), count + 1)

        counted = self._classically(bind, counting_cond, counting_body, (*init, 0))
        *result, count = _as_tuple(counted, len(init) + 1)
        at_call = _as_at_call(body)
        self.items.append(_Loop(lambda _, *c: at_call(*c), init, 0, 1, count))
        return None if not result else result[0] if len(result) == 1 else tuple(result)

    def record_cond(self, preds: list, branches: list, otherwise: Callable | None, bind: Callable) -> Any:
        # Without `otherwise` the branches return nothing: no classical run is needed.
        result = None if otherwise is None else self._classically(bind, preds, branches, otherwise)
        # Each branch runs now, where the circuit calls it: run later (when emitted), it would see
        # the Python values of that time (a loop variable it closes over, say), not the call's.
        runs = [self._branch_run(b) for b in branches]
        self.items.append(_Cond(preds, runs, None if otherwise is None else self._branch_run(otherwise)))
        return result

    def _branch_run(self, branch: Callable) -> AdjointRegion:
        region = AdjointRegion(self.state, self.lazy)
        _run_in(self.state, region, branch, (), {})
        return region

    def _classically(self, bind: Callable, *args: Any) -> Any:
        with self.state.region(DiscardRegion()):
            return bind(*args)

    def emit(self) -> list:
        """Queue the items' adjoints into the enclosing context; the adjoint gates outside loops."""
        qml = _qml()
        emitted = []
        for item in reversed(self.items):
            if isinstance(item, _Loop):
                self._emit_loop(item)
            elif isinstance(item, _Cond):
                self._emit_cond(item)
            else:
                with qml.QueuingManager.stop_recording():  # qml.adjoint(op, lazy), unqueued
                    adjoints = [op.adjoint() if not self.lazy and op.has_adjoint else qml.ops.Adjoint(op)
                                for op in reversed(item)]
                for op in adjoints:
                    qml.QueuingManager.append(op)
                emitted += adjoints
        return emitted

    def _emit_loop(self, loop: _Loop) -> None:
        state, lower, step, count = self.state, loop.lower, loop.step, loop.count

        @for_loop(0, count, 1)
        def reversed_loop(k: Any) -> None:
            j = count - 1 - k
            i = lower + j * step
            carried = loop.init
            if loop.init:  # the values iteration j receives: j iterations of the body, no gates
                with state.region(DiscardRegion()):
                    carried = _as_tuple(for_loop(lower, i, step)(loop.body)(*loop.init), len(loop.init))
            adjoint_transform(state, loop.body, self.lazy)(i, *carried)

        reversed_loop()

    def _emit_cond(self, item: _Cond) -> None:
        adjoints = [_emitting(run) for run in item.branches]
        chosen = cond(item.preds[0])(adjoints[0])
        for pred, branch in zip(item.preds[1:], adjoints[1:]):
            chosen.else_if(pred)(branch)
        if item.otherwise is not None:
            chosen.otherwise(_emitting(item.otherwise))
        chosen()


def _emitting(region: AdjointRegion) -> Callable[[], None]:
    """A branch emitting ``region``'s adjoint."""

    def branch() -> None:
        region.emit()

    return branch


def _as_at_call(fn: Callable, copies: dict[int, Any] | None = None) -> Callable:
    """A copy of ``fn`` whose closure cells hold their values now (and so, recursively, do the
    functions it closes over): a loop body is traced again when the adjoint is emitted, after the
    function returned, and a Python loop's variable it closes over has moved on since. The user's
    own cells are never written."""
    copies = {} if copies is None else copies
    if not isinstance(fn, types.FunctionType) or not fn.__closure__:
        return fn
    if id(fn) in copies:
        return copies[id(fn)]
    cells = tuple(types.CellType() for _ in fn.__closure__)
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, cells)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    copy.__dict__.update(fn.__dict__)
    copies[id(fn)] = copy  # before its cells: a function may close over itself
    for mine, theirs in zip(cells, fn.__closure__):
        try:
            mine.cell_contents = _as_at_call(theirs.cell_contents, copies)
        except ValueError:  # not assigned yet
            pass
    return copy


def _as_tuple(values: Any, n: int) -> tuple:
    """The loop convention: one carried value unwrapped, several as a tuple, none as ``None``."""
    return () if n == 0 else (values,) if n == 1 else tuple(values)


class RegionControlFlow:
    """The circuit's control-flow handler: a loop or branch inside ``qml.adjoint`` (even through
    ``qml.ctrl`` regions) is recorded by that adjoint region, elsewhere bound as usual. ``depth``:
    the loops and branches being traced (``loop_depth``: loops); ``calls``: those traced so far."""

    def __init__(self, state: Any):
        self.state = state
        self.loop_depth = self.depth = self.calls = 0

    @contextlib.contextmanager
    def _traced(self, loop: bool) -> Iterator[tuple[AdjointRegion | None, Callable[[Callable], Callable]]]:
        """Counts the loop or branch; yields the innermost adjoint region recording control flow
        (its pending operations made items) and how a function runs in the ctrl regions inside it."""
        region, inner = None, []
        for k in reversed(range(len(self.state.regions))):
            if isinstance(self.state.regions[k], (AdjointRegion, DiscardRegion)):
                if isinstance(self.state.regions[k], AdjointRegion):
                    region, inner = self.state.regions[k], self.state.regions[k + 1:]
                    self.state.flush()
                break
        self.calls += 1
        self.depth += 1
        self.loop_depth += loop
        try:
            yield region, lambda fn: _within(self.state, inner, fn)
        finally:
            self.depth -= 1
            self.loop_depth -= loop

    def for_loop(self, body: Callable, bounds: tuple, init: tuple, bind: Callable) -> Any:
        with self._traced(loop=True) as (region, within):
            if region is None:
                return bind(body, init)
            return region.record_for_loop(within(body), bounds, init, bind)

    def while_loop(self, cond_fn: Callable, body: Callable, init: tuple, bind: Callable) -> Any:
        with self._traced(loop=True) as (region, within):
            if region is None:
                return bind(cond_fn, body, init)
            return region.record_while_loop(cond_fn, within(body), init, bind)

    def cond(self, preds: list, branches: list, otherwise: Callable | None, bind: Callable) -> Any:
        # `qml.cond(m, qml.RY)(x, wires=0)`: a branch may return the operator it applies.
        branches = [operators_dropped(b) for b in branches]
        otherwise = None if otherwise is None else operators_dropped(otherwise)
        with self._traced(loop=False) as (region, within):
            if region is None:
                return bind(preds, branches, otherwise)
            otherwise = None if otherwise is None else within(otherwise)
            return region.record_cond(preds, [within(b) for b in branches], otherwise, bind)


def _within(state: Any, regions: Sequence[CtrlRegion], fn: Callable) -> Callable:
    """``fn`` in new ctrl regions like ``regions``, whose controls it keeps wherever emitted."""
    if not regions:
        return fn

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for region in regions:
                stack.enter_context(state.region(CtrlRegion(region.options)))
            out = fn(*args, **kwargs)
            state.flush()  # hand the controlled gates on while the regions are open
        return out

    return wrapped


def _unqueue_operator_arguments(args: tuple, kwargs: dict) -> None:
    """Operators passed as arguments are the function's to apply, not gates of their own."""
    qml = _qml()
    leaves, _ = qml.pytrees.flatten((args, kwargs), lambda obj: isinstance(obj, qml.operation.Operator))
    for leaf in leaves:
        if isinstance(leaf, qml.operation.Operator):
            qml.QueuingManager.remove(leaf)


@dataclass
class RegionRun:
    """What a function run in a region applied: ``gates`` outside ``control_flow``, if it had any."""

    gates: list
    control_flow: bool


def _run_in(state: Any, region: Region, fn: Callable, args: tuple, kwargs: dict) -> None:
    _unqueue_operator_arguments(args, kwargs)
    with state.region(region):
        fn(*args, **kwargs)
        state.flush()


def run_adjoint(state: Any, fn: Callable, lazy: bool, args: tuple, kwargs: dict) -> RegionRun:
    """Run ``fn(*args, **kwargs)`` in an :class:`AdjointRegion` of ``state``, and emit its adjoint."""
    region = AdjointRegion(state, lazy)
    _run_in(state, region, fn, args, kwargs)
    gates = region.emit()
    return RegionRun(gates, any(not isinstance(item, list) for item in region.items))


def run_ctrl(state: Any, fn: Callable, options: tuple, args: tuple, kwargs: dict) -> RegionRun:
    """Run ``fn(*args, **kwargs)`` in a :class:`CtrlRegion` of ``options`` of ``state``."""
    region = CtrlRegion(options)
    calls = state.control_flow.calls
    _run_in(state, region, fn, args, kwargs)
    traced = state.control_flow.calls != calls
    return RegionRun([] if traced else region.released, traced)


def adjoint_transform(state: Any, fn: Callable, lazy: bool = True, returns: bool = True) -> Callable:
    """``qml.adjoint(fn, lazy)`` in ``state``'s circuit: calling it returns the adjoint operator(s)
    when ``fn`` applied gates only, as PennyLane does; nothing with ``returns=False`` (a branch)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = run_adjoint(state, fn, lazy, args, kwargs)
        if not returns or run.control_flow:
            return None
        return run.gates[0] if len(run.gates) == 1 else run.gates

    return wrapper

