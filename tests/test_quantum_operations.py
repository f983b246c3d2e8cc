"""Operations inside compiled QNodes beyond the named gates: operations applied by their matrix,
``qml.Snapshot`` (returned as Catalyst returns snapshots), and ``catalyst_lite.adjoint``/``ctrl``
(Catalyst's signatures, returning operators). Results against ``default.qubit``; structures and
errors against Catalyst 0.15."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

import catalyst_lite
from catalyst_lite import CatalystLiteError, for_loop, qjit

TOL = 1e-10


def dev(n=3):
    return qml.device("default.qubit", wires=n)


class XXRotation(qml.operation.Operation):
    """A user's operation with a matrix and no decomposition."""

    num_wires = 2
    num_params = 1

    @staticmethod
    def compute_matrix(theta):
        c, s = jnp.cos(theta / 2), -1j * jnp.sin(theta / 2)
        return jnp.array([[c, 0, 0, s], [0, c, s, 0], [0, s, c, 0], [s, 0, 0, c]])


def test_operations_with_a_matrix_and_no_decomposition_are_applied_by_it():
    block = np.array([[0.1, 0.2], [0.3, 0.4]])

    def circuit(x):
        qml.Hadamard(0)
        XXRotation(x, wires=[0, 2])
        XXRotation(0.4, wires=[1, 2])
        qml.BlockEncode(block, wires=[1, 2])
        qml.adjoint(XXRotation(x, wires=[2, 0]))
        qml.ctrl(XXRotation(x * 2, wires=[2, 0]), control=1, control_values=0)
        return qml.state()

    np.testing.assert_allclose(qjit(qml.qnode(dev())(circuit))(0.3), qml.qnode(dev())(circuit)(0.3), atol=TOL)


def test_an_operation_without_matrix_or_decomposition_is_named():
    class Opaque(qml.operation.Operation):
        num_wires = 1

    with pytest.raises(CatalystLiteError, match="Opaque.*neither a decomposition nor a matrix"):
        qjit(qml.qnode(dev())(lambda: (Opaque(wires=0), qml.state())[1]))()


# --- operations whose decomposition has loops and branches (Catalyst's "sharp bits") ----------------


def _branch(F, p, wires):
    @F.cond(p > 0.5)
    def big():
        qml.RX(p, wires=wires[0])

    big()


def _branches(F, p, wires):
    @F.cond(p > 0.8)
    def big():
        qml.RX(p, wires=wires[0])

    @big.else_if(p > 0.4)
    def middle():
        qml.RZ(p, wires=wires[0])
        qml.Hadamard(wires[0])

    @big.otherwise
    def small():
        qml.RY(p, wires=wires[1])

    big()


def _loop_of_branches(F, p, wires):
    @F.for_loop(0, 3, 1)
    def rung(i, v):
        @F.cond(v > 0.7)
        def big():
            qml.RX(v, wires=wires[0])

        @big.otherwise
        def small():
            qml.CNOT(wires)

        big()
        return v * 1.5

    qml.RY(rung(p), wires=wires[1])  # the loop's value, after it


def _while(F, p, wires):
    @F.while_loop(lambda v: v < 1.5)
    def grow(v):
        qml.RX(v, wires=wires[0])
        qml.CNOT(wires)
        return v + 0.4

    grow(p)


def _switched(F, p, wires):
    cases = [lambda: qml.RX(p, wires=wires[0]), lambda: qml.RY(p, wires=wires[1]),
             lambda: (qml.RZ(p, wires=wires[0]), qml.Hadamard(wires[0]))]
    k = (p > 0.5) * 1 + (p > 0.8) * 1
    if F is qml:  # the reference: Python's choice
        cases[int(k)]()
        return
    chosen = catalyst_lite.switch(k)(cases[0])
    chosen.branch(1)(cases[1])
    chosen.branch(2)(cases[2])
    chosen()


def _decomposed_by(body, F):
    """A user's operation whose decomposition records ``body`` (with the control flow of ``F``) on a
    tape, as in Catalyst's documentation."""

    class Op(qml.operation.Operation):
        num_params, num_wires = 1, 2

        def compute_decomposition(self, p, wires=None):
            with qml.tape.QuantumTape() as tape:
                body(F, p, wires)
            return tape.operations

    return Op


