"""Shots and mid-circuit measurements in compiled QNodes, with PennyLane's semantics.

- ``mcm_method="deferred"`` without shots is exact: compared with ``default.qubit`` to 1e-10.
- ``"one-shot"`` (the default with shots) runs each shot on its own branch: its estimates are
  compared with ``default.qubit``'s exact values within five binomial standard errors (seeded), and
  what is deterministic per shot (a measured wire keeps its outcome) is checked exactly.
- Shot vectors, ``qml.set_shots``, the call-site ``shots=`` keyword, a traced number of shots,
  ``int64`` samples, devices without wires, and Catalyst's errors.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import for_loop, measure, qjit, while_loop
from catalyst_lite.errors import QuantumOperationError, ShotsError
from catalyst_lite.quantum.measurements import INVALID_SAMPLE

DEV = qml.device("default.qubit", wires=3)
REFERENCE = qml.device("default.qubit")  # deferred measurements add wires of their own
X, Y = 1.1, 0.7
SHOTS = 3000


def branching(x, y):
    """Two mid-circuit measurements (one with reset) that steer later gates."""
    qml.RX(x, 0)
    qml.RY(y, 1)
    qml.CNOT([0, 2])
    m0 = qml.measure(0)
    qml.cond(m0, qml.RY)(y, wires=1)
    m1 = qml.measure(1, reset=True)
    qml.cond(m1 == 0, qml.Hadamard)(wires=2)
    qml.RX(x * 0.5, 1)
    return m0, m1


def exact_circuit(x, y):
    m0, m1 = branching(x, y)
    return (qml.expval(qml.Z(1) @ qml.X(2)), qml.var(qml.Y(2)), qml.probs(wires=[0, 1]),
            qml.expval(m0), qml.var(m0 + 2 * m1), qml.probs(op=[m0, m1]), qml.probs(op=m1))


def assert_all_close(actual, expected):
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-10)


def test_deferred_without_shots_is_exact():
    expected = qml.qnode(REFERENCE, mcm_method="deferred")(exact_circuit)(X, Y)
    assert_all_close(qjit(qml.qnode(DEV, mcm_method="deferred")(exact_circuit))(X, Y), expected)


def test_the_defer_measurements_transform_is_mcm_method_deferred():
    def circuit(x, y):
        m0, _ = branching(x, y)
        return qml.expval(qml.Z(1) @ qml.X(2)), qml.probs(wires=[0, 1]), qml.expval(m0)

    expected = qml.transforms.defer_measurements(qml.qnode(REFERENCE)(circuit))(X, Y)
    assert_all_close(qjit(qml.transforms.defer_measurements(qml.qnode(DEV)(circuit)))(X, Y), expected)


def test_deferred_without_shots_post_selects_and_renormalizes():
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        qml.RY(x / 3, 1)
        m = qml.measure(1, postselect=1)
        qml.cond(m, qml.PauliX)(wires=2)
        return qml.expval(qml.Z(0)), qml.probs(wires=[0, 2])

    expected = qml.qnode(REFERENCE, mcm_method="deferred")(circuit)(X)
    assert_all_close(qjit(qml.qnode(DEV, mcm_method="deferred")(circuit))(X), expected)


def tolerance(p, shots=SHOTS):
    """Five binomial standard errors of a frequency whose probability is ``p`` (at least 1e-3)."""
    return max(5 * np.sqrt(p * (1 - p) / shots), 1e-3)


@pytest.fixture(scope="module")
def one_shot():
    def circuit(x, y):
        m0, m1 = branching(x, y)
        return (qml.expval(qml.Z(1) @ qml.X(2)), qml.probs(wires=[0, 1]), qml.expval(m0),
                qml.probs(op=[m0, m1]), qml.counts(m1), qml.sample(m0), qml.sample(wires=[0, 2]),
                qml.expval(m0 + 2 * m1), qml.var(m1))

    return qjit(seed=11)(qml.set_shots(qml.qnode(DEV)(circuit), shots=SHOTS))(X, Y)


def test_one_shot_estimates_match_default_qubit(one_shot):
    exact = [np.asarray(e) for e in qml.qnode(REFERENCE, mcm_method="deferred")(exact_circuit)(X, Y)]
    zx, probs, m0, m0m1 = (np.asarray(r) for r in one_shot[:4])
    assert abs(zx - exact[0]) < 2 * tolerance((1 - exact[0]) / 2)  # a +-1 outcome: twice a frequency
    for estimate, p in [*zip(probs, exact[2]), *zip(m0m1, exact[5]), (m0, exact[3])]:
        assert abs(estimate - p) < tolerance(p)
    outcomes, counts = (np.asarray(c) for c in one_shot[4])
    assert outcomes.tolist() == [0, 1] and counts.sum() == SHOTS
    assert abs(counts[1] / SHOTS - exact[6][1]) < tolerance(exact[6][1])


def test_one_shot_records_every_measurement_of_a_shot_together(one_shot):
    m0_samples, bits = np.asarray(one_shot[5]), np.asarray(one_shot[6])
    assert m0_samples.dtype == np.int64 and bits.dtype == np.int64
    assert m0_samples.shape == (SHOTS,) and bits.shape == (SHOTS, 2)
    # Wire 0 keeps its measured value: per shot, its sample is that shot's m0.
    np.testing.assert_array_equal(bits[:, 0], m0_samples)
    assert 0 < m0_samples.sum() < SHOTS  # both branches were taken
    # Statistics of one shot set: the mean of m0 + 2 m1 is mean(m0) + 2 mean(m1) exactly.
    m1_mean = np.asarray(one_shot[4][1])[1] / SHOTS
    assert abs(np.asarray(one_shot[7]) - (m0_samples.mean() + 2 * m1_mean)) < 1e-12
    assert abs(np.asarray(one_shot[2]) - m0_samples.mean()) < 1e-12
    assert abs(np.asarray(one_shot[8]) - m1_mean * (1 - m1_mean)) < 1e-12


def post_selected(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    m = qml.measure(0, postselect=1)
    return qml.sample(wires=[1]), qml.expval(qml.Z(1)), qml.counts(m)


def test_one_shot_post_selection_discards_failed_shots_hardware_like():
    sample, z1, (outcomes, counts) = qjit(seed=3)(qml.qnode(DEV, shots=SHOTS)(post_selected))(X)
    sample = np.asarray(sample)[:, 0]
    valid = sample != INVALID_SAMPLE
    assert set(sample[valid].tolist()) == {1} and counts.tolist() == [0, valid.sum()]
    p = np.sin(X / 2) ** 2
    assert abs(valid.mean() - p) < tolerance(p)
    assert float(z1) == -1.0  # over the valid shots only


@pytest.mark.parametrize("options", [{"postselect_mode": "fill-shots"}, {"mcm_method": "deferred"}])
def test_filled_shots_and_deferred_with_shots_keep_every_shot(options):
    sample, z1, (outcomes, counts) = qjit(seed=3)(qml.qnode(DEV, shots=50, **options)(post_selected))(X)
    assert np.asarray(sample).tolist() == [[1]] * 50
    assert float(z1) == -1.0 and counts.tolist() == [0, 50]


def test_mid_circuit_measurements_inside_loops_one_per_shot():
    """Repeat until success: the number of attempts is geometric, per shot (returned stacked, as
    Catalyst returns a classical value of a one-shot circuit); a for_loop of measurements."""

    def circuit(x):
        @while_loop(lambda done, attempts: ~done)
        def attempt(done, attempts):
            qml.RX(x, 0)
            return measure(0, reset=True), attempts + 1

        _, attempts = attempt(False, 0)

        @for_loop(0, 3, 1)
        def heads(i, total):
            qml.Hadamard(i)
            return total + measure(i)

        return attempts, qml.expval(heads(0)), qml.sample(wires=[0])

    attempts, heads, sample = qjit(seed=5)(qml.qnode(DEV, shots=SHOTS)(circuit))(X)
    p = np.sin(X / 2) ** 2
    attempts = np.asarray(attempts)
    assert attempts.shape == (SHOTS,) and attempts.min() >= 1
    assert abs(attempts.mean() - 1 / p) < 5 * np.sqrt(1 - p) / p / np.sqrt(SHOTS)
    assert abs(float(heads) - 1.5) < 5 * np.sqrt(0.75 / SHOTS)


def copied_bit(x):
    """Wire 0 rotated, measured mid-circuit and copied to wire 1."""
    qml.RX(x, 0)
    m = qml.measure(0)
    qml.CNOT([0, 1])
    return qml.sample(wires=[0, 1]), qml.expval(qml.Z(1)), qml.counts(m)


def copied_bit_without_measurement(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    return qml.sample(wires=[0, 1]), qml.expval(qml.Z(1)), qml.probs(wires=[0])


def check_shots(result, qfunc, n):
    """``n`` samples of two equal bits, an expectation that is a mean of ``n`` outcomes and, with
    one execution per shot, the same shots' mean."""
    sample, z1, last = result
    assert np.asarray(sample).shape == (n, 2)
    np.testing.assert_array_equal(np.asarray(sample)[:, 0], np.asarray(sample)[:, 1])
    assert float(z1) * n == pytest.approx(round(float(z1) * n), abs=1e-9)
    if qfunc is copied_bit:  # one execution per shot records all measurements together
        assert float(z1) == pytest.approx(1 - 2 * np.asarray(sample)[:, 1].mean(), abs=1e-12)
        assert np.asarray(last[1]).sum() == n


