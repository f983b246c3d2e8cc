"""Which PennyLane operations compile, and the :class:`GateRecord` s they become: a dense matrix
on target wires plus control wires and values. Named gates use ``op.matrix()`` (traced parameters
allowed); controlled gates become their base's records with controls, adjoints the reversed,
conjugate-transposed records of their base; other operations their decomposition, else their
matrix.

A :class:`WireMap` maps a device's wires to state-vector indices: **labels** (``wires=3`` or
``["a", "b"]``), **a traced number** (``wires=n``: ``0 .. n - 1``, a state of symbolic length) or
**unspecified** (``wires=None``: allocated as the circuit uses them, an integer bringing every
wire below it, each new wire least significant: ``on_grow``). Wires of ``qml.allocate`` get
*slots* after the device's wires, kept between runs (:meth:`WireMap.begin_run` frees them); a freed
slot is reused as it is if promised restored, else only where :meth:`WireMap.allocate` may
``reuse`` it (a loop or branch: the circuit then resets it). A traced wire (a loop index) is an
index, seen by ``on_traced`` so that one outside the device raises ``WireError`` when the program
runs (:class:`OutsideWires`).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..control_flow.common import ControlFlowOperation, control_flow_handler
from ..debug import callback
from ..errors import CompileError, QuantumOperationError, WireError, pennylane_error
from ..trace_context import scope as context_scope
from ..jax_extras import Tracer
from ..jax_extras.provenance import vectorized_stack
from .statevector import basis_indices, bit_mask, outcome_index

__all__ = ["GateRecord", "WireMap", "OutsideWires", "gate_records", "initial_state", "batched_matrices",
           "stacked_matrices"]

SUPPORTED_GATES = frozenset({
    "Identity", "PauliX", "PauliY", "PauliZ", "Hadamard", "S", "T", "SX",
    "RX", "RY", "RZ", "Rot", "PhaseShift", "U1", "U2", "U3",
    "SWAP", "ISWAP", "IsingXX", "IsingYY", "IsingZZ", "IsingXY", "MultiRZ",
    "QubitUnitary", "DiagonalQubitUnitary",
})
"""Gates applied as their matrix (their controlled versions and adjoints too)."""

MAX_DENSE_WIRES = 3
"""Above this many target wires a gate is decomposed (``QubitUnitary``, which cannot be, is not)."""

_NO_BROADCASTING = (
    " is not supported (nor by Catalyst): map the QNode over the batch instead, with "
    "catalyst_lite.vmap(qnode) or jax.vmap(qnode) inside qjit."
)


class BroadcastingError(QuantumOperationError):
    """An operation with broadcast (batched) parameters in a compiled QNode (one circuit per call,
    as in Catalyst); its own class so that ``mcm_method="one-shot"`` can give Catalyst's phrase."""


@dataclass(frozen=True)
class GateRecord:
    """A gate on ``targets`` where every wire of ``controls`` has its ``control_values``: the matrix
    of ``op`` (kept for :func:`batched_matrices`; conjugate-transposed when ``adjoint``), or
    ``explicit`` when there is no operator."""

    op: Any
    targets: tuple
    controls: tuple = ()
    control_values: tuple = ()
    adjoint: bool = False
    explicit: Any = None

    @property
    def matrix(self) -> Any:
        m = self.explicit if self.op is None else self.op.matrix()
        return _dagger(m) if self.adjoint else m

    @property
    def is_static(self) -> bool:
        """True when the matrix is known while tracing (no traced parameter)."""
        values = [self.explicit] if self.op is None else self.op.parameters
        return not any(isinstance(p, Tracer) for p in values)

    def group_key(self) -> tuple:
        """Records with equal keys compute their matrices in one batched call."""
        hyper = tuple(sorted((k, repr(v)) for k, v in self.op.hyperparameters.items()))
        return (type(self.op), hyper, self.adjoint, len(self.op.parameters))


def _dagger(m: Any) -> Any:
    xp = np if isinstance(m, np.ndarray) else jnp
    return xp.conj(xp.swapaxes(xp.asarray(m), -1, -2))


def stacked(values: Sequence[Any]) -> Any:
    """``jnp.stack(values)``, or one gather or vector formula when the values are elements of one
    array or computed by one formula (:func:`~.jax_extras.provenance.vectorized_stack`)."""
    vector = vectorized_stack(values)
    return jnp.stack([jnp.asarray(v) for v in values]) if vector is None else vector


