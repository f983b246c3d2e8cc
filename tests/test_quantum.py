"""QNodes compiled inside ``@qjit``: gates, control flow, mid-circuit measurements and terminal
measurements against PennyLane's own ``default.qubit``; errors for what does not compile."""

import jax
import numpy as np
import pennylane as qml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from circuits import layered

from catalyst_lite import CatalystLiteError, cond, for_loop, measure, qjit, while_loop

TOL = 1e-10


def dev(n=3, **kw):
    return qml.device("default.qubit", wires=n, **kw)


def compare(qfunc, *args, n=3):
    """Compiled and PennyLane results of ``qfunc`` agree to TOL."""
    expected = qml.qnode(dev(n))(qfunc)(*args)
    actual = qjit(qml.qnode(dev(n))(qfunc))(*args)
    for a, e in zip(np.atleast_1d(np.asarray(actual, dtype=object)) if isinstance(actual, tuple) else [actual],
                    expected if isinstance(expected, tuple) else [expected]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=TOL)


ONE_WIRE = [qml.PauliX, qml.PauliY, qml.PauliZ, qml.Hadamard, qml.S, qml.T, qml.SX]
ONE_PARAM = [qml.RX, qml.RY, qml.RZ, qml.PhaseShift]
TWO_WIRE = [qml.CNOT, qml.CY, qml.CZ, qml.SWAP]
TWO_PARAM = [qml.CRX, qml.CRY, qml.CRZ, qml.ControlledPhaseShift, qml.IsingXX, qml.IsingYY, qml.IsingZZ]


def test_every_listed_gate_and_measurement():
    u = qml.matrix(qml.Rot(0.1, 0.7, -0.3, wires=0) @ qml.RX(0.2, 0))

    def circuit(x):
        for g in ONE_WIRE:
            g(wires=1)
            qml.RX(x, 0)
        for g in ONE_PARAM:
            g(x * 1.3, wires=2)
            qml.Hadamard(0)
        for g in TWO_WIRE:
            g(wires=[0, 2])
            qml.RY(0.4, 1)
        for g in TWO_PARAM:
            g(x - 0.2, wires=[2, 1])
        qml.Rot(x, 0.3, 0.5, wires=0)
        qml.CRot(0.1, x, 0.3, wires=[1, 0])
        qml.Toffoli(wires=[0, 1, 2])
        qml.CSWAP(wires=[2, 0, 1])
        qml.MultiRZ(x, wires=[0, 1, 2])
        qml.QubitUnitary(u, wires=1)
        qml.adjoint(qml.S(0))
        qml.adjoint(qml.CRX(0.3, wires=[0, 2]))
        qml.ctrl(qml.RY(x, 2), control=[0, 1], control_values=[1, 0])
        qml.ctrl(qml.Hadamard(1), control=0)
        H = qml.Hamiltonian([0.3, -1.2], [qml.Z(0) @ qml.X(1), qml.Y(2)])
        return (qml.expval(qml.Z(0)), qml.expval(qml.X(1) @ qml.Y(2)), qml.expval(H), qml.var(H),
                qml.var(qml.X(0)), qml.probs(), qml.probs(wires=[2, 0]), qml.state(),
                qml.expval(qml.Hermitian(np.array([[1.0, 2j], [-2j, 0.5]]), wires=1)))

    compare(circuit, 0.37)


def test_state_preparation():
    def circuit(bits):
        qml.BasisState(bits, wires=[0, 1, 2])
        qml.Hadamard(0)
        return qml.state()

    compare(circuit, np.array([0, 1, 1]))

    def prep():
        qml.StatePrep(np.arange(8) / np.linalg.norm(np.arange(8)), wires=[0, 1, 2])
        qml.CNOT([0, 2])
        return qml.probs()

    compare(prep)


@pytest.mark.parametrize("w", [1, 2])
def test_composite_observables_on_traced_wires_match_default_qubit(w):
    # products, sums and scalar products whose parts have no Pauli representation
    hermitian = np.array([[1.0, 2.0], [2.0, 0.0]])

    def circuit(w, x):
        qml.RX(x, 0)
        qml.CNOT([0, w])
        qml.RY(x, w)
        return (qml.expval(qml.Hermitian(hermitian, w) @ qml.X(0)), qml.var(qml.Hermitian(hermitian, w) @ qml.Z(0)),
                qml.expval(qml.Hermitian(hermitian, w) + 0.3 * qml.Hadamard(w) @ qml.Y(0)),
                qml.var(qml.Hadamard(w) @ qml.X(0)), qml.expval(0.5 * qml.Hermitian(hermitian, w)),
                qml.probs(op=qml.Hermitian(hermitian, w) @ qml.Y(0)))

    expected = qml.qnode(dev(3))(circuit)(w, 0.4)
    for actual, value in zip(qjit(qml.qnode(dev(3))(circuit))(w, 0.4), expected, strict=True):
        np.testing.assert_allclose(actual, value, atol=TOL)
    gradient = jax.grad(lambda x: qml.qnode(dev(3))(circuit)(w, x)[2])(0.4)
    for method in ("adjoint", "parameter-shift"):
        compiled = qjit(jax.grad(lambda w, x: qml.qnode(dev(3), diff_method=method)(circuit)(w, x)[2], argnums=1))
        np.testing.assert_allclose(compiled(w, 0.4), gradient, atol=1e-8)


