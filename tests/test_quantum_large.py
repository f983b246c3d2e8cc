"""Circuits of many gates: long irregular runs become tables applied by one loop (a program whose
size does not grow with the circuit's), wide gates on known wires one tensor contraction, and
scalars computed alike (a circuit's angles) one vector formula. Results against ``default.qubit``;
speed lives in ``benchmarks/large_circuits.py``."""

import jax
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import qjit
from catalyst_lite.jax_extras.provenance import vectorized_stack
from catalyst_lite.quantum.statevector import apply_tensor, zero_state
from catalyst_lite.quantum.fusion import MAX_BLOCK_GATES

TOL = 1e-10


def dev(n):
    return qml.device("default.qubit", wires=n)


def _count(jaxpr, name=None) -> int:
    """Equations of ``jaxpr`` and the jaxprs nested in it (of primitive ``name`` only, if given)."""
    return sum((name is None or e.primitive.name == name) + sum(_count(sub, name) for sub in jax.core.jaxprs_in_params(e.params))
               for e in jaxpr.eqns)


def random_circuit(length: int, n_wires: int, seed: int, traced: bool):
    """``length`` gates on random wires: rotations (known angles, or ``x * angle``), CNOT,
    Toffoli, CRZ, Hadamard, CSWAP and a doubly-controlled RY; every angle differs, so no stretch
    repeats."""
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, 8, length)
    wires = [rng.choice(n_wires, 3, replace=False).tolist() for _ in range(length)]
    angles = rng.uniform(0, 2 * np.pi, length)

    def circuit(x):
        for k, w, a in zip(kinds, wires, angles):
            angle = x * a if traced else a
            if k < 3:
                (qml.RX, qml.RY, qml.RZ)[k](angle, wires=w[0])
            elif k == 3:
                qml.CNOT(w[:2])
            elif k == 4:
                qml.Toffoli(w)
            elif k == 5:
                qml.CRZ(angle, wires=w[:2])
            elif k == 6:
                qml.CSWAP(w)
            else:
                qml.ctrl(qml.RY(angle, w[2]), control=w[:2], control_values=[1, 0])
        return qml.state()

    return circuit


@pytest.mark.parametrize("traced", [False, True], ids=["known angles", "traced angles"])
def test_long_irregular_circuit_is_one_table_loop_whatever_its_length(traced):
    sizes = {}
    for length in (300, 900):
        circuit = random_circuit(length, 6, seed=length, traced=traced)
        compiled = qjit(qml.qnode(dev(6))(circuit))
        np.testing.assert_allclose(compiled(0.7), qml.qnode(dev(6))(circuit)(0.7), atol=TOL)
        jaxpr = compiled.jaxpr.jaxpr
        assert _count(jaxpr, "for_loop") == 1
        # The user's own `x * angle` equations (one product each) grow with the circuit.
        sizes[length] = _count(jaxpr) - (_count(jaxpr, "mul") if traced else 0)
    # Fused blocks are multiplied one depth at a time (up to MAX_BLOCK_GATES, a few equations
    # each, for the one- and two-wire blocks): bounded, whatever the number of gates.
    assert abs(sizes[900] - sizes[300]) <= 2 * 6 * MAX_BLOCK_GATES


@pytest.mark.parametrize("traced", [False, True], ids=["known angles", "traced angles"])
def test_table_entries_of_every_form_match_default_qubit(traced):
    """A long irregular run whose gates fill every form of table entry: one-wire blocks (on the
    last wire too), two-target gates with up to two controls, one-target gates with up to three
    controls, control values 0 and 1; a gate on three targets splits the run."""
    rng = np.random.default_rng(11)
    gates = [(int(k), rng.permutation(5).tolist()) for k in rng.integers(0, 8, 120)]
    qft = qml.matrix(qml.QFT(wires=range(3)))

    def circuit(x):
        for k, w in gates:
            angle = x * (k + 1) if traced else 0.3 * (k + 1)
            if k == 0:
                qml.RX(angle, wires=w[0])
            elif k == 1:
                qml.ctrl(qml.RY(angle, w[0]), control=w[1:3], control_values=[0, 1])
            elif k == 2:
                qml.ctrl(qml.IsingZZ(angle, w[:2]), control=w[2:4], control_values=[1, 0])
            elif k == 3:
                qml.ctrl(qml.RZ(angle, w[0]), control=w[1:4])
            elif k == 4:
                qml.ctrl(qml.SWAP(w[:2]), control=w[2:3], control_values=[0])
            elif k == 5:
                qml.IsingXX(angle, w[:2])
            elif k == 6:
                qml.Hadamard(4)
            else:
                qml.QubitUnitary(qft, wires=w[:3])
        return qml.state()

    compiled = qjit(qml.qnode(dev(5))(circuit))
    np.testing.assert_allclose(compiled(0.7), qml.qnode(dev(5))(circuit)(0.7), atol=TOL)
    assert _count(compiled.jaxpr.jaxpr, "for_loop") >= 1  # tables, not 120 unrolled gates


