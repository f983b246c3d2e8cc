"""QNodes inside ``@qjit``: the circuit becomes array operations of the traced program.

While catalyst_lite traces (:func:`quantum_tracing`), calling a ``qml.QNode`` runs
:func:`execute_qnode`: the state vector and a PRNG key are *ambient carries* (threaded through
loops and branches); the quantum function's operations queue (:mod:`.regions`)
and are applied (:mod:`.fusion`) when the state is next needed, since PennyLane unqueues an
operator that becomes the base of ``qml.adjoint``/``qml.ctrl``. Measurements are exact or
statistics of shots (:mod:`.measurements`).

A circuit whose mid-circuit measurements' results cover many branches runs again and again inside
one counted loop: :func:`one_shot_results` once per shot (``"one-shot"``, ``"deferred"`` with
shots; the results are statistics of each shot's records over the valid shots, a value that is no
measurement stacked per shot, as in Catalyst), :func:`all_branches_results` once per branch
(``"deferred"`` without shots: exact statistics of the weighted mixture, as PennyLane's). There,
``run(policy, key)`` runs the quantum function once (:func:`run_circuit`); ``probe`` is the run
that found the measurements: the results' structure and the QNode's key carry.

>>> import pennylane as qml
>>> from catalyst_lite import qjit
>>> dev = qml.device("default.qubit", wires=2)
>>> @qjit
... @qml.qnode(dev)
... def bell(x: float):
...     qml.RY(x, wires=0)
...     qml.CNOT(wires=[0, 1])
...     return qml.probs()
>>> [round(float(p), 3) for p in bell(3.14159265 / 2)]
[0.5, 0.0, 0.0, 0.5]
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..trace_context import current as current_context, pennylane_capture_enabled, scope as context_scope
from ..control_flow import for_loop
from ..control_flow.common import (
    ControlFlowOperation, StandsForValue, ambient_carry, control_flow_handler, traced_value,
)
from ..debug import callback
from ..errors import (
    CatalystLiteError, CompileError, QuantumOperationError, QuantumRegionError, RetrySignal, ShotsError,
    WireError, pennylane_error,
)
from ..jax_extras import Tracer, is_tracing, under_jax_transformation
from ..jax_extras.patches import Patch, register_patch
from ..tracing import Contribution, register_trace_extension
from . import prng
from .adjoint import adjoint_expvals
from .gates import (
    BroadcastingError, DecomposesIntoControlFlow, GateRecord, OutsideWires, WireMap, _qml, bit_flip_matrix,
    gate_records, initial_state, recorded_decomposition, replayed_control_flow,
)
from .mcm import (
    Branches, McmConfig, McmPolicy, OneShot, ShotPlan, SingleBranch, ValueCarry, measured_value, with_values,
)
from .fusion import apply_records
from .gradients import by_adjoint_method, gradient_method, with_exact_derivative
from .measurements import (
    apply_observable, check_hermitian, exact_measurement, flatten_results, is_measurement, measure_terminal,
    measurement_kind, shot_records, statistic, value_record,
)
from .regions import MEASUREMENT_IN_REGION, Region, RegionControlFlow, adjoint_transform, recorder_class, run_ctrl
from .sharded import StateSharding, execute_sharded_qnode
from .statevector import apply_matrix, project_wire, wire_entanglement, wire_probability, zero_state
from .transforms import qnode_pipeline, transformed_operations

__all__ = ["execute_qnode", "measure", "compiling_state", "quantum_tracing", "CIRCUIT_COMPILE_OPTIONS"]

SUPPORTED_DEVICES = ("default.qubit", "lightning.qubit", "null.qubit")  # null.qubit simulates nothing

CIRCUIT_COMPILE_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}
"""XLA options for a program that holds a circuit: XLA's classic CPU emitters compile its gate
kernels about a third faster than the fusion emitters, and run them as fast; LLVM's ``-O1`` (XLA's
default is ``-O2``) takes a tenth off the rest of the compilation (LLVM's optimizations are most
of it), and the memory-bound kernels run as fast. Classical programs keep XLA's defaults
(bit-identical to ``jax.jit``)."""


@dataclass
class TracedCircuits:
    """The QNodes compiled into one program: QNode ``i`` draws from stream ``i`` of a base key from
    ``seed``, else replaced on every call (:meth:`contribution`), as Catalyst draws anew."""

    seed: int | None = None
    count: int = 0
    base_key: Any = None

    def next_key(self) -> "KeyCarry":
        """The key of the next QNode compiled into the program."""
        if self.base_key is None:
            self.base_key = prng.key_from_seed(0 if self.seed is None else self.seed)
        key = prng.fold_in(self.base_key, self.count)
        self.count += 1
        return KeyCarry(key, self._drawing)

    def _drawing(self) -> None:
        if self.seed is None:  # only a key drawn from needs replacing on each call
            prng.mark_unseeded(self.base_key)

    def contribution(self, consts: Sequence[Any]) -> Contribution:
        """The program's XLA options, and the positions among its ``consts`` of keys to draw anew on
        each call (its own unseeded key, and those of unseeded programs it called while traced)."""
        fresh = {i: prng.host_key for i, c in enumerate(consts) if prng.is_unseeded_key(c)}
        return Contribution(dict(CIRCUIT_COMPILE_OPTIONS) if self.count else {}, fresh)


@register_trace_extension
@contextlib.contextmanager
def quantum_tracing(options: Mapping[str, Any]) -> Iterator[Callable[[Sequence[Any]], Contribution]]:
    """While tracing a ``qjit`` with ``options`` (``seed``), QNode calls compile into the program;
    yields its :meth:`TracedCircuits.contribution` (a trace extension)."""
    intercept_qnode_calls()
    seed = options.get("seed")
    traced = TracedCircuits(None if seed is None else int(seed))
    with context_scope(traced_circuits=traced):
        yield traced.contribution


def _make_qnode_call(original: Callable) -> Callable:
    # While this thread traces a qjit program (also under jax.grad/jax.vmap inside it) a QNode
    # compiles into it; elsewhere PennyLane runs it.
    def __call__(self, *args, **kwargs):
        if current_context().traced_circuits is not None and is_tracing(under_transformations=True):
            return execute_qnode(self, args, kwargs)
        return original(self, *args, **kwargs)

    return __call__


_intercept_lock = threading.Lock()
_intercepting = False


def intercept_qnode_calls() -> None:
    """Patch ``QNode.__call__`` once PennyLane is imported (acting only for a thread that traces)."""
    global _intercepting
    with _intercept_lock:
        if not _intercepting and "pennylane" in sys.modules:
            qnode_class = sys.modules["pennylane"].QNode
            register_patch(Patch("compile_qnode_calls", qnode_class, "__call__", _make_qnode_call,
                                 "a QNode called while catalyst_lite traces compiles into the program"))
            _intercepting = True


class KeyCarry(ValueCarry):
    """The PRNG key, an ambient carry; ``on_draw`` is told of each draw."""

    def __init__(self, key, on_draw: Callable[[], None] = lambda: None):
        super().__init__(key)
        self.on_draw = on_draw

    def split(self):
        """A fresh key for one random draw; the carried key moves on."""
        self.on_draw()
        self.value, sub = prng.split(self.value)
        return sub


class QuantumState:
    """The state vector, an ambient carry: :meth:`get` first applies the gates queued so far.
    ``regions``: the open ``qml.adjoint``/``qml.ctrl`` regions, outermost first (:mod:`.regions`)."""

    def __init__(self, wires: WireMap, recorder: Any, pipeline: Any = None, simulated: bool = True):
        self.wires = wires
        self.simulated = simulated  # False: null.qubit applies no gate
        wires.on_grow = self._grow
        self.recorder = recorder
        self.pipeline = pipeline  # the QNode's own transforms
        self._vector = self.initial = zero_state(wires.n_wires)
        # deferred: gates wait in _pending for the adjoint method (:func:`_adjoint_results`)
        self.deferred = False
        self._pending: list[GateRecord] = []
        self.fresh = True  # nothing applied yet: a StatePrep here is the initial state
        self.regions: list[Region] = []
        self.control_flow = RegionControlFlow(self)
        self.snapshots: list = []
        self._applying = False
        # the gates applied while the state is a function of them only (:mod:`.adjoint`), else None
        self.applied: list[GateRecord] | None = []

    @property
    def vector(self) -> Any:
        if self._pending:
            pending, self._pending = self._pending, []
            applying, self._applying = self._applying, True
            try:
                self._vector = apply_records(self, self._vector, pending)
            finally:
                self._applying = applying
        return self._vector

    @vector.setter
    def vector(self, value: Any) -> None:
        self._vector = value

    @property
    def n_wires(self) -> Any:
        return self.wires.n_wires

    def get(self):
        self.flush()
        return self.vector

    def _grow(self, added: int) -> None:
        """``added`` wires join the state in ``|0>`` (in a loop or branch: the circuit runs again)."""
        if self._in_control_flow():
            raise WiresAllocated()
        self.applied = None
        self.vector = jnp.kron(self.vector, zero_state(added))

    def set(self, value) -> None:
        if not self._applying:  # a loop, branch or measurement wrote the state
            self.applied = None
        self.vector = value
        self.fresh = False

    @contextlib.contextmanager
    def region(self, region: Region) -> Iterator[Region]:
        self.regions.append(region)
        try:
            with region.queue:
                yield region
        finally:
            self.regions.pop()

    def flush(self, measurements: Sequence[Any] | None = None) -> None:
        """Apply the queued operations, those of open regions through their regions.
        ``measurements``: the terminal ones, given for the last segment (transforms see them)."""
        if self._applying:  # a loop applying gates asks for the state being built
            return
        for k in reversed(range(len(self.regions))):
            ops = self.regions[k].release(self.regions[k].take())
            if ops is None:
                return
            parent = self.regions[k - 1].queue if k else self.recorder
            for op in ops:
                parent.append(op)
        self._applying = True
        try:
            # Operators built by decompositions and transforms must not queue (applied twice).
            with _qml().QueuingManager.stop_recording(), control_flow_handler(None):
                self._apply_queued(measurements)
        finally:
            self._applying = False

    def _apply_queued(self, measurements: Sequence[Any] | None) -> None:
        final = measurements is not None
        ops = [with_values(op) for op in self.recorder.take_operations(final)]
        if not self.simulated:  # snapshots are of |0...0>
            self.snapshots += [self._snapshot(op) for op in ops if op.name == "Snapshot"]
            return
        if self.pipeline and (ops or final):  # in the last segment, measurements are checked too
            ops = transformed_operations(self.pipeline, ops, measurements or ())
        if ops and (self._in_control_flow() or self.regions):
            self.applied = None
        records: list[GateRecord] = []
        for op in ops:
            if isinstance(op, (ControlFlowOperation, replayed_control_flow())):  # put on the tape by a
                self._commit(records)  # transform or recorded by a decomposition: its gates, now
                records = []
                self._replay(getattr(op, "flow", op).replay)
                continue
            if op.name in ("Snapshot", "Allocate", "Deallocate") and records:
                # (an allocated slot's index is the wire's after the gates so far)
                self.vector, records = apply_records(self, self.vector, records), []
            if op.name == "Snapshot":
                self.applied = None
                self.snapshots.append(self._snapshot(op))
            elif op.name in ("Allocate", "Deallocate"):
                self._allocation(op)
            elif isinstance(op, _qml().StatePrep) and self.fresh and not records:
                # default.qubit's initial state (AmplitudeEmbedding too); a later one is decomposed
                self.vector = self.initial = initial_state(op, self.wires)
                if any(isinstance(p, Tracer) for p in op.parameters):
                    self.applied = None
                self.fresh = False
            elif type(op).__name__ == "MidMeasureMP":
                raise QuantumOperationError(
                    "qml.measure is compiled only while catalyst_lite is PennyLane's active compiler "
                    "(qml.qjit(compiler='catalyst_lite')); use catalyst_lite.measure."
                )
            else:
                try:
                    records += gate_records(op, self.wires)
                except DecomposesIntoControlFlow:  # its gates follow its loops and branches, now
                    self._commit(records)
                    records = []
                    self._replay(functools.partial(self._decompose, op))
                self.wires.check_distinct(op.wires, op.name)
        self._commit(records)

    def _commit(self, records: list[GateRecord]) -> None:
        if not records:
            return
        if self.applied is not None:
            self.applied += records
        if self.deferred and self.applied is not None:
            self._pending += records
        else:
            self.vector = apply_records(self, self.vector, records)
        self.fresh = False

    def _replay(self, replay: Callable[[], Any]) -> None:
        """Call ``replay`` (control flow called again), recording and applying its gates as in the
        circuit (but not transformed again: the transform that placed it saw them as one operation;
        nor controlled or adjointed again by the open regions, which the operation went through)."""
        pipeline, self.pipeline, self._applying = self.pipeline, None, False
        regions, self.regions = self.regions, []
        try:
            with self.recorder, control_flow_handler(self.control_flow):
                replay()
            self.flush()
        finally:
            self.pipeline, self._applying, self.regions = pipeline, True, regions

    def _decompose(self, op: Any) -> None:
        """Apply ``op``, whose decomposition has loops or branches, as a quantum function: its
        operators queued, its control flow called again in the circuit (adjoints and controlled
        versions of it in adjoint and ctrl regions)."""
        qml = _qml()
        if isinstance(op, qml.ops.Adjoint):
            adjoint_transform(self, functools.partial(self._decompose, op.base), returns=False)()
        elif isinstance(op, qml.ops.Controlled):
            options = (op.control_wires, op.control_values, op.work_wires, "borrowed")
            run_ctrl(self, functools.partial(self._decompose, op.base), options, (), {})
        else:
            for item in recorded_decomposition(op):
                item.flow.replay() if isinstance(item, replayed_control_flow()) else qml.apply(item)

    def _in_control_flow(self) -> bool:
        return self.control_flow.depth > 0

    def _allocation(self, op: Any) -> None:
        """``Allocate``: each dynamic wire gets a slot (:class:`.gates.WireMap`); inside a loop or branch,
        freed slots are reused, reset by a measurement as PennyLane does. ``Deallocate``: freed."""
        if op.name == "Deallocate":
            self.wires.deallocate(op.wires)
            return
        in_control_flow = self._in_control_flow()
        restored = bool(op.hyperparameters.get("restored", False))
        circuit = current_context().circuits[-1]
        for index, used in self.wires.allocate(op.wires, restored, reuse=in_control_flow):
            if (in_control_flow and not restored) or used:
                if circuit.exact:  # one drawn outcome is PennyLane's average only if not entangled
                    callback(_raise_if_entangled)(wire_entanglement(self.vector, index, self.n_wires))
                collapse(circuit, index, reset=True)

    def _snapshot(self, op: Any) -> Any:
        """The state at a ``qml.Snapshot``, as Catalyst returns it."""
        measurement = op.hyperparameters.get("measurement")
        if measurement is not None and type(measurement).__name__ != "StateMP":
            raise NotImplementedError(
                "qml.Snapshot() only supports qml.state() when used from within Catalyst, but "
                f"encountered {type(measurement)}"
            )
        if self._in_control_flow():
            raise QuantumOperationError(
                "qml.Snapshot inside a for_loop, while_loop or cond is not supported: the snapshots "
                "are results of the QNode, taken once. Take the snapshot outside the loop or branch."
            )
        return self.vector


@dataclass
class CircuitRun:
    """One run of a QNode's quantum function: what :func:`measure` reads, then what it returned."""

    state: QuantumState
    key: KeyCarry
    policy: McmPolicy
    output: Any = None
    measurements: list = field(default_factory=list)
    adjoint: Any = None  # the results by the adjoint method, when it applies
    exact: bool = False  # the QNode's results are this run's exact ones (no shots, one branch)