def _cnot(w):
    qml.CNOT(wires=[w, 0])


def _controlled_rotation(w):
    qml.ctrl(qml.RX, control=w)(0.4, wires=0)


def _toffoli_in_a_loop(w):
    @for_loop(0, 2, 1)
    def chain(i):
        qml.Toffoli(wires=[i, w, 3])  # w = 1 coincides in the second iteration only

    chain()


@pytest.mark.parametrize(
    "gate, name", [(_cnot, "CNOT"), (_controlled_rotation, "CRX"), (_toffoli_in_a_loop, "Toffoli")]
)
def test_traced_wires_of_one_gate_that_coincide_are_an_error_when_the_program_runs(gate, name):
    """Was a number (0.0 for CNOT(w, 0) at w = 0); PennyLane refuses such wires when it sees them,
    Catalyst's runtime when the program runs."""

    def circuit(w):
        qml.Hadamard(0)
        qml.Hadamard(1)
        gate(w)
        return qml.expval(qml.PauliZ(0))

    compiled = qjit(qml.qnode(dev(4))(circuit))
    good, coinciding = (2, 1) if gate is _toffoli_in_a_loop else (1, 0)
    np.testing.assert_allclose(compiled(good), qml.qnode(dev(4))(circuit)(good), atol=1e-12)
    with pytest.raises(qml.exceptions.WireError, match=f"Wires must be unique: {name} in the QNode circuit"):
        compiled(coinciding)
    with pytest.raises((ValueError, qml.exceptions.WireError)):  # PennyLane's class depends on the gate
        qml.qnode(dev(4))(circuit)(coinciding)
    np.testing.assert_allclose(compiled(good), qml.qnode(dev(4))(circuit)(good), atol=1e-12)


def test_traced_wires_in_loops_and_cond():
    @qjit
    @qml.qnode(dev(4))
    def circuit(n: int, x: float):
        qml.Hadamard(0)

        @for_loop(0, n - 1, 1)
        def chain(i):
            qml.CNOT(wires=[i, i + 1])
            qml.RY(x * i, wires=i + 1)

        chain()

        @while_loop(lambda k: k < 3)
        def again(k):
            qml.RZ(0.3, wires=k)
            return k + 1

        again(0)

        @cond(x > 0.5)
        def branch():
            qml.PauliX(wires=3)

        branch()
        return qml.probs()

    @qml.qnode(dev(4))
    def reference(n, x):
        qml.Hadamard(0)
        for i in range(n - 1):
            qml.CNOT(wires=[i, i + 1])
            qml.RY(x * i, wires=i + 1)
        for k in range(3):
            qml.RZ(0.3, wires=k)
        if x > 0.5:
            qml.PauliX(wires=3)
        return qml.probs()

    for n, x in [(4, 0.7), (2, 0.2)]:
        np.testing.assert_allclose(circuit(n, x), reference(n, x), atol=TOL)


def test_pennylane_control_flow_inside_qnode():
    @qjit
    @qml.qnode(dev(3))
    def circuit(n: int):
        @qml.for_loop(0, n, 1)
        def layer(i):
            qml.RX(0.5, wires=i)

        layer()
        return qml.expval(qml.Z(0) @ qml.Z(2))

    np.testing.assert_allclose(circuit(3), np.cos(0.5) ** 2, atol=TOL)


def test_mid_circuit_measurement_feeds_cond_and_is_seeded():
    @qjit(seed=11)
    @qml.qnode(dev(2))
    def teleport_bit(x: float):
        qml.RY(x, 0)
        m = measure(0)

        @cond(m)
        def fix():
            qml.PauliX(1)

        fix()
        return qml.expval(qml.Z(0) @ qml.Z(1)), m

    zz, m = teleport_bit(1.0)
    assert float(zz) == pytest.approx(1.0)
    outcomes = {bool(qjit(seed=s)(teleport_bit.original_function)(1.6)[1]) for s in range(12)}
    assert outcomes == {True, False}

    @qjit(seed=3)
    @qml.qnode(dev(1))
    def reset():
        qml.PauliX(0)
        qml.measure(0, reset=True)
        return qml.probs()

    np.testing.assert_allclose(reset(), [1.0, 0.0], atol=TOL)


@pytest.mark.parametrize(
    "use",
    [
        lambda m: m.astype(int) * 3,
        lambda m: np.zeros((), m.dtype) | m.astype(m.dtype),
        lambda m: m.reshape(1).astype(float) + np.zeros(m.ndim + m.size),
        lambda m: jax.lax.cond(m, lambda: 2.0, lambda: -1.0),
    ],
)
def test_a_mid_circuit_outcome_has_the_array_attributes_of_catalysts_traced_bool(use):
    # Catalyst's measure returns a traced bool: programs call m.astype(int), read m.dtype, m.shape.
    @qml.qnode(dev(1))
    def circuit(x: float):
        qml.RX(x, 0)
        return use(measure(0))

    compiled = qjit(circuit)
    for x, bit in ((0.0, False), (np.pi, True)):  # deterministic outcomes
        np.testing.assert_allclose(compiled(x), use(jax.numpy.asarray(bit)), atol=TOL)


