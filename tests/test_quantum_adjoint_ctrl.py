"""``qml.adjoint`` and ``qml.ctrl`` of quantum functions that contain control flow, compiled by
catalyst_lite, against ``default.qubit`` (where the same loops run as Python loops): the adjoint of
a loop is the reversed loop of adjoint bodies, the adjoint of a branch the branch of adjoints, and
every gate inside ``ctrl`` is controlled. Measurements inside them raise Catalyst's errors."""

import numpy as np
import pennylane as qml
import pytest

import catalyst_lite
from catalyst_lite import cond, for_loop, measure, qjit, while_loop
from catalyst_lite.errors import QuantumRegionError

DEV = qml.device("default.qubit", wires=3)


def assert_states_match(qfunc, *args, dev=DEV):
    expected = qml.qnode(dev)(qfunc)(*args)
    actual = qjit(qml.qnode(dev)(qfunc))(*args)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-10)


def pennylane_control_flow(x, n):
    """Two wires (0, 1): a loop carrying a value, a while loop, a branch and a controlled gate in
    a loop, written with PennyLane's control flow (Python loops on default.qubit)."""

    @qml.for_loop(0, n, 1)
    def chain(i, angle):
        qml.RX(angle * x, wires=i % 2)
        qml.CNOT([i % 2, (i + 1) % 2])
        return angle + 0.5

    angle = chain(1.0)

    @qml.while_loop(lambda k: k < 2)
    def walk(k):
        qml.RZ(k * x + 0.1, wires=k)
        qml.Hadamard(k)
        return k + 1

    walk(0)

    def big():
        qml.S(1)
        qml.RX(x, 0)

    def small():
        qml.T(0)

    qml.cond(x > 0.5, big, small)()

    @qml.for_loop(0, 2, 1)
    def controlled(i):
        qml.ctrl(qml.RY, control=(i + 1) % 2)(x, wires=i)

    controlled()
    qml.RY(angle, wires=0)


WRAPPERS = {
    "adjoint": lambda f: qml.adjoint(f),
    "ctrl": lambda f: qml.ctrl(f, control=2, control_values=0),
    "adjoint of ctrl": lambda f: qml.adjoint(qml.ctrl(f, control=2)),
    "ctrl of adjoint": lambda f: qml.ctrl(qml.adjoint(f), control=2),
    "adjoint of adjoint": lambda f: qml.adjoint(qml.adjoint(f)),
    "adjoint, not lazy": lambda f: qml.adjoint(f, lazy=False),
}


def test_control_flow_inside_adjoint_and_ctrl_matches_default_qubit():
    def circuit(x, n):  # every wrapper in turn, each followed by a gate that does not commute
        qml.Hadamard(0)
        qml.RX(0.3, 1)
        qml.Hadamard(2)
        for k, wrap in enumerate(WRAPPERS.values()):
            wrap(pennylane_control_flow)(x, n)
            qml.RY(0.2 * k + 0.1, wires=k % 3)
        return qml.state()

    for x in (0.7, 0.2):
        assert_states_match(circuit, x, 4)


def catalyst_lite_control_flow(x, n, m):
    """catalyst_lite's own control flow (it runs eagerly on default.qubit): a reversed range with
    traced bounds, a while loop with two carried values, a cond with else_if/otherwise that
    returns a value, a nested loop."""

    @for_loop(n, m, -2)
    def down(i):
        qml.RY(x * i, wires=i % 3)

        @for_loop(0, i % 3, 1)
        def inner(j, a):
            qml.CRX(a, wires=[j, (j + 1) % 3])
            return a * 1.5

        inner(x)

    down()

    @while_loop(lambda k, a: k < n)
    def grow(k, a):
        qml.IsingXY(a, wires=[k % 3, (k + 2) % 3])
        return k + 2, a + x

    _, total = grow(0, 0.1)

    @cond(total > 1.0)
    def branch():
        qml.Rot(total, x, 0.2, wires=1)
        return total * 2

    @branch.else_if(total > 0.5)
    def branch():
        qml.SX(2)
        return total

    @branch.otherwise
    def branch():
        return -total

    qml.RZ(branch(), wires=2)