class WiresAllocated(RetrySignal):
    """A new wire inside a loop or branch, or a first traced wire: run the circuit again."""


def _device_name(qnode) -> str:
    return getattr(qnode.device, "name", type(qnode.device).__name__)


def _device_wires(qnode) -> WireMap:
    """The device's wires: labels, a traced number, or allocated on use (:class:`.gates.WireMap`)."""
    device = qnode.device
    name = _device_name(qnode)
    if name not in SUPPORTED_DEVICES:
        raise QuantumOperationError(
            f"catalyst_lite compiles QNodes on {' and '.join(SUPPORTED_DEVICES)}, not on {name}."
        )
    if device.wires is None:
        return WireMap(growing=True)  # allocated as the circuit uses them
    labels = list(device.wires.labels)
    if len(labels) == 1 and isinstance(labels[0], Tracer):
        if not jnp.issubdtype(labels[0].dtype, jnp.integer):
            raise WireError(f"The number of wires of {name} must be an integer, got {labels[0].aval.str_short()}.")
        qnode_name = getattr(qnode, "__name__", "a QNode")
        callback(functools.partial(_raise_if_negative_wires, name, qnode_name))(labels[0])
        return WireMap(None, labels[0].astype(jnp.int64))  # 0 .. n - 1
    if any(isinstance(l, Tracer) for l in labels):
        raise WireError(f"The wires of {name} are labels or one (possibly traced) number of wires, got {labels}.")
    return WireMap(labels)


