"""qjit(autograph=True) on QNodes: loops and branches with gates and mid-circuit measurements,
compared with the same circuits written with explicit control flow (results and the nesting of
control flow in the jaxpr) and with PennyLane's default.qubit."""

import warnings

import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import AutoGraphError, cond, for_loop, measure, qjit, while_loop
from catalyst_lite.errors import AutoGraphWarning

from jaxpr_structure import control_flow_of

DEV = qml.device("default.qubit", wires=3)


def layered(x, n):
    """The circuit in plain Python (concrete ``n``), for default.qubit."""
    for i in range(n):
        qml.RX(x * (i + 1), wires=i % 3)
        if i % 2 == 0:
            qml.CNOT(wires=[i % 3, (i + 1) % 3])
    k = 0
    while k < n:
        qml.RY(0.1 * k, wires=2)
        k += 1
    return qml.expval(qml.PauliZ(1) @ qml.PauliZ(2))


autograph_layered = qjit(autograph=True)(qml.qnode(DEV)(lambda x, n: layered(x, n)))


@qjit
@qml.qnode(DEV)
def explicit_layered(x: float, n: int):
    @for_loop(0, n, 1)
    def layer(i):
        qml.RX(x * (i + 1), wires=i % 3)

        @cond(i % 2 == 0)
        def entangle():
            qml.CNOT(wires=[i % 3, (i + 1) % 3])

        entangle()

    layer()

    @while_loop(lambda k: k < n)
    def rotations(k):
        qml.RY(0.1 * k, wires=2)
        return k + 1

    rotations(0)
    return qml.expval(qml.PauliZ(1) @ qml.PauliZ(2))


def test_loops_and_branches_with_gates():
    reference = qml.QNode(layered, DEV)
    for x, n in [(0.3, 4), (0.7, 1), (1.1, 0)]:
        expected = float(reference(x, n))
        assert float(autograph_layered(x, n)) == pytest.approx(expected, abs=1e-12)
        assert float(explicit_layered(x, n)) == pytest.approx(expected, abs=1e-12)
    assert control_flow_of(autograph_layered.jaxpr) == control_flow_of(explicit_layered.jaxpr) == [
        ("for_loop", [[("cond", [[], []])]]),
        ("while_loop", [[], []]),
    ]


def test_a_gate_under_a_size_condition_and_a_read_of_its_array():
    # `i < len(x) and x[i] > 0` reads x[i] only where Python does: an empty x has no gate.
    def circuit(x, i):
        if i < x.shape[0] and x[i] > 0:
            qml.RX(x[i], wires=0)
        return qml.expval(qml.Z(0))

    compiled = qjit(qml.qnode(DEV)(circuit), autograph=True, abstracted_axes=({0: "n"}, None))
    reference = qml.qnode(DEV)(circuit)
    for x in (np.array([0.5, -1.0, 2.0]), np.zeros(0)):
        for i in range(len(x) + 1):
            np.testing.assert_allclose(compiled(x, i), reference(x, i), atol=1e-12)


def test_mid_circuit_measurements_in_conditions_and_loops():
    @qjit(autograph=True, seed=11)
    @qml.qnode(DEV)
    def reset_each(x: float, n: int):
        for _ in range(n):
            qml.RY(x, wires=0)
            if measure(0):  # a traced outcome: cond
                qml.PauliX(0)  # back to |0>
        qml.PauliX(1)
        m = measure(1, postselect=1)  # a traced outcome, known to be True
        if m:
            qml.PauliX(2)
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(2))

    @qjit(seed=11)
    @qml.qnode(DEV)
    def explicit(x: float, n: int):
        @for_loop(0, n, 1)
        def loop(i):
            qml.RY(x, wires=0)

            @cond(measure(0))
            def flip():
                qml.PauliX(0)

            flip()

        loop()
        qml.PauliX(1)

        @cond(measure(1, postselect=1))
        def flip2():
            qml.PauliX(2)

        flip2()
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(2))

    for n in (0, 3):
        assert [float(v) for v in reset_each(1.2, n)] == [1.0, -1.0]
        assert [float(v) for v in explicit(1.2, n)] == [1.0, -1.0]
    assert control_flow_of(reset_each.jaxpr) == control_flow_of(explicit.jaxpr)


def test_pennylane_measure_under_the_pennylane_entry_point():
    @qml.qjit(compiler="catalyst_lite", autograph=True)
    @qml.qnode(DEV)
    def teleport_bit(x: float):
        qml.RX(x, wires=0)
        qml.CNOT(wires=[0, 1])
        if qml.measure(0, postselect=0):
            qml.PauliX(2)
        elif x > 1.0:
            qml.PauliY(2)
        return qml.expval(qml.PauliZ(1)), qml.expval(qml.PauliZ(2))

    # postselecting 0 on wire 0 leaves wire 1 in |0>; the measured bit is False
    assert [float(v) for v in teleport_bit(0.4)] == pytest.approx([1.0, 1.0])
    assert [float(v) for v in teleport_bit(1.4)] == pytest.approx([1.0, -1.0])


