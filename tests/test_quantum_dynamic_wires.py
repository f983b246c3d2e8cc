"""Devices whose number of wires is a traced value (``qml.device(..., wires=n)`` inside the
compiled function: the state vector has the symbolic length ``2**n``, one trace serves every
``n``) or left unspecified (``wires=None``: wires allocated as the circuit uses them, as Catalyst's
automatic qubit management). Results against ``default.qubit`` with the same number of wires."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import CatalystLiteError, cond, for_loop, grad, measure, qjit

TOL = 1e-10


def reference(qfunc, n, *args, **device):
    """``qfunc`` on ``default.qubit`` with ``n`` wires (``qfunc(n, *args)``)."""
    return qml.qnode(qml.device("default.qubit", wires=n, **device))(lambda *a: qfunc(n, *a))(*args)


def chain(n, x):
    """Gates on known and traced wires, a Hermitian and a Pauli sum: every kind of measurement."""
    qml.Hadamard(0)

    @for_loop(0, n - 1, 1)
    def ladder(i):
        qml.RY(x * (i + 1), wires=i + 1)
        qml.CNOT(wires=[i, i + 1])

    ladder()
    qml.Toffoli(wires=[0, 1, 2])
    qml.IsingXX(x / 3, wires=[2, 0])
    hermitian = qml.Hermitian(np.array([[1.0, 0.5j], [-0.5j, -1.0]]), wires=1)
    return (qml.state(), qml.probs(), qml.probs(wires=[2, 0]), qml.expval(qml.X(0) @ qml.Z(2) + 0.5 * qml.Y(1)),
            qml.var(qml.Z(1)), qml.expval(hermitian))


def prepared(n, x):
    """A state preparation on traced wires, then gates of ``x``: one expectation value."""
    qml.StatePrep(jnp.ones(4) / 2, wires=[n - 1, 0])
    qml.RY(x, wires=1)
    qml.CRZ(x * 2, wires=[1, n - 1])
    return qml.expval(qml.Z(1) @ qml.X(n - 1))


@pytest.fixture(scope="module")
def traced_chain():
    @qjit
    def run(n: int, x: float):
        return qml.qnode(qml.device("default.qubit", wires=n))(chain)(n, x)

    return run


@pytest.mark.parametrize("n", [3, 4, 6])
def test_traced_number_of_wires_matches_default_qubit(traced_chain, n):
    for actual, expected in zip(traced_chain(n, 0.7), reference(chain, n, 0.7)):
        np.testing.assert_allclose(actual, expected, atol=TOL)


def test_the_state_has_a_symbolic_length_and_is_traced_once():
    traces = []

    @qjit
    def run(n: int, x: float):
        traces.append(n)
        return qml.qnode(qml.device("default.qubit", wires=n))(chain)(n, x)

    for n in (3, 4, 5):
        run(n, 0.2)
    assert len(traces) == 1
    results = [v for v in run.jaxpr.jaxpr.outvars if getattr(v.aval, "dtype", None) == np.complex128]
    (state,) = results
    assert not isinstance(state.aval.shape[0], int)  # a variable of the program: 2**n
    assert "tensor<?xcomplex<f64>>" in run.mlir


def test_samples_counts_and_mid_circuit_measurements_on_a_traced_number_of_wires():
    @qjit(seed=5)
    def run(n: int):
        @qml.set_shots(shots=20)
        @qml.qnode(qml.device("default.qubit", wires=n))
        def circuit():
            qml.X(0)

            @for_loop(1, n, 1)
            def copy(i):
                qml.CNOT(wires=[i - 1, i])

            copy()
            return qml.sample(), qml.counts(), qml.sample(wires=[0])

        return circuit()

    for n in (2, 4):
        samples, (outcomes, counts), first = run(n)
        assert samples.shape == (20, n) and samples.dtype == np.int64 and (samples == 1).all()
        np.testing.assert_array_equal(outcomes, np.arange(2**n))
        assert counts[-1] == 20 and counts.sum() == 20
        assert first.shape == (20, 1)

    @qjit(seed=2)
    def branch(n: int, x: float):
        @qml.qnode(qml.device("default.qubit", wires=n))
        def circuit():
            qml.RX(x, wires=n - 1)
            m = measure(n - 1)

            @cond(m)
            def flip():
                qml.X(0)

            flip()
            return qml.expval(qml.Z(0) @ qml.Z(n - 1))

        return circuit()

    assert np.isclose(branch(3, 1.1), 1.0) and np.isclose(branch(5, 0.4), 1.0)  # both flipped or neither


def test_state_preparation_and_gradient_on_a_traced_number_of_wires():
    @qjit
    def run(n: int, x: float):
        circuit = qml.qnode(qml.device("default.qubit", wires=n))(prepared)
        return circuit(n, x), grad(lambda y: circuit(n, y))(x)

    for n in (3, 4):
        value, slope = run(n, 0.6)
        np.testing.assert_allclose(value, reference(prepared, n, 0.6), atol=TOL)
        expected = jax.grad(qml.qnode(qml.device("default.qubit", wires=n), interface="jax")(
            lambda x: prepared(n, x)))(0.6)
        np.testing.assert_allclose(slope, expected, atol=1e-8)



def test_lightning_qubit_with_a_traced_number_of_wires_matches_default_qubit():
    """lightning.qubit's constructor hashes its wire labels, a traced number among them: it runs as
    default.qubit does (every kind of measurement, a gradient, samples)."""
    @qjit(seed=3)
    def run(n, x):
        device = qml.device("lightning.qubit", wires=n)
        measured = qml.qnode(device)(chain)(n, x)
        slope = grad(lambda y: qml.qnode(device)(prepared)(n, y))(x)
        samples = qml.qnode(device, shots=5)(lambda: (qml.X(n - 1), qml.sample())[1])()
        return measured, slope, samples

    for n in (3, 5):
        measured, slope, samples = run(n, 0.7)
        for actual, expected in zip(measured, reference(chain, n, 0.7)):
            np.testing.assert_allclose(actual, expected, atol=TOL)
        expected = jax.grad(qml.qnode(qml.device("default.qubit", wires=n), interface="jax")(
            lambda x: prepared(n, x)))(0.7)
        np.testing.assert_allclose(slope, expected, atol=1e-8)
        np.testing.assert_array_equal(samples, np.tile(np.eye(n, dtype=int)[n - 1], (5, 1)))

def test_wires_allocated_on_use_as_catalyst():
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 3])

        @for_loop(0, 2, 1)
        def loop(i):
            qml.RY(x, wires=5)  # a new wire inside a loop: the circuit is traced again with it

        loop()
        return qml.probs(), qml.expval(qml.Z(3))

    probs, z3 = qjit(qml.qnode(qml.device("default.qubit", wires=None))(circuit))(0.3)
    assert probs.shape == (2**6,)  # wires 0 .. 5, as Catalyst allocates them
    expected = qml.qnode(qml.device("default.qubit", wires=6))(circuit)(0.3)
    np.testing.assert_allclose(probs, expected[0], atol=TOL)
    np.testing.assert_allclose(z3, expected[1], atol=TOL)


def test_wires_allocated_on_use_refuse_traced_wires():
    def circuit(n: int):
        @for_loop(0, n, 1)
        def loop(i):
            qml.X(wires=i)

        loop()
        return qml.probs()

    with pytest.raises(CatalystLiteError, match="wires=None"):
        qjit(qml.qnode(qml.device("default.qubit", wires=None))(circuit))


def test_a_negative_traced_number_of_wires_is_a_wire_error_when_the_program_runs():
    """Was 'negative shift count' (Python's ValueError) from the check of the state's size 2**n
    (PennyLane reads a Python -1 as the label of one wire: a traced number is a count)."""
    from catalyst_lite.errors import WireError

    def superposed(n):
        qml.Hadamard(0)
        return qml.probs()

    @qjit
    def run(n: int):
        return qml.qnode(qml.device("default.qubit", wires=n))(superposed)(n)

    with pytest.raises(WireError, match=r"wires of default.qubit must not be negative, got -1 .*superposed"):
        run(-1)
    np.testing.assert_allclose(run(2), reference(superposed, 2), atol=1e-12)