def batched_matrices(records: Sequence[GateRecord], params: Sequence[Any] | None = None) -> Any:
    """The matrices of records sharing one :meth:`GateRecord.group_key`, stacked: one call of the
    operator type's ``compute_matrix`` on their stacked parameters (or ``params``)."""
    first = records[0].op
    if params is None:
        params = [stacked([r.op.parameters[i] for r in records]) for i in range(len(first.parameters))]
    m = jnp.asarray(type(first).compute_matrix(*params, **first.hyperparameters), jnp.complex128)
    m = jnp.broadcast_to(m, (len(records),) + m.shape[-2:])
    return _dagger(m) if records[0].adjoint else m


def stacked_matrices(run: Sequence[GateRecord]) -> Any:
    """``(len(run), 2**k, 2**k)`` matrices of records with ``k`` targets each: known ones as
    constants, traced ones by one batched call per gate type, put in order by one gather."""
    groups: dict[Any, list[int]] = {}
    for i, r in enumerate(run):
        key = "known" if r.is_static else ("explicit", i) if r.op is None else r.group_key()
        groups.setdefault(key, []).append(i)
    blocks = [np.stack([np.asarray(run[i].matrix, np.complex128) for i in rows]) if key == "known" else
              batched_matrices([run[i] for i in rows]) if run[rows[0]].op is not None else
              jnp.asarray(run[rows[0]].matrix, jnp.complex128)[None] for key, rows in groups.items()]
    if len(blocks) == 1:
        return blocks[0]
    order = np.argsort([i for rows in groups.values() for i in rows])
    return jnp.take(jnp.concatenate([jnp.asarray(b) for b in blocks]), order, axis=0)


@dataclass(eq=False)
class ValueCarry:
    """A traced value threaded through control flow (an ambient carry)."""

    value: Any

    def get(self) -> Any:
        return self.value

    def set(self, value: Any) -> None:
        self.value = value


def _qml():
    """PennyLane, imported when a circuit needs it (a classical program never imports it)."""
    import pennylane as qml

    return qml


def gate_records(op: Any, wires: WireMap) -> list[GateRecord]:
    """The records that apply ``op`` (a PennyLane operator) to the state, in order."""
    qml = _qml()
    if op.name == "GlobalPhase":  # exp(-i phi) on one wire (its own, else the first): qml.state()'s phase
        target = wires.index(op.wires[0], op.name) if len(op.wires) else 0
        return [GateRecord(None, (target,), explicit=type(op).compute_matrix(op.parameters[0], n_wires=1))]
    # a controlled operator without wires of its own (GlobalPhase) is its decomposition, below
    if isinstance(op, qml.ops.Controlled) and len(op.base.wires):
        controls = wires.indices(op.control_wires, op.name)
        values = tuple(op.control_values)
        return [replace(r, controls=r.controls + controls, control_values=r.control_values + values)
                for r in gate_records(op.base, wires)]
    if isinstance(op, qml.ops.Adjoint):
        return [replace(r, adjoint=not r.adjoint) for r in reversed(gate_records(op.base, wires))]
    if op.name in SUPPORTED_GATES and (len(op.wires) <= MAX_DENSE_WIRES or op.name == "QubitUnitary"):
        return [GateRecord(_unbatched(op), wires.indices(op.wires, op.name))]
    if op.has_decomposition:
        try:
            decomposition = recorded_decomposition(op)
            if any(isinstance(o, replayed_control_flow()) for o in decomposition or ()):
                raise DecomposesIntoControlFlow(op)
            if decomposition is not None:
                return [r for sub in decomposition for r in gate_records(sub, wires)]
        except qml.operation.DecompositionUndefinedError:
            pass
        except jax.errors.ConcretizationTypeError:
            # a decomposition branching on a traced parameter (SpecialUnitary's): the matrix is exact
            if not op.has_matrix:
                raise
    if op.has_matrix:  # BlockEncode, a user's operation with compute_matrix only
        return [GateRecord(None, wires.indices(_unbatched(op).wires, op.name), explicit=op.matrix())]
    raise QuantumOperationError(
        f"catalyst_lite cannot compile the quantum operation {op.name}: it has neither a "
        f"decomposition nor a matrix. Supported: {', '.join(sorted(SUPPORTED_GATES))}; their "
        "qml.adjoint and qml.ctrl (CNOT, CY, CZ, CRX, CRY, CRZ, CRot, ControlledPhaseShift, Toffoli, "
        "CSWAP...), BasisState and StatePrep, operations that decompose into these, and operations "
        f"with a matrix; give {op.name} a compute_matrix or a compute_decomposition."
    )