def _placing(Op, F):
    """A circuit with ``Op`` alone, adjointed, controlled, in a loop and in an adjoint region."""

    def circuit(x):
        qml.RY(0.4, 0)
        qml.Hadamard(1)
        qml.Hadamard(2)
        Op(x, wires=[0, 1])
        qml.adjoint(Op(x / 2, wires=[1, 0]))
        qml.ctrl(Op, control=2)(x * 1.2, wires=[0, 1])

        @F.for_loop(0, 2, 1)
        def twice(i):
            Op(x * (i + 1), wires=[1, 0])

        twice()
        qml.adjoint(lambda y: [qml.RZ(y, 1), Op(y, wires=[0, 1])])(x * 0.7)
        return qml.probs()

    return circuit


@pytest.mark.parametrize("body, flow", [
    *((body, flow) for body in (_branch, _branches, _loop_of_branches, _while) for flow in (catalyst_lite, qml)),
    (_switched, catalyst_lite),  # (its cond was recorded too: its gates applied twice)
])
def test_loops_and_branches_of_a_decomposition_follow_its_traced_parameter(body, flow):
    """Catalyst's sharp-bits example (a ``cond`` on a parameter in ``compute_decomposition``): its
    gates were applied whatever the parameter, with ``otherwise`` or a loop an internal error."""
    compiled = qjit(qml.qnode(dev())(_placing(_decomposed_by(body, flow), flow)))
    reference = qml.qnode(dev())(_placing(_decomposed_by(body, qml), qml))
    for x in (0.3, 0.6, 0.9):
        np.testing.assert_allclose(compiled(x), reference(x), atol=TOL)


@pytest.mark.parametrize("body", [_branches, _loop_of_branches])
def test_gradient_through_a_decomposition_with_loops_and_branches(body):
    def circuit(Op):
        def expval(x):
            qml.Hadamard(1)
            Op(x, wires=[0, 1])
            qml.adjoint(Op(x / 2, wires=[1, 0]))
            return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(1))

        return expval

    compiled = qjit(catalyst_lite.grad(qml.qnode(dev())(circuit(_decomposed_by(body, catalyst_lite)))))
    reference = qml.grad(qml.qnode(dev())(circuit(_decomposed_by(body, qml))))
    for x in (0.3, 0.6, 0.9):
        np.testing.assert_allclose(compiled(x), reference(qml.numpy.array(x)), atol=1e-8)


def test_qnode_transform_decomposing_an_operation_with_loops_and_branches():
    gates = {"RX", "RY", "RZ", "CNOT", "Hadamard"}

    def circuit(Op):
        def probs(x):
            qml.Hadamard(0)
            Op(x, wires=[0, 1])
            return qml.probs()

        return qml.transforms.decompose(qml.qnode(dev())(probs), gate_set=gates)

    compiled = qjit(circuit(_decomposed_by(_loop_of_branches, catalyst_lite)))
    reference = circuit(_decomposed_by(_loop_of_branches, qml))
    for x in (0.3, 0.6, 0.9):
        np.testing.assert_allclose(compiled(x), reference(x), atol=TOL)


# --- qml.Snapshot ---------------------------------------------------------------------------------


def _snapshotted(x):
    qml.Snapshot()
    qml.Hadamard(0)
    qml.Snapshot("after_h")
    qml.RX(x, 1)
    qml.CNOT([0, 2])
    qml.Snapshot(measurement=qml.state())
    return qml.expval(qml.Z(1)), qml.probs(wires=[0])


def test_snapshots_come_first_as_catalyst_returns_them():
    snapshots, (expval, probs) = qjit(qml.qnode(dev())(_snapshotted))(0.3)
    expected = qml.snapshots(qml.qnode(dev())(_snapshotted))(0.3)
    assert isinstance(snapshots, list) and len(snapshots) == 3
    for actual, key in zip(snapshots, [0, "after_h", 2]):
        np.testing.assert_allclose(actual, expected[key], atol=TOL)
    np.testing.assert_allclose(expval, expected["execution_results"][0], atol=TOL)
    np.testing.assert_allclose(probs, expected["execution_results"][1], atol=TOL)


def test_snapshot_with_one_result_and_with_shots():
    @qjit
    @qml.qnode(dev(1))
    def single(x: float):
        qml.RY(x, 0)
        qml.Snapshot()
        return qml.expval(qml.Z(0))

    (state,), value = single(0.5)
    np.testing.assert_allclose(state, [np.cos(0.25), np.sin(0.25)], atol=TOL)
    np.testing.assert_allclose(value, np.cos(0.5), atol=TOL)

    @qjit(seed=3)
    @qml.set_shots(shots=5)
    @qml.qnode(dev(1))
    def sampled():
        qml.X(0)
        qml.Snapshot()
        return qml.sample()

    (state,), samples = sampled()
    np.testing.assert_allclose(state, [0, 1], atol=TOL)
    assert samples.shape == (5, 1) and (samples == 1).all()