def test_catalyst_lite_control_flow_inside_adjoint():
    def circuit(x, n, m):
        qml.Hadamard(0)
        qml.Hadamard(3)
        qml.adjoint(catalyst_lite_control_flow)(x, n, m)
        qml.RX(0.4, wires=3)
        qml.ctrl(qml.adjoint(catalyst_lite_control_flow), control=3, control_values=0)(x, n, m)
        return qml.state()

    for x, n, m in [(0.45, 5, -1), (0.9, 4, 0), (0.2, 1, 2)]:
        assert_states_match(circuit, x, n, m, dev=qml.device("default.qubit", wires=4))


def branches_reading_python_values(x):
    """Branches built in a Python loop, closing over its variable and a list changed after each
    call: a branch's gates are those of its call (PennyLane runs it there)."""
    seen = [0.5]
    for w in range(3):

        @cond(x[w] > 0)
        def flip():
            qml.RX(seen[-1], wires=w)

            @cond(x[w] > 0.5)
            def inner():
                qml.CNOT([w, (w + 1) % 3])

            inner()

        @flip.otherwise
        def flip():
            qml.RY(seen[-1] * x[w], wires=(w + 2) % 3)

        flip()
        qml.cond(x[w] < 0.3, lambda: qml.Hadamard(w))()
        qml.ctrl(qml.cond(x[w] > -0.2, lambda: qml.RZ(seen[-1], wires=w)), control=(w + 1) % 3)()
        seen.append(seen[-1] + 1.0)


@pytest.mark.parametrize("x", [[0.9, -0.4, 0.2], [0.1, 0.7, -0.8], [-0.3, 0.6, 1.2]])
def test_branches_inside_adjoint_see_the_python_values_of_their_call(x):
    def circuit(x):
        qml.Hadamard(3)
        qml.adjoint(branches_reading_python_values)(x)
        qml.ctrl(qml.adjoint(branches_reading_python_values), control=3)(x[::-1])
        return qml.state()

    assert_states_match(circuit, np.array(x), dev=qml.device("default.qubit", wires=4))


def loops_reading_python_values(x, n):
    """Loops built in a Python loop whose bodies close over its variable, directly and through a
    helper function built there too."""
    for k in range(2):

        def rotation(i):
            qml.RY(x[k] * (i + 1), wires=i % 3)

        @for_loop(0, n, 1)
        def ladder(i):
            rotation(i)
            qml.CNOT([k, 2])

        ladder()

        @while_loop(lambda j: j < n)
        def walk(j):
            qml.RX(x[k] + j, wires=k)
            return j + 1

        walk(0)


@pytest.mark.parametrize("n", [0, 2, 3])
def test_loops_inside_adjoint_see_the_python_values_of_their_call(n):
    def circuit(x, n):
        qml.Hadamard(1)
        qml.adjoint(loops_reading_python_values)(x, n)
        return qml.state()

    assert_states_match(circuit, np.array([0.3, 0.8]), n)


def test_adjoint_of_a_loop_with_traced_bounds_is_one_loop_in_the_program():
    def circuit(x, n):
        @for_loop(0, n, 1)
        def layer(i):
            qml.RX(x * (i + 1), wires=i % 3)
            qml.CNOT([i % 3, (i + 1) % 3])

        qml.adjoint(layer)()
        return qml.state()

    compiled = qjit(qml.qnode(DEV)(circuit))
    for n in (7, 0):
        expected = qml.qnode(DEV)(circuit)(0.3, n)
        np.testing.assert_allclose(np.asarray(compiled(0.3, n)), expected, atol=1e-10)
    # No carried values: no forward run, only the reversed loop, whose trip count is traced.
    outer = [e for e in compiled.jaxpr.jaxpr.eqns if e.primitive.name == "for_loop"]
    assert len(outer) == 1