def arithmetic(x, y):
    """Statistics of sums, differences, products, comparisons and negations of two outcomes,
    with a branch taken only when both are 1 (PennyLane's integers: m0 + m1 reaches 2)."""
    qml.RX(x, 0)
    qml.RY(y, 1)
    m0, m1 = qml.measure(0), qml.measure(1)
    qml.cond(m0 + m1 == 2, qml.RX)(x, wires=2)
    qml.cond(~m0 & (m1 - m0 == 1), qml.Hadamard)(wires=2)
    return (qml.expval(m0 + m1), qml.var(m0 - m1), qml.expval(2 * m1 + m0), qml.var(m0 * m1),
            qml.expval(m0 >= m1), qml.expval(~m1), qml.probs(op=[m0, m1]), qml.probs(wires=[2]))


@pytest.mark.parametrize("method", ["deferred", "tree-traversal"])
def test_statistics_of_measurement_value_expressions_are_exact(method):
    expected = qml.qnode(REFERENCE, mcm_method="deferred")(arithmetic)(X, Y)
    # a sum of independent outcomes (not P(m0 or m1))
    assert float(expected[0]) == pytest.approx(np.sin(X / 2) ** 2 + np.sin(Y / 2) ** 2)
    assert_all_close(qjit(qml.qnode(DEV, mcm_method=method)(arithmetic))(X, Y), expected)