@pytest.mark.parametrize(
    "use",
    [
        lambda m, x: jax.lax.select(m, x, 2.0 * x + 0.5),
        lambda m, x: jax.numpy.where(m, jax.numpy.sin(x), x + 1.0),
        lambda m, x: jax.lax.select_n(m, x, -x) + jax.lax.convert_element_type(m, float),
        lambda m, x: (jax.debug.print("outcome {m}", m=m), x + jax.numpy.logical_not(m))[1],
    ],
)
def test_jax_functions_of_a_raw_mid_circuit_outcome_follow_pennylanes_measure(use, recwarn):
    # lax.select(m, ...) and jax.debug.print(m) bound the outcome object itself: a TypeError when run.
    @qml.qnode(dev(2))
    def circuit(x: float):
        qml.RX(x, 0)
        qml.RY(use(measure(0), x), 1)
        return qml.expval(qml.PauliZ(1))

    @qml.qnode(qml.device("default.qubit", wires=2))
    def reference(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.RY)(use(True, x), 1)
        qml.cond(~m, qml.RY)(use(False, x), 1)
        return qml.expval(qml.PauliZ(1))

    compiled = qjit(circuit)
    for x in (0.0, np.pi, 0.0):  # deterministic outcomes
        np.testing.assert_allclose(compiled(x), reference(x), atol=TOL)
    assert not [w for w in recwarn if "__jax_array__" in str(w.message)]


def test_samples_and_counts_with_shots():
    @qjit(seed=5)
    @qml.qnode(dev(2), shots=2000)
    def sampled():
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        return qml.sample(), qml.counts(wires=[0]), qml.sample(qml.X(0))

    samples, (outcomes, counts), xs = sampled()
    assert samples.shape == (2000, 2) and np.all(samples[:, 0] == samples[:, 1])
    assert outcomes.tolist() == [0, 1] and int(counts.sum()) == 2000 and 850 < int(counts[0]) < 1150
    assert set(np.unique(xs)) <= {-1.0, 1.0} and abs(float(np.mean(xs))) < 0.15
    first = np.asarray(sampled()[0])
    np.testing.assert_array_equal(first, np.asarray(sampled()[0]))


def _coin(shots: int = 64):
    @qml.qnode(dev(1), shots=shots)
    def coin():
        qml.Hadamard(0)
        return qml.sample()

    return coin


def test_without_a_seed_every_call_draws_anew():
    # Catalyst draws anew on every execution unless qjit is given a seed.
    f = qjit(_coin())
    draws = [np.asarray(f()).ravel() for _ in range(3)]
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[1], draws[2])
    assert all(set(d.tolist()) <= {0, 1} for d in draws)
    # The key is a constant of the program replaced on each call: the traced program has no
    # extra argument, and nothing is traced again.
    assert f.jaxpr.jaxpr.invars == [] and f.inspect().last.fresh_consts == 1


def test_a_program_that_never_draws_does_not_refresh_its_key():
    def circuit(x):
        @for_loop(0, 3, 1)
        def layer(i):  # the key is carried through the loop, but nothing draws from it
            qml.RX(x, 0)

        layer()
        return qml.expval(qml.Z(0))

    f = qjit(qml.qnode(dev(1))(circuit))
    assert float(f(0.2)) == pytest.approx(np.cos(0.6), abs=TOL)
    assert f.inspect().last.fresh_consts == 0


def test_unseeded_key_of_a_qjit_called_inside_another_is_drawn_anew():
    inner = qjit(_coin())

    @qjit
    def outer(x: float):
        return inner(), x

    assert not np.array_equal(np.asarray(outer(1.0)[0]), np.asarray(outer(1.0)[0]))


def test_qnodes_of_one_seeded_program_draw_independent_streams():
    @qjit(seed=3)
    def two():
        return _coin()(), _coin()()

    a, b = (np.asarray(r).ravel() for r in two())
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(two()[0]).ravel(), a)  # seeded: calls repeat


def test_circuit_programs_get_circuit_compile_options_and_classical_ones_do_not():
    from catalyst_lite.quantum.qnode import CIRCUIT_COMPILE_OPTIONS

    circuit = qjit(qml.qnode(dev(2))(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1]))
    classical = qjit(lambda x: x * 2.0)
    assert float(circuit(0.4)) == pytest.approx(np.cos(0.4), abs=TOL) and float(classical(1.5)) == 3.0
    assert circuit.inspect().last.compile_options == CIRCUIT_COMPILE_OPTIONS
    assert classical.inspect().last.compile_options == {}


H_MIXED = qml.Hamiltonian([0.3, -1.2], [qml.Z(0) @ qml.X(1), qml.Y(0)])


def shot_circuit(x):
    qml.RX(x, 0)
    qml.RY(0.5, 1)
    qml.CNOT([0, 1])
    return (qml.expval(qml.Z(0)), qml.expval(qml.X(0) @ qml.Y(1)), qml.expval(H_MIXED),
            qml.var(qml.X(1)), qml.var(H_MIXED), qml.probs(wires=[1, 0]))


