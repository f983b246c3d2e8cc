"""Operations that PennyLane decomposes (templates, wide gates, ``StatePrep`` later in a circuit,
adjoint and controlled templates) are applied exactly once, as on ``default.qubit``.

Decomposing builds operators; while a compiled circuit's recorder was the active queuing context
they were queued into it as well, and applied a second time by the next loop traced while the
gates were being applied (issue #19, items 1 and 3)."""

import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import for_loop, qjit

N = 4
DEV = qml.device("default.qubit", wires=N)
RNG = np.random.default_rng(1)
WEIGHTS = RNG.normal(size=(3, N, 3))
UNITARY = np.linalg.qr(RNG.normal(size=(N, N)))[0]  # a constant: its decomposition is numeric
AMPLITUDES = RNG.normal(size=2**N) / 4


def assert_states_match(qfunc, *args):
    expected = qml.qnode(DEV)(qfunc)(*args)
    actual = qjit(qml.qnode(DEV)(qfunc))(*args)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-10)


def test_wide_gates_decomposed_in_one_circuit_are_applied_once():
    """The issue's circuit: two DoubleExcitations and a four-wire MultiRZ (all decomposed)."""

    def circuit(x, y):
        qml.DoubleExcitation(x, wires=[0, 1, 2, 3])
        qml.DoubleExcitation(y, wires=[2, 3, 0, 1])
        qml.MultiRZ(x, wires=[0, 1, 2, 3])
        return qml.state()

    assert_states_match(circuit, 3.14, 0.6)
    assert_states_match(circuit, 0.3, -1.2)


def test_templates_adjoints_and_controlled_templates_match_default_qubit():
    def circuit(weights, amplitudes):
        qml.Hadamard(0)
        qml.RX(0.4, 1)
        qml.StronglyEntanglingLayers(weights, wires=range(N))
        qml.QFT(wires=range(N))
        qml.GroverOperator(wires=range(N))
        qml.BasisRotation(wires=range(N), unitary_matrix=UNITARY)
        qml.AmplitudeEmbedding(amplitudes, wires=range(N), normalize=True)  # later: decomposed
        qml.BasisEmbedding([1, 0, 1], wires=[0, 2, 3])
        qml.adjoint(qml.QFT)(wires=range(N))
        qml.ctrl(qml.QFT, control=0)(wires=[1, 2, 3])
        qml.adjoint(qml.StronglyEntanglingLayers(weights, wires=range(N)))
        qml.ctrl(qml.GroverOperator(wires=[1, 2, 3]), control=0, control_values=0)
        qml.StatePrep(amplitudes, wires=[3, 1, 0, 2], normalize=True)
        qml.adjoint(qml.ctrl(qml.BasisRotation(wires=[1, 2, 3], unitary_matrix=UNITARY[:3, :3]), 0))
        return qml.state()

    assert_states_match(circuit, WEIGHTS, AMPLITUDES)


def test_templates_inside_a_loop_body_with_traced_parameters():
    def circuit(weights):
        qml.Hadamard(1)

        @for_loop(0, 3, 1)
        def layers(i):
            qml.StronglyEntanglingLayers(weights[i][None], wires=range(N))
            qml.QFT(wires=[0, 2, 3])

        layers()
        return qml.state()

    expected = qml.qnode(DEV)(lambda w: [circuit_unrolled(w), qml.state()][1])(WEIGHTS)
    np.testing.assert_allclose(np.asarray(qjit(qml.qnode(DEV)(circuit))(WEIGHTS)), expected, atol=1e-10)


def circuit_unrolled(weights):
    qml.Hadamard(1)
    for i in range(3):
        qml.StronglyEntanglingLayers(weights[i][None], wires=range(N))
        qml.QFT(wires=[0, 2, 3])


@pytest.mark.parametrize("transform", [qml.transforms.decompose, qml.transforms.cancel_inverses])
def test_qnode_transforms_that_decompose_apply_each_gate_once(transform):
    def circuit(x):
        qml.QFT(wires=range(N))
        qml.DoubleExcitation(x, wires=[0, 1, 2, 3])
        qml.adjoint(qml.QFT)(wires=[1, 2, 3])

        @for_loop(0, 2, 1)  # the segment before it is applied first; then the loop's body
        def rotations(i):
            qml.RY(x * i, wires=i)

        rotations()
        return qml.state()

    expected = transform(qml.qnode(DEV)(circuit_without_loop))(0.7)
    actual = qjit(transform(qml.qnode(DEV)(circuit)))(0.7)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-10)


def circuit_without_loop(x):
    qml.QFT(wires=range(N))
    qml.DoubleExcitation(x, wires=[0, 1, 2, 3])
    qml.adjoint(qml.QFT)(wires=[1, 2, 3])
    for i in range(2):
        qml.RY(x * i, wires=i)
    return qml.state()


def test_decompositions_that_call_qml_adjoint_and_qml_ctrl_get_operators():
    """``PhaseAdder`` (inside ``Adder`` with a modulus) decomposes into
    ``qml.adjoint(QFT)(wires=...)``: built off the circuit's queue, it must be PennyLane's operator
    (it was an empty list: a ``TypeError`` in ``change_op_basis``)."""

    def circuit():
        qml.BasisState(np.array([1, 0, 1]), wires=[0, 1, 2])
        qml.Adder(3, x_wires=[0, 1, 2], mod=6, work_wires=[3, 4])
        qml.ctrl(qml.PhaseAdder(2, x_wires=[1, 2]), control=0)
        return qml.state()

    dev = qml.device("default.qubit", wires=5)
    np.testing.assert_allclose(qjit(qml.qnode(dev)(circuit))(), qml.qnode(dev)(circuit)(), atol=1e-10)