def test_snapshot_of_another_measurement_is_catalysts_error():
    def circuit():
        qml.Snapshot(measurement=qml.expval(qml.Z(0)))
        return qml.state()

    with pytest.raises(NotImplementedError, match=r"only supports qml.state\(\)"):
        qjit(qml.qnode(dev())(circuit))()


def test_snapshot_inside_a_loop_is_refused():
    def circuit(n: int):
        @for_loop(0, n, 1)
        def loop(i):
            qml.RX(0.1, wires=i)
            qml.Snapshot()

        loop()
        return qml.state()

    with pytest.raises(CatalystLiteError, match="Snapshot inside a for_loop"):
        qjit(qml.qnode(dev())(circuit))


# --- catalyst_lite.adjoint and catalyst_lite.ctrl --------------------------------------------------


def _entangle(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(x / 2, 1)


def test_adjoint_and_ctrl_of_functions_return_operators_as_catalyst():
    seen = {}

    def lite(x):
        qml.Hadamard(2)
        adj = catalyst_lite.adjoint(_entangle)(x)
        ctl = catalyst_lite.ctrl(_entangle, control=2, control_values=0)(x)
        seen.update(adj=adj, ctl=ctl)
        return qml.state()

    def reference(x):
        qml.Hadamard(2)
        qml.adjoint(_entangle)(x)
        qml.ctrl(_entangle, control=2, control_values=0)(x)
        return qml.state()

    np.testing.assert_allclose(qjit(qml.qnode(dev())(lite))(0.4), qml.qnode(dev())(reference)(0.4), atol=TOL)
    adj, ctl = seen["adj"], seen["ctl"]
    assert isinstance(adj, qml.operation.Operator) and adj.wires.tolist() == [0, 1]  # fn's order, as Catalyst
    assert [g.name for g in adj.decomposition()] == ["Adjoint(RY)", "Adjoint(CNOT)", "Adjoint(RX)"]
    assert ctl.wires.tolist() == [2, 0, 1] and ctl.control_wires.tolist() == [2]
    assert ctl.work_wire_type == "borrowed" and ctl.control_values == [0]
    assert [g.name for g in ctl.decomposition()] == ["C(RX)", "MultiControlledX", "C(RY)"]


def test_adjoint_and_ctrl_of_operators_and_classes_are_pennylanes():
    def lite(x):
        catalyst_lite.adjoint(qml.RX(x, 1))
        catalyst_lite.ctrl(qml.RY(x, 0), control=[1, 2], control_values=[0, 0])
        op = catalyst_lite.adjoint(qml.RZ, lazy=False)(x, wires=2)
        assert op.name == "RZ"  # lazy=False: the operator's own adjoint
        return qml.state()

    def reference(x):
        qml.adjoint(qml.RX(x, 1))
        qml.ctrl(qml.RY(x, 0), control=[1, 2], control_values=[0, 0])
        qml.RZ(-x, wires=2)
        return qml.state()

    np.testing.assert_allclose(qjit(qml.qnode(dev())(lite))(0.9), qml.qnode(dev())(reference)(0.9), atol=TOL)


def test_adjoint_of_a_loop_returns_an_operator_without_decomposition():
    seen = {}

    def circuit(x, n: int):
        def ladder():
            @for_loop(0, n, 1)
            def rung(i):
                qml.RY(x * (i + 1), wires=i)

            rung()

        ladder()
        seen["op"] = catalyst_lite.adjoint(ladder)()
        return qml.probs()

    np.testing.assert_allclose(qjit(qml.qnode(dev())(circuit))(0.7, 3), np.eye(8)[0], atol=TOL)
    with pytest.raises(qml.operation.DecompositionUndefinedError, match="loops or branches"):
        seen["op"].decomposition()


@pytest.mark.parametrize("make", [lambda: catalyst_lite.adjoint(5), lambda: catalyst_lite.ctrl(5, control=0)])
def test_adjoint_and_ctrl_of_something_else_raise_catalysts_error(make):
    with pytest.raises(ValueError, match="Expected a callable or a qml.Operator"):
        make()


# --- null.qubit -------------------------------------------------------------------------------------


def test_null_qubit_simulates_nothing_and_shapes_results_as_pennylane():
    def exact(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0)), qml.probs(wires=[0, 1]), qml.state(), qml.var(qml.X(1))

    def sampled(x):
        qml.RX(x, 0)
        return qml.sample(wires=[0, 1]), qml.expval(qml.Z(0)), qml.sample(qml.Z(0))

    null = qml.device("null.qubit", wires=3)
    for circuit, shots in ((exact, None), (sampled, 4)):
        actual = qjit(qml.qnode(null, shots=shots)(circuit))(0.3)
        expected = qml.qnode(null, shots=shots)(circuit)(0.3)
        for a, e in zip(actual, expected):
            assert a.shape == np.shape(e)
            np.testing.assert_allclose(a, e, atol=TOL)


