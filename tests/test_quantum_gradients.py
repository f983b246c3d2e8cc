"""Derivatives of compiled QNodes: every ``diff_method`` against ``default.qubit``'s gradients,
QNodes with traced loop bounds and traced wires, shots, and Catalyst 0.15's errors (its
``DifferentiableCompileError`` for ``diff_method=None``, variances, the adjoint method of
``probs``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

from catalyst_lite import for_loop, grad, jacobian, jvp, qjit
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


def mixed_gates(w, x):
    """Rotations, Rot, controlled rotations (one and two controls, a control value 0), CNOT, CZ,
    two-wire and adjoint gates, parameters shared by several gates; two observables, one a
    Hamiltonian."""
    qml.StronglyEntanglingLayers(w, wires=range(3))
    qml.CRX(x[0], [0, 2])
    qml.CZ([2, 1])
    qml.Rot(x[1], x[0], x[2], 1)
    qml.CRot(x[2], x[1], 0.3, [1, 0])
    qml.ctrl(qml.RY(x[1], 0), control=[1, 2], control_values=[1, 0])
    qml.IsingXY(x[2], [0, 1])
    qml.adjoint(qml.RZ(x[0], 2))
    qml.CNOT([0, 2])
    qml.MultiRZ(x[1], [0, 2])
    return qml.expval(qml.Z(0) @ qml.X(2)), qml.expval(qml.Y(2) + 0.5 * qml.Z(1))


def _uses_adjoint_method(program) -> bool:
    """The adjoint method's rule is a custom derivative in the traced program."""
    return "custom_jvp_call" in str(program.inspect().last.jaxpr)


def test_adjoint_method_gradients_equal_backprops():
    """Exact expectation values are differentiated by the adjoint method (one loop over the
    fused blocks, :mod:`catalyst_lite.quantum.adjoint`) by default (``"best"``) on
    default.qubit; the gradients are default.qubit's backpropagation's."""
    dev = qml.device("default.qubit", wires=3)
    circuit = qml.qnode(dev)(mixed_gates)
    reference = qml.qnode(dev, diff_method="backprop", interface="autograd")(mixed_gates)
    rng = np.random.default_rng(7)
    w, x = rng.normal(size=(1, 3, 3)), rng.normal(size=3)
    cost = lambda c, xp: lambda w, x: xp.dot(np.array([0.3, 1.0]), xp.stack(c(w, x)))  # one circuit
    program = qjit(grad(cost(circuit, jax.numpy), argnums=(0, 1)))
    expected = qml.grad(cost(reference, pnp), argnums=(0, 1))(pnp.array(w), pnp.array(x))
    for actual, expected in zip(program(w, x), expected):
        np.testing.assert_allclose(actual, expected, atol=1e-10)
    assert _uses_adjoint_method(program)


def small(x):
    qml.RX(x[0], 0)
    qml.CRY(x[1] * x[0], [0, 1])
    qml.Rot(x[1], 0.2, x[0], 1)
    return qml.expval(qml.Z(1) + 0.5 * qml.X(0) @ qml.Y(1))


def test_adjoint_method_second_derivatives():
    """The adjoint method's rule is array code: its own derivative is exact too."""
    dev = qml.device("default.qubit", wires=2)
    circuit = qml.qnode(dev, diff_method="adjoint")(small)
    reference = qml.qnode(dev, diff_method="backprop", interface="jax")(small)  # uncompiled
    x = np.array([0.7, -0.4])
    program = qjit(jacobian(grad(circuit)))
    np.testing.assert_allclose(program(x), jax.hessian(reference)(x), atol=1e-10)
    assert _uses_adjoint_method(program)


def long_circuit(x):
    """More fused blocks than are unrolled: the forward simulation is a loop too."""
    for k in range(30):
        qml.RY(x[k % 3] * (k + 1) / 10, k % 4)
        qml.CNOT([k % 4, (k + 2) % 4])
    return qml.expval(qml.X(1) @ qml.Z(3))