def shot_tolerances(x, shots):
    """Five standard errors of each estimate of ``shot_circuit`` (bounds where noted)."""
    words = [qml.Z(0), qml.X(0) @ qml.Y(1), qml.Z(0) @ qml.X(1), qml.Y(0), qml.X(1)]
    exact = qml.qnode(dev(2))(lambda: ((qml.RX(x, 0), qml.RY(0.5, 1), qml.CNOT([0, 1])),
                                      [qml.expval(w) for w in words])[1])()
    z0, xy, zx, y0, x1 = (float(e) for e in exact)
    se_word = lambda mean: np.sqrt((1 - mean**2) / shots)  # noqa: E731  (+-1 outcomes)
    # Each word of H_MIXED is sampled on its own: the errors add in quadrature.
    se_h = np.sqrt(0.3**2 * (1 - zx**2) + 1.2**2 * (1 - y0**2)) / np.sqrt(shots)
    # |Var - var| <= 2|mean - m| for +-1 outcomes; outcomes within +-1.5 bound the variance of
    # (X - mean)**2 by 3**4 / 4, so its standard error by 4.5 / sqrt(N).
    return [5 * se_word(z0), 5 * se_word(xy), 5 * se_h, 10 * se_word(x1), 5 * 4.5 / np.sqrt(shots),
            5 * 0.5 / np.sqrt(shots)]


@pytest.mark.parametrize("x, shots", [(0.3, 200), (2.1, 200), (0.3, 5000), (2.1, 5000)])
def test_shot_estimates_within_five_standard_errors(x, shots):
    exact = qml.qnode(dev(2))(shot_circuit)(x)
    estimated = qjit(seed=17)(qml.qnode(dev(2), shots=shots)(shot_circuit))(x)
    for e, a, tol in zip(exact, estimated, shot_tolerances(x, shots)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=tol + 1e-12)


def test_shot_estimates_are_estimates_and_seeded():
    def circuit(x):
        qml.RY(x, 0)
        qml.Hadamard(1)
        return qml.expval(qml.Z(0)), qml.var(0.5 * qml.Z(0)), qml.probs(wires=[0, 1])

    shots = 300
    f = qjit(seed=4)(qml.qnode(dev(2), shots=shots)(circuit))
    first = [np.asarray(r) for r in f(1.1)]
    again = [np.asarray(r) for r in qjit(seed=4)(qml.qnode(dev(2), shots=shots)(circuit))(1.1)]
    for a, b, c in zip(first, [np.asarray(r) for r in f(1.1)], again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    other = np.asarray(qjit(seed=5)(qml.qnode(dev(2), shots=shots)(circuit))(1.1)[2])
    assert not np.array_equal(other, first[2])
    probs = first[2]
    assert float(probs.sum()) == pytest.approx(1.0, abs=TOL)
    np.testing.assert_allclose(probs * shots, np.round(probs * shots), atol=1e-9)
    assert float(first[0]) != pytest.approx(np.cos(1.1), abs=1e-6)  # an estimate, not exact
    # With shots the qnode's own setting wins over the device's, as in PennyLane.
    exact = qjit(qml.qnode(dev(2, shots=shots), shots=None)(circuit))(1.1)
    np.testing.assert_allclose(exact[0], np.cos(1.1), atol=TOL)


def test_several_qnodes_and_post_processing():
    a = qml.qnode(dev(2))(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])
    b = qml.qnode(dev(3))(lambda x: (qml.RY(x, 2), qml.expval(qml.Z(2)))[1])

    @qjit
    def f(x: float):
        return a(x) * 2 + b(x / 2)

    assert float(f(0.3)) == pytest.approx(2 * np.cos(0.3) + np.cos(0.15), abs=TOL)


GATES = st.sampled_from(ONE_WIRE + ONE_PARAM + TWO_WIRE + TWO_PARAM + [qml.Rot, qml.Toffoli])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(GATES, st.permutations([0, 1, 2]), st.floats(-3, 3)), min_size=1, max_size=8))
def test_random_circuits_match_default_qubit(gates):
    def circuit():
        for g, wires, x in gates:
            nw = g.num_wires
            args = [] if g.num_params == 0 else [x] * g.num_params
            g(*args, wires=wires[:nw])
        return qml.state(), qml.expval(qml.X(0) @ qml.Z(2))

    compare(circuit)


@pytest.mark.parametrize(
    "qfunc, error, words",
    [
        (lambda: (qml.AmplitudeDamping(0.1, 0), qml.expval(qml.Z(0)))[1], TypeError, ["AmplitudeDamping", "Supported"]),
        (lambda: (qml.RX(0.1, 7), qml.expval(qml.Z(0)))[1], ValueError, ["RX", "wire 7"]),
        (lambda: qml.classical_shadow(wires=[0]), TypeError, ["ClassicalShadowMP", "expval"]),
        (lambda: qml.sample(), TypeError, ["sample", "shots"]),
    ],
)
def test_clear_errors_while_tracing(qfunc, error, words):
    with pytest.raises(error) as info:
        qjit(qml.qnode(dev(2))(qfunc))()
    assert isinstance(info.value, CatalystLiteError)
    assert all(w in str(info.value) for w in words)