def run_circuit(qnode, qfunc: Callable, args: tuple, kwargs: dict, wires: WireMap, policy: McmPolicy,
                key: KeyCarry, adjoint: bool = False, exact: bool = False) -> CircuitRun:
    """Run ``qfunc`` once from ``|0...0>``, its gates array operations of the traced program;
    ``adjoint``: exact expectation values by the adjoint method (``run.adjoint``)."""
    recorder = recorder_class()()
    state = QuantumState(wires, recorder, qnode_pipeline(qnode), _device_name(qnode) != "null.qubit")
    state.deferred = adjoint and state.simulated
    outside = OutsideWires(wires, WiresAllocated)
    wires.begin_run()
    run = CircuitRun(state, key, policy, exact=exact)
    with context_scope(circuits=(*current_context().circuits, run)), contextlib.ExitStack() as scope:
        for carry in (state, key, *policy.carries, *outside.carries):
            scope.enter_context(ambient_carry(carry))
        scope.enter_context(recorder)
        scope.enter_context(control_flow_handler(state.control_flow))
        run.output = qfunc(*args, **kwargs)
        _check_returned(qnode, run.output)
        run.measurements = [m for m in jax.tree_util.tree_leaves(run.output, is_leaf=is_measurement) if is_measurement(m)]
        for m in run.measurements:
            recorder.check_not_applied(m)
            check_hermitian(m)
            if m.mv is None and m.obs is None:  # (an observable's factors may share wires: X(0) @ X(0))
                wires.check_distinct(m.wires, measurement_kind(m))
            if m.mv is None:  # wires allocated on use: all of them before any result
                _check_terminal_wires(m, all_wires=False)
                wires.indices(m.wires, measurement_kind(m))
        state.flush(run.measurements)  # while the state is ambient (loops carry it)
        if wires.slots:  # qml.allocate was applied
            for m in run.measurements:
                _check_terminal_wires(m, all_wires=m.mv is None)
        # (the adjoint sweep knows the device's wires only)
        run.adjoint = _adjoint_results(run) if state.deferred and not wires.slots else None
        if run.adjoint is None:
            state.vector  # applies the deferred gates while the state is ambient
    outside.check(_device_name(qnode), getattr(qnode, "__name__", "a QNode"))
    return run