def operators_dropped(branch: Callable) -> Callable:
    """``branch`` returning ``None`` in place of the operators it returns (gates it applied)."""
    qml = _qml()

    def is_operator(x: Any) -> bool:
        return isinstance(x, qml.operation.Operator)

    def dropped() -> Any:
        out = branch()
        leaves = jax.tree_util.tree_leaves(out, is_leaf=is_operator)
        if leaves and all(is_operator(x) for x in leaves):
            return None
        return jax.tree_util.tree_map(lambda x: None if is_operator(x) else x, out, is_leaf=is_operator)

    dropped.__name__ = dropped.__qualname__ = getattr(branch, "__name__", "branch")
    return dropped


class DecomposesIntoControlFlow(Exception):
    """Signal: ``op``'s decomposition calls a loop or branch, which only the circuit can apply (the
    gates of its body are not operators of the decomposition's tape)."""


class RecordedOnTape:
    """The control-flow handler of a decomposition or a QNode's transform: a loop or branch goes on
    the queue recording (a decomposition's tape) as its ``.operation``, which the circuit replays (a
    transform may also put ``.operation`` on its tape); its values are computed here without the
    circuit (its gates discarded)."""

    def noted(self, operation: ControlFlowOperation) -> None:
        replayed_control_flow()(operation)

    @staticmethod
    def _classical(bind: Callable, *args: Any) -> Any:
        with _qml().QueuingManager.stop_recording(), context_scope(ambient_carries=()):
            return bind(*args)

    def for_loop(self, body: Any, bounds: tuple, init: tuple, bind: Callable) -> Any:
        return self._classical(bind, body, init)

    def while_loop(self, cond_fn: Any, body: Any, init: tuple, bind: Callable) -> Any:
        return self._classical(bind, cond_fn, body, init)

    def cond(self, preds: list, branches: list, otherwise: Any, bind: Callable) -> Any:
        otherwise = None if otherwise is None else operators_dropped(otherwise)
        return self._classical(bind, preds, [operators_dropped(b) for b in branches], otherwise)


@functools.cache
def replayed_control_flow() -> type:
    """The operator that stands on a tape for ``flow``, a loop or branch called while the tape
    recorded (a PennyLane tape takes operators only)."""
    qml = _qml()

    class ReplayedControlFlow(qml.operation.Operator):
        num_params = 0

        def __init__(self, flow: ControlFlowOperation):
            self.flow = flow
            super().__init__(wires=[])
            self._name = flow.name  # "Cond", "ForLoop"...: Catalyst's name of the operation

        def __repr__(self) -> str:
            return repr(self.flow)

    return ReplayedControlFlow


def recorded_decomposition(op: Any) -> list:
    """``op.decomposition()``, its loops and branches recorded as :func:`replayed_control_flow` s."""
    with control_flow_handler(RecordedOnTape()):
        return op.decomposition()


def _unbatched(op: Any) -> Any:
    if getattr(op, "batch_size", None):
        raise BroadcastingError(f"{op.name} with broadcast (batched) parameters{_NO_BROADCASTING}")
    return op


def initial_state(op: Any, wires: WireMap) -> Any:
    """The state ``StatePrep(vector, W)`` prepares from ``|0...0>`` (``vector`` on the wires ``W``
    in their order, the others in ``|0>``); ``vector``, the wires and their number may be traced."""
    targets = list(wires.indices(op.wires, op.name))
    if getattr(op, "batch_size", None):
        raise BroadcastingError(f"{op.name} with broadcast (batched) states{_NO_BROADCASTING}")
    vector = op.parameters[0].toarray() if getattr(op, "is_sparse", False) else op.parameters[0]
    vector = jnp.asarray(vector, jnp.complex128).reshape(-1)
    n, k = wires.n_wires, len(targets)
    if wires.traced or not all(isinstance(t, int) for t in targets):
        # Amplitude i takes the vector's entry at its targets' bits, where the other bits are 0.
        indices = basis_indices(n)
        others_zero = (indices & ~functools.reduce(operator.or_, [bit_mask(t, n) for t in targets])) == 0
        entry = vector.at[outcome_index(indices, targets, n)].get(mode="promise_in_bounds")
        return jnp.where(others_zero, entry, 0)
    others = [w for w in range(n) if w not in targets]
    # Rows: the W wires in W's order; column 0: the other wires all in |0>.
    table = jnp.zeros((2**k, 2 ** (n - k)), jnp.complex128).at[:, 0].set(vector)
    return jnp.transpose(table.reshape((2,) * n), np.argsort(targets + others)).reshape(-1)