def first_layers(x, n):
    """Gates until a loop stops at `break` (plain Python for default.qubit)."""
    for i in range(n):
        if i >= 2:
            break
        qml.RX(x * (i + 1), wires=i)
    return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(1)), qml.expval(qml.PauliZ(2))


def test_break_in_a_loop_with_gates():
    ours = qjit(autograph=True)(qml.qnode(DEV)(first_layers))
    reference = qml.QNode(first_layers, DEV)
    for x, n in [(0.5, 3), (0.5, 1), (0.9, 0)]:
        for a, b in zip(ours(x, n), reference(x, n)):
            assert float(a) == pytest.approx(float(b), abs=1e-12)
    assert [name for name, _ in control_flow_of(ours.jaxpr)] == ["while_loop"]


def test_branches_measuring_different_observables():
    # Catalyst 0.15 raises a TypeError about the return structure; ours says how to rewrite it
    @qml.qnode(DEV)
    def f(x: float):
        qml.RX(x, wires=0)
        if x > 1:
            m = qml.expval(qml.PauliZ(0))
        else:
            m = qml.expval(qml.PauliX(0))
        return m

    with pytest.raises(AutoGraphError, match="'m' is expval.*measure once after it"):
        qjit(autograph=True)(f)


def test_python_lists_of_wires_are_unrolled_and_uncompilable_loops_fall_back():
    angles = [0.1, 0.2, 0.3]

    def circuit(scale):
        for wire, angle in zip([0, 1, 2], angles):
            qml.RX(angle * scale, wires=wire)
        for i in range(3):
            qml.Hadamard(wires=i)  # queued by the failed compiled attempt too: must not stay
            qml.RY(angles[i], wires=i)  # a Python list indexed by the loop index: falls back
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(1) @ qml.PauliZ(2))

    with pytest.warns(AutoGraphWarning, match="Python loop"):
        compiled = qjit(autograph=True)(qml.qnode(DEV)(circuit))
        result = float(compiled(2.0))
    assert result == pytest.approx(float(qml.QNode(circuit, DEV)(2.0)), abs=1e-12)
    assert control_flow_of(compiled.jaxpr) == []


def test_a_list_of_measurements_built_in_a_loop():
    def circuit(x):
        for i in range(3):
            qml.RX(x * (i + 1), wires=i)
        measurements = []
        for i in range(3):
            measurements.append(qml.expval(qml.PauliZ(i)))
        return measurements

    with pytest.warns(AutoGraphWarning, match="'measurements'"):
        compiled = qjit(autograph=True)(qml.qnode(DEV)(circuit))
        results = [float(v) for v in compiled(0.3)]
    assert results == pytest.approx([float(v) for v in qml.QNode(circuit, DEV)(0.3)], abs=1e-12)


def test_a_qnode_called_from_converted_code_is_converted():
    @qml.qnode(DEV)
    def rotations(x, n):
        for i in range(n):
            if x > 0:
                qml.RX(x, wires=i % 3)
            else:
                qml.RY(-x, wires=i % 3)
        return qml.expval(qml.PauliZ(0))

    @qjit(autograph=True)
    def twice(x: float, n: int):
        return 2 * rotations(x, n)

    for x, n in [(0.5, 4), (-0.5, 4), (0.5, 0)]:
        with qml.QueuingManager.stop_recording():
            expected = 2 * float(qml.QNode(rotations.func, DEV)(x, n))
        assert float(twice(x, n)) == pytest.approx(expected, abs=1e-12)


def rotate_twice(x):
    for i in range(2):
        qml.RX(x * (i + 1), wires=0)


def signed_rotation(x):
    if x > 0:
        qml.RX(x, wires=0)
    else:
        qml.RY(x, wires=0)


def test_functions_given_to_adjoint_and_ctrl():
    """Their operations must be known while tracing (PennyLane transforms the recorded gates):
    loops over known ranges run in Python there, a traced condition is an AutoGraphError (not
    gates applied untransformed)."""

    def circuit(x):
        qml.Hadamard(wires=1)
        qml.adjoint(rotate_twice)(x)
        qml.ctrl(rotate_twice, control=1)(x)

        def inner():
            for i in range(2):
                qml.RY(x, wires=i)

        qml.adjoint(inner)()
        return qml.expval(qml.PauliZ(0))

    compiled = qjit(autograph=True)(qml.qnode(DEV)(circuit))
    assert float(compiled(0.3)) == pytest.approx(float(qml.QNode(circuit, DEV)(0.3)), abs=1e-12)

    def traced_condition(x: float):
        qml.adjoint(signed_rotation)(x)
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(AutoGraphError, match="inside qml.adjoint or qml.ctrl"):
        qjit(autograph=True)(qml.qnode(DEV)(traced_condition))