def _check_terminal_wires(m: Any, all_wires: bool) -> None:
    """Catalyst's errors: no wire of ``qml.allocate`` measured; with ``all_wires``, wires named."""
    if all_wires and not len(m.wires):
        raise CompileError(  # Catalyst's phrase, with its line breaks
            "\nTerminal measurements must take in an explicit list of wires when\ndynamically "
            f"allocated wires are present in the program.\n{measurement_kind(m)}() measures every wire."
        )
    if any(type(w).__name__ == "DynamicWire" for w in m.wires):
        raise CompileError(
            "\nTerminal measurements cannot take in dynamically allocated wires\nsince they must be "
            f"temporary.\n{measurement_kind(m)} of a wire of qml.allocate."
        )


_NUMBERS = (Tracer, jax.Array, np.ndarray, np.number, np.bool_, bool, int, float, complex)  # returnable


def _check_returned(qnode, output: Any) -> None:
    """A QNode returns measurements and (as with Catalyst) numbers and arrays: not nothing, nor an
    operator or another Python object."""
    # an operator is a leaf (its pytree leaves are its parameters, numbers, which it is not)
    leaves = jax.tree_util.tree_leaves(output, is_leaf=lambda x: is_measurement(x) or isinstance(x, _qml().operation.Operator))
    odd = [x for x in leaves if not (is_measurement(x) or isinstance(x, (StandsForValue, *_NUMBERS)))]
    if not leaves or odd:
        what = f"returned {(odd or [output])[0]!r}" if odd or output is not None else "returned no measurement"
        raise pennylane_error(QuantumOperationError, "QuantumFunctionError")(
            "A quantum function must return either a single measurement, or a nonempty sequence of "
            f"measurements. The QNode {getattr(qnode, '__name__', qnode)} {what}: return "
            "qml.expval, qml.probs, qml.sample... (or numbers and arrays, as Catalyst allows)."
        )