def sampled_arithmetic(x, y):
    m0, m1 = arithmetic(x, y)[6].mv  # the circuit's two outcomes
    return (qml.sample(m0 + m1), qml.sample([m0, m1]), qml.counts(m0 - m1), qml.expval(m0 + m1),
            qml.var(m0 - m1), qml.probs(wires=[2]), qml.sample(wires=[2]))


@pytest.mark.parametrize("method", ["one-shot", "deferred", "tree-traversal"])
def test_statistics_of_measurement_value_expressions_with_shots(method):
    exact = [np.asarray(e) for e in qml.qnode(REFERENCE, mcm_method="deferred")(arithmetic)(X, Y)]
    qnode = qml.qnode(DEV, mcm_method=method, shots=SHOTS)(sampled_arithmetic)
    total, pair, (outcomes, counts), mean, var, probs, wire_2 = qjit(seed=6)(qnode)(X, Y)
    total, pair = np.asarray(total), np.asarray(pair)
    # every statistic comes from the same shots: exact identities
    np.testing.assert_array_equal(total, pair.sum(axis=1))
    assert set(np.unique(total)) == {0, 1, 2}
    difference = pair[:, 0] - pair[:, 1]
    assert np.asarray(outcomes).tolist() == [-1, 0, 1]
    assert np.asarray(counts).tolist() == [int((difference == d).sum()) for d in (-1, 0, 1)]
    assert float(mean) == pytest.approx(total.mean(), abs=1e-12)
    assert float(var) == pytest.approx(difference.var(), abs=1e-12)
    assert np.asarray(probs)[1] == pytest.approx(np.asarray(wire_2).mean(), abs=1e-12)
    # and they estimate default.qubit's exact values (five standard errors)
    assert abs(float(mean) - exact[0]) < 5 * np.sqrt(2.0 / SHOTS)
    assert abs(float(var) - exact[1]) < 5 * np.sqrt(1.0 / SHOTS)
    assert abs(np.asarray(probs)[1] - exact[7][1]) < 5 * np.sqrt(0.25 / SHOTS)


