"""Derivatives of compiled QNodes: every ``diff_method`` against ``default.qubit``'s gradients,
QNodes with traced loop bounds and traced wires, shots, and Catalyst 0.15's errors (its
``DifferentiableCompileError`` for ``diff_method=None``, variances, the adjoint method of
``probs``)."""

import jax
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import for_loop, grad, jacobian, qjit
from catalyst_lite.errors import DifferentiableCompileError

DEV = qml.device("default.qubit", wires=4)


def layered(x, n, w):
    """``n`` layers (a traced loop bound) entangling wire ``w`` (a traced wire)."""

    @for_loop(0, n, 1)
    def layer(i):
        qml.RX(x * (i + 1), wires=i)
        qml.CRY(x, wires=[i, w])
        qml.IsingXX(x / 2, wires=[w, (i + 1) % 3])

    layer()
    qml.MultiRZ(x, wires=[0, w])
    return qml.expval(qml.Z(0) @ qml.Z(w)), qml.probs(wires=[w])


def layered_reference(x, n, w):
    for i in range(n):
        qml.RX(x * (i + 1), wires=i)
        qml.CRY(x, wires=[i, w])
        qml.IsingXX(x / 2, wires=[w, (i + 1) % 3])
    qml.MultiRZ(x, wires=[0, w])
    return qml.expval(qml.Z(0) @ qml.Z(w)), qml.probs(wires=[w])


def test_parameter_shift_jacobian_with_traced_loop_bounds_and_wires():
    circuit = qml.qnode(DEV, diff_method="parameter-shift")(layered)
    program = qjit(lambda x, n, w: jacobian(circuit, argnums=0)(x, n, w))
    reference = jax.jacobian(qml.qnode(DEV, diff_method="parameter-shift")(layered_reference))
    for n, w in ((3, 3), (2, 3), (1, 2)):
        for actual, expected in zip(program(0.3, n, w), reference(0.3, n, w)):
            np.testing.assert_allclose(actual, expected, atol=1e-10)


def rotations(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(2 * x, 1)
    return qml.expval(qml.Z(1))


@pytest.mark.parametrize("method", ["parameter-shift", "adjoint", "finite-diff", "backprop", "best"])
def test_every_diff_method_gives_default_qubits_gradient(method):
    actual = qjit(grad(qml.qnode(DEV, diff_method=method)(rotations)))(0.4)
    expected = jax.grad(qml.qnode(DEV, diff_method=method)(rotations))(0.4)
    np.testing.assert_allclose(actual, expected, atol=1e-6 if method == "finite-diff" else 1e-10)


def test_shot_estimates_get_the_derivative_of_their_exact_values():
    """With shots the value is an estimate and its derivative is the exact one (the mean of the
    parameter-shift estimate), not the zero derivative of a sample count."""
    circuit = qml.qnode(DEV, diff_method="parameter-shift", shots=200)(rotations)
    value, gradient = qjit(seed=5)(lambda x: (circuit(x), grad(circuit)(x)))(0.4)
    exact = qml.qnode(DEV, diff_method="parameter-shift")(rotations)
    np.testing.assert_allclose(gradient, jax.grad(exact)(0.4), atol=1e-10)
    assert abs(value - exact(0.4)) < 5 * np.sqrt(1 / 200) and (value * 200) % 2 == 0  # an estimate


def _expval(x):
    qml.RX(x, 0)
    return qml.expval(qml.Z(0))


def _var(x):
    qml.RX(x, 0)
    return qml.var(qml.Z(0))


def _probs(x):
    qml.RX(x, 0)
    return qml.probs(wires=[0])


@pytest.mark.parametrize(
    "method, circuit, shots, match",
    [
        (None, _expval, None, "explicitly marked non-differentiable"),
        ("adjoint", _probs, None, "adjoint method can only be used for QNodes which return qml.expval"),
        ("parameter-shift", _var, None, "Variance returns are forbidden in gradients"),
        ("backprop", _expval, 100, "finite shots"),
    ],
)
def test_catalysts_errors_for_qnodes_that_cannot_be_differentiated_so(method, circuit, shots, match):
    qnode = qml.qnode(DEV, diff_method=method, shots=shots)(circuit)
    with pytest.raises(DifferentiableCompileError, match=match):
        qjit(jacobian(qnode))(0.4)


def test_finite_differences_of_the_whole_function_ignore_diff_method():
    qnode = qml.qnode(DEV, diff_method=None)(_expval)
    np.testing.assert_allclose(qjit(grad(qnode, method="fd"))(0.4), -np.sin(0.4), atol=1e-6)
