"""``qml.allocate``/``qml.deallocate`` (dynamically allocated wires) in compiled QNodes, with and
without PennyLane's program capture: the wires they give act as fresh ``|0>`` wires, and the
device wires' results are ``default.qubit``'s on a device with spare wires (where PennyLane places
them). Inside a loop the same wire is reused, reset to ``|0>`` as PennyLane resets reused wires."""

import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import for_loop, qjit
from catalyst_lite.errors import CompileError, QuantumOperationError
from test_capture import needs_capture

DEV = qml.device("default.qubit", wires=3)
SPARE = qml.device("default.qubit", wires=7)  # room for PennyLane to place the allocated wires


def entangling(x):
    qml.RX(x, 1)
    with qml.allocate(1) as q:  # entangled with wire 1, then given back without being restored
        qml.X(q[0])
        qml.CNOT([q[0], 2])
        qml.CRY(x, [1, q[0]])
    with qml.allocate(1, restored=True) as r:  # given back in |0>, as promised
        qml.H(r[0])
        qml.CNOT([r[0], 0])
        qml.CNOT([r[0], 0])
        qml.H(r[0])
    pair = qml.allocate(2)
    qml.H(pair[1])
    qml.CRX(2 * x, [pair[1], 0])
    qml.deallocate(pair)
    return qml.probs(wires=[0, 1, 2])


def test_allocated_wires_match_default_qubit_with_spare_wires():
    expected = qml.qnode(SPARE)(entangling)(0.4)
    np.testing.assert_allclose(qjit(qml.qnode(DEV)(entangling))(0.4), expected, atol=1e-12)


@needs_capture
def test_allocated_wires_under_program_capture():
    expected = qml.qnode(SPARE)(entangling)(0.7)
    np.testing.assert_allclose(qjit(qml.qnode(DEV)(entangling), capture=True)(0.7), expected, atol=1e-12)
    assert not qml.capture.enabled()


def test_a_wire_allocated_in_a_traced_loop_is_reset_for_each_iteration():
    def compiled(n):
        @for_loop(0, n, 1)
        def body(i):
            q = qml.allocate(1)
            qml.X(q[0])  # |1> at the end of each iteration: the next one needs it reset
            qml.CNOT([q[0], 1])
            qml.deallocate(q)

        body()
        return qml.probs(wires=[0, 1])

    def reference(n):
        for _ in range(n):
            with qml.allocate(1) as q:
                qml.X(q[0])
                qml.CNOT([q[0], 1])
        return qml.probs(wires=[0, 1])

    circuit = qjit(qml.qnode(DEV)(compiled))
    for n in (3, 4):
        np.testing.assert_allclose(circuit(n), qml.qnode(SPARE)(reference)(n), atol=1e-12)


def test_a_wire_entangled_when_freed_in_a_traced_loop_is_refused_without_shots():
    """Reusing a freed wire that is still entangled takes a reset by measurement; PennyLane
    averages over its outcomes (with wires to spare: each allocation a fresh wire). Without shots
    one drawn outcome would be a wrong number: a clear error instead, with shots the statistics of
    the shots (each its own outcome)."""

    def compiled(x):
        @for_loop(0, 2, 1)
        def body(i):
            with qml.allocate(1) as q:
                qml.CNOT([0, q[0]])
                qml.RY(x, q[0])
                qml.CNOT([q[0], 1])  # q stays entangled with wires 0 and 1

        qml.H(0)
        body()
        return qml.expval(qml.X(0))

    def reference(x):
        qml.H(0)
        for _ in range(2):
            with qml.allocate(1) as q:
                qml.CNOT([0, q[0]])
                qml.RY(x, q[0])
                qml.CNOT([q[0], 1])
        return qml.expval(qml.X(0))

    with pytest.raises(QuantumOperationError, match="still entangled with other wires"):
        qjit(qml.qnode(DEV)(compiled))(0.9)
    sampled = qjit(qml.qnode(DEV, shots=4000)(compiled), seed=3)(0.9)
    assert abs(sampled - qml.qnode(SPARE)(reference)(0.9)) < 0.06


def used_after_deallocation():
    with qml.allocate(1) as q:
        qml.X(q[0])
    qml.H(q[0])
    return qml.probs(wires=[0])


def every_wire_measured():
    with qml.allocate(1) as q:
        qml.X(q[0])
    return qml.probs()


def allocated_wire_measured():
    q = qml.allocate(1)
    return qml.probs(wires=q)


@pytest.mark.parametrize("circuit, message", [
    (used_after_deallocation, "Deallocated qubits cannot be used, but used in Hadamard"),
    (every_wire_measured, "Terminal measurements must take in an explicit list of wires"),
    (allocated_wire_measured, "Terminal measurements cannot take in dynamically allocated wires"),
])
def test_catalysts_errors_for_allocated_wires(circuit, message):
    with pytest.raises(CompileError, match=message):
        qjit(qml.qnode(DEV)(circuit))()