@pytest.mark.parametrize("shots", [SHOTS, [100, (300, 2)]])
@pytest.mark.parametrize("with_mcm", [False, True])
def test_measurements_of_one_group_come_from_the_same_shots(shots, with_mcm):
    """As on default.qubit: the measurements without observable share one set of samples, and
    those of Pauli words that agree on their wires another (probs() is the frequency of sample()'s
    outcomes; expval/var of Z(0) and X(1) are the mean and variance of sample(Z(0)), sample(X(1)))."""

    def circuit(x):
        qml.RX(x, 0)
        qml.RY(x / 2, 1)
        qml.CNOT([0, 2])
        if with_mcm:
            qml.cond(qml.measure(2), qml.RZ)(x, wires=1)
        return (qml.probs(wires=[0, 1]), qml.sample(wires=[1, 0]), qml.counts(wires=[0]),
                qml.expval(qml.Z(0)), qml.sample(qml.Z(0)), qml.var(qml.X(1)), qml.sample(qml.X(1)),
                qml.expval(qml.Z(0) @ qml.X(1)))

    results = qjit(seed=8)(qml.qnode(DEV, shots=shots)(circuit))(X)
    entries = results if isinstance(shots, list) else [results]
    assert len(entries) == (3 if isinstance(shots, list) else 1)
    for probs, bits, (_, counts), z0, z0_samples, var_x1, x1_samples, zx in entries:
        bits, z0_samples, x1_samples = map(np.asarray, (bits, z0_samples, x1_samples))
        n = len(bits)
        frequencies = np.bincount(2 * bits[:, 1] + bits[:, 0], minlength=4) / n
        np.testing.assert_array_equal(np.asarray(probs), frequencies)
        assert np.asarray(counts).tolist() == [int((bits[:, 1] == b).sum()) for b in (0, 1)]
        assert float(z0) == pytest.approx(z0_samples.mean(), abs=1e-12)
        assert float(var_x1) == pytest.approx(x1_samples.var(), abs=1e-12)
        assert float(zx) == pytest.approx((z0_samples * x1_samples).mean(), abs=1e-12)


def test_shot_vectors_give_one_result_per_entry():
    shots = [10, (20, 3)]
    reference = qml.qnode(DEV, shots=shots)(copied_bit_without_measurement)(X)
    for qfunc in (copied_bit, copied_bit_without_measurement):
        results = qjit(seed=2)(qml.qnode(DEV, shots=shots)(qfunc))(X)
        assert isinstance(results, tuple) and len(results) == len(reference) == 4
        for entry, n in zip(results, [10, 20, 20, 20]):
            check_shots(entry, qfunc, n)
        assert [np.shape(r[0]) for r in reference] == [np.shape(r[0]) for r in results]


def test_set_shots_call_site_shots_and_int64_samples():
    def circuit(x):
        qml.RX(x, 0)
        return qml.sample(), qml.sample(qml.Z(0))

    qnode = qml.qnode(DEV)(circuit)
    sample, z = qjit(qml.set_shots(qnode, shots=7))(X)
    assert sample.dtype == np.int64 and sample.shape == (7, 3) and z.shape == (7,)
    with pytest.warns(qml.exceptions.PennyLaneDeprecationWarning, match="shots"):
        sample, _ = qjit(lambda x: qnode(x, shots=5))(X)
    assert sample.shape == (5, 3)


def call_site_circuit(x, with_sample=True):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    sample = [qml.sample()] if with_sample else []  # PennyLane: returned in the order measured
    return (*sample, qml.expval(qml.Z(1)), qml.probs(wires=[0]))


def shapes(results):
    return [np.shape(r) for r in jax.tree_util.tree_leaves(results)]


@pytest.mark.parametrize("device_shots", [None, 20])
def test_call_site_shots_of_a_compiled_qnode_are_pennylanes(device_shots):
    """``qjit(qnode)(x, shots=...)`` overrides the QNode's shots for that call, as calling the
    QNode does on ``default.qubit``: an int, a shot vector, or None for exact results."""
    device = qml.device("default.qubit", wires=2, shots=device_shots)
    qnode, exact_qnode = (qml.qnode(device)(functools.partial(call_site_circuit, with_sample=s)) for s in (True, False))
    compiled = qjit(seed=5)(qnode)
    exact_z, exact_probs = qml.qnode(DEV)(call_site_circuit)(X, with_sample=False)
    with pytest.warns(qml.exceptions.PennyLaneDeprecationWarning, match="shots"):
        sample, z, probs = compiled(X, shots=SHOTS)
        assert shapes(compiled(X, shots=[5, (4, 2)])) == shapes(qnode(X, shots=[5, (4, 2)]))
        assert_all_close(qjit(exact_qnode)(X, shots=None), (exact_z, exact_probs))
    assert sample.shape == (SHOTS, 2) and np.array_equal(sample[:, 0], sample[:, 1])
    assert abs(float(z) - float(exact_z)) < 5 * np.sqrt((1 - float(exact_z) ** 2) / SHOTS)  # 5 std errors
    np.testing.assert_allclose(probs, np.bincount(np.asarray(sample[:, 0]), minlength=2) / SHOTS, atol=1e-12)
    if device_shots is not None:  # the device's shots without the keyword
        assert compiled(X)[0].shape == (device_shots, 2)