def _check_shots(qnode, shots: ShotPlan, measurements: list) -> None:
    """Shots PennyLane refuses: with ``qml.state()``, or (when run) not positive."""
    if shots.finite and any(measurement_kind(m) == "state" for m in measurements):
        raise pennylane_error(QuantumOperationError, "DeviceError")(
            f"Measurement state() not accepted with finite shots on {_device_name(qnode)}: remove the "
            "shots (qml.set_shots(..., shots=None)) to return the state."
        )
    if shots.traced:
        callback(_raise_if_not_positive)(shots.total)


def _raise_if_entangled(entanglement: Any) -> None:
    if float(entanglement) > 1e-10:
        raise QuantumOperationError(
            "qml.allocate inside a for_loop, while_loop or cond reused a wire freed by qml.deallocate "
            "while it was still entangled with other wires. PennyLane resets such a wire by a "
            "mid-circuit measurement and averages over its outcomes; without shots catalyst_lite "
            "would follow one drawn outcome (a wrong number). Uncompute the wire before deallocating "
            "it, allocate it outside the loop or branch, or set finite shots (each shot then follows "
            "its own outcome)."
        )


def _raise_if_negative_wires(device: str, qnode: str, n_wires: Any) -> None:
    if int(n_wires) < 0:
        raise WireError(
            f"The number of wires of {device} must not be negative, got {int(n_wires)} (the traced number "
            f"of wires of the QNode {qnode}). Pass wires=n with n >= 0."
        )


def _raise_if_not_positive(total: Any) -> None:
    if int(total) <= 0:
        raise ShotsError(
            "Shots must be a single positive integer, a tuple pair of the form (shots, copies), or a "
            f"sequence of these types; got shots={int(total)} (the traced number of shots)."
        )


def _naming_the_qnode(execute: Callable) -> Callable:
    """``execute`` whose errors name the QNode: gates and measurements are applied after its
    function returns (no line of the user's is on the stack), and a QNode may be one of several."""

    @functools.wraps(execute)
    def named(qnode, *args: Any, **kwargs: Any) -> Any:
        try:
            return execute(qnode, *args, **kwargs)
        except CatalystLiteError as error:
            name = getattr(qnode, "__name__", None)
            message = error.args[0] if error.args and isinstance(error.args[0], str) else None
            if name and message is not None and not re.search(rf"\b{re.escape(name)}\b", message):
                error.args = (f"{error.args[0]} (in the QNode {name})", *error.args[1:])
            raise

    return named