def test_variance_of_a_traced_sum_with_shots_estimates_default_qubits():
    # sampled in the eigenbasis of the whole sum (JAX's eigh of its matrix), as PennyLane samples it
    def circuit(x: float):
        qml.RY(0.4, 0)
        return qml.var(qml.Hamiltonian([x, 1.0], [qml.Z(0), qml.X(0)]))

    shots = 20000
    estimate = qjit(seed=1)(qml.qnode(dev(2), shots=shots)(circuit))(0.3)
    expected = qml.qnode(dev(2))(circuit)(0.3)
    spread = 2 * np.sqrt(0.3**2 + 1)  # of the eigenvalues +-sqrt(x**2 + 1)
    assert abs(float(estimate) - float(expected)) < 5 * spread**2 / 2 / np.sqrt(shots)


@pytest.mark.parametrize("shots", [None, 100])
@pytest.mark.parametrize(
    "measurement",
    [lambda: qml.expval(qml.prod(qml.X(0), qml.Z(0))), lambda: qml.var(qml.Z(1) @ qml.Y(1)),
     lambda: qml.expval(1j * qml.X(0)), lambda: qml.expval(qml.X(0) @ qml.Y(0) + qml.Z(1))],
)
def test_a_non_hermitian_product_of_paulis_is_a_clear_error(measurement, shots):
    # default.qubit returns a complex expectation (X(0) @ Z(0) is -1j * Y(0)); a real number was returned
    with pytest.raises(TypeError, match="not Hermitian"):
        qjit(qml.set_shots(qml.qnode(dev(2))(lambda: (qml.RX(0.7, 0), measurement())[1]), shots=shots))()


def test_hermitian_products_of_paulis_on_one_wire_are_measured_as_default_qubit():
    def circuit(x):
        qml.RX(x, 0)
        qml.RY(0.3, 1)
        return (qml.expval(qml.X(0) @ qml.X(0)), qml.var(qml.Z(0) @ qml.Z(0) @ qml.X(1)),
                qml.expval(qml.prod(qml.Y(0), qml.Y(0)) + 2 * qml.X(1)),
                qml.expval(qml.X(0) @ qml.Y(0) + qml.Y(0) @ qml.X(0)))

    expected = qml.qnode(dev(2))(circuit)(0.7)
    np.testing.assert_allclose(qjit(qml.qnode(dev(2))(circuit))(0.7), expected, atol=TOL)


def _equation_count(jaxpr, skip=()) -> int:
    """Equations of ``jaxpr`` and the jaxprs nested in it, except those of primitives ``skip``."""
    return sum((e.primitive.name not in skip) + sum(_equation_count(sub, skip) for sub in jax.core.jaxprs_in_params(e.params))
               for e in jaxpr.eqns)


def test_repeated_layers_are_one_loop_whatever_their_number():
    sizes = {}
    for layers in (3, 30):
        params = np.random.default_rng(layers).uniform(0, np.pi, (layers, 4))
        f = qjit(qml.qnode(dev(4))(layered(4, layers)))
        expected = qml.qnode(dev(4))(layered(4, layers))(params)
        assert np.allclose(f(params), expected, atol=1e-10)
        assert sum(e.primitive.name == "for_loop" for e in f.jaxpr.jaxpr.eqns) == 1
        # The user's own ``params[layer, w]`` (a slice and a squeeze each) grow with the layers.
        sizes[layers] = _equation_count(f.jaxpr.jaxpr, skip=("slice", "squeeze"))
    assert sizes[3] == sizes[30]
    assert "stablehlo.while" in f.mlir


def _irregular(gates):
    def circuit(params):
        for i, (kind, a, b) in enumerate(gates):
            if kind == 0:
                qml.RY(params[i], wires=a)
            elif kind == 1:
                qml.CNOT(wires=[a, b])
            else:
                qml.CRX(params[i], wires=[b, a])
        return qml.expval(qml.Z(0) @ qml.Z(3))

    return circuit


def test_fused_blocks_match_pennylane_on_every_gate_kind():
    def circuit(x):
        qml.Hadamard(0), qml.RX(x, 1), qml.CNOT([0, 1]), qml.SWAP([1, 3]), qml.CZ([3, 0])
        qml.Toffoli([0, 3, 2]), qml.S(2), qml.ctrl(qml.Y(1), control=[2], control_values=[0])
        qml.CRY(x, [3, 1]), qml.RZ(x, 3), qml.T(0), qml.CSWAP([1, 0, 2]), qml.IsingXX(x, [0, 2])
        qml.QubitUnitary(qml.matrix(qml.RX(0.4, 0) @ qml.RY(0.2, 1) @ qml.Hadamard(2) @ qml.X(3)), [3, 1, 0, 2])
        qml.MultiRZ(x, [0, 1, 2, 3])
        return qml.state()

    assert np.allclose(qjit(qml.qnode(dev(4))(circuit))(0.7), qml.qnode(dev(4))(circuit)(0.7), atol=1e-10)