def test_adjoint_returns_pennylanes_operators_for_gates_only():
    # qml.adjoint(fn)(args) returns what it returns in PennyLane (a list for several gates, with no
    # .wires); catalyst_lite.adjoint returns Catalyst's one operator, with fn's wires in fn's order.
    seen = {}

    def circuit(x):
        seen["ops"] = qml.adjoint(lambda: (qml.RX(x, 2), qml.CNOT([0, 1])))()
        seen["one"] = qml.adjoint(qml.RY)(x, wires=1)
        seen["region"] = catalyst_lite.adjoint(lambda: (qml.RX(x, 2), qml.CNOT([0, 1])))()
        return qml.state()

    qjit(qml.qnode(DEV)(circuit))(0.5)
    compiled = dict(seen)
    qml.qnode(DEV)(circuit)(0.5)  # PennyLane, uncompiled
    assert type(compiled["ops"]) is type(seen["ops"]) is list
    assert all(isinstance(op, qml.ops.Adjoint) for op in compiled["ops"])
    assert [op.base.name for op in compiled["ops"]] == [op.base.name for op in seen["ops"]] == ["CNOT", "RX"]
    assert compiled["one"].base.name == "RY"
    assert list(compiled["region"].wires) == [2, 0, 1]


def rotated_then_measured(x):
    qml.RX(x, 0)
    measure(0)


def rotated_then_measured_by_pennylane(x):
    qml.RX(x, 0)
    qml.measure(0)


def measured_in_a_loop(x):
    @for_loop(0, 2, 1)
    def body(i):
        qml.RX(x, wires=i)
        measure(i)

    body()


def rotated_then_expval(x):
    qml.RX(x, 0)
    return qml.expval(qml.Z(0))


# Catalyst 0.15 raises ValueError with these messages.
MID_CIRCUIT = r"Mid-circuit measurements cannot be used within an adjoint\(\) or ctrl\(\) region"
PROCESS = r"Measurement process cannot be used within an adjoint\(\) or ctrl\(\) region"


@pytest.mark.parametrize("region", [
    lambda f: qml.adjoint(f),
    lambda f: qml.ctrl(f, control=2),
    lambda f: qml.adjoint(lambda x: qml.ctrl(f, control=2)(x)),
])
@pytest.mark.parametrize("inner, message", [
    (rotated_then_measured, MID_CIRCUIT),
    (rotated_then_measured_by_pennylane, MID_CIRCUIT),
    (measured_in_a_loop, MID_CIRCUIT),
    (rotated_then_expval, PROCESS),
])
def test_measurements_inside_adjoint_or_ctrl_are_catalysts_errors(region, inner, message):
    def circuit(x):
        region(inner)(x)
        return qml.state()

    with pytest.raises(QuantumRegionError, match=message) as raised:
        qjit(qml.qnode(DEV)(circuit))(0.3)
    assert isinstance(raised.value, ValueError)


def test_pennylane_qjit_compiler_dispatches_adjoint_of_loops():
    def circuit(x, n):
        qml.Hadamard(0)
        qml.adjoint(pennylane_control_flow)(x, n)
        return qml.probs()

    expected = qml.qnode(DEV)(circuit)(0.7, 3)
    actual = qml.qjit(qml.qnode(DEV)(circuit), compiler="catalyst_lite")(0.7, 3)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-10)


def test_catalyst_ctrl_and_adjoint_of_functions_with_a_traced_control_wire():
    dev = qml.device("default.qubit", wires=4)

    def compiled(x):
        qml.Hadamard(0)

        @for_loop(0, 3, 1)
        def body(i):
            catalyst_lite.ctrl(lambda: (qml.RX(x, wires=i + 1), qml.CNOT([i + 1, (i + 2) % 4])), control=i)()
            catalyst_lite.adjoint(lambda: qml.IsingXX(x * i, wires=[i, 3]))()

        body()
        return qml.state()

    def reference(x):
        qml.Hadamard(0)
        for i in range(3):
            qml.ctrl(lambda: (qml.RX(x, wires=i + 1), qml.CNOT([i + 1, (i + 2) % 4])), control=i)()
            qml.adjoint(lambda: qml.IsingXX(x * i, wires=[i, 3]))()
        return qml.state()

    np.testing.assert_allclose(qjit(qml.qnode(dev)(compiled))(0.7), qml.qnode(dev)(reference)(0.7), atol=1e-10)