@_naming_the_qnode
def execute_qnode(qnode, args: tuple, kwargs: dict, qfunc: Callable | None = None):
    """The QNode's results, as array operations of the traced program (``qfunc``: in place of its
    function, from ``catalyst_lite.capture``). The first run follows one drawn branch of each
    mid-circuit measurement; with another ``mcm_method`` it runs again per shot or branch."""
    wires = _device_wires(qnode)
    kwargs = dict(kwargs)
    shots = ShotPlan.of(qnode, kwargs)
    # (the trace's record; a QNode compiled by another route gets its own)
    key = (current_context().traced_circuits or TracedCircuits()).next_key()
    qfunc = qnode.func if qfunc is None else qfunc
    state_sharding = (current_context().qjit_options or {}).get("state_sharding")
    if state_sharding is not None:  # qjit(state_sharding=...): the state split over devices
        sharding = StateSharding(state_sharding, getattr(qnode, "__name__", "a QNode"))
        return execute_sharded_qnode(qnode, qfunc, args, kwargs, sharding, key, shots)
    config = McmConfig.of(qnode, shots)
    initial_key = key.get()
    while True:
        try:
            first = run_circuit(qnode, qfunc, args, kwargs, wires, SingleBranch(), key,
                                adjoint=by_adjoint_method(qnode) and not shots.finite,
                                exact=not shots.finite and config.method == "single-branch-statistics"
                                and not config.explicit)  # (chosen: one branch is what is asked)
            break
        except WiresAllocated:  # run again with the wires found so far, from the same key
            key.set(initial_key)
        except BroadcastingError as error:
            if config.method == "one-shot" and config.explicit:  # Catalyst's phrase first
                raise BroadcastingError(f"mcm_method='one-shot' is not compatible with broadcasting: {error}") from None
            raise
    _check_shots(qnode, shots, first.measurements)
    classical = not all(is_measurement(x) for x in flatten_results(first.output)[0])
    method = gradient_method(qnode, [measurement_kind(m) for m in first.measurements], shots.finite, classical)
    if first.policy.sites and config.method != "single-branch-statistics" and first.state.simulated:

        def run(policy: McmPolicy, key: KeyCarry) -> CircuitRun:
            return run_circuit(qnode, qfunc, args, kwargs, wires, policy, key)

        key.set(initial_key)  # the first run's draws are unused: its equations are dropped
        if shots.finite:
            results = one_shot_results(run, first, shots, config)
        else:
            results = all_branches_results(run, first)
    elif first.adjoint is not None:
        results = first.adjoint
    else:
        # (under jax.grad inside the program too: statistics of shots get exact derivatives)
        differentiated = method is not None or under_jax_transformation()
        results = _terminal_results(first, shots, differentiated and first.state.simulated)
    # With qml.Snapshot, Catalyst returns the snapshots (of the first run) before the results.
    return (first.state.snapshots, results) if first.state.snapshots else results


def _adjoint_results(run: CircuitRun) -> Any:
    """Exact expectation values with derivatives by the adjoint method (:mod:`.adjoint`), or
    ``None`` when it does not apply (every ``diff_method`` gives an exact ``expval`` the same)."""
    state = run.state
    if state.applied is None or state.snapshots or run.policy.sites:
        return None
    leaves, tree = flatten_results(run.output)
    if not all(is_measurement(x) for x in leaves):
        return None
    values = adjoint_expvals(leaves, state.initial, state.applied, state.n_wires, state.wires)
    return None if values is None else jax.tree_util.tree_unflatten(tree, values)


def _terminal_results(run: CircuitRun, shots: ShotPlan, differentiated: bool = False) -> Any:
    """The results from the final state: exact, or statistics of ``shots`` (a tuple per entry of
    a shot vector); ``differentiated``: with the exact ones' derivatives (:mod:`.gradients`)."""
    state = run.state
    leaves, tree = flatten_results(run.output)
    measured = [x for x in leaves if is_measurement(x)]
    results = iter(measure_terminal(measured, state.vector, state.n_wires, state.wires, shots, run.key.split,
                                    state.simulated))

    def value(mp: Any) -> Any:
        result = next(results)
        if not (differentiated and shots.finite and mp.mv is None and measurement_kind(mp) in ("expval", "probs", "var")):
            return result
        exact = exact_measurement(mp, state.vector, state.n_wires, state.wires)
        if shots.partitioned:
            return tuple(with_exact_derivative(r, exact) for r in result)
        return with_exact_derivative(result, exact)

    values = [value(x) if is_measurement(x) else traced_value(x) for x in leaves]
    if not shots.partitioned:
        return jax.tree_util.tree_unflatten(tree, values)
    return tuple(jax.tree_util.tree_unflatten(tree, [v[i] if is_measurement(x) else v for x, v in zip(leaves, values)])
                 for i in range(len(shots.slices())))


MAX_BRANCHING_MEASUREMENTS = 20
"""``mcm_method="deferred"`` without shots runs ``2**k`` branches: at most this many measurements."""


def _shot_records(leaves: list, run: Any, key: Any) -> list:
    """What one execution (one shot) records of each output leaf."""
    drawn = [leaf for leaf in leaves if is_measurement(leaf) and leaf.mv is None]  # never state() (qnode._check_shots)
    state = run.state
    records = iter(shot_records(drawn, state.vector, key.split, 1, state.n_wires, state.wires))
    return [jnp.asarray(leaf) if not is_measurement(leaf) else value_record(leaf) if leaf.mv is not None else next(records)[0]
            for leaf in leaves]