def test_pennylane_qjit_dispatches_adjoint_ctrl_measure():
    @qml.qjit(compiler="catalyst_lite", seed=1)
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def circuit(x: float):
        qml.adjoint(qml.RX)(x, wires=0)
        qml.ctrl(qml.RY, control=0)(x, wires=1)
        m = qml.measure(1, postselect=0)

        @qml.cond(m)
        def never():
            qml.X(0)

        never()
        return qml.probs()

    @qml.qnode(dev(2))
    def reference(x):
        qml.adjoint(qml.RX)(x, wires=0)
        qml.ctrl(qml.RY, control=0)(x, wires=1)
        return qml.probs()

    p = reference(0.5)
    expected = np.array([p[0], 0.0, p[2], 0.0]) / (p[0] + p[2])
    np.testing.assert_allclose(circuit(0.5), expected, atol=TOL)


# --- StatePrep on some wires, observables built before a loop, the QNode's own transforms -------


def _reference(qfunc, n=3, transform=None):
    """``qfunc`` on PennyLane's ``default.qubit`` (optionally transformed), and compiled."""
    wrap = transform or (lambda q: q)
    return wrap(qml.qnode(dev(n))(qfunc)), qjit(wrap(qml.qnode(dev(n))(qfunc)))


VECTOR = np.array([1, 2, 3j, 4]) / np.sqrt(30)


@pytest.mark.parametrize("wires", [[2, 0], [0, 2], [1, 2], [2, 1, 0]])
def test_state_prep_on_some_wires_in_any_order(wires):
    vector = np.arange(1, 2 ** len(wires) + 1) * np.exp(0.3j * np.arange(2 ** len(wires)))
    vector = vector / np.linalg.norm(vector)

    def first(v):  # the circuit's initial state, the vector traced
        qml.StatePrep(v, wires=wires)
        qml.RY(0.3, 1)
        return qml.state()

    def later(v):  # after gates, on wires in |0> and not: PennyLane applies its decomposition
        qml.RX(0.4, 0), qml.Hadamard(1)
        qml.StatePrep(v, wires=wires)
        qml.CNOT([0, 1])
        return qml.state()

    for qfunc in (first, later):
        reference, compiled = _reference(qfunc)
        np.testing.assert_allclose(compiled(vector), reference(vector), atol=TOL)
        assert compiled.jaxpr.in_avals[0].shape == vector.shape  # the vector is traced


def test_state_prep_pad_with_and_normalize():
    def circuit():
        qml.Hadamard(0)
        qml.StatePrep(np.array([1.0, 2.0, 2.0]), wires=[2, 1], pad_with=0.0, normalize=True)
        return qml.state()

    reference, compiled = _reference(circuit)
    np.testing.assert_allclose(compiled(), reference(), atol=TOL)


def _observables_before_a_loop(loop):
    def circuit(x):
        obs = qml.Z(0) @ qml.X(1)
        ham = qml.Hamiltonian([0.3, -0.7], [qml.Y(0), qml.Z(1) @ qml.Z(2)])
        total = 0.5 * qml.X(2) + qml.Z(1)
        herm = qml.Hermitian(np.array([[1.0, 2j], [-2j, 0.5]]), wires=1)
        qml.Hadamard(0)
        loop(x)
        return qml.expval(obs), qml.expval(ham), qml.var(total), qml.expval(herm)

    return circuit


def test_observable_combinations_built_before_a_loop_are_not_applied_as_gates():
    def compiled_loop(x):
        @for_loop(0, 3, 1)
        def body(i):
            qml.RY(x, 1), qml.CNOT([0, 2])

        body()

    def unrolled(x):
        for _ in range(3):
            qml.RY(x, 1), qml.CNOT([0, 2])

    expected = qml.qnode(dev())(_observables_before_a_loop(unrolled))(0.4)
    actual = qjit(qml.qnode(dev())(_observables_before_a_loop(compiled_loop)))(0.4)
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=TOL)


def test_observable_combination_before_a_mid_circuit_measurement():
    def circuit(x):
        obs = qml.X(0) @ qml.Y(1) + 0.5 * qml.Z(1)
        qml.RX(x, 1)
        measure(0, postselect=0)
        qml.Hadamard(0)
        return qml.expval(obs)

    def reference(x):
        qml.RX(x, 1)
        qml.Hadamard(0)
        return qml.expval(qml.X(0) @ qml.Y(1) + 0.5 * qml.Z(1))

    np.testing.assert_allclose(qjit(qml.qnode(dev(2))(circuit))(0.7), qml.qnode(dev(2))(reference)(0.7), atol=TOL)


@pytest.mark.parametrize("observable", [lambda z: z, lambda z: 2.0 * z @ qml.X(1), lambda z: qml.Hamiltonian([0.5], [z])])
def test_gate_built_before_a_loop_and_measured_is_a_clear_error(observable):
    def circuit(x):
        z = qml.Z(0)

        @for_loop(0, 2, 1)
        def body(i):
            qml.RY(x, 0)

        body()
        return qml.expval(observable(z))

    with pytest.raises(TypeError, match=r"Z\(0\).*Build the observable where it is measured") as info:
        qjit(qml.qnode(dev(2))(circuit))(0.3)
    assert isinstance(info.value, CatalystLiteError)