def test_wide_gates_on_known_wires_are_one_contraction_each():
    rng = np.random.default_rng(3)
    u6, _ = np.linalg.qr(rng.normal(size=(64, 64)) + 1j * rng.normal(size=(64, 64)))
    u4, _ = np.linalg.qr(rng.normal(size=(16, 16)) + 1j * rng.normal(size=(16, 16)))

    def circuit(x):
        for w in range(8):
            qml.RY(x * (w + 1), wires=w)
        qml.QubitUnitary(u6, wires=[5, 0, 7, 2, 3, 6])
        qml.ctrl(qml.QubitUnitary(u4, wires=[6, 1, 4, 0]), control=[3, 2], control_values=[0, 1])
        return qml.probs(wires=[0, 3, 5])

    compiled = qjit(qml.qnode(dev(8))(circuit))
    np.testing.assert_allclose(compiled(0.3), qml.qnode(dev(8))(circuit)(0.3), atol=TOL)
    assert _count(compiled.jaxpr.jaxpr) < 200  # the indexed kernel would need 4**6 terms


@pytest.mark.parametrize("targets, controls, values", [
    ([2, 0, 3], [], []), ([1, 3, 0], [2], [0]), ([3, 1, 2], [0, 4], [1, 0]),
])
def test_tensor_kernel_matches_the_full_matrix(targets, controls, values):
    rng = np.random.default_rng(len(targets) + len(controls))
    k = len(targets)
    m = rng.normal(size=(2**k, 2**k)) + 1j * rng.normal(size=(2**k, 2**k))
    state = rng.normal(size=32) + 1j * rng.normal(size=32)
    op = qml.QubitUnitary(m, wires=targets, unitary_check=False)
    if controls:
        op = qml.ctrl(op, control=controls, control_values=values)
    expected = qml.matrix(op, wire_order=range(5)) @ state
    np.testing.assert_allclose(apply_tensor(state, m, targets, 5, controls, values), expected, atol=TOL)
    np.testing.assert_allclose(apply_tensor(zero_state(5), m, targets, 5, controls, values),
                               qml.matrix(op, wire_order=range(5))[:, 0], atol=TOL)


def test_scalars_computed_alike_stack_as_one_formula():
    @qjit
    def stacked(x: float, p):
        values = [jax.numpy.sin(x * a + p[i]) / 2 for i, a in enumerate((0.5, 1.5, 2.5))]
        vector = vectorized_stack(values)
        assert vector.parent.primitive.name == "div"  # the formula once, on vectors
        mixed = vectorized_stack([x * 2.0, x + 1.0])  # two formulas: not one
        assert mixed is None
        return vector

    p = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(stacked(0.4, p), np.sin(0.4 * np.array([0.5, 1.5, 2.5]) + p) / 2, atol=TOL)


def test_template_of_thousands_of_gates_matches_default_qubit():
    x_wires, work = list(range(4)), list(range(4, 10))

    def circuit(x):
        qml.BasisEmbedding(11, wires=x_wires)
        qml.RY(x, wires=1)
        qml.Multiplier(7, x_wires, mod=16, work_wires=work)
        return qml.probs(wires=x_wires)

    np.testing.assert_allclose(qjit(qml.qnode(dev(10))(circuit))(0.4), qml.qnode(dev(10))(circuit)(0.4), atol=TOL)