def test_adjoint_method_of_a_long_circuit_and_its_jvp():
    dev = qml.device("default.qubit", wires=4)
    circuit = qml.qnode(dev, diff_method="adjoint")(long_circuit)
    reference = qml.qnode(dev, diff_method="backprop", interface="autograd")(long_circuit)
    x, t = np.array([0.4, -1.1, 0.7]), np.array([1.0, 0.5, -2.0])
    program = qjit(lambda x: jvp(circuit, (x,), (t,)))
    value, tangent = program(x)
    np.testing.assert_allclose(value, reference(pnp.array(x)), atol=1e-12)
    np.testing.assert_allclose(tangent, qml.grad(reference)(pnp.array(x)) @ t, atol=1e-10)
    assert _uses_adjoint_method(program)


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


def _expval_and_value(x):
    qml.RX(x, 0)
    return qml.expval(qml.Z(0)), x**2


def test_a_qnode_returning_a_value_that_is_not_a_measurement():
    """PennyLane rejects such a QNode; parameter-shift and adjoint cannot differentiate the value
    (Catalyst's error); with "best" it runs, and each result has its exact derivative."""
    with pytest.raises(qml.exceptions.QuantumFunctionError):
        qml.qnode(DEV)(_expval_and_value)(0.4)
    for method in ("parameter-shift", "adjoint"):
        qnode = qml.qnode(DEV, diff_method=method)(_expval_and_value)
        with pytest.raises(DifferentiableCompileError, match=f"The {method} method can only be used.*not a measurement"):
            qjit(jacobian(qnode))(0.4)
    np.testing.assert_allclose(qjit(jacobian(qml.qnode(DEV)(_expval_and_value)))(0.4), [-np.sin(0.4), 0.8])


def test_gradient_with_respect_to_a_complex_argument_is_pennylanes():
    """jax.grad of default.qubit's QNode takes a complex argument (a real function of it); so does
    grad (Catalyst 0.15 raises)."""

    def circuit(z, y):
        qml.RX(jnp.real(z) * jnp.imag(z), wires=0)
        qml.RY(y, wires=0)
        return qml.expval(qml.Z(0))

    z = 0.3 + 0.7j
    expected = jax.grad(qml.qnode(DEV)(circuit))(z, 2.0)
    np.testing.assert_allclose(qjit(grad(qml.qnode(DEV, diff_method="adjoint")(circuit)))(z, 2.0), expected)


def test_finite_differences_of_the_whole_function_ignore_diff_method():
    qnode = qml.qnode(DEV, diff_method=None)(_expval)
    np.testing.assert_allclose(qjit(grad(qnode, method="fd"))(0.4), -np.sin(0.4), atol=1e-6)


# --- JAX's own transformations of QNodes inside qjit ---------------------------------------------
# jax.grad/jax.jacobian/jax.vmap applied inside the program compile the QNode as any other call:
# catalyst_lite's loops with traced wires, catalyst_lite.measure and qml.measure work under them.


def test_jax_jacobian_and_grad_of_a_qnode_with_traced_loop_bounds_and_wires():
    qnode = qml.qnode(qml.device("lightning.qubit", wires=4))(layered)
    reference = qml.qnode(DEV)(layered_reference)

    @qjit
    def both(x: float):
        first = jax.jacobian(lambda y: qnode(y, 3, 3))(x)
        return first, jax.grad(lambda y: jax.numpy.sin(qnode(y, 2, 3)[0]))(x)

    expected = jax.jacobian(lambda y: reference(y, 3, 3))(0.4), jax.grad(lambda y: jax.numpy.sin(reference(y, 2, 3)[0]))(0.4)
    for got, want in zip(jax.tree.leaves(both(0.4)), jax.tree.leaves(expected)):
        np.testing.assert_allclose(got, want, atol=1e-10)


def test_jax_grad_of_a_qnode_in_a_training_loop():
    qnode = qml.qnode(qml.device("lightning.qubit", wires=4), diff_method="adjoint")(layered)
    reference = qml.qnode(DEV)(layered_reference)

    @qjit
    def train(x: float):
        @for_loop(0, 4, 1)
        def step(i, y):
            return y - 0.1 * jax.grad(lambda z: qnode(z, 3, 3)[0])(y)

        return step(x)

    expected = 0.4
    for _ in range(4):
        expected = expected - 0.1 * jax.grad(lambda z: reference(z, 3, 3)[0])(expected)
    np.testing.assert_allclose(train(0.4), expected, atol=1e-10)