def bit_flip_matrix(bit: Any) -> Any:
    """``X**bit`` for a (possibly traced) bit: the identity for 0, Pauli X for 1."""
    b = jnp.asarray(bit).astype(jnp.complex128)
    return jnp.stack([jnp.stack([1 - b, b]), jnp.stack([b, 1 - b])])


def _is_traced(wire: Any) -> bool:
    return isinstance(wire, Tracer) or (hasattr(wire, "shape") and not isinstance(wire, np.ndarray))


def _is_index(label: Any) -> bool:
    return isinstance(label, (int, np.integer)) and not isinstance(label, bool) and label >= 0


class WireMap:
    """Device wire labels to state-vector indices (see the module docstring)."""

    def __init__(self, labels: Sequence[Any] | None = (), n_wires: Any = None, growing: bool = False):
        self.labels = None if labels is None else list(labels)
        self.n_wires = len(self.labels) if n_wires is None else n_wires
        self.growing = growing
        self.on_grow: Callable[[int], None] = lambda added: None
        self.on_traced: Callable[[Any], None] = lambda index: None
        self.on_coinciding: Callable[[Any, str], None] = lambda coincide, op_name: None
        self.checked = False  # the circuit checks its traced wires (see OutsideWires)
        self.slots: list = []  # the wires added for dynamically allocated ones (qml.allocate)
        self.begin_run()

    def begin_run(self) -> None:
        """A run of the circuit begins: every slot is free and in ``|0>``."""
        self.dynamic: dict = {}  # DynamicWire -> (its slot, restored when deallocated)
        self.free: list = [(slot, False) for slot in self.slots]  # (slot, used since the run began)

    def allocate(self, dynamic_wires: Sequence[Any], restored: bool = False, reuse: bool = False) -> list:
        """A free slot (in ``|0>``, or with ``reuse`` any) for each of ``dynamic_wires``, added as
        needed: ``(index, used)`` per wire, ``used`` when it may not be in ``|0>``."""
        if self.labels is None:
            raise WireError("qml.allocate on a device with a traced number of wires is not supported: "
                            "give the device a fixed number of wires.")
        given = []
        for wire in dynamic_wires:
            usable = [k for k, (_, used) in enumerate(self.free) if reuse or not used]
            if usable:
                slot, used = self.free.pop(usable[0])
            else:
                slot, used = _Slot(len(self.slots)), False
                self.slots.append(slot)
                self.labels.append(slot)
                self.n_wires = len(self.labels)
                self.on_grow(1)
            self.dynamic[wire] = (slot, restored)
            given.append((self.labels.index(slot), used))
        return given

    def deallocate(self, dynamic_wires: Sequence[Any]) -> None:
        """Free the slots of ``dynamic_wires`` (``qml.deallocate``)."""
        for wire in dynamic_wires:
            slot, restored = self.dynamic.pop(wire, (None, False))
            if slot is not None:
                self.free.append((slot, not restored))

    @property
    def traced(self) -> bool:
        """The number of wires is a traced value."""
        return self.labels is None

    def index(self, wire: Any, op_name: str) -> Any:
        if _is_traced(wire):
            if self.growing:
                raise WireError(
                    f"{op_name} acts on a traced wire on a device without a number of wires "
                    "(wires=None), whose wires are allocated as the circuit names them: give the "
                    "device a number of wires (wires=n, n may be an argument of the compiled function)."
                )
            device = [label for label in self.labels or () if not isinstance(label, _Slot)]
            if device != list(range(len(device))):  # a traced wire needs labels that are indices
                raise WireError(
                    f"{op_name} acts on a traced wire, but the device's wires are labelled "
                    f"{self.labels}; traced wires need a device with wires=<int>."
                )
            index = jnp.asarray(wire, jnp.int64)
            self.on_traced(index)
            return index
        label = wire.item() if isinstance(wire, np.ndarray) else wire
        if type(label).__name__ == "DynamicWire":
            if label not in self.dynamic:  # Catalyst's class and phrase
                raise CompileError(f"Deallocated qubits cannot be used, but used in {op_name}: "
                                   "a wire of qml.allocate is usable until it is deallocated.")
            return self.labels.index(self.dynamic[label][0])
        if self.labels is None:
            if not _is_index(label):
                raise WireError(f"{op_name} acts on wire {label!r}; the wires of a device with a traced "
                                "number of wires are the integers 0 .. n - 1.")
            return int(label)
        if label not in self.labels:
            if not self.growing:
                raise WireError(
                    f"{op_name} acts on wire {label!r}, which the device does not have (its wires "
                    f"are {self.labels})."
                )
            self._allocate(label)
        return self.labels.index(label)

    def indices(self, wires: Sequence[Any], op_name: str) -> tuple:
        return tuple(self.index(w, op_name) for w in wires)

    def check_distinct(self, wires: Sequence[Any], op_name: str) -> None:
        """An operator's traced wires, seen by ``on_coinciding`` if they coincide with its others
        (PennyLane refuses such wires when they are Python values)."""
        if len(wires) > 1 and any(map(_is_traced, wires)):
            labels = jnp.stack([jnp.asarray(w, jnp.int64) for w in wires])
            self.on_coinciding(jnp.any(jnp.triu(labels[:, None] == labels[None, :], 1)), op_name)

    def _allocate(self, label: Any) -> None:
        """Add ``label`` (an integer brings every smaller one with it) as the last wires."""
        added = [w for w in range(label + 1) if w not in self.labels] if _is_index(label) else [label]
        self.labels += added
        self.n_wires = len(self.labels)
        self.on_grow(len(added))


