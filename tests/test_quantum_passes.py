"""Compiler passes on compiled QNodes (``qml.transform(pass_name=...)``, Catalyst's
``passes.apply_pass`` and ``catalyst_lite.passes``): they keep the circuit's results, as in
Catalyst 0.15, compared with ``default.qubit``; an unknown pass is Catalyst's ``CompileError``."""

import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import CompileError, measure, passes, pipeline, qjit

DEV = qml.device("default.qubit", wires=2)


def non_commuting(x):
    qml.RX(x, 0)
    qml.Hadamard(1)
    qml.Hadamard(1)
    qml.RZ(x, 1)
    qml.RZ(-x / 2, 1)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(0)), qml.expval(qml.X(0)), qml.expval(qml.Z(0) @ qml.Y(1)), qml.probs(wires=[1])


@pytest.mark.parametrize("schedule", [
    lambda q: qml.transform(pass_name="split-non-commuting")(q),
    lambda q: qml.transforms.split_non_commuting(q),
    lambda q: passes.apply_pass("cancel-inverses")(passes.merge_rotations(q)),
    lambda q: passes.apply_pass("disentangle-cnot", "flag", option=1)(q),
])
def test_compiler_passes_keep_the_results(schedule):
    expected = qml.qnode(DEV)(non_commuting)(0.7)
    actual = qjit(schedule(qml.qnode(DEV)(non_commuting)))(0.7)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, atol=1e-10)


def test_dynamic_one_shot_pass_keeps_one_shot_semantics():
    def circuit(x):
        qml.RX(x, 0)
        m = measure(0)
        qml.CNOT([0, 1])
        return qml.sample(wires=[1]), qml.expval(m)

    plain = qml.qnode(DEV, shots=50)(circuit)
    a = qjit(seed=11)(qml.transform(pass_name="dynamic-one-shot")(plain))(1.1)
    b = qjit(seed=11)(plain)(1.1)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], np.mean(a[0]), atol=1e-12)  # each shot: its own branch


def test_an_unknown_pass_is_catalysts_compile_error():
    qnode = passes.apply_pass("my-plugin-pass")(qml.qnode(DEV)(non_commuting))
    with pytest.raises(CompileError, match="unknown pass or pass pipeline: my-plugin-pass"):
        qjit(qnode)(0.7)


def test_pipeline_schedules_its_passes_in_order():
    """Catalyst's ``pipeline({pass: options})``: names of ``catalyst.passes`` or pass names; the
    results are kept, as with each pass alone; an unknown pass is the same ``CompileError``."""
    expected = qml.qnode(DEV)(non_commuting)(0.7)
    scheduled = pipeline({"cancel_inverses": {}, "merge-rotations": {}})(qml.qnode(DEV)(non_commuting))
    assert [t.pass_name for t in scheduled.compile_pipeline] == ["cancel-inverses", "merge-rotations"]
    for a, e in zip(qjit(scheduled)(0.7), expected):
        np.testing.assert_allclose(a, e, atol=1e-10)
    unknown = pipeline({"my-plugin-pass": {}})(qml.qnode(DEV)(non_commuting))
    with pytest.raises(CompileError, match="unknown pass or pass pipeline: my-plugin-pass"):
        qjit(unknown)(0.7)