def test_product_queued_as_a_gate_before_a_loop_is_a_clear_error():
    def circuit(x):
        qml.prod(qml.RX(x, 0), qml.RY(x, 1))

        @for_loop(0, 2, 1)
        def body(i):
            qml.Hadamard(0)

        body()
        return qml.probs()

    with pytest.raises(TypeError, match="never measured.*Queue its gates separately") as info:
        qjit(qml.qnode(dev(2))(circuit))(0.3)
    assert isinstance(info.value, CatalystLiteError)


def _redundant_circuit(cancelled=True):
    """A circuit with pairs of gates that cancel_inverses removes (unless ``cancelled=False``:
    the circuit without them, written by hand) and rotations that merge_rotations merges."""
    def circuit(x):
        for k in range(3):
            qml.RX(x, 0), qml.RZ(0.1 * k, 2), qml.RZ(-0.1 * k, 2)
        if cancelled:
            qml.Hadamard(1), qml.CNOT([0, 1]), qml.CNOT([0, 1]), qml.Hadamard(1)
        qml.SWAP([0, 2]), qml.RY(x, 0), qml.Hadamard(2), qml.CNOT([2, 1])
        return qml.probs()

    return circuit


@qml.transform
def _drop_hadamards(tape):
    """An answer-changing transform: a wrong or skipped application shows in the result."""
    return [tape.copy(operations=[op for op in tape.operations if op.name != "Hadamard"])], lambda r: r[0]


@pytest.mark.parametrize("transform", [qml.transforms.cancel_inverses, qml.transforms.merge_rotations,
                                       _drop_hadamards, qml.transforms.decompose(gate_set={"RX", "RY", "CNOT", "RZ", "GlobalPhase"})])
def test_qnode_transforms_are_applied(transform):
    reference, compiled = _reference(_redundant_circuit(), transform=transform)
    np.testing.assert_allclose(compiled(0.3), reference(0.3), atol=TOL)
    plain = qjit(qml.qnode(dev())(_redundant_circuit()))
    untransformed = plain(0.3)
    if transform is _drop_hadamards:
        assert not np.allclose(untransformed, reference(0.3), atol=1e-3)
    size = _equation_count(compiled.jaxpr.jaxpr)
    if transform is qml.transforms.cancel_inverses:  # the program of the circuit without the pairs
        by_hand = qjit(qml.qnode(dev())(_redundant_circuit(cancelled=False)))
        by_hand(0.3)
        assert size == _equation_count(by_hand.jaxpr.jaxpr) < _equation_count(plain.jaxpr.jaxpr)
    if transform is qml.transforms.merge_rotations:  # fewer gates: a smaller program
        assert size < _equation_count(plain.jaxpr.jaxpr)


def test_qnode_transforms_apply_to_each_segment_of_a_loop():
    def circuit(x):
        qml.Hadamard(0), qml.Hadamard(1)

        @for_loop(0, 3, 1)
        def body(i):
            qml.RY(x, 0), qml.Hadamard(1)

        body()
        qml.Hadamard(0)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    def unrolled(x):
        for _ in range(3):
            qml.RY(x, 0)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    compiled = qjit(_drop_hadamards(qml.qnode(dev(2))(circuit)))
    np.testing.assert_allclose(compiled(0.4), qml.qnode(dev(2))(unrolled)(0.4), atol=TOL)


def _loop_on_the_angle(x):
    @for_loop(0, 3, 1)
    def body(i, angle):
        qml.RY(angle, wires=i % 2)
        return angle / 2

    body(x)
    return body


def _counting_loop(x):
    @while_loop(lambda k: k < 3)
    def body(k):
        qml.RX(x * k, wires=1)
        return k + 1

    body(1)
    return body


def _branch_on_the_angle(x):
    @cond(x > 0.5)
    def branch():
        qml.CNOT([0, 1])

    @branch.otherwise
    def branch():
        qml.Hadamard(1)

    branch()
    return branch


@pytest.mark.parametrize("flow, unrolled", [
    (_loop_on_the_angle, lambda x: [qml.RY(x, 0), qml.RY(x / 2, 1), qml.RY(x / 4, 0)]),
    (_counting_loop, lambda x: [qml.RX(x, 1), qml.RX(2 * x, 1)]),
    (_branch_on_the_angle, lambda x: [qml.CNOT([0, 1])] if x > 0.5 else [qml.Hadamard(1)]),
])
def test_control_flow_operation_put_on_the_tape_by_a_qnode_transform_is_applied_there(flow, unrolled):
    """Catalyst's ``.operation`` of control flow called in a QNode's transform goes on the
    transform's tape: its gates are applied where it stands (it was an AttributeError)."""
    def inserting(ops_of):
        @qml.transform
        def inserted(tape):
            first, *rest = tape.operations
            return [tape.copy(operations=[first, *ops_of(first.data[0]), *rest])], lambda r: r[0]
        return inserted

    def circuit(x):
        qml.RX(x, 0)
        qml.Hadamard(1)
        qml.CRY(0.7, [1, 0])
        return qml.probs()

    compiled = qjit(inserting(lambda x: [flow(x).operation])(qml.qnode(dev(2))(circuit)))
    reference = inserting(unrolled)(qml.qnode(dev(2))(circuit))
    for x in (0.3, 0.9):
        np.testing.assert_allclose(compiled(x), reference(x), atol=TOL)