def test_call_site_shots_yield_to_set_shots_as_in_pennylane():
    qnode = qml.set_shots(qml.qnode(DEV)(call_site_circuit), shots=6)
    with pytest.warns(UserWarning, match="set_shots"):
        expected = shapes(qnode(X, shots=50))
    with pytest.warns(UserWarning, match="set_shots"):
        assert shapes(qjit(qnode)(X, shots=50)) == expected
    assert expected[0] == (6, 3)


def test_a_traced_number_of_shots():
    for qfunc in (copied_bit, copied_bit_without_measurement):
        compiled = qjit(seed=1)(lambda n, x: qml.set_shots(qml.qnode(DEV)(qfunc), shots=n)(x))
        for n in (3, 40):
            check_shots(compiled(n, X), qfunc, n)
        assert len(compiled.inspect().programs) == 1  # traced once for every number of shots


def test_sample_and_counts_on_a_device_without_wires():
    # Catalyst 0.15: sample() has shape (shots, 0) and counts() is ([0], [shots])
    circuit = qml.qnode(qml.device("default.qubit", wires=0), shots=3)
    sample = qjit(circuit(lambda: qml.sample()))()
    outcomes, counts = qjit(circuit(lambda: qml.counts()))()
    assert sample.shape == (3, 0) and sample.dtype == np.int64
    assert outcomes.tolist() == [0] and counts.tolist() == [3]


def test_without_shots_one_branch_is_followed_by_default():
    def circuit():
        qml.Hadamard(0)
        qml.measure(0)
        return qml.probs(wires=[0])

    probs = np.asarray(qjit(seed=4)(qml.qnode(DEV)(circuit))())
    assert sorted(probs.tolist()) == [0.0, 1.0]  # Catalyst's single-branch-statistics


@pytest.mark.parametrize("options, qfunc, error, message", [
    ({"mcm_method": "one-shot"}, lambda: qml.measure(0) and qml.probs(), ShotsError,
     "mcm_method='one-shot' is not supported in analytic shot mode"),
    ({"shots": 10, "mcm_method": "single-branch-statistics", "postselect_mode": "hw-like"},
     lambda: qml.probs(), ShotsError, "'hw-like' post-selection requires mcm_method='one-shot'"),
    ({"shots": 10}, lambda: (qml.measure(0), qml.state())[1], qml.exceptions.DeviceError,
     "not accepted with finite shots"),
    ({"shots": 10}, lambda: qml.state(), qml.exceptions.DeviceError, "not accepted with finite shots"),
    ({}, lambda: qml.X(0), qml.exceptions.QuantumFunctionError, "must return either a single measurement"),
    ({}, lambda: None, qml.exceptions.QuantumFunctionError, "must return either a single measurement"),
    ({"mcm_method": "deferred"}, lambda: qml.sample(qml.measure(0)), QuantumOperationError, "finite shots"),
    ({}, lambda: qml.expval(qml.measure(0)), QuantumOperationError, "deferred"),
])
def test_catalysts_and_pennylanes_errors(options, qfunc, error, message):
    with pytest.raises(error, match=message):
        qjit(qml.qnode(DEV, **options)(qfunc))()


def test_pennylanes_rejections_are_raised_with_its_classes_as_ours_too():
    """The same programs that default.qubit rejects (checked here) fail compiled too: a QNode
    returning nothing or an operator."""
    for qfunc in (lambda: qml.X(0), lambda: None, lambda: qml.RX(0.3, 0)):
        with pytest.raises(qml.exceptions.QuantumFunctionError, match="must return either"):
            qml.qnode(DEV)(qfunc)()
        with pytest.raises(QuantumOperationError, match="must return either"):
            qjit(qml.qnode(DEV)(qfunc))()
    with pytest.raises(qml.exceptions.DeviceError, match="not accepted with finite shots"):
        qml.qnode(DEV, shots=10)(qml.state)()