def one_shot_results(run: Callable, probe: Any, shots: ShotPlan, config: McmConfig) -> Any:
    """The QNode's results with one execution per shot (see the module docstring)."""
    key = probe.key
    leaves, tree = flatten_results(probe.output)
    # Each record's type, from the probe (with a key of its own: its equations are dropped)
    scratch = type(key)(key.get())
    shapes = [jnp.asarray(r) for r in _shot_records(leaves, probe, scratch)]
    base = key.split()
    count = shots.total

    @for_loop(0, count, 1)
    def each_shot(i, records, valid):
        policy = OneShot(config.fill_shots)
        shot_key = type(key)(prng.fold_in(base, i), key.on_draw)
        current = run(policy, shot_key)
        now = _shot_records(flatten_results(current.output)[0], current, shot_key)
        records = [lax.dynamic_update_index_in_dim(r, jnp.asarray(x, r.dtype), i, 0) for r, x in zip(records, now)]
        return records, lax.dynamic_update_index_in_dim(valid, policy.valid.get(), i, 0)

    init = [jnp.zeros((count,) + s.shape, s.dtype) for s in shapes]
    records, valid = each_shot(init, jnp.ones((count,), bool))
    kept = None if config.fill_shots else valid

    def entry(records: list, kept: Any) -> Any:
        values = [statistic(leaf, r, probe.state.n_wires, kept) if is_measurement(leaf) else r
                  for leaf, r in zip(leaves, records)]
        return jax.tree_util.tree_unflatten(tree, values)

    if not shots.partitioned:
        return entry(records, kept)
    return tuple(entry([r[start:stop] for r in records], None if kept is None else kept[start:stop])
                 for start, stop in shots.slices())


def _moments(leaf: Any, state: Any) -> Any:
    """What one branch contributes (weighted) to a measurement: its exact value (and mean square)."""
    if not is_measurement(leaf):
        raise QuantumOperationError(
            "With mcm_method='deferred' and no shots the QNode must return measurements only (a "
            "mid-circuit measurement value differs from branch to branch); use qml.expval(m) or "
            "qml.probs(op=m)."
        )
    kind = measurement_kind(leaf)
    if kind not in ("expval", "var", "probs"):
        problem = "needs finite shots" if kind in ("sample", "counts") else "is not supported here"
        raise QuantumOperationError(
            f"{kind} {problem}; with mcm_method='deferred' and no shots, expval, var and probs are "
            "computed exactly."
        )
    if leaf.mv is not None:
        value = value_record(leaf)
        if kind == "probs":
            return jax.nn.one_hot(value, 2 ** len(leaf.mv if isinstance(leaf.mv, (list, tuple)) else [leaf.mv]),
                                  dtype=jnp.float64)
        return jnp.stack([value, value**2])
    if kind == "probs":
        return exact_measurement(leaf, state.vector, state.n_wires, state.wires)
    applied = apply_observable(leaf.obs, state.vector, state.n_wires, state.wires)
    return jnp.stack([jnp.real(jnp.vdot(state.vector, applied)), jnp.real(jnp.vdot(applied, applied))])


def _combined(leaf: Any, total: Any, norm: Any) -> Any:
    moments, kind = total / norm, measurement_kind(leaf)
    return moments if kind == "probs" else moments[0] if kind == "expval" else moments[1] - moments[0] ** 2


def all_branches_results(run: Callable, probe: Any) -> Any:
    """The QNode's exact results over every branch of its mid-circuit measurements."""
    sites = probe.policy.sites
    if probe.policy.sites_in_loops:
        raise QuantumOperationError(
            "mcm_method='deferred' without shots needs the number of mid-circuit measurements "
            "while tracing, but a measurement is inside a for_loop/while_loop. Set finite shots "
            "(each shot then follows its own branch), or measure outside loops."
        )
    if sites > MAX_BRANCHING_MEASUREMENTS:
        raise QuantumOperationError(
            f"mcm_method='deferred' without shots runs every branch: {sites} mid-circuit "
            f"measurements would be 2**{sites} executions. Set finite shots instead."
        )
    leaves, tree = flatten_results(probe.output)
    init = [jnp.zeros_like(_moments(leaf, probe.state)) for leaf in leaves]

    @for_loop(0, 2**sites, 1)
    def each_branch(b, totals, norm):
        policy = Branches(b)
        current = run(policy, probe.key)
        weight = policy.total_weight()
        moments = [_moments(leaf, current.state) for leaf in flatten_results(current.output)[0]]
        return [t + weight * m for t, m in zip(totals, moments)], norm + weight

    totals, norm = each_branch(init, jnp.zeros(()))
    return jax.tree_util.tree_unflatten(tree, [_combined(leaf, t, norm) for leaf, t in zip(leaves, totals)])


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """Measure one wire inside a compiled QNode, like ``catalyst.measure``: the outcome is a traced
    boolean; the state collapses (reset to ``|0>`` with ``reset=True``). The QNode's
    ``mcm_method`` and shots choose the outcome (:mod:`.mcm`); ``postselect`` forces it, or
    discards the shots that miss it.

    >>> import pennylane as qml
    >>> from catalyst_lite import cond, measure, qjit
    >>> @qjit(seed=7)
    ... @qml.qnode(qml.device("default.qubit", wires=2))
    ... def copy_bit():
    ...     qml.Hadamard(0)
    ...     m = measure(0)
    ...     @cond(m)
    ...     def flip():
    ...         qml.X(1)
    ...     flip()
    ...     return qml.expval(qml.Z(0) @ qml.Z(1))
    >>> round(float(copy_bit()), 6)
    1.0
    """
    stack, qml = current_context().circuits, sys.modules.get("pennylane")
    another_compiler = qml is not None and qml.compiler.active_compiler() not in (None, "catalyst_lite")
    if not is_tracing() and (pennylane_capture_enabled() or another_compiler):
        # qjit(capture=True), or qml.qjit with Catalyst: PennyLane's measure hands it to them
        return jnp.asarray(_qml().measure(wires, reset=reset, postselect=postselect), bool)
    if not is_tracing(under_transformations=True):  # Catalyst's class and phrase, then ours
        raise CompileError("measure can only be used from within @qjit: call it in a QNode that qjit compiles.")
    if not stack:
        raise CompileError("measure can only be used from within a qp.qnode (a QNode) that qjit compiles.")
    circuit = stack[-1]
    state = circuit.state
    if state.regions:
        raise QuantumRegionError(MEASUREMENT_IN_REGION)
    label = _measured_wire(wires)
    if postselect not in (None, 0, 1):
        raise QuantumOperationError(f"measure: postselect must be '0' or '1', got {postselect!r}.")
    state.get()  # first: a wire of qml.allocate has its slot once the allocation is applied
    wire = state.wires.index(label, "measure")
    return measured_value(label, reset, postselect, collapse(circuit, wire, reset, postselect))