def _embedded(w, x):
    """Gates of one type with parameters from constant data and from the weights (fused alike)."""
    qml.AngleEmbedding(x, wires=range(3))
    qml.AngleEmbedding(w[:3] * x + w[3:], wires=range(3), rotation="Y")
    qml.BasicEntanglerLayers(w.reshape(2, 3), wires=range(3))
    return qml.expval(qml.Z(0) @ qml.Z(2))


DATA = jnp.array([[0.1, -0.7, 1.3], [0.4, 0.2, -0.5]])


@pytest.mark.parametrize(
    "program",
    [
        lambda qn: lambda w: jax.grad(lambda v: qn(v, DATA[0]))(w),  # data a constant of the program
        lambda qn: lambda w: jax.grad(lambda v: qn(v, jnp.array([0.3, 0.2, 0.1])))(w),
        lambda qn: lambda w: jax.value_and_grad(lambda v: (qn(v, DATA[1]), v), has_aux=True)(w),
        lambda qn: lambda w: jax.jacobian(lambda v: jnp.stack([qn(v, x) for x in DATA]))(w),
        lambda qn: lambda w: jax.lax.fori_loop(0, 3, lambda i, v: v - 0.2 * jax.grad(qn)(v, DATA[0]), w),
        lambda qn: lambda w: jax.vmap(lambda x: jax.grad(qn)(w, x))(DATA),
        lambda qn: lambda w: jax.jvp(lambda v: qn(v, DATA[0]), (w,), (jnp.ones_like(w),)),
    ],
)
def test_jax_transformations_of_qnodes_embedding_constant_data_equal_jax_jits(program):
    # Parameters of one gate type that another transformation traces were read as constants (a
    # traced array passed to NumPy).
    w = jnp.linspace(-0.6, 0.9, 6)
    compiled = qjit(program(qml.qnode(DEV)(_embedded)))(w)
    expected = jax.jit(program(qml.qnode(DEV)(_embedded)))(w)
    for a, e in zip(jax.tree_util.tree_leaves(compiled), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(a, e, atol=1e-10)


def test_jax_vmap_of_qnodes_with_mid_circuit_measurements():
    from catalyst_lite import measure

    def reset_and_rotate(x):
        qml.RX(x, 0)
        measure(0, reset=True)  # whatever the outcome, wire 0 ends in |0>
        qml.RY(x, 1)
        return qml.probs(wires=[0, 1])

    def deferred(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.RY)(x, 1)
        return qml.expval(qml.Z(1))

    dev = qml.device("lightning.qubit", wires=2)
    first = qml.qnode(dev)(reset_and_rotate)
    second = qml.qnode(dev, mcm_method="deferred")(deferred)
    xs = np.array([0.3, 1.1, 2.0])
    got_first, got_second, got_grad = qjit(lambda v: (jax.vmap(first)(v), jax.vmap(second)(v), jax.grad(second)(v[0])))(xs)
    np.testing.assert_allclose(got_first, [[np.cos(x / 2) ** 2, np.sin(x / 2) ** 2, 0, 0] for x in xs], atol=1e-10)
    reference = qml.qnode(qml.device("default.qubit", wires=3), mcm_method="deferred")(deferred)
    np.testing.assert_allclose(got_second, [reference(x) for x in xs], atol=1e-10)
    np.testing.assert_allclose(got_grad, jax.grad(reference)(xs[0]), atol=1e-10)


def test_jax_jacobian_of_a_qnode_with_shots_is_the_exact_derivative():
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[1])

    qnode = qml.set_shots(qml.qnode(qml.device("lightning.qubit", wires=2))(circuit), shots=200)
    got = qjit(lambda x: jax.jacobian(qnode)(x), seed=3)(0.7)
    expected = jax.jacobian(qml.qnode(DEV)(circuit))(0.7)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, atol=1e-10)