@qml.transform
def _measure_x_instead(tape):
    return [tape.copy(measurements=[qml.expval(qml.X(0))])], lambda r: r[0]


def test_unsupported_qnode_transform_is_a_clear_error():
    # (split_non_commuting keeps the results: it is accepted, see test_quantum_passes.py)
    circuit = _measure_x_instead(qml.qnode(dev(2))(lambda: (qml.expval(qml.X(0)), qml.expval(qml.Z(0)))))
    with pytest.raises(TypeError, match="_measure_x_instead.*only transforms that rewrite the gates into one circuit") as info:
        qjit(circuit)()
    assert isinstance(info.value, CatalystLiteError)


def test_state_prep_as_first_operation_is_array_operations_not_its_decomposition():
    def prepared(v):
        qml.StatePrep(v, wires=[3, 1, 0, 2])
        qml.RY(0.3, 1)
        return qml.state()

    def unprepared(v):
        qml.RY(0.3, 1)
        return qml.state()

    vector = np.exp(0.2j * np.arange(16)) / 4
    sizes = []
    for qfunc in (prepared, unprepared):
        compiled = qjit(qml.qnode(dev(5))(qfunc))
        np.testing.assert_allclose(compiled(vector), qml.qnode(dev(5))(qfunc)(vector), atol=TOL)
        sizes.append(_equation_count(compiled.jaxpr.jaxpr))
    assert sizes[0] <= sizes[1] + 10  # a few array operations, not 2**4 decomposed gates


@pytest.mark.parametrize("mcm_method", [None, "single-branch-statistics", "deferred"])
@pytest.mark.parametrize("state, postselect", [(lambda: None, 1), (lambda: qml.X(0), 0)])
def test_postselecting_an_outcome_of_probability_zero_gives_pennylanes_nan(mcm_method, state, postselect):
    """No state is left: every result is NaN, as default.qubit gives (it was 0: a zeroed state)."""
    def circuit(x):
        state()
        qml.RX(x, wires=1)
        measure(0, postselect=postselect)
        return qml.expval(qml.Z(1)), qml.probs(wires=[0, 1]), qml.var(qml.X(1))

    reference = qml.qnode(dev(2), mcm_method="tree-traversal")(
        lambda x: (state(), qml.RX(x, 1), qml.measure(0, postselect=postselect), qml.expval(qml.Z(1)),
                   qml.probs(wires=[0, 1]), qml.var(qml.X(1)))[3:])(0.4)
    actual = qjit(qml.qnode(qml.device("lightning.qubit", wires=2), mcm_method=mcm_method)(circuit))(0.4)
    for a, e in zip(actual, reference):
        assert np.isnan(e).all() and np.isnan(a).all() and np.shape(a) == np.shape(e)


@pytest.mark.parametrize("measurement", [qml.expval, qml.var])
def test_a_hermitian_whose_matrix_does_not_fit_its_wires_is_refused_as_pennylane_refuses_it(measurement):
    """A matrix built inside the compiled function is traced, and PennyLane checks only Python and
    NumPy matrices: a 4x4 matrix on one wire gave a number."""
    import jax.numpy as jnp

    def circuit(x, size):
        qml.RX(x, wires=0)
        return measurement(qml.Hermitian(jnp.eye(size), wires=0))

    with pytest.raises(ValueError, match="Expected input matrix to have shape 2x2"):
        qml.qnode(dev(2))(circuit)(0.3, 4)
    compiled = qjit(qml.qnode(dev(2))(circuit), static_argnums=1)
    refused = r"Expected input matrix to have shape 2x2, .* 4x4 .*wires \[0\]"
    with pytest.raises(CatalystLiteError, match=refused):
        compiled(0.3, 4)
    np.testing.assert_allclose(compiled(0.3, 2), qml.qnode(dev(2))(circuit)(0.3, 2), atol=1e-12)



@pytest.mark.parametrize("measurement, shots", [(qml.probs, None), (qml.sample, 4)])
def test_traced_wires_of_one_measurement_that_coincide_are_an_error_when_the_program_runs(measurement, shots):
    """Were results for the wires [0, 0] (probabilities of a wire paired with itself); an
    observable's factors may share a wire (X(w) @ X(0), as in PennyLane)."""

    def circuit(w):
        qml.Hadamard(0)
        return measurement(wires=[w, 0])

    qnode = qml.set_shots(qml.qnode(dev(2))(circuit), shots=shots)
    compiled = qjit(qnode)
    with pytest.raises(qml.exceptions.WireError):
        qnode(0)
    name = measurement.__name__
    with pytest.raises(qml.exceptions.WireError, match=f"Wires must be unique: {name} in the QNode circuit"):
        compiled(0)
    if shots is None:
        np.testing.assert_allclose(compiled(1), qnode(1), atol=1e-12)

        def shared(w):
            qml.Hadamard(0)
            return qml.expval(qml.PauliX(w) @ qml.PauliX(0))

        shared_qnode = qml.qnode(dev(2))(shared)
        np.testing.assert_allclose(qjit(shared_qnode)(0), shared_qnode(0), atol=1e-12)