def collapse(circuit: CircuitRun, wire: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """Measure state index ``wire`` of ``circuit`` as its policy chooses (``reset``: back to |0>)."""
    state = circuit.state
    in_loop = state.control_flow.loop_depth > 0
    if not state.simulated:  # null.qubit: every outcome is 0
        return circuit.policy.outcome(0.0, postselect, circuit.key.split, in_loop)
    vector = state.vector
    p1 = wire_probability(vector, wire, state.n_wires)
    outcome = circuit.policy.outcome(p1, postselect, circuit.key.split, in_loop)
    probability = jnp.where(outcome, p1, 1.0 - p1)
    vector = project_wire(vector, wire, outcome.astype(jnp.int64), probability, state.n_wires)
    if postselect is not None and circuit.policy.impossible_postselection_is_nan:
        vector = jnp.where(probability > 0, vector, jnp.nan)
    if reset:
        vector = apply_matrix(vector, bit_flip_matrix(outcome), [wire], state.n_wires)
    state.set(vector)
    return outcome


def _measured_wire(wires: Any) -> Any:
    """The one wire of ``measure(wires)``: a label, or a one-element list or array of one."""
    if isinstance(wires, (list, tuple)):
        if len(wires) != 1:
            raise QuantumOperationError(
                f"measure: Only one element is supported for the 'wires' parameter, got {list(wires)}."
            )
        return wires[0]
    shape = getattr(wires, "shape", ())
    if shape not in ((), (1,)):
        raise QuantumOperationError(f"measure: Measure is only supported on 1 qubit, got array of shape {shape}.")
    return wires.reshape(()) if shape else wires


def compiling_state() -> QuantumState | None:
    """The state of the circuit being compiled in this thread, if any."""
    stack = current_context().circuits
    return stack[-1].state if stack and is_tracing(under_transformations=True) else None


def _region_state(fn: Any) -> QuantumState | None:
    """The state in which quantum function ``fn`` becomes a region; ``None`` for operators and off
    the circuit's queue (in a decomposition: ``PhaseAdder``'s ``qml.adjoint(QFT)(wires)``)."""
    qml = _qml()
    if isinstance(fn, qml.operation.Operator) or not callable(fn) or not qml.QueuingManager.recording():
        return None
    return compiling_state()


def pennylane_adjoint(fn: Any, lazy: bool = True) -> Any:
    """``qml.adjoint``: of a quantum function, its adjoint region (:mod:`.regions`)."""
    state = _region_state(fn)
    if state is None:
        return sys.modules["pennylane.ops.op_math.adjoint"].create_adjoint_op(fn, lazy)
    return adjoint_transform(state, fn, lazy)


def pennylane_ctrl(op: Any, control: Any, control_values=None, work_wires=None, work_wire_type="borrowed") -> Any:
    """``qml.ctrl``: of a quantum function, its ctrl region (:mod:`.regions`); calling it returns ``[]``."""
    options = (control, control_values, work_wires, work_wire_type)
    state = _region_state(op)
    if state is None:
        return _qml().ops.op_math.controlled.create_controlled_op(op, *options)

    def apply(*args: Any, **kwargs: Any) -> list:
        run_ctrl(state, op, options, args, kwargs)
        return []

    return apply


pennylane_measure = measure  # qml.measure: a traced boolean, as with Catalyst