def test_amplitude_embedding_with_zero_amplitudes_is_the_initial_state():
    """``AmplitudeEmbedding`` (a ``StatePrep``) as the first operation is the initial state, as on
    ``default.qubit``: its padded zero amplitudes gave NaN gradients through the decomposition."""

    def embedded(f):
        qml.AmplitudeEmbedding(f, wires=range(2), normalize=True, pad_with=0.0)
        qml.RY(0.3, 0)
        return qml.expval(qml.Z(0) @ qml.X(1))

    f = jnp.array([0.3, 1.0, -0.4])
    expected = jax.grad(qml.qnode(DEV, interface="jax")(embedded))(f)
    np.testing.assert_allclose(qjit(grad(qml.qnode(DEV)(embedded)))(f), expected, atol=1e-12)


def test_adjoint_method_with_a_traced_wire():
    """A gate on a wire given by an argument: the adjoint method does not apply (its blocks need
    known wires), and the derivative is the simulation's (it failed planning the blocks)."""

    def circuit(x, k):
        qml.Hadamard(0)
        qml.RX(x, wires=k)
        qml.CNOT([0, 1])
        qml.RY(2 * x, wires=k)
        return qml.expval(qml.Z(2) + qml.X(0) @ qml.Z(1))

    compiled = qjit(grad(qml.qnode(DEV, diff_method="adjoint")(circuit)))
    reference = jax.grad(qml.qnode(DEV, interface="jax")(circuit))
    for k in (0, 2):
        np.testing.assert_allclose(compiled(0.6, k), reference(0.6, k), atol=1e-12)
        assert abs(reference(0.6, k)) > 0.1


def _fixed_gates_between_rotations(x):
    qml.Hadamard(0)
    qml.RX(x, 1)
    qml.Hadamard(1)
    qml.CNOT([0, 1])
    qml.RY(2 * x, 1)
    qml.S(2)
    qml.Hadamard(2)
    qml.RX(x / 3, 2)
    return qml.expval(qml.Z(1) + 0.3 * qml.Y(2))


def _forty_layers(x):
    for i in range(40):
        qml.RX(x * (i + 1) / 10, i % 3)
        qml.Hadamard((i + 1) % 3)
        qml.CNOT([i % 3, (i + 2) % 3])
        qml.RY(x / (i + 1), (i + 1) % 3)
    return qml.expval(qml.Z(0))


@pytest.mark.parametrize("circuit", [_fixed_gates_between_rotations, _forty_layers])
def test_adjoint_sweep_with_known_blocks_and_many_blocks_matches_default_qubit(circuit):
    """The adjoint sweep over blocks whose matrix is known at compile time (a lone Hadamard) and
    over more blocks than it unrolls (160 gates) gives default.qubit's value and derivative."""
    dev = qml.device("default.qubit", wires=3)
    ours = qml.qnode(dev, diff_method="adjoint")(circuit)
    reference = qml.qnode(dev, interface="jax")(circuit)
    derivative = qjit(grad(ours))
    for x in (0.37, -1.2):
        assert float(qjit(ours)(x)) == pytest.approx(float(reference(x)), abs=1e-10)
        assert float(derivative(x)) == pytest.approx(float(jax.grad(reference)(x)), abs=1e-9)
    assert _uses_adjoint_method(derivative)


_READS = {  # (layer, wire, angle) read order of one (2, 3, 3) array: even steps up, down, repeated, irregular
    "template": lambda w: [w[l, i, k] for l in range(2) for i in range(3) for k in range(3)],
    "by wire": lambda w: [w[l, i, 0] for i in range(3) for l in range(2)],
    "backwards": lambda w: [w[l, i, 1] for l in (1, 0) for i in (2, 1, 0)],
    "repeated": lambda w: [w[0, 0, 0]] * 4,
    "irregular": lambda w: [w[0, 0, 0], w[0, 0, 2], w[0, 1, 0], w[1, 2, 1]],
}


