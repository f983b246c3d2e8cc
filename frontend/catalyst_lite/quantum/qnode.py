"""QNodes inside ``@qjit``: the circuit becomes array operations of the traced program.

While catalyst_lite traces (see :func:`quantum_tracing`), calling a ``qml.QNode`` runs
:func:`execute_qnode` instead of PennyLane's execution pipeline:

1. the state vector and a PRNG key become *ambient carries* (``control_flow.common``), so every
   ``for_loop``/``while_loop`` carries them and every ``cond`` branch returns them;
2. the quantum function runs under a ``CircuitRecorder`` (a PennyLane queuing context,
   :mod:`.recorder`);
3. queued gates are applied when the state is next needed (:meth:`QuantumState.get`): by a loop or
   branch being traced, a mid-circuit measurement, or the terminal measurements. Gates written in
   a loop body are therefore applied inside that body. (Gates wait until then rather than being
   applied on queuing because PennyLane removes an operator from the queue again when it becomes
   the base of ``qml.adjoint``/``qml.ctrl``.) Observables that are not gates (products, sums,
   Hamiltonians, ``Hermitian``) stay queued until the terminal measurements, which may take them;
   the QNode's own transforms rewrite the operations of each applied stretch (:mod:`.transforms`);
   a ``StatePrep`` that is the circuit's first operation sets the state, a later one is its
   decomposition (as on ``default.qubit``).
   Inside ``qml.adjoint``/``qml.ctrl`` of a function, operations queue into a region and reach
   the circuit adjointed or controlled (:mod:`.regions`).
4. the gates are applied by :mod:`.application`: fused blocks and repeated layers as loops for
   gates on known wires (:mod:`.fusion`), counted loops over stacked matrices for traced wires, so
   the compiled program's size does not grow with the circuit's;
5. the terminal measurements are exact, or statistics of shots (:mod:`.sampling`); a circuit with
   mid-circuit measurements may run again once per shot or per branch (:mod:`.repeated`).

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
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..trace_context import current as current_context, pennylane_capture_enabled, scope as context_scope
from ..control_flow.common import StandsForValue, ambient_carry, control_flow_handler, traced_value
from ..debug import callback
from ..errors import CompileError, QuantumOperationError, QuantumRegionError, ShotsError, WireError, pennylane_error
from ..jax_extras import Tracer, is_tracing, under_jax_transformation
from ..jax_extras.patches import Patch, register_patch
from ..tracing import Contribution, register_trace_extension
from . import prng
from .adjoint import adjoint_expvals
from .application import apply_records
from .gates import GateRecord, _qml, bit_flip_matrix, gate_records, initial_state
from .mcm import McmPolicy, SingleBranch, ValueCarry, measured_value, with_values
from .gradients import by_adjoint_method, gradient_method, with_exact_derivative
from .measurements import exact_measurement, measure_terminal
from .sampling import flatten_results, is_measurement, measurement_kind
from .recorder import recorder_class
from .regions import MEASUREMENT_IN_REGION, Region, RegionControlFlow, adjoint_transform, ctrl_transform
from .repeated import all_branches_results, one_shot_results
from .sharded import StateSharding, execute_sharded_qnode
from .shots import McmConfig, ShotPlan
from .statevector import apply_matrix, project_wire, wire_entanglement, wire_probability, zero_state
from .transforms import qnode_pipeline, transformed_operations
from .wires import OutsideWires, WireMap

__all__ = ["execute_qnode", "measure", "compiling_state", "quantum_tracing", "intercept_qnode_calls", "TracedCircuits", "CIRCUIT_COMPILE_OPTIONS", "SUPPORTED_DEVICES"]

SUPPORTED_DEVICES = ("default.qubit", "lightning.qubit", "null.qubit")
UNSIMULATED_DEVICES = ("null.qubit",)
"""Devices that simulate nothing: results have their shapes, with PennyLane's ``null.qubit``
values (see :func:`.measurements.measure_terminal`)."""
_SKIPPED = frozenset({"Barrier"})

# --- scope: intercepting QNode calls while catalyst_lite traces ----------------------------------


CIRCUIT_COMPILE_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
"""XLA options for a program that holds a circuit. A state-vector simulation is a chain of
complex multiply-reduce and gather kernels, one per gate block; XLA's classic CPU emitters compile
them about a third faster than its fusion emitters (most of a circuit's first call), and the
executables run as fast. Classical programs keep XLA's defaults (bit-identical to ``jax.jit``)."""


@dataclass
class TracedCircuits:
    """The QNodes compiled into one program while it is traced, and what the program needs for
    them: XLA options, and its PRNG key.

    The program draws (mid-circuit measurements, samples) from one base key, a constant of the
    traced program; QNode number ``i`` draws from stream ``i`` of it (:func:`.prng.fold_in`).
    With ``seed``, the base key comes from it: every call draws the same. Without, the base key
    is replaced by a fresh one on every call (see :meth:`fresh_consts`), as Catalyst draws anew
    on every execution.
    """

    seed: int | None = None
    count: int = 0
    base_key: Any = None

    @property
    def compile_options(self) -> dict[str, Any]:
        return dict(CIRCUIT_COMPILE_OPTIONS) if self.count else {}

    def next_key(self) -> "KeyCarry":
        """The key of the next QNode compiled into the program."""
        if self.base_key is None:
            self.base_key = prng.key_from_seed(0 if self.seed is None else self.seed)
        key = prng.fold_in(self.base_key, self.count)
        self.count += 1
        return KeyCarry(key, self._drawing)

    def _drawing(self) -> None:
        """A QNode draws from the program's key: without a seed, calls must replace it (until
        then its value does not matter, and calls need not pay for a fresh one)."""
        if self.seed is None:
            prng.mark_unseeded(self.base_key)

    @staticmethod
    def fresh_consts(consts: Sequence[Any]) -> dict[int, Callable[[], Any]]:
        """Positions among a traced program's ``consts`` of the keys to draw anew on each call:
        its own unseeded key, and those of unseeded qjit programs it called while it traced."""
        return {i: prng.host_key for i, c in enumerate(consts) if prng.is_unseeded_key(c)}


@register_trace_extension
@contextlib.contextmanager
def quantum_tracing(options: Mapping[str, Any]) -> Iterator[Callable[[Sequence[Any]], Contribution]]:
    """While tracing a ``qjit`` with these ``options``: QNode calls compile into the program (a
    scope of every trace, see :func:`~catalyst_lite.tracing.register_trace_extension`).

    ``options["seed"]`` seeds the PRNG of mid-circuit measurements and samples. Yields what gives
    the program's XLA options and fresh constants once it is traced.
    """
    intercept_qnode_calls()
    seed = options.get("seed")
    traced = TracedCircuits(None if seed is None else int(seed))
    with context_scope(traced_circuits=traced):
        yield lambda consts: Contribution(traced.compile_options, traced.fresh_consts(consts))


def _make_qnode_call(original: Callable) -> Callable:
    # A QNode called while this thread traces a qjit program (inside `quantum_tracing`) becomes
    # array operations of the program, also under jax.grad/jax.vmap applied inside it (JAX
    # transforms those operations as any others); everywhere else (other threads, eager calls,
    # other traces) PennyLane runs it.
    def __call__(self, *args, **kwargs):
        if current_context().traced_circuits is not None and is_tracing(under_transformations=True):
            return execute_qnode(self, args, kwargs)
        return original(self, *args, **kwargs)

    return __call__


_intercept_lock = threading.Lock()
_intercepting = False


def intercept_qnode_calls() -> None:
    """Register the :class:`~catalyst_lite.jax_extras.patches.Patch` of ``QNode.__call__`` once
    PennyLane is imported (by the user: a program without QNodes never imports it). Like JAX's
    repairs it is in effect only while some thread traces, and acts only for that thread."""
    global _intercepting
    if _intercepting or "pennylane" not in sys.modules:
        return
    with _intercept_lock:
        if not _intercepting:
            qnode_class = sys.modules["pennylane"].QNode
            register_patch(Patch("compile_qnode_calls", qnode_class, "__call__", _make_qnode_call,
                                 "a QNode called while catalyst_lite traces compiles into the program"))
            _intercepting = True


def _traced() -> TracedCircuits:
    """The record of the trace in progress (a QNode compiled by another route gets its own)."""
    traced = current_context().traced_circuits
    return TracedCircuits() if traced is None else traced


# --- ambient values ------------------------------------------------------------------------------


class KeyCarry(ValueCarry):
    """The PRNG key threaded through control flow (an ambient carry); ``on_draw`` is told of each
    draw."""

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

    ``regions`` are the ``qml.adjoint``/``qml.ctrl`` regions open now (outermost first, see
    :mod:`.regions`): operations queue into the innermost one.
    """

    def __init__(self, wires: WireMap, recorder: Any, pipeline: Any = None, simulated: bool = True):
        self.wires = wires
        self.simulated = simulated  # False: a device that applies no gate (null.qubit)
        wires.on_grow = self._grow
        self.recorder = recorder
        self.pipeline = pipeline  # the QNode's own transforms (None or empty: none)
        self._vector = self.initial = zero_state(wires.n_wires)
        # the gates applied so far wait here, unapplied, while the adjoint method may compute
        # the results from them (``deferred``, :func:`_adjoint_results`); reading the state
        # applies them
        self.deferred = False
        self._pending: list[GateRecord] = []
        self.fresh = True  # still |0...0>, nothing applied: a StatePrep here is the initial state
        self.regions: list[Region] = []
        self.control_flow: RegionControlFlow | None = None  # the circuit's loops and branches
        self.snapshots: list = []  # the state at each qml.Snapshot, in order
        self._applying = False
        # every gate applied, in order, while the state is a function of them only (for the
        # adjoint method, :mod:`.adjoint`); None once it is not (loops, branches, a traced
        # initial state, mid-circuit measurements)
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
        """``added`` wires were allocated (a device with ``wires=None``): they join the state in
        ``|0>``. Inside a loop or branch the state's size is fixed: the circuit runs again, with
        these wires from the start."""
        if self.control_flow is not None and self.control_flow.depth:
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
        """Open ``region``: operations queue into it until the block ends."""
        self.regions.append(region)
        try:
            with region.queue:
                yield region
        finally:
            self.regions.pop()

    def flush(self, measurements: Sequence[Any] | None = None) -> None:
        """Apply the queued operations: those of open regions first reach the circuit through
        their regions (an adjoint region keeps them). ``measurements``: this is the circuit's
        last segment, and these are its terminal measurements (the QNode's transforms see them)."""
        if self._applying:  # a loop applying gates asks for the state: it is the one being built
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
            # Decompositions and transforms build operators: none may queue into the circuit
            # (they would be applied again), and the loops that apply gates are our own.
            with _qml().QueuingManager.stop_recording(), control_flow_handler(None):
                self._apply_queued(measurements)
        finally:
            self._applying = False

    def _apply_queued(self, measurements: Sequence[Any] | None) -> None:
        final = measurements is not None
        ops = [with_values(op) for op in self.recorder.take_operations(final)]
        if not self.simulated:  # nothing to apply; snapshots are of |0...0>
            self.snapshots += [self._snapshot(op) for op in ops if op.name == "Snapshot"]
            return
        if self.pipeline and (ops or final):  # the last segment: measurements are checked too
            ops = transformed_operations(self.pipeline, ops, measurements or ())
        if ops and (self.control_flow is not None and self.control_flow.depth or self.regions):
            self.applied = None
        records: list[GateRecord] = []
        for op in ops:
            if op.name == "Snapshot":
                self.applied = None
                if records:
                    self.vector, records = apply_records(self, self.vector, records), []
                self.snapshots.append(self._snapshot(op))
            elif op.name in _SKIPPED:
                continue
            if op.name in ("Allocate", "Deallocate"):  # qml.allocate, qml.deallocate
                if records:  # the slots' indices are the wires' after the gates so far
                    self.vector, records = apply_records(self, self.vector, records), []
                self._allocation(op)
                continue
            if isinstance(op, _qml().StatePrep) and self.fresh and not records:
                # default.qubit's initial state (also of its subclasses: AmplitudeEmbedding); a
                # later StatePrep is its decomposition, below.
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
                records += gate_records(op, self.wires)
        if self.applied is not None:
            self.applied += records
        if records and self.deferred and self.applied is not None:
            self._pending += records
            self.fresh = False
        elif records:
            self.vector = apply_records(self, self.vector, records)
            self.fresh = False


    def _allocation(self, op: Any) -> None:
        """``Allocate``: each dynamic wire gets a slot (a wire added to the state in ``|0>``, or a
        freed one, see :mod:`.wires`). Inside a loop or branch, whose state has a fixed size, freed
        slots are reused, reset to ``|0>`` first by a measurement with reset whose outcome is
        dropped (as PennyLane resets a reused wire), since an earlier iteration may have used the
        slot. ``Deallocate``: the slots are freed."""
        if op.name == "Deallocate":
            self.wires.deallocate(op.wires)
            return
        in_control_flow = bool(self.control_flow is not None and self.control_flow.depth)
        restored = bool(op.hyperparameters.get("restored", False))
        circuit = _circuits()[-1]
        for index, used in self.wires.allocate(op.wires, restored, reuse=in_control_flow):
            if (in_control_flow and not restored) or used:
                if circuit.exact:
                    # PennyLane's reset averages over both outcomes; one drawn outcome gives the
                    # same state only when the slot is not entangled with the other wires
                    callback(_raise_if_entangled)(wire_entanglement(self.vector, index, self.n_wires))
                collapse(circuit, index, reset=True)

    def _snapshot(self, op: Any) -> Any:
        """The state at ``qml.Snapshot`` ``op``, as Catalyst returns it (only ``qml.state()``
        snapshots, not inside loops or branches)."""
        measurement = op.hyperparameters.get("measurement")
        if measurement is not None and type(measurement).__name__ != "StateMP":
            raise NotImplementedError(
                "qml.Snapshot() only supports qml.state() when used from within Catalyst, but "
                f"encountered {type(measurement)}"
            )
        if self.control_flow is not None and self.control_flow.depth:
            raise QuantumOperationError(
                "qml.Snapshot inside a for_loop, while_loop or cond is not supported: the snapshots "
                "are results of the QNode, taken once. Take the snapshot outside the loop or branch."
            )
        return self.vector


# --- the circuit ---------------------------------------------------------------------------------


@dataclass
class CircuitRun:
    """One run of a QNode's quantum function: its state, key, control-flow handler and
    mid-circuit measurement policy (what :func:`measure` reads while the run is traced), then what
    it returned and its terminal measurements."""

    state: QuantumState
    key: KeyCarry
    policy: McmPolicy
    regions: RegionControlFlow
    output: Any = None
    measurements: list = field(default_factory=list)
    adjoint: Any = None  # the results computed by the adjoint method, when it applies
    # the QNode's results are this run's exact ones (no shots, one branch of its mid-circuit
    # measurements): a slot of qml.allocate reused in a loop or branch must be back in |0>
    exact: bool = False


class WiresAllocated(Exception):
    """A device with ``wires=None`` met a new wire inside a loop or branch, or a circuit met its
    first traced wire: run the circuit again (its wire map now holds the wire, or checks traced
    wires)."""


def _device_name(qnode) -> str:
    return getattr(qnode.device, "name", type(qnode.device).__name__)


def _device_wires(qnode) -> WireMap:
    """The device's wires: its labels, a traced number (``wires=n`` inside the compiled function),
    or allocated as the circuit uses them (``wires=None``), see :mod:`.wires`."""
    device = qnode.device
    name = _device_name(qnode)
    if name not in SUPPORTED_DEVICES:
        raise QuantumOperationError(
            f"catalyst_lite compiles QNodes on {' and '.join(SUPPORTED_DEVICES)}, not on {name}."
        )
    if device.wires is None:
        return WireMap.allocated_on_use()
    labels = list(device.wires.labels)
    if len(labels) == 1 and isinstance(labels[0], Tracer):
        if not jnp.issubdtype(labels[0].dtype, jnp.integer):
            raise WireError(f"The number of wires of {name} must be an integer, got {labels[0].aval.str_short()}.")
        return WireMap.counted(labels[0])
    if any(isinstance(l, Tracer) for l in labels):
        raise WireError(f"The wires of {name} are labels or one (possibly traced) number of wires, got {labels}.")
    return WireMap(labels)


def run_circuit(qnode, qfunc: Callable, args: tuple, kwargs: dict, wires: WireMap, policy: McmPolicy,
                key: KeyCarry, adjoint: bool = False, exact: bool = False) -> CircuitRun:
    """Run the QNode's quantum function ``qfunc`` once, from ``|0...0>``, with its gates applied to
    the state as array operations of the program being traced. ``adjoint``: the QNode is being
    differentiated without shots; when its results are exact expectation values, they are
    computed with derivatives by the adjoint method (``run.adjoint``, see :mod:`.adjoint`).
    ``exact``: see :attr:`CircuitRun.exact`."""
    recorder = recorder_class()()
    state = QuantumState(wires, recorder, qnode_pipeline(qnode), _device_name(qnode) not in UNSIMULATED_DEVICES)
    state.deferred = adjoint and state.simulated
    regions = RegionControlFlow(state)
    state.control_flow = regions
    outside = OutsideWires(wires, WiresAllocated)
    wires.begin_run()
    run = CircuitRun(state, key, policy, regions, exact=exact)
    with context_scope(circuits=(*_circuits(), run)), contextlib.ExitStack() as scope:
        for carry in (state, key, *policy.carries, *outside.carries):
            scope.enter_context(ambient_carry(carry))
        scope.enter_context(recorder)
        scope.enter_context(control_flow_handler(regions))
        run.output = qfunc(*args, **kwargs)
        _check_returned(qnode, run.output)
        run.measurements = [m for m in jax.tree_util.tree_leaves(run.output, is_leaf=is_measurement) if is_measurement(m)]
        for m in run.measurements:
            recorder.check_not_applied(m)
            if m.mv is None:  # wires allocated on use: all of them before any result
                _check_terminal_wires(m, all_wires=False)
                wires.indices(m.wires, measurement_kind(m))
        state.flush(run.measurements)  # while ambient: a loop applying the last gates must carry the state
        if wires.slots:  # qml.allocate was applied
            for m in run.measurements:
                _check_terminal_wires(m, all_wires=m.mv is None)
        # (allocated wires keep the simulation's own derivatives: the sweep knows the device's wires only)
        run.adjoint = _adjoint_results(run) if state.deferred and not wires.slots else None
        if run.adjoint is None:
            state.vector  # the gates still unapplied, applied while the state is ambient
    outside.check(_device_name(qnode))
    return run


def _check_terminal_wires(m: Any, all_wires: bool) -> None:
    """Terminal measurements do not measure wires of ``qml.allocate``, and (``all_wires``: when
    some were allocated) name their wires: PennyLane chooses which device wires the allocated
    ones use. Catalyst's errors."""
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


def _check_returned(qnode, output: Any) -> None:
    """A QNode returns measurements, as PennyLane requires, and (as with Catalyst, whose programs
    mix them) numbers and arrays: values computed in the circuit (a mid-circuit measurement's
    outcome), its arguments, constants. Not nothing (a forgotten ``return``, which PennyLane
    rejects too), nor an operator or another Python object, which a compiled program cannot
    return."""
    leaves = jax.tree_util.tree_leaves(output, is_leaf=is_measurement)
    odd = [x for x in leaves if not (is_measurement(x) or isinstance(x, StandsForValue) or _is_number(x))]
    if not leaves or odd:
        what = f"returned {(odd or [output])[0]!r}" if odd or output is not None else "returned no measurement"
        raise pennylane_error(QuantumOperationError, "QuantumFunctionError")(
            "A quantum function must return either a single measurement, or a nonempty sequence of "
            f"measurements. The QNode {getattr(qnode, '__name__', qnode)} {what}: return "
            "qml.expval, qml.probs, qml.sample... (or numbers and arrays, as Catalyst allows)."
        )


def _is_number(x: Any) -> bool:
    """A value a compiled program can return: a traced value, an array, a number or a bool."""
    return isinstance(x, (Tracer, jax.Array, np.ndarray, np.number, np.bool_, bool, int, float, complex))


def _check_shots(qnode, shots: ShotPlan, measurements: list) -> None:
    """Shots PennyLane refuses: ``qml.state()`` with finite shots; a traced number of shots that
    is not positive (raised when the program runs)."""
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


def _raise_if_not_positive(total: Any) -> None:
    if int(total) <= 0:
        raise ShotsError(
            "Shots must be a single positive integer, a tuple pair of the form (shots, copies), or a "
            f"sequence of these types; got shots={int(total)} (the traced number of shots)."
        )


def execute_qnode(qnode, args: tuple, kwargs: dict, qfunc: Callable | None = None):
    """The QNode's results, computed by array operations in the program being traced. ``qfunc``
    runs in place of the QNode's quantum function (``catalyst_lite.capture`` passes the function's
    captured program).

    The quantum function runs once with each mid-circuit measurement following one drawn branch.
    That is the result when the circuit has no mid-circuit measurement, or with
    ``mcm_method="single-branch-statistics"`` (the default without shots, as in Catalyst).
    Otherwise the circuit runs again inside a loop, once per shot or once per branch
    (:mod:`.repeated`), and the first run is dead code.
    """
    wires = _device_wires(qnode)
    kwargs = dict(kwargs)
    shots = ShotPlan.of(qnode, kwargs)
    key = _traced().next_key()
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
    _check_shots(qnode, shots, first.measurements)
    classical = not all(is_measurement(x) for x in flatten_results(first.output)[0])
    method = gradient_method(qnode, [measurement_kind(m) for m in first.measurements], shots.finite, classical)
    if first.policy.sites and config.method != "single-branch-statistics" and first.state.simulated:

        def run(policy: McmPolicy, key: KeyCarry) -> CircuitRun:
            return run_circuit(qnode, qfunc, args, kwargs, wires, policy, key)

        # Draw from the key the first run started from: nothing it computed is used, so its
        # equations are dropped from the program.
        key.set(initial_key)
        if shots.finite:
            results = one_shot_results(run, first, shots, config)
        else:
            results = all_branches_results(run, first)
    elif first.adjoint is not None and not first.policy.sites:
        results = first.adjoint
    else:
        # Under jax.grad/jax.jacobian applied inside the program, statistics of shots get their
        # exact derivatives too (those of the samples are zero).
        differentiated = method is not None or under_jax_transformation()
        results = _terminal_results(first, shots, differentiated and first.state.simulated)
    # With qml.Snapshot, Catalyst returns the snapshots (of the first run) before the results.
    return (first.state.snapshots, results) if first.state.snapshots else results


def _adjoint_results(run: CircuitRun) -> Any:
    """The results of a QNode being differentiated without shots whose results are all exact
    expectation values, with derivatives by the adjoint method (:mod:`.adjoint`: two compiled
    loops instead of the reverse of the whole simulation); ``None`` when that does not apply.
    Every ``diff_method`` of an exact ``expval`` has the same, exact, derivative."""
    state = run.state
    if state.applied is None or state.snapshots or run.policy.sites:
        return None
    leaves, tree = flatten_results(run.output)
    if not all(is_measurement(x) for x in leaves):
        return None
    values = adjoint_expvals(leaves, state.initial, state.applied, state.n_wires, state.wires)
    return None if values is None else jax.tree_util.tree_unflatten(tree, values)


def _terminal_results(run: CircuitRun, shots: ShotPlan, differentiated: bool = False) -> Any:
    """The QNode's results from its final state: exact, or statistics of ``shots`` samples (a
    tuple of results, one per entry of a shot vector). ``differentiated``: statistics of shots
    have the derivatives of the exact ones (see :mod:`.gradients`)."""
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
    entries = range(len(shots.slices()))
    return tuple(jax.tree_util.tree_unflatten(tree, [v[i] if is_measurement(x) else v for x, v in zip(leaves, values)])
                 for i in entries)


def _circuits() -> tuple[CircuitRun, ...]:
    return current_context().circuits


# --- mid-circuit measurement ---------------------------------------------------------------------


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """Measure one wire in the computational basis inside a compiled QNode, like
    ``catalyst.measure``: returns the outcome as a traced boolean that ``cond`` can use; the state
    collapses (and is reset to ``|0>`` with ``reset=True``). How the outcome is chosen depends on
    the QNode's ``mcm_method`` and shots (:mod:`.mcm`): drawn for one branch, for each shot, or
    enumerated over all branches; ``postselect`` forces it, or discards the shots that miss it.

    >>> from catalyst_lite import measure
    >>> import pennylane as qml
    >>> from catalyst_lite import qjit, cond
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
    stack = _circuits()
    if not is_tracing() and (pennylane_capture_enabled() or _another_compiler_traces()):
        # PennyLane captures the program (qjit(capture=True)), or another compiler traces it
        # (qml.qjit with Catalyst): PennyLane's measure, which hands it to them.
        import pennylane as qml

        return jnp.asarray(qml.measure(wires, reset=reset, postselect=postselect), bool)
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
    """Measure state index ``wire`` of ``circuit``'s current state (its queued gates applied): the
    outcome (chosen by the circuit's mid-circuit measurement policy), with the state collapsed,
    and flipped back to ``|0>`` with ``reset``."""
    state = circuit.state
    in_loop = circuit.regions.loop_depth > 0
    if not state.simulated:  # null.qubit: every outcome is 0
        return circuit.policy.outcome(0.0, postselect, circuit.key.split, in_loop)
    vector = state.vector
    p1 = wire_probability(vector, wire, state.n_wires)
    outcome = circuit.policy.outcome(p1, postselect, circuit.key.split, in_loop)
    probability = jnp.where(outcome, p1, 1.0 - p1)
    vector = project_wire(vector, wire, outcome.astype(jnp.int64), probability, state.n_wires)
    if reset:
        vector = apply_matrix(vector, bit_flip_matrix(outcome), [wire], state.n_wires)
    state.set(vector)
    return outcome


def _another_compiler_traces() -> bool:
    """PennyLane's active compiler is not catalyst_lite (``qml.qjit`` compiling with Catalyst)."""
    qml = sys.modules.get("pennylane")
    return qml is not None and qml.compiler.active_compiler() not in (None, "catalyst_lite")


def _measured_wire(wires: Any) -> Any:
    """The one wire ``measure(wires)`` names: a label, or a one-element list or array of one."""
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


# --- PennyLane's compiler-dispatched operations --------------------------------------------------
# While catalyst_lite is PennyLane's active compiler, qml.adjoint, qml.ctrl and qml.measure hand
# their work to the compiler's ``ops`` entry point; these are the quantum ones.


def _compiling_circuit() -> CircuitRun | None:
    """The circuit being compiled in this thread, if any."""
    stack = _circuits()
    return stack[-1] if stack and is_tracing(under_transformations=True) else None


def compiling_state() -> QuantumState | None:
    """The state of the circuit being compiled in this thread, if any."""
    circuit = _compiling_circuit()
    return None if circuit is None else circuit.state


def _off_circuit() -> bool:
    """Operators are being built outside the circuit's queue (an operation's decomposition,
    computed with queuing stopped, as ``PhaseAdder``'s ``qml.adjoint(QFT)(wires)``): PennyLane's
    own ``qml.adjoint``/``qml.ctrl`` build them, and return operators as the decomposition needs."""
    return not _qml().QueuingManager.recording()


def pennylane_adjoint(fn: Any, lazy: bool = True) -> Any:
    """``qml.adjoint``: of an operator, PennyLane's own ``Adjoint``; of a quantum function inside a
    compiled circuit, its adjoint region (:mod:`.regions`: loops reversed, branches adjointed)."""
    qml = _qml()
    circuit = _compiling_circuit()
    if circuit is None or isinstance(fn, qml.operation.Operator) or not callable(fn) or _off_circuit():
        return sys.modules["pennylane.ops.op_math.adjoint"].create_adjoint_op(fn, lazy)
    return adjoint_transform(circuit.state, fn, lazy)


def pennylane_ctrl(op: Any, control: Any, control_values=None, work_wires=None, work_wire_type="borrowed") -> Any:
    """``qml.ctrl``: of an operator, PennyLane's own controlled operator; of a quantum function
    inside a compiled circuit, its ctrl region (every gate it applies controlled, in loops too)."""
    qml = _qml()
    options = (control, control_values, work_wires, work_wire_type)
    circuit = _compiling_circuit()
    if circuit is None or isinstance(op, qml.operation.Operator) or not callable(op) or _off_circuit():
        return qml.ops.op_math.controlled.create_controlled_op(op, *options)
    return ctrl_transform(circuit.state, op, *options)


def pennylane_measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """``qml.measure``: :func:`measure` (the outcome is a traced boolean, as with Catalyst)."""
    return measure(wires, reset=reset, postselect=postselect)