@dataclass(eq=False)
class _Slot:
    """The label of the ``k``-th wire added for dynamically allocated wires."""

    k: int

    def __repr__(self) -> str:
        return f"<allocated wire {self.k}>"


class OutsideWires:
    """The first traced wire of a circuit run outside the device, and the first operator whose
    traced wires coincide (in ambient ``carries``), for :meth:`check` to raise ``WireError`` when
    the program runs. A circuit runs again with the check (``retry``) at its first traced wire, so
    others carry nothing more."""

    def __init__(self, wires: WireMap, retry: Callable[[], Exception]):
        self.wires, self.retry = wires, retry
        self.carries: tuple = ()
        if wires.checked:
            self.carries = (ValueCarry(jnp.asarray(False)), ValueCarry(jnp.zeros((), jnp.int64)),
                            ValueCarry(jnp.full((), -1, jnp.int64)))
        self.operators: list[str] = []  # the operators with traced wires that may coincide
        wires.on_traced, wires.on_coinciding = self.see, self.see_coinciding

    def see(self, index: Any) -> None:
        if not self.carries:
            self.wires.checked = True
            raise self.retry()
        found, first, _ = self.carries
        outside = (index < 0) | (index >= self.wires.n_wires)
        first.value = jnp.where(found.value | ~outside, first.value, index)
        found.value = found.value | outside

    def see_coinciding(self, coincide: Any, op_name: str) -> None:
        if self.carries:  # (its traced wire was seen)
            clash = self.carries[2]
            clash.value = jnp.where((clash.value < 0) & coincide, len(self.operators), clash.value)
            self.operators.append(op_name)

    def check(self, device: str, qnode: str) -> None:
        self.wires.on_traced = lambda index: None  # the terminal measurements' wires were seen
        if not self.carries:
            return

        def raise_outside(found: Any, first: Any, clash: Any) -> None:
            if bool(found):
                raise pennylane_error(WireError, "WireError")(
                    f"Cannot run circuit(s) on {device} as they contain wires not found on the device: "
                    f"{{{int(first)}}} (a traced wire of the QNode {qnode}; the device's wires are "
                    "0 .. n - 1)."
                )
            if int(clash) >= 0:  # PennyLane's phrase first (for Python wires), then ours
                raise pennylane_error(WireError, "WireError")(
                    f"Wires must be unique: {self.operators[int(clash)]} in the QNode {qnode} acts on "
                    "traced wires that coincide when the program runs; give each operator and measurement "
                    "distinct wires."
                )

        callback(raise_outside)(*(carry.value for carry in self.carries))