def test_under_program_capture_pennylane_autograph_converts():
    """With qjit(capture=True) PennyLane records the program, so its own autograph (which emits
    PennyLane's control flow) converts the function; catalyst_lite compiles the recording."""
    from test_capture import REFUSAL

    if REFUSAL is not None:
        pytest.skip(f"PennyLane refuses program capture here: {REFUSAL}")

    def circuit(x, n):
        for i in range(n):
            if i % 2 == 0:
                qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    compiled = qjit(autograph=True, capture=True)(qml.qnode(DEV)(circuit))
    assert float(compiled(0.3, 3)) == pytest.approx(float(qml.QNode(circuit, DEV)(0.3, 3)), abs=1e-12)


def measure_until_zero(x):
    """A traced ``if`` chooses the wire to measure; while the measurement reads 1, flip wire 0
    back and measure it again; then rotate wire 2 by the number of tries."""
    qml.RX(x, wires=0)
    if x > 1.0:
        m = measure(0)
    else:
        m = measure(1)  # |0>
    k = 0
    while m:
        qml.PauliX(wires=0)
        m = measure(0)
        k += 1
    qml.RY(0.4 * (k + 1), wires=2)
    return qml.probs(wires=2)


def test_measurement_values_carried_by_loops_and_branches():
    """Compiled, with deterministic outcomes, against the probabilities computed by hand."""
    tries = qjit(autograph=True)(qml.qnode(DEV)(measure_until_zero))
    for x, k in ((np.pi, 1), (0.5, 0)):  # measures |1> on wire 0: one retry; |0> on wire 1: none
        half_angle = 0.4 * (k + 1) / 2
        np.testing.assert_allclose(tries(x), [np.cos(half_angle) ** 2, np.sin(half_angle) ** 2], atol=1e-12)
    assert {"cond", "while_loop"} <= {n for n, _ in control_flow_of(tries.jaxpr)}


def _chain(x):
    for w in [0, 1, 2]:
        qml.RX(x, wires=w)
    for i, w in enumerate([0, 1]):
        qml.CNOT(wires=[w, w + 1])
        qml.RZ(x * i, wires=w)


def test_strict_conversion_keeps_python_loops_inside_adjoint(monkeypatch):
    """Under strict conversion loops over lists are compiled, except in ``qml.adjoint`` (whose
    operations PennyLane records): there they run in Python, so their items stay wires."""
    import catalyst_lite

    monkeypatch.setattr(catalyst_lite, "autograph_strict_conversion", True)

    def circuit(x):
        qml.adjoint(_chain)(x)
        for w in [0, 1, 2]:
            qml.RY(x, wires=w)
        return qml.expval(qml.PauliZ(2))

    ours = qjit(autograph=True)(qml.qnode(DEV)(circuit))
    assert float(ours(0.3)) == pytest.approx(float(qml.QNode(circuit, DEV)(0.3)), abs=1e-12)
    assert [name for name, _ in control_flow_of(ours.jaxpr)] == ["for_loop"]


def _wire_by_wire(x):
    """Loops of Python-int bounds whose index is a gate's wire (traced once compiled)."""
    for i in range(3):
        if i % 2 == 0:
            qml.RX(x * (i + 1), wires=i)
        else:
            qml.RY(x, wires=i)
    k = 0
    while k < 2:
        qml.CNOT(wires=[k, k + 1])
        k += 1
    return qml.probs()


@pytest.mark.parametrize("device", ["default.qubit", "lightning.qubit"])
def test_loops_of_python_int_bounds_over_wires_compile_without_a_fallback(device):
    """The circuit's first traced wire runs the circuit again (catalyst_lite's own signal): the
    loop compiles on that run, as in Catalyst; it was unrolled with an AutoGraphWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoGraphWarning)
        f = qjit(autograph=True)(qml.qnode(qml.device(device, wires=3))(_wire_by_wire))
        actual = f(0.4)
    np.testing.assert_allclose(actual, qml.QNode(_wire_by_wire, DEV)(0.4), atol=1e-12)
    assert control_flow_of(f.jaxpr) == [("for_loop", [[("cond", [[], []])]]), ("while_loop", [[], []])]


class _Rotations:
    """Applies gates and counts them: a compiled loop or branch calling it carries the count."""

    def __init__(self, x):
        self.x, self.count = x, 0

    def rotate(self, wire):
        qml.RX(self.x, wires=wire)
        self.count += 1
        self.x = self.x * 2


def _counted_rotations(x, n):
    r = _Rotations(x)
    for i in range(n):
        r.rotate(i % 3)
    if x > 0.2:
        r.rotate(2)
    return qml.expval(qml.PauliZ(0) @ qml.PauliZ(2)), r.count


def test_methods_assigning_attributes_in_compiled_control_flow_apply_their_gates_once():
    ours = qjit(autograph=True)(qml.qnode(DEV)(_counted_rotations))
    for x, n in [(0.3, 4), (0.1, 2), (0.5, 0)]:
        value, count = ours(x, n)
        expected = qml.QNode(lambda x, n: _counted_rotations(x, n)[0], DEV)(x, n)
        assert float(value) == pytest.approx(float(expected), abs=1e-12)
        assert int(count) == n + (x > 0.2)