@pytest.mark.parametrize("method", ["best", "adjoint", "parameter-shift"])
@pytest.mark.parametrize("read", list(_READS))
def test_gradients_of_parameters_read_in_any_order_from_one_array_match_default_qubit(read, method):
    """Parameters read one by one from an array become one strided slice (when they step evenly
    upwards) or one gather; either way the circuit's value and gradient are default.qubit's."""

    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(3)) if read == "template" else None
        for j, angle in enumerate(_READS[read](w)):
            qml.RY(angle, j % 3)
            qml.CNOT([j % 3, (j + 1) % 3])
        return qml.expval(qml.Z(0) @ qml.X(2))

    dev = qml.device("default.qubit", wires=3)
    reference = qml.qnode(dev, interface="jax")(circuit)
    ours = qml.qnode(dev, diff_method=method)(circuit)
    w = np.random.default_rng(5).uniform(-np.pi, np.pi, (2, 3, 3))
    assert float(qjit(ours)(w)) == pytest.approx(float(reference(w)), abs=1e-10)
    np.testing.assert_allclose(qjit(grad(ours))(w), jax.grad(reference)(w), atol=1e-10)


def _blocks_of_every_size(x, layers):
    for i in range(layers):
        qml.RX(x[0] * (i + 1), 3)  # a one-wire block (wire 3 alone)
        qml.Hadamard(4)  # a known block
        qml.RY(x[1], 0)
        qml.IsingZZ(x[0] - x[1], [0, 1])  # a two-wire block
        qml.ctrl(qml.RZ(x[1] / (i + 1), 2), control=[0, 1])  # a three-wire block
        qml.CNOT([1, 2])  # a monomial
    return qml.expval(qml.Z(0) @ qml.X(4)), qml.expval(qml.Y(2) + 0.5 * qml.Z(3))


@pytest.mark.parametrize("layers", [1, 6])
def test_adjoint_jacobian_with_blocks_of_every_size_and_two_results_matches_default_qubit(layers):
    """The adjoint sweep over one-, two- and three-wire blocks (a stack of matrices per size),
    traced and known, and monomials, for two results at once, unrolled (one layer) or a loop
    (six): default.qubit's values and Jacobian."""
    dev = qml.device("default.qubit", wires=5)
    ours = qml.qnode(dev, diff_method="adjoint")(_blocks_of_every_size)
    reference = qml.qnode(dev, interface="jax")(_blocks_of_every_size)
    x = np.array([0.8, -0.35])
    program = qjit(jacobian(lambda x: jnp.stack(ours(x, layers))))
    np.testing.assert_allclose(qjit(ours, static_argnums=1)(x, layers), reference(x, layers), atol=1e-10)
    expected = jax.jacobian(lambda x: jnp.stack(reference(x, layers)))(x)
    np.testing.assert_allclose(program(x), expected, atol=1e-10)
    assert _uses_adjoint_method(program)


def _many_kinds_of_monomials(x):
    for i in range(12):  # each layer's permutations and phases on other wires
        a, b, c = i % 5, (i + 2) % 5, (i + 3) % 5
        qml.RY(x[0] * (i + 1) / 7, a)
        qml.CZ([a, b])
        qml.S(c)
        qml.Toffoli([a, c, b])
        qml.PauliY(a)
        qml.RX(x[1] - i / 5, b)
        qml.SWAP([b, c])
        qml.ctrl(qml.T(a), control=[b, c], control_values=[1, 0])
        qml.CSWAP([c, a, (i + 1) % 5])
        qml.MultiControlledX(wires=[a, b, c, (i + 4) % 5], control_values=[0, 1, 1])
        qml.CNOT([c, a])
    return qml.expval(qml.Z(0) @ qml.X(2)), qml.expval(qml.Y(3) + 0.5 * qml.Z(1))


def test_adjoint_jacobian_with_many_kinds_of_monomial_blocks_matches_default_qubit():
    """Monomial blocks with phases, controls on either value and maps not affine (Toffoli, CSWAP,
    MultiControlledX), each layer's on other wires: default.qubit's values and Jacobian, by the
    adjoint method."""
    dev = qml.device("default.qubit", wires=5)
    ours = qml.qnode(dev, diff_method="adjoint")(_many_kinds_of_monomials)
    reference = qml.qnode(dev, interface="jax")(_many_kinds_of_monomials)
    x = np.array([0.9, -0.45])
    program = qjit(jacobian(lambda x: jnp.stack(ours(x))))
    np.testing.assert_allclose(qjit(ours)(x), reference(x), atol=1e-10)
    np.testing.assert_allclose(program(x), jax.jacobian(lambda x: jnp.stack(reference(x)))(x), atol=1e-10)
    assert _uses_adjoint_method(program)
