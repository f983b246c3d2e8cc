"""``mitigate_with_zne`` (Catalyst's zero-noise extrapolation). On catalyst_lite's noiseless
simulators a folded circuit gives the circuit's own results, so the mitigated value is the
extrapolation of equal values: compared here with ``default.qubit`` and with PennyLane's
extrapolation functions. Catalyst 0.15 gives the same values (and the same error classes for bad
scale factors, folding names and non-scalar results); it cannot differentiate a mitigated circuit,
catalyst_lite can."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import grad, mitigate_with_zne, qjit
from catalyst_lite.errors import UnsupportedOperationError

DEV = qml.device("default.qubit", wires=2)


def two_expvals(x):
    qml.RX(x, wires=0)
    qml.RY(x / 2, wires=1)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))


def one_expval(x):
    qml.RX(x, wires=0)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


def test_default_extrapolation_of_a_noiseless_circuit_is_its_value():
    circuit = qml.qnode(DEV)(one_expval)
    f = qjit(lambda x: mitigate_with_zne(circuit, scale_factors=[1, 3, 5])(x))
    np.testing.assert_allclose(f(0.4), circuit(0.4), atol=1e-10)


def test_several_results_are_a_tuple():
    circuit = qml.qnode(DEV)(two_expvals)
    out = qjit(lambda x: mitigate_with_zne(circuit, scale_factors=[1, 3])(x))(0.7)
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_allclose(out, circuit(0.7), atol=1e-10)


def test_extrapolate_and_its_kwargs_and_a_function_of_qnodes():
    circuit = qml.qnode(DEV)(one_expval)
    scale = [1, 3, 5]
    f = qjit(lambda x: mitigate_with_zne(
        lambda y: circuit(y) * 2.0, scale_factors=scale, extrapolate=qml.noise.poly_extrapolate,
        extrapolate_kwargs={"order": 1},
    )(x))
    expected = qml.noise.poly_extrapolate(np.array(scale, float), np.full(3, 2.0 * float(circuit(0.3))), order=1)
    np.testing.assert_allclose(f(0.3), expected, atol=1e-10)
    decorated = mitigate_with_zne(scale_factors=[1, 3], folding="local-all")(circuit)
    np.testing.assert_allclose(qjit(decorated)(0.3), circuit(0.3), atol=1e-10)


def test_mitigated_circuit_is_differentiable():
    circuit = qml.qnode(DEV)(one_expval)
    f = qjit(grad(lambda x: mitigate_with_zne(circuit, scale_factors=[1, 3])(x)))
    np.testing.assert_allclose(f(0.4), jax.grad(circuit)(0.4), atol=1e-8)


@pytest.mark.parametrize("scale, error", [([1, 2], ValueError), ([1, -3], ValueError), ([1.0, 3], TypeError)])
def test_scale_factors_are_odd_positive_ints(scale, error):
    with pytest.raises(error, match="odd positive"):
        mitigate_with_zne(qml.qnode(DEV)(one_expval), scale_factors=scale)


def test_folding_and_results_are_checked():
    circuit = qml.qnode(DEV)(one_expval)
    with pytest.raises(ValueError, match="folding must be one of"):
        qjit(lambda x: mitigate_with_zne(circuit, scale_factors=[1], folding="bogus")(x))(0.1)
    with pytest.raises(UnsupportedOperationError, match="local-random"):
        qjit(lambda x: mitigate_with_zne(circuit, scale_factors=[1], folding="local-random")(x))(0.1)
    probs = qml.qnode(DEV)(lambda x: (qml.RX(x, 0), qml.probs(wires=0))[1])
    with pytest.raises(TypeError, match="expectation values and classical scalars"):
        qjit(lambda x: mitigate_with_zne(probs, scale_factors=[1, 3])(x))(0.1)