def test_a_qnode_returns_numbers_and_arrays_beside_its_measurements():
    """As with Catalyst (PennyLane's uncompiled QNode rejects them): a constant, an argument and a
    value computed in the circuit come back as arrays, the measurements as default.qubit's."""
    def circuit(x):
        qml.RX(x, 0)
        return [np.pi, qml.expval(qml.Z(0))], x, 2 * x, 12

    (pi, expval), x, twice, twelve = qjit(qml.qnode(DEV)(circuit))(0.4)
    reference = qml.qnode(DEV)(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])(0.4)
    assert np.allclose(expval, reference)
    assert (float(pi), float(x), float(twice), int(twelve)) == (np.pi, 0.4, 0.8, 12)
    assert float(qjit(qml.qnode(DEV)(lambda: 1.5))()) == 1.5
    # an operator's wires (a pytree of ints), as PennyLane's operator has them
    wires = qjit(qml.qnode(DEV)(lambda: qml.ctrl(qml.CNOT(wires=[2, 0]), control=1).wires))()
    assert [int(w) for w in wires] == list(qml.ctrl(qml.CNOT(wires=[2, 0]), control=1).wires)


def _rx_measure_rx(x, y):
    qml.RX(x, wires=0)
    qml.measure(0)
    qml.RX(y, wires=0)
    return qml.probs(wires=0)


def test_broadcast_parameters_are_rejected_and_vmap_maps_the_batch():
    """Batched gate parameters are not compiled (as in Catalyst, with its phrase when the QNode
    asks for one-shot); ``jax.vmap`` of the QNode gives default.qubit's broadcast results."""
    batch = np.array([0.4, 2.1])
    one_shot = qml.qnode(DEV, mcm_method="one-shot", shots=10)(_rx_measure_rx)
    with pytest.raises(ValueError, match="mcm_method='one-shot' is not compatible with broadcasting.*vmap"):
        qjit(one_shot)(batch, batch)
    with pytest.raises(QuantumOperationError, match="^RX with broadcast.*vmap"):
        qjit(qml.qnode(DEV, mcm_method="deferred")(_rx_measure_rx))(batch, batch)
    exact = qml.qnode(REFERENCE, mcm_method="deferred")(_rx_measure_rx)
    mapped = qjit(jax.vmap(qml.qnode(DEV, mcm_method="deferred")(_rx_measure_rx)))(batch, batch)
    np.testing.assert_allclose(mapped, exact(batch, batch), atol=1e-10)


@pytest.mark.parametrize("shots", [0, -3])
def test_a_traced_number_of_shots_must_be_positive(shots):
    compiled = qjit(lambda n: qml.set_shots(qml.qnode(DEV)(lambda: qml.sample()), shots=n)())
    assert compiled(2).shape == (2, 3)
    with pytest.raises(ValueError, match="Shots must be a single positive integer"):
        compiled(shots)
    with pytest.raises(ValueError, match="Shots must be a single positive integer"):
        qml.set_shots(qml.qnode(DEV)(lambda: qml.sample()), shots=shots)()


@pytest.mark.parametrize("wire", [3, 7, -1])
def test_a_traced_wire_outside_the_device_raises_wire_error_when_the_program_runs(wire):
    def circuit(w):
        qml.Hadamard(0)

        @for_loop(0, w, 1)
        def chain(i):
            qml.CNOT([i, i + 1])

        chain()
        qml.RX(0.5, wires=w)
        return qml.probs(wires=[w])

    compiled = qjit(qml.qnode(DEV)(circuit))
    expected = qml.qnode(DEV)(circuit)(2)
    np.testing.assert_allclose(compiled(2), expected, atol=1e-12)
    with pytest.raises(qml.exceptions.WireError, match="wires not found on the device"):
        qml.qnode(DEV)(circuit)(wire)
    with pytest.raises(qml.exceptions.WireError, match=re.escape(f"device: {{{3 if wire > 0 else wire}}}")):
        compiled(wire)


def test_deferred_without_shots_refuses_measurements_inside_loops():
    def circuit():
        @for_loop(0, 2, 1)
        def body(i):
            qml.Hadamard(i)
            measure(i)

        body()
        return qml.probs()

    with pytest.raises(QuantumOperationError, match="inside a for_loop/while_loop"):
        qjit(qml.qnode(DEV, mcm_method="deferred")(circuit))()


