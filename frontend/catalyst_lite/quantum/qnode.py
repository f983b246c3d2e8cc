"""QNodes inside ``@qjit``: the circuit becomes array operations of the traced program.

While catalyst_lite traces (see :func:`quantum_tracing`), calling a ``qml.QNode`` runs
:func:`execute_qnode` instead of PennyLane's execution pipeline:

1. the state vector and a PRNG key become *ambient carries* (``control_flow.common``), so every
   ``for_loop``/``while_loop`` carries them and every ``cond`` branch returns them;
2. the quantum function runs under a :class:`CircuitRecorder` (a PennyLane queuing context);
3. queued gates are applied when the state is next needed (:meth:`QuantumState.get`): by a loop or
   branch being traced, a mid-circuit measurement, or the terminal measurements. Gates written in
   a loop body are therefore applied inside that body. (Gates wait until then rather than being
   applied on queuing because PennyLane removes an operator from the queue again when it becomes
   the base of ``qml.adjoint``/``qml.ctrl``.) Observables that are not gates (products, sums,
   Hamiltonians, ``Hermitian``) stay queued until the terminal measurements, which may take them;
   the QNode's own transforms rewrite the operations of each applied stretch (:mod:`.transforms`);
   a ``StatePrep`` that is the circuit's first operation sets the state, a later one is its
   decomposition (as on ``default.qubit``).
4. runs of gates are applied by one counted loop over their stacked matrices and wires
   (:func:`apply_records`), so the compiled program's size does not grow with the circuit's.

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
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..control_flow import for_loop
from ..control_flow.common import ambient_carry
from ..errors import QuantumOperationError, WireError
from ..jax_extras import Tracer, is_tracing
from . import prng
from .fusion import apply_known_wires, has_known_wires
from .gates import PREPARATIONS, GateRecord, WireMap, bit_flip_matrix, gate_records, initial_state, stacked_matrices
from .measurements import measure_terminal
from .statevector import apply_matrix, project_wire, wire_probability, zero_state
from .transforms import qnode_pipeline, transformed_operations

__all__ = ["execute_qnode", "measure", "quantum_tracing", "TracedCircuits", "CIRCUIT_COMPILE_OPTIONS", "apply_records", "SUPPORTED_DEVICES"]

SUPPORTED_DEVICES = ("default.qubit", "lightning.qubit")
LOOP_MIN_GATES = 2
"""Runs of at least this many gates are applied by one counted loop (one compiled kernel)."""
_SKIPPED = frozenset({"Barrier", "Snapshot"})

_local = threading.local()


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


@contextlib.contextmanager
def quantum_tracing(options: Mapping[str, Any]) -> Iterator[TracedCircuits]:
    """While tracing a ``qjit`` with these ``options``: QNode calls compile into the program.

    ``options["seed"]`` seeds the PRNG of mid-circuit measurements and samples. Yields the
    :class:`TracedCircuits` record of the trace.
    """
    previous = getattr(_local, "traced", None)
    seed = options.get("seed")
    _local.traced = TracedCircuits(None if seed is None else int(seed))
    try:
        with _qnode_interception():
            yield _local.traced
    finally:
        _local.traced = previous


@contextlib.contextmanager
def _qnode_interception() -> Iterator[None]:
    import pennylane as qml

    original = qml.QNode.__call__
    if getattr(original, "_catalyst_lite", False):  # nested qjit traces: already installed
        yield
        return

    def __call__(self, *args, **kwargs):
        if is_tracing():
            return execute_qnode(self, args, kwargs)
        return original(self, *args, **kwargs)

    __call__._catalyst_lite = True
    qml.QNode.__call__ = __call__
    try:
        yield
    finally:
        qml.QNode.__call__ = original


def _traced() -> TracedCircuits:
    """The record of the trace in progress (a QNode compiled by another route gets its own)."""
    traced = getattr(_local, "traced", None)
    return TracedCircuits() if traced is None else traced


# --- ambient values ------------------------------------------------------------------------------


class KeyCarry:
    """The PRNG key threaded through control flow (an ambient carry); ``on_draw`` is told of each
    draw."""

    def __init__(self, key, on_draw: Callable[[], None] = lambda: None):
        self.key = key
        self.on_draw = on_draw

    def get(self):
        return self.key

    def set(self, value) -> None:
        self.key = value

    def split(self):
        """A fresh key for one random draw; the carried key moves on."""
        self.on_draw()
        self.key, sub = prng.split(self.key)
        return sub


class QuantumState:
    """The state vector, an ambient carry: :meth:`get` first applies the gates queued so far."""

    def __init__(self, n_wires: int, wires: WireMap, recorder: "CircuitRecorder", pipeline: Any = None):
        self.n_wires = n_wires
        self.wires = wires
        self.recorder = recorder
        self.pipeline = pipeline  # the QNode's own transforms (None or empty: none)
        self.vector = zero_state(n_wires)
        self.fresh = True  # still |0...0>, nothing applied: a StatePrep here is the initial state

    def get(self):
        self.flush()
        return self.vector

    def set(self, value) -> None:
        self.vector = value
        self.fresh = False

    def flush(self, measurements: Sequence[Any] | None = None) -> None:
        """Apply the queued operations. ``measurements``: this is the circuit's last segment, and
        these are its terminal measurements (the QNode's transforms see them)."""
        final = measurements is not None
        ops = self.recorder.take_operations(final)
        if self.pipeline and (ops or final):  # the last segment: measurements are checked too
            ops = transformed_operations(self.pipeline, ops, measurements or ())
        records: list[GateRecord] = []
        for op in ops:
            if op.name in _SKIPPED:
                continue
            if op.name == "StatePrep" and self.fresh and not records:
                # default.qubit's initial state; a later StatePrep is its decomposition, below.
                self.vector = initial_state(op, self.wires)
                self.fresh = False
            elif op.name in PREPARATIONS:
                records += PREPARATIONS[op.name](op, self.wires)
            elif type(op).__name__ == "MidMeasureMP":
                raise QuantumOperationError(
                    "qml.measure is compiled only while catalyst_lite is PennyLane's active compiler "
                    "(qml.qjit(compiler='catalyst_lite')); use catalyst_lite.measure."
                )
            else:
                records += gate_records(op, self.wires)
        if records:
            self.vector = apply_records(self, self.vector, records)
            self.fresh = False


def _observable_types() -> tuple:
    """Operator types that are observables and not gates: a flush before the end of the QNode
    leaves them queued, since a measurement written later may still take them."""
    import pennylane as qml

    return (qml.ops.Prod, qml.ops.Sum, qml.ops.SProd, qml.Hermitian, qml.Projector)


@functools.cache
def _recorder_class():
    import pennylane as qml

    class CircuitRecorder(qml.queuing.AnnotatedQueue):
        """The queuing context of a compiled circuit: operators wait here until applied.

        ``applied`` holds the operators taken to be applied as gates (by ``id``), so that a
        measurement of one of them is an error rather than a wrong answer; ``deferred`` the
        observable-type operators a flush left queued.
        """

        def __init__(self):
            super().__init__()
            self.applied: dict[int, Any] = {}
            self.deferred: dict[int, Any] = {}

        def take_operations(self, final: bool = False) -> list:
            """The queued operators to apply now, removed from the queue. Before the last
            segment (``final=False``) observable-type operators stay queued."""
            ops = [o for o in self.queue if isinstance(o, qml.operation.Operator)]
            if not final:
                self.deferred.update((id(o), o) for o in ops if isinstance(o, _observable_types()))
                ops = [o for o in ops if not isinstance(o, _observable_types())]
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


# --- applying gates ------------------------------------------------------------------------------


MAX_LOOP_CONTROLS = (1, 2)
"""Control slots of the loop kernels: a gate takes the first that fits (unused slots hold wire
-1), so a circuit of one-wire gates and CNOTs is one loop, one kernel."""


def _loop_shape(r: GateRecord) -> tuple[int, int] | None:
    """``(targets, control slots)`` of the loop kernel that applies a record; ``None`` for wider
    gates (applied one by one)."""
    if len(r.targets) not in (1, 2):
        return None
    for c in MAX_LOOP_CONTROLS:
        if len(r.controls) <= c:
            return len(r.targets), c
    return None


def _table(rows: list[list[Any]]) -> Any:
    """Integer rows as a NumPy constant, or a traced array when some entry is traced."""
    if any(isinstance(x, Tracer) for row in rows for x in row):
        return jnp.stack([jnp.stack([jnp.asarray(x, jnp.int64) for x in row]) for row in rows])
    return np.asarray(rows, np.int64).reshape(len(rows), -1)


def _apply_run_in_loop(state_carry: QuantumState, vector, run: Sequence[GateRecord]):
    """A run of gates of one shape applied by one counted loop over their stacked matrices and
    wires: one compiled gate kernel, however long the run."""
    n = state_carry.n_wires
    k, c = _loop_shape(run[0])
    matrices = stacked_matrices(run)
    wires = _table([list(r.targets) + list(r.controls) + [-1] * (c - len(r.controls)) for r in run])
    values = _table([list(r.control_values) + [1] * (c - len(r.controls)) for r in run])
    state_carry.vector = vector

    @for_loop(0, len(run), 1)
    def gates(g):
        m = lax.dynamic_index_in_dim(matrices, g, keepdims=False)
        w = lax.dynamic_index_in_dim(wires, g, keepdims=False)
        v = lax.dynamic_index_in_dim(values, g, keepdims=False) if c else []
        state_carry.vector = apply_matrix(
            state_carry.vector, m, [w[t] for t in range(k)], n,
            [w[k + t] for t in range(c)], [v[t] for t in range(c)],
        )

    gates()
    return state_carry.vector


def apply_records(state_carry: QuantumState, vector, records: Sequence[GateRecord]):
    """``records`` applied to ``vector`` in order: runs of gates on known wires planned by
    :mod:`.fusion` (fused blocks, repeated stretches as loops), the others by gate kernels."""
    n = state_carry.n_wires
    for known, run in _runs_by_wire_kind(records):
        if known:
            vector = apply_known_wires(state_carry, vector, run, n,
                                       fallback=lambda v, rs: _apply_by_shape(state_carry, v, rs))
        else:
            vector = _apply_by_shape(state_carry, vector, run)
    return vector


def _runs_by_wire_kind(records: Sequence[GateRecord]) -> list[tuple[bool, list[GateRecord]]]:
    """Maximal runs of consecutive records that all have, or all lack, known wires."""
    runs: list[tuple[bool, list[GateRecord]]] = []
    for r in records:
        known = has_known_wires(r)
        if runs and runs[-1][0] == known:
            runs[-1][1].append(r)
        else:
            runs.append((known, [r]))
    return runs


def _apply_by_shape(state_carry: QuantumState, vector, records: Sequence[GateRecord]):
    """``records`` applied by the indexed gate kernel: each run of consecutive gates of one shape
    by a counted loop (wires may be traced), the others one by one."""
    n = state_carry.n_wires
    i = 0
    while i < len(records):
        shape = _loop_shape(records[i])
        j = i + 1
        while shape is not None and j < len(records) and _loop_shape(records[j]) == shape:
            j += 1
        if shape is not None and j - i >= LOOP_MIN_GATES:
            vector = _apply_run_in_loop(state_carry, vector, records[i:j])
        else:
            for r in records[i:j]:
                vector = apply_matrix(vector, r.matrix, r.targets, n, r.controls, r.control_values)
        i = j
    return vector


# --- the circuit ---------------------------------------------------------------------------------


class _Circuit:
    """The QNode being compiled in this thread: its state and key (for :func:`measure`)."""

    def __init__(self, state: QuantumState, key: KeyCarry):
        self.state, self.key = state, key


def _device_wires(qnode) -> WireMap:
    device = qnode.device
    name = getattr(device, "name", type(device).__name__)
    if name not in SUPPORTED_DEVICES:
        raise QuantumOperationError(
            f"catalyst_lite compiles QNodes on {' and '.join(SUPPORTED_DEVICES)}, not on {name}."
        )
    if device.wires is None:
        raise WireError(
            f"QNode {getattr(qnode, '__name__', qnode)}: the device {name} needs a fixed number "
            "of wires (qml.device(..., wires=<int>)) to be compiled."
        )
    labels = list(device.wires.labels)
    if any(isinstance(l, Tracer) for l in labels):
        raise WireError("The number of wires of a compiled device must be a Python integer, not a traced value.")
    return WireMap(labels)


def execute_qnode(qnode, args: tuple, kwargs: dict):
    """The QNode's results, computed by array operations in the program being traced."""
    import pennylane as qml

    wires = _device_wires(qnode)
    kwargs = dict(kwargs)
    shots = qnode._get_shots(kwargs).total_shots
    recorder = _recorder_class()()
    state = QuantumState(wires.n_wires, wires, recorder, qnode_pipeline(qnode))
    key = _traced().next_key()
    circuit = _Circuit(state, key)
    stack = _circuits()
    stack.append(circuit)
    try:
        with ambient_carry(state), ambient_carry(key), recorder:
            output = qnode.func(*args, **kwargs)
            is_mp = lambda x: isinstance(x, qml.measurements.MeasurementProcess)  # noqa: E731
            measurements = [m for m in jax.tree_util.tree_leaves(output, is_leaf=is_mp) if is_mp(m)]
            for m in measurements:
                recorder.check_not_applied(m)
            state.flush(measurements)  # while ambient: a loop applying the last gates must carry the state

        def value(x):
            if not is_mp(x):
                return x
            sample_key = key.split() if shots is not None else None
            return measure_terminal(x, state.vector, wires.n_wires, wires, shots, sample_key)

        return jax.tree_util.tree_map(value, output, is_leaf=is_mp)
    finally:
        stack.pop()


def _circuits() -> list[_Circuit]:
    if not hasattr(_local, "circuits"):
        _local.circuits = []
    return _local.circuits


# --- mid-circuit measurement ---------------------------------------------------------------------


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """Measure one wire in the computational basis inside a compiled QNode, like
    ``catalyst.measure``: returns the outcome as a traced boolean that ``cond`` can use; the state
    collapses (and is reset to ``|0>`` with ``reset=True``; ``postselect`` forces the outcome).

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
    if not stack or not is_tracing():
        raise QuantumOperationError("measure() is only available inside a QNode compiled by qjit.")
    circuit = stack[-1]
    state = circuit.state
    wire_list = list(wires) if isinstance(wires, (list, tuple)) else [wires]
    if len(wire_list) != 1:
        raise QuantumOperationError(f"measure() measures exactly one wire, got {wire_list}.")
    wire = state.wires.index(wire_list[0], "measure")
    vector = state.get()
    p1 = wire_probability(vector, wire, state.n_wires)
    if postselect is None:
        outcome = prng.uniform(circuit.key.split(), ()) < p1
    else:
        outcome = jnp.asarray(bool(postselect))
    probability = jnp.where(outcome, p1, 1.0 - p1)
    vector = project_wire(vector, wire, outcome.astype(jnp.int64), probability, state.n_wires)
    if reset:
        vector = apply_matrix(vector, bit_flip_matrix(outcome), [wire], state.n_wires)
    state.set(vector)
    return outcome


# --- PennyLane's compiler-dispatched operations --------------------------------------------------
# While catalyst_lite is PennyLane's active compiler, qml.adjoint, qml.ctrl and qml.measure hand
# their work to the compiler's ``ops`` entry point; these are the quantum ones.


def pennylane_adjoint(fn: Any, lazy: bool = True) -> Any:
    """``qml.adjoint``: PennyLane's own operator/queuing logic (the gates compile as usual)."""
    import sys

    import pennylane  # noqa: F401  (the module below is PennyLane's)

    return sys.modules["pennylane.ops.op_math.adjoint"].create_adjoint_op(fn, lazy)


def pennylane_ctrl(op: Any, control: Any, control_values=None, work_wires=None, work_wire_type="borrowed") -> Any:
    """``qml.ctrl``: PennyLane's own controlled operators (compiled as controlled records)."""
    from pennylane.ops.op_math.controlled import create_controlled_op

    return create_controlled_op(op, control, control_values, work_wires, work_wire_type)


def pennylane_measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    """``qml.measure``: :func:`measure` (the outcome is a traced boolean, as with Catalyst)."""
    return measure(wires, reset=reset, postselect=postselect)