@pytest.mark.parametrize("values", [[], [True], [0, 1, 1]])
def test_catalyst_ctrl_rejects_a_wrong_number_of_control_values(values):
    """PennyLane's Controlled rejects a count that differs from the control wires' (qml.ctrl's
    named gates, CRX..., skip the check); catalyst_lite.ctrl rejects it for operators, operator
    classes and functions alike, with Catalyst's phrase and PennyLane's."""
    import catalyst_lite

    with pytest.raises(ValueError, match="control_values should be the same length"):
        qml.ops.Controlled(qml.PauliX(0), [1, 2], control_values=[True])
    cases = [
        lambda: catalyst_lite.ctrl(qml.RX(0.1, wires=0), control=[1, 2], control_values=values),
        lambda: catalyst_lite.ctrl(qml.RX, control=[1, 2], control_values=values),
        lambda: catalyst_lite.ctrl(lambda: qml.RX(0.1, 0), control=[1, 2], control_values=values),
    ]
    for make in cases:
        with pytest.raises(ValueError, match="Length of the control_values .*same length as control_wires"):
            make()

    @qjit
    @qml.qnode(DEV)
    def circuit(x):
        catalyst_lite.ctrl(lambda: qml.RX(x, 0), control=[1, 2], control_values=values)()
        return qml.state()

    with pytest.raises(ValueError, match="Length of the control_values"):
        circuit(0.2)


def test_catalyst_ctrl_takes_control_values_as_lists_arrays_or_one_value():
    import catalyst_lite

    def circuit(x, w, ctrl):
        qml.X(0)
        ctrl(qml.RX(x, wires=2), control=w)
        ctrl(qml.RY, control=[w], control_values=[True])(x, wires=1)
        ctrl(qml.RY, control=np.array([0, 1]), control_values=np.array([1, 0]))(x, wires=2)
        ctrl(lambda: qml.RZ(x, wires=1), control=(0, 2), control_values=(1, 0))()
        return qml.state()

    expected = qml.qnode(DEV)(circuit)(0.3, 0, qml.ctrl)
    actual = qjit(qml.qnode(DEV)(lambda x, w: circuit(x, w, catalyst_lite.ctrl)))(0.3, 0)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-12)


def test_catalyst_ctrl_of_a_function_outside_qjit_queues_its_gates_and_describes_them():
    """Outside a compiled circuit (a QNode PennyLane runs, or plain Python), catalyst_lite.ctrl of
    a function applies what qml.ctrl applies and returns the operator describing it, with every
    option, as inside qjit."""
    import catalyst_lite

    def circuit(x, ctrl):
        qml.X(0)
        ctrl(lambda: (qml.RX(x, 1), qml.CNOT([1, 2])), control=0, control_values=[1])()
        ctrl(lambda: qml.RY(x, 2), control=[0, 1], control_values=[1, 0])()
        return qml.probs()

    np.testing.assert_allclose(qml.qnode(DEV)(circuit)(0.4, catalyst_lite.ctrl),
                               qml.qnode(DEV)(circuit)(0.4, qml.ctrl), atol=1e-12)

    def adder():
        qml.SemiAdder(x_wires=[1, 2], y_wires=[3, 4], work_wires=[5])

    op = catalyst_lite.ctrl(adder, control=0, work_wires=[6], work_wire_type="zeroed")()
    assert op.work_wire_type == "zeroed" and op.control_wires.tolist() == [0]
    [gate] = op.decomposition()
    assert gate.hyperparameters["work_wire_type"] == "zeroed" and gate.work_wires.tolist() == [6]

    nested = catalyst_lite.ctrl(catalyst_lite.ctrl(lambda: qml.RZ(0.5, wires=0), control=1), control=2)()
    [gate] = nested.decomposition()
    assert set(gate.control_wires) == {1, 2} and gate.base == qml.RZ(0.5, wires=0)