def test_measurement_values_as_gate_parameters_loop_values_and_predicates():
    """An outcome (1 here) in a gate parameter, jnp.where, a loop's carried value, `if` under
    autograph and as a returned value (Catalyst's bool), next to PennyLane's arithmetic."""
    import jax.numpy as jnp

    def circuit():
        qml.X(0)
        m = qml.measure(0)
        qml.RX(np.pi * m, wires=1)  # X on wire 1
        if m + m == 2:  # autograph: PennyLane's integers, 2 (an "or" would be 1)
            qml.X(2)

        @for_loop(0, 3, 1)
        def total(i, acc):
            return acc + m

        return m, jnp.where(m, 5.0, -5.0), total(0), ~m, qml.probs(wires=[1, 2])

    m, chosen, total, negated, probs = qjit(autograph=True)(qml.qnode(DEV)(circuit))()
    assert np.asarray(m).dtype == np.bool_ and bool(m) and not bool(negated)
    assert float(chosen) == 5.0 and int(total) == 3
    np.testing.assert_allclose(probs, [0, 0, 0, 1], atol=1e-12)


def entangled(w, x):
    """Wires 0, ``w`` and ``3 - w`` entangled (``w`` traced when compiled)."""
    qml.RX(x, 0)
    qml.CNOT([0, w])
    qml.RY(x, w)
    qml.CRX(x / 2, [w, 3 - w])


@pytest.mark.parametrize("w", [1, 2])
def test_products_and_sums_on_traced_wires_are_sampled_as_default_qubit(w):
    # products of observables on a traced wire: sampled factor by factor, eigenvalues in wire order
    hermitian = np.array([[1.0, 2.0], [2.0, 0.0]])

    def circuit(w, x, sampled=True):
        entangled(w, x)
        word, product = qml.X(0) @ qml.Y(w), qml.Hermitian(hermitian, w) @ qml.X(0)
        hamiltonian = qml.Hamiltonian([0.3, 0.5], [qml.X(w), qml.Z(0) @ qml.Y(w)])
        three = qml.X(0) @ qml.Y(w) @ qml.Z(3 - w)
        return (qml.var(word), qml.expval(hamiltonian), (qml.sample if sampled else qml.expval)(three),
                (qml.counts if sampled else qml.expval)(product), qml.probs(op=qml.X(w) @ qml.Y(0)))

    shots = 20000
    variance, hamiltonian, samples, (outcomes, counts), probs = qjit(
        qml.set_shots(qml.qnode(qml.device("default.qubit", wires=4))(circuit), shots=shots), seed=3)(w, X)
    expected = qml.qnode(qml.device("default.qubit", wires=4))(circuit)(w, X, sampled=False)
    tolerance = 5 * 2 / np.sqrt(shots)
    mean_of_counts = np.sum(np.asarray(outcomes) * np.asarray(counts)) / shots
    np.testing.assert_allclose([variance, hamiltonian, np.mean(samples)], expected[:3], atol=tolerance)
    np.testing.assert_allclose(mean_of_counts, expected[3], atol=2 * tolerance)  # eigenvalues up to 2.6
    np.testing.assert_allclose(probs, expected[4], atol=tolerance)


def test_sampling_a_sum_on_a_traced_wire_is_a_clear_error():
    def circuit(w):
        qml.Hadamard(w)
        return qml.var(qml.X(0) @ qml.Y(w) + qml.Z(w))

    compiled = qjit(qml.set_shots(qml.qnode(DEV)(circuit), shots=100))
    with pytest.raises(QuantumOperationError, match="eigenbasis of the whole observable"):
        compiled(1)


def test_pauli_words_on_traced_wires_are_not_sampled_in_one_basis_with_others():
    # p[0] and p[1] are new traced values at each use, and may be the known wire 1 when the program
    # runs: sharing one basis with another word would rotate a wire twice, or into the wrong basis
    def circuit(p):
        qml.RY(0.3, 0)
        qml.RY(1.1, 1)
        return (qml.expval(qml.Z(p[1]) @ qml.X(p[0])), qml.expval(qml.X(p[0]) @ qml.Z(p[1])), qml.expval(qml.Z(1)),
                qml.var(qml.X(p[0])))

    shots = 20000
    compiled = qjit(qml.set_shots(qml.qnode(DEV)(circuit), shots=shots), seed=5)
    for p in ([1, 0], [0, 1]):
        expected = qml.qnode(DEV)(circuit)(p)
        np.testing.assert_allclose(compiled(np.array(p)), expected, atol=5 / np.sqrt(shots))


TRACED_OBSERVABLES = {  # observables whose data are arguments of the compiled function
    "hermitian": lambda h, c: qml.Hermitian(h, wires=[0, 1]),
    "hermitian in a product": lambda h, c: qml.Hermitian(h, wires=[1, 0]) @ qml.Z(2),
    "scaled hermitian": lambda h, c: qml.s_prod(c, qml.Hermitian(h, wires=[2, 0])),
    "projector onto a state": lambda h, c: qml.Projector(h[0] / jnp.linalg.norm(h[0]), wires=[0, 1]),
    "sum with a traced coefficient": lambda h, c: c * qml.X(1) + qml.Z(0) @ qml.Y(2),
}


