"""Random circuits against ``default.qubit``: gate fusion, monomial gathers, repeated layers and
decompositions must never change a circuit's state (issue #19, item 3).

The circuits mix permuted wire orders, multi-wire rotations, controlled gates with control values,
gates that are decomposed, known and traced parameters, and stretches repeated several times (which
become loops). Each drawn circuit is compiled once and run with two parameter vectors.

The suite runs a small sample; ``CATALYST_LITE_RANDOM_CIRCUITS=500`` runs a larger one.
"""

import os

import numpy as np
import pennylane as qml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalyst_lite import qjit

N_WIRES = 5
N_PARAMS = 6
EXAMPLES = int(os.environ.get("CATALYST_LITE_RANDOM_CIRCUITS", "6"))
DEV = qml.device("default.qubit", wires=N_WIRES)


GATES = {
    # name: (build(params, wires), number of wires, number of parameters)
    "H": (lambda p, w: qml.Hadamard(w[0]), 1, 0),
    "S": (lambda p, w: qml.S(w[0]), 1, 0),
    "X": (lambda p, w: qml.X(w[0]), 1, 0),
    "T": (lambda p, w: qml.T(w[0]), 1, 0),
    "RX": (lambda p, w: qml.RX(p[0], w[0]), 1, 1),
    "RY": (lambda p, w: qml.RY(p[0], w[0]), 1, 1),
    "Rot": (lambda p, w: qml.Rot(p[0], p[1], p[2], w[0]), 1, 3),
    "CNOT": (lambda p, w: qml.CNOT(w), 2, 0),
    "CZ": (lambda p, w: qml.CZ(w), 2, 0),
    "SWAP": (lambda p, w: qml.SWAP(w), 2, 0),
    "ISWAP": (lambda p, w: qml.ISWAP(w), 2, 0),
    "CRY": (lambda p, w: qml.CRY(p[0], w), 2, 1),
    "IsingXX": (lambda p, w: qml.IsingXX(p[0], w), 2, 1),
    "IsingYY": (lambda p, w: qml.IsingYY(p[0], w), 2, 1),
    "IsingZZ": (lambda p, w: qml.IsingZZ(p[0], w), 2, 1),
    "SingleExcitation": (lambda p, w: qml.SingleExcitation(p[0], w), 2, 1),
    "Toffoli": (lambda p, w: qml.Toffoli(w), 3, 0),
    "CSWAP": (lambda p, w: qml.CSWAP(w), 3, 0),
    "MultiRZ3": (lambda p, w: qml.MultiRZ(p[0], w), 3, 1),
    "MultiRZ4": (lambda p, w: qml.MultiRZ(p[0], w), 4, 1),  # decomposed (more than 3 wires)
    "PauliRot": (lambda p, w: qml.PauliRot(p[0], "XYZ", w), 3, 1),
    "DoubleExcitation": (lambda p, w: qml.DoubleExcitation(p[0], w), 4, 1),
    "OrbitalRotation": (lambda p, w: qml.OrbitalRotation(p[0], w), 4, 1),
    "ctrl(RX)": (lambda p, w: qml.ctrl(qml.RX(p[0], w[0]), control=w[1:], control_values=[0, 1]), 3, 1),
    "ctrl(SWAP)": (lambda p, w: qml.ctrl(qml.SWAP(w[:2]), control=w[2], control_values=0), 3, 0),
    "adjoint(CRot)": (lambda p, w: qml.adjoint(qml.CRot(p[0], p[1], 0.3, w)), 2, 2),
    "QFT": (lambda p, w: qml.QFT(w), 3, 0),  # decomposed
}


@st.composite
def gates(draw):
    name = draw(st.sampled_from(sorted(GATES)))
    _, n_wires, n_params = GATES[name]
    wires = draw(st.permutations(range(N_WIRES)))[:n_wires]
    # A parameter is an index into the traced vector, or a known number.
    params = [draw(st.one_of(st.integers(0, N_PARAMS - 1), st.floats(-3, 3).map(lambda v: round(v, 3))))
              for _ in range(n_params)]
    return name, tuple(wires), tuple(params)


@st.composite
def circuits(draw):
    """Gates, and stretches of them repeated (``(start, length, times)``: a layered circuit)."""
    ops = draw(st.lists(gates(), min_size=1, max_size=30))
    start = draw(st.integers(0, len(ops) - 1))
    length = draw(st.integers(1, min(6, len(ops) - start)))
    times = draw(st.sampled_from([1, 2, 5]))
    return ops[:start] + ops[start:start + length] * times + ops[start + length:]


def qfunc_of(ops):
    def circuit(theta):
        for name, wires, params in ops:
            values = [theta[p] if isinstance(p, int) else p for p in params]
            GATES[name][0](values, list(wires))
        return qml.state(), qml.expval(qml.Z(0) @ qml.X(3)), qml.probs(wires=[4, 1])

    return circuit


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(circuits(), st.integers(0, 2**31 - 1))
def test_random_fusable_circuits_match_default_qubit(ops, seed):
    rng = np.random.default_rng(seed)
    circuit = qfunc_of(ops)
    compiled = qjit(qml.qnode(DEV)(circuit))
    for theta in (rng.uniform(-np.pi, np.pi, N_PARAMS), rng.uniform(-np.pi, np.pi, N_PARAMS)):
        expected = qml.qnode(DEV)(circuit)(theta)
        actual = compiled(theta)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-9, err_msg=str(ops))