# --- measurements and options: observables' probabilities, Catalyst's errors ------------------------


def test_probs_of_an_observable_are_in_its_eigenbasis_as_pennylane():
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.probs(op=qml.X(0)), qml.probs(op=qml.Y(1) @ qml.Z(0)), qml.probs(op=qml.Hadamard(1))

    for actual, expected in zip(qjit(qml.qnode(dev())(circuit))(0.7), qml.qnode(dev())(circuit)(0.7)):
        np.testing.assert_allclose(actual, expected, atol=TOL)
    sampled = qjit(seed=2)(qml.qnode(dev(), shots=4000)(circuit))(0.7)
    for actual, expected in zip(sampled, qml.qnode(dev())(circuit)(0.7)):
        np.testing.assert_allclose(actual, expected, atol=5 * 0.5 / np.sqrt(4000))


def test_measurements_of_the_state_are_default_qubits():
    def circuit(x):
        qml.RX(x, 5)
        qml.CNOT([5, "a"])
        qml.RY(x / 2, 1)
        qml.CRX(x, [1, 5])
        return (qml.density_matrix(wires=["a", 5]), qml.density_matrix(wires=[1]), qml.vn_entropy(wires=[5], log_base=2),
                qml.purity(wires=["a", 1]), qml.mutual_info(wires0=[5], wires1=["a", 1]), qml.state())

    device = qml.device("default.qubit", wires=[1, "a", 5])
    for actual, expected in zip(qjit(qml.qnode(device)(circuit))(0.7), qml.qnode(device)(circuit)(0.7)):
        np.testing.assert_allclose(actual, expected, atol=TOL)

    def entropy(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.vn_entropy(wires=[1])

    np.testing.assert_allclose(qjit(catalyst_lite.grad(qml.qnode(dev(), diff_method="backprop")(entropy)))(0.7),
                               jax.grad(qml.qnode(dev())(entropy))(0.7), atol=TOL)


@pytest.mark.parametrize("a, b", [(1, 3), (3, 0), (1, 0)])
def test_measurements_of_the_state_on_traced_wires_are_default_qubits(a, b):
    # wires known when the program runs (arguments), alone, in any order, with known wires
    def circuit(a, b, x):
        qml.Hadamard(0)
        qml.RY(x, 3)
        qml.CNOT([0, a])
        qml.CRX(x / 2, [b, 2])
        qml.IsingXY(x, [3, 1])
        return (qml.density_matrix(wires=[b]), qml.density_matrix(wires=[a, b]), qml.density_matrix(wires=[2, a, b]),
                qml.purity(wires=[b, 2]), qml.vn_entropy(wires=[a], log_base=2),
                qml.mutual_info(wires0=[a], wires1=[b, 2]), qml.mutual_info(wires0=[2, b], wires1=[a]))

    device = qml.device("default.qubit", wires=4)
    compiled = qjit(qml.qnode(device)(circuit))
    for actual, expected in zip(compiled(a, b, 0.7), qml.qnode(device)(circuit)(a, b, 0.7)):
        np.testing.assert_allclose(actual, expected, atol=TOL)


def test_measurements_of_the_state_with_shots_are_a_clear_error():
    circuit = qml.qnode(dev(), shots=10)(lambda: (qml.Hadamard(0), qml.density_matrix(wires=[0]))[1])
    with pytest.raises(CatalystLiteError, match="DensityMatrixMP.*shots=None"):
        qjit(circuit)()


@pytest.mark.parametrize("seed, error", [(-1, ValueError), (2**32, ValueError), (1.5, TypeError)])
def test_a_seed_out_of_range_is_catalysts_error(seed, error):
    with pytest.raises(error, match="seed"):
        qjit(seed=seed)(lambda x: x)
    assert float(qjit(seed=2**32 - 1)(lambda x: x)(1.0)) == 1.0


def test_parameter_broadcasting_names_vmap_which_gives_default_qubits_results():
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.probs(wires=[1]), qml.expval(qml.Z(0))

    xs = np.array([0.1, 0.7, 2.0])
    with pytest.raises(CatalystLiteError, match=r"RX with broadcast.*vmap"):
        qjit(qml.qnode(dev())(circuit))(xs)
    mapped = qjit(lambda v: jax.vmap(qml.qnode(dev())(circuit))(v))(xs)
    broadcast = qml.qnode(dev())(circuit)(xs)
    for actual, expected in zip(mapped, broadcast):
        np.testing.assert_allclose(actual, expected, atol=TOL)


def test_special_unitary_with_traced_parameters_is_applied_by_its_matrix():
    """Its decomposition asks whether a traced angle is 0; the matrix is exact, derivatives too."""

    def circuit(theta):
        qml.Hadamard(0)
        qml.SpecialUnitary(theta, wires=[0, 1])
        qml.SpecialUnitary(theta[:3], wires=[2])
        return qml.expval(qml.Z(0) @ qml.X(1) + qml.Y(2))

    theta = np.random.default_rng(3).normal(size=15)
    reference = qml.qnode(dev())(circuit)
    np.testing.assert_allclose(qjit(qml.qnode(dev())(circuit))(theta), reference(theta), atol=TOL)
    gradient = qjit(catalyst_lite.grad(qml.qnode(dev(), diff_method="adjoint")(circuit)))(theta)
    np.testing.assert_allclose(gradient, jax.grad(reference)(theta), atol=TOL)


def test_gates_inside_jax_lax_control_flow_are_refused():
    """JAX traces a ``jax.lax.cond``'s branches and a ``jax.lax.fori_loop``'s body itself: gates
    queued there would reach the circuit once each, in the wrong place (both branches applied: a
    wrong number). A clear error instead; a QNode called inside such a function (the whole circuit
    in it) stays right."""

    def in_lax_cond(x):
        jax.lax.cond(x > 0.5, lambda: (qml.RY(x, 0), None)[1], lambda: (qml.RX(x, 0), None)[1])
        return qml.expval(qml.Z(0))

    def in_fori_loop(x):
        jax.lax.fori_loop(0, 2, lambda i, c: (qml.RX(x * i, 0), c)[1], 0)
        return qml.expval(qml.Z(0))

    for circuit in (in_lax_cond, in_fori_loop):
        with pytest.raises(catalyst_lite.errors.QuantumOperationError, match="JAX traces itself"):
            qjit(qml.qnode(dev(1))(circuit))(0.7)

    def rotated(x):
        qml.RY(x, 0)
        return qml.expval(qml.Z(0))

    inner = qml.qnode(dev(1))(rotated)
    branch = qjit(lambda x: jax.lax.cond(x > 0.5, inner, lambda x: 2.0 + x, x))
    assert abs(branch(0.7) - qml.qnode(dev(1))(rotated)(0.7)) < TOL


def test_gates_inside_a_jax_fori_loop_over_sizes_follow_its_iterations():
    """A ``jax.lax.fori_loop`` whose bounds are sizes (an integer argument, ``len`` of an abstracted
    axis) is catalyst_lite's for_loop: its gates are applied once per iteration, as default.qubit
    applies them in a Python loop."""

    def compiled(n, x):
        jax.lax.fori_loop(0, n, lambda i, c: (qml.RX(c * (i + 1), 0), c)[1], x)
        return qml.expval(qml.Z(0))

    def over_axis(xs):
        jax.lax.fori_loop(xs.shape[0] // 2, xs.shape[0], lambda i, c: (qml.RY(xs[i], 0), c)[1], 0)
        return qml.expval(qml.Z(0))

    def reference(n, x):
        for i in range(n):
            qml.RX(x * (i + 1), 0)
        return qml.expval(qml.Z(0))

    def reference_over_axis(xs):
        for v in xs[len(xs) // 2:]:
            qml.RY(v, 0)
        return qml.expval(qml.Z(0))

    program, axis_program = qjit(qml.qnode(dev(1))(compiled)), qjit(qml.qnode(dev(1))(over_axis),
                                                                      abstracted_axes={0: "n"})
    for n in (3, 0, 1):
        assert abs(program(n, 0.4) - qml.qnode(dev(1))(reference)(n, 0.4)) < TOL
        xs = np.linspace(0.2, 1.0, n + 2)
        assert abs(axis_program(xs) - qml.qnode(dev(1))(reference_over_axis)(xs)) < TOL