@pytest.mark.parametrize("build", TRACED_OBSERVABLES.values(), ids=TRACED_OBSERVABLES)
def test_observables_of_traced_data_are_sampled_in_their_eigenbasis(build):
    # PennyLane diagonalizes a Hermitian with NumPy, and eigenvalues of traced data are known only when
    # the program runs: these raised PennyLane's ValueError or a QuantumOperationError
    h = np.array([[1.0, 2.0, 0.0, 0.5], [2.0, -1.0, 0.5, 0.0], [0.0, 0.5, 0.3, 0.0], [0.5, 0.0, 0.0, 2.0]])

    def circuit(h, c, sampled=True):
        entangled(1, X)
        obs = build(h, c)
        return qml.expval(obs), qml.var(obs), (qml.sample if sampled else qml.expval)(obs)

    shots = 20000
    expected = [float(e) for e in qml.qnode(DEV)(circuit)(h, -0.7, sampled=False)]
    mean, variance, samples = qjit(qml.set_shots(qml.qnode(DEV)(circuit), shots=shots), seed=8)(h, -0.7)
    spectrum = np.linalg.eigvalsh(qml.matrix(build(h, -0.7), wire_order=[0, 1, 2]))
    assert np.min(np.abs(np.asarray(samples)[:, None] - spectrum[None, :]), axis=1).max() < 1e-10
    spread = spectrum.max() - spectrum.min()
    assert abs(float(mean) - expected[0]) < 5 * np.sqrt(expected[1] / shots)
    assert abs(float(np.mean(samples)) - expected[0]) < 5 * np.sqrt(expected[1] / shots)
    assert abs(float(variance) - expected[1]) < 5 * spread**2 / 2 / np.sqrt(shots) + 1e-12


def test_counts_of_a_traced_hermitian_name_its_eigenvalues_as_pennylane():
    """``qml.counts`` of a ``Hermitian`` whose matrix is an argument (PennyLane's ValueError):
    its eigenvalues (PennyLane's keys) with counts of their probabilities; a repeated eigenvalue,
    which PennyLane merges into one key, is a clear error."""
    h = np.array([[1.0, 2.0, 0.0, 0.5], [2.0, -1.0, 0.5, 0.0], [0.0, 0.5, 0.3, 0.0], [0.5, 0.0, 0.0, 2.0]])

    def circuit(h, measurement=qml.counts):
        entangled(1, X)
        return measurement(op=qml.Hermitian(h, wires=[1, 0])), measurement(op=qml.Hermitian(h[:2, :2], wires=2))

    shots = 20000
    compiled = qjit(qml.set_shots(qml.qnode(DEV)(circuit), shots=shots), seed=3)
    by_pennylane = qml.set_shots(qml.qnode(DEV)(circuit), shots=shots)(h)
    exact = qml.qnode(DEV)(circuit)(h, qml.probs)
    for (values, counts), keys, probabilities in zip(compiled(h), by_pennylane, exact):
        np.testing.assert_allclose(values, sorted(float(k) for k in keys), atol=1e-10)
        assert int(np.sum(counts)) == shots
        np.testing.assert_allclose(np.asarray(counts) / shots, probabilities, atol=5 * 0.5 / np.sqrt(shots))
    with pytest.raises(QuantumOperationError, match="repeated eigenvalue"):
        compiled(np.diag([1.0, 2.0, 2.0, 3.0]))


def test_probabilities_in_the_eigenbasis_of_a_traced_hermitian():
    h = np.array([[1.0, 2.0, 0.0, 0.0], [2.0, -1.0, 0.5, 0.0], [0.0, 0.5, 0.3, 0.0], [0.0, 0.0, 0.0, 2.0]])

    def circuit(h):
        entangled(1, X)
        return qml.probs(op=qml.Hermitian(h, wires=[1, 0])), qml.probs(op=qml.Hermitian(h[:2, :2], wires=2))

    expected = qml.qnode(DEV)(circuit)(h)
    assert_all_close(qjit(qml.qnode(DEV)(circuit))(h), expected)
    shots = 20000
    estimated = qjit(qml.set_shots(qml.qnode(DEV)(circuit), shots=shots), seed=9)(h)
    for e, a in zip(expected, estimated):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=5 * 0.5 / np.sqrt(shots))
