"""``qjit(capture=...)``: programs traced through PennyLane's program capture (plxpr) and compiled
by catalyst_lite give the results of the same programs compiled without capture, and of
``default.qubit``.

PennyLane switches its capture on only with the JAX version it pins (0.7.1 for PennyLane 0.45);
elsewhere the tests that need it are skipped, and ``capture=True`` must fail with a clear error.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

import catalyst_lite
from catalyst_lite import QJIT, qjit
from catalyst_lite.control_flow import cond_p, for_loop_p, while_loop_p
from catalyst_lite.errors import (
    ArgumentValueError,
    CaptureUnavailableError,
    DimensionError,
    PlxprCaptureCFCompatibilityError,
    QuantumOperationError,
)


def _capture_refusal() -> str | None:
    """PennyLane's reason for refusing to switch its capture on here (None: it switches on)."""
    try:
        qml.capture.enable()
    except ImportError as e:
        return str(e)
    qml.capture.disable()
    return None


REFUSAL = _capture_refusal()
needs_capture = pytest.mark.skipif(
    REFUSAL is not None,
    reason=f"PennyLane {qml.__version__} refuses program capture with JAX {jax.__version__}: {REFUSAL}",
)
needs_entry_points = pytest.mark.skipif(
    not qml.compiler.available("catalyst_lite"), reason="entry points not installed: run `pip install -e .`"
)


@pytest.fixture(autouse=True)
def capture_switch_restored():
    """Every test leaves PennyLane's (process-wide) capture switch off, as it found it."""
    assert not qml.capture.enabled()
    yield
    enabled = qml.capture.enabled()
    qml.capture.disable()
    assert not enabled, "a test left qml.capture enabled"


def both(fn, *args, **options):
    """``fn(*args)`` compiled with capture on and off (with the same options), and the program
    compiled with capture on."""
    captured = qjit(fn, capture=True, **options)
    return captured(*args), qjit(fn, capture=False, **options)(*args), captured


def assert_same(actual, expected, **tol):
    assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        assert np.shape(a) == np.shape(e)
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), **tol)


def primitives_of(compiled: QJIT) -> set:
    """Every primitive of the traced program, nested bodies included."""
    found = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive)
            for sub in jax.core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(compiled.jaxpr.jaxpr)
    return found


# --- the option ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["yes", 2, None, "True", 0.5])
def test_invalid_capture_values_are_rejected_at_decoration(value):
    with pytest.raises(ArgumentValueError, match="invalid value for capture"):
        qjit(lambda x: x, capture=value)


@pytest.mark.parametrize("value", ["global", False, 0])
def test_default_and_off_use_catalyst_lite_frontend(value):
    @qjit(capture=value)
    def f(n: int):
        return qml.for_loop(0, n, 1)(lambda i, acc: acc + i)(0)

    assert int(f(5)) == 10
    assert for_loop_p in primitives_of(f)


@pytest.mark.skipif(REFUSAL is None, reason="PennyLane switches its capture on with this JAX")
def test_capture_true_where_pennylane_refuses_is_a_clear_error():
    with pytest.raises(CaptureUnavailableError) as info:
        qjit(lambda x: x, capture=True)
    message = str(info.value)
    assert "capture=False" in message and jax.__version__ in message
    assert isinstance(info.value, ImportError)  # `except ImportError` keeps working
    assert not qml.capture.enabled()


def test_make_jaxpr_of_a_closure_over_traced_values_inside_qjit():
    """PennyLane's capture calls jax.make_jaxpr on bodies that close over the program's values
    (a repair in jax_extras.patches): so can a user."""
    seen = []

    @qjit
    def f(n: int):
        x = jnp.arange(n) * 1.0
        closed = jax.make_jaxpr(lambda y: y * jnp.sum(x))(x)
        seen.append([eqn.primitive.name for eqn in closed.eqns])
        return x * jnp.sum(x)

    assert_same(f(4), np.arange(4.0) * 6.0)
    assert seen[0][-1] == "mul" and "reduce_sum" in seen[0]


# --- classical programs ----------------------------------------------------------------------------


@needs_capture
def test_loops_and_cond_with_traced_bounds_and_dynamic_arrays():
    traces = []

    def f(n: int, x: float):
        traces.append(n)
        a = jnp.ones(n) * x

        @qml.for_loop(0, n, 1)
        def add(i, a):
            return a + x * i

        @qml.while_loop(lambda k, a: k < n)
        def double(k, a):
            return k + 1, a * 2

        _, a = double(0, add(a))
        return qml.cond(x > 1.0, lambda: a + 1, lambda: a - 1)()

    captured = qjit(f, capture=True)
    for n, x in [(3, 1.0), (5, 2.0)]:
        a = np.ones(n) * x + x * sum(range(n))
        expected = a * 2.0**n + (1 if x > 1.0 else -1)
        assert_same(captured(n, x), expected)
        assert_same(captured(n, x), qjit(f, capture=False)(n, x))
    assert len(traces) == 1 + 2  # traced once (ahead of time) with capture, twice without
    assert {for_loop_p, while_loop_p, cond_p} <= primitives_of(captured)
    assert not any(type(p).__module__.startswith("pennylane") for p in primitives_of(captured))


@needs_capture
def test_abstracted_axes_cond_elifs_and_resizing_loops():
    def f(x):
        @qml.while_loop(lambda k, s: k < x.shape[0])
        def total(k, s):
            return k + 1, s + x[k]

        _, s = total(0, 0.0)

        @qml.for_loop(0, 2, 1, allow_array_resizing=True)
        def grow(i, a):
            return jnp.concatenate([a, a])

        def big():
            return s * 10

        def medium():
            return s * 2

        def small():
            return -s

        return qml.cond(s > 10.0, big, small, elifs=((s > 2.0, medium),))(), grow(x)

    traces = []

    def counted(x):
        traces.append(x.shape)
        return f(x)

    captured = qjit(counted, capture=True, abstracted_axes={0: "n"})
    for x in (np.arange(2.0), np.arange(3.0), np.arange(6.0)):
        s = x.sum()
        expected = (s * 10 if s > 10 else s * 2 if s > 2 else -s, np.tile(x, 4))
        assert_same(captured(x), expected)
        assert_same(captured(x), qjit(f, capture=False, abstracted_axes={0: "n"})(x))
    assert len(traces) == 1  # PennyLane's capture traces the program once, for every size


@needs_capture
@pytest.mark.parametrize("capture", [True, False])
def test_resizing_while_loop_carrying_python_literals(capture):
    # The body returns Python literals (a bool, a float) next to an array that grows.
    def f(n):
        loop = qml.while_loop if capture else catalyst_lite.while_loop

        @loop(lambda i, a, done, s: i < 3, allow_array_resizing=True)
        def grow(i, a, done, s):
            return i + 1, jnp.ones(a.shape[0] + 2), False, 1.5

        return grow(0, jnp.ones(n), True, 0.0)

    for n in (1, 4):
        assert_same(qjit(f, capture=capture)(n), (3, np.ones(n + 6), False, 1.5))


@needs_capture
def test_cond_branches_returning_new_sizes_and_nested_loops():
    def f(n: int, x: float):
        @qml.for_loop(0, n, 1)
        def outer(i, acc):
            return qml.for_loop(0, i, 1)(lambda j, a: a + j)(acc)

        return qml.cond(x > 0, lambda: jnp.ones(n) * x, lambda: jnp.zeros(n + 1))(), outer(jnp.zeros(n))

    for n, x in [(3, 1.5), (4, -1.0)]:
        on, off, _ = both(f, n, x)
        assert_same(on, off)
        assert on[0].shape == ((n,) if x > 0 else (n + 1,))
        assert_same(on[1], np.full(n, sum(j for i in range(n) for j in range(i))))


@needs_capture
def test_pytrees_static_arguments_and_differentiation():
    def f(d, k):
        @qml.for_loop(0, k, 1)
        def body(i, c):
            return {"a": c["a"] + 1.0, "b": c["b"] * 2.0}

        cube = lambda y: y**3  # noqa: E731
        return (
            body(d),
            qml.grad(cube)(d["a"]),
            qml.jacobian(lambda y: jnp.stack([y**2, jnp.sin(y)]))(d["a"]),
            qml.value_and_grad(cube)(d["a"]),
            qml.jvp(cube, [d["a"]], [1.0]),
            qml.vjp(cube, [d["a"]], [1.0]),
        )

    d = {"a": 2.0, "b": jnp.ones(2)}
    on = qjit(f, capture=True, static_argnums=1)(d, 3)
    assert_same(on[0], {"a": 5.0, "b": np.full(2, 8.0)})
    assert_same(on[1:4], (12.0, np.array([4.0, np.cos(2.0)]), (8.0, 12.0)))
    assert_same(on[4], (8.0, 12.0))
    assert_same(on[5], (8.0, 12.0))


@needs_capture
def test_a_loop_pennylane_captures_with_a_fixed_static_size_is_a_clear_error():
    # PennyLane captures the body with the static size 1 of its initial array, even with
    # allow_array_resizing=True: compiling it would be wrong.
    def f(n: int):
        grow = qml.while_loop(lambda a: a.shape[0] < n, allow_array_resizing=True)(
            lambda a: jnp.concatenate([a, a])
        )
        return grow(jnp.ones(1))

    with pytest.raises(DimensionError, match="capture=False"):
        qjit(f, capture=True)
    assert qjit(f, capture=False)(5).shape == (8,)


# --- quantum programs ------------------------------------------------------------------------------

DEV = qml.device("default.qubit", wires=3)


def gates_loops_and_transforms(x, n):
    qml.RX(x, 0)

    @qml.for_loop(0, n, 1)
    def layer(i, y):
        qml.RY(y, i % 3)
        qml.CNOT([i % 3, (i + 1) % 3])
        return y * 1.1

    y = layer(x)

    @qml.while_loop(lambda k: k < 2)
    def hadamards(k):
        qml.Hadamard(k)
        return k + 1

    hadamards(0)

    def ry():
        qml.RY(y, 2)

    def rz():
        qml.RZ(y, 2)

    qml.cond(y > 1.0, ry, rz)()
    qml.adjoint(qml.RZ)(x, 1)
    qml.adjoint(qml.S(0))
    qml.ctrl(qml.RX, 0)(x, 1)
    qml.ctrl(qml.RY(x, 2), 1, control_values=[0])

    def block(z):
        qml.RX(z, 0)
        qml.IsingXX(z, [0, 1])

    qml.adjoint(block)(x)
    qml.ctrl(block, control=2)(y)
    return (
        qml.expval(qml.Z(0) @ qml.Z(2)),
        qml.probs(wires=[0, 1]),
        qml.probs(),
        qml.state(),
        qml.var(qml.X(0) @ qml.Y(1)),
    )


@needs_capture
def test_qnode_gates_loops_cond_adjoint_ctrl_match_default_qubit():
    circuit = qml.qnode(DEV)(gates_loops_and_transforms)
    captured, uncaptured = qjit(circuit, capture=True), qjit(circuit, capture=False)
    for x, n in [(0.7, 5), (0.2, 2)]:  # both branches of the cond; one program for every n
        on = captured(x, n)
        assert_same(on, circuit(x, n), atol=1e-10)
        assert_same(on, uncaptured(x, n), atol=1e-12)
    assert {for_loop_p, while_loop_p, cond_p} <= primitives_of(captured)


@needs_capture
def test_qnode_inside_a_classical_program_with_derivatives():
    @qml.qnode(DEV)
    def circuit(y):
        qml.RX(y, 0)
        qml.RY(2 * y, 1)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    def f(x):
        return circuit(x) * 2, qml.grad(circuit)(x), catalyst_lite.grad(circuit)(x)

    on, off, _ = both(f, 0.4)
    assert_same(on, off, atol=1e-12)
    expected_grad = jax.grad(lambda y: jnp.cos(y) * jnp.cos(2 * y))(0.4)
    assert_same(on, (2 * np.cos(0.4) * np.cos(0.8), expected_grad, expected_grad), atol=1e-10)


@needs_capture
def test_jax_vmap_of_a_qnode_runs_it_once_per_element():
    """Was "Abstract evaluation for 'qnode' not implemented" (JAX checks it under dynamic shapes);
    PennyLane vectorizes such a QNode, and compiled as a loop it matches default.qubit row by row."""

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(2))
        qml.RY(w[0], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[1, 0])

    node = qml.qnode(DEV)(circuit)
    reference = qml.qnode(qml.device("default.qubit", wires=2))(circuit)
    w = jnp.array([0.3, 0.7])
    rows = qjit(lambda X, w: jax.vmap(node, in_axes=(0, None))(X, w), capture=True)
    columns = qjit(lambda X, w: jax.vmap(node, in_axes=(1, None))(X, w), capture=True)
    for X in (np.array([[0.1, 0.2], [0.5, -0.4]]), np.array([[0.9, 0.3], [1.2, 0.0], [-0.6, 2.1]])):
        expected = [reference(x, w) for x in X]
        assert_same(rows(X, w), jax.tree_util.tree_map(lambda *r: np.stack(r), *expected), atol=1e-10)
        assert_same(columns(X.T, w), jax.tree_util.tree_map(lambda *r: np.stack(r), *expected), atol=1e-10)

    @qml.set_shots(shots=4)
    @qml.qnode(DEV)
    def flipped(x):
        qml.RX(x, 0)
        return qml.sample(wires=[0])

    samples = qjit(lambda X: jax.vmap(flipped)(X), capture=True)(jnp.array([0.0, np.pi]))
    np.testing.assert_array_equal(samples, np.array([[[0]] * 4, [[1]] * 4]))

    @qml.qnode(qml.device("default.qubit", wires=1))
    def rotated(x, w):
        qml.RX(x * w, 0)
        return qml.expval(qml.Z(0))

    X = jnp.array([0.1, 0.4, 0.9])
    def loss(w):
        return jnp.sum(jax.vmap(rotated, in_axes=(0, None))(X, w))

    slope = qjit(jax.grad(loss), capture=True)(0.7)
    np.testing.assert_allclose(slope, jax.grad(lambda w: jnp.sum(jnp.cos(X * w)))(0.7), atol=1e-10)


@needs_capture
def test_static_arguments_of_a_compiled_qnode_stay_python_values():
    """Was PennyLane's "Autograph must be used when Python control flow is dependent on a dynamic
    variable": its capture traced every argument of the QNode, static ones included (Catalyst
    hands them to the QNode as static, and default.qubit runs such circuits)."""

    def circuit(n, x, rotation):
        for i in range(n):
            (qml.RX if rotation == "X" else qml.RY)(x * (i + 1), wires=i)
        return qml.probs(wires=range(n))

    reference = qml.qnode(qml.device("default.qubit", wires=3))(circuit)
    by_position = qjit(qml.qnode(DEV)(circuit), capture=True, static_argnums=(0, 2))
    by_name = qjit(qml.qnode(DEV)(circuit), capture=True, static_argnames=("n", "rotation"))
    for n, rotation in [(2, "X"), (3, "Y"), (1, "X")]:
        assert_same(by_position(n, 0.4, rotation), reference(n, 0.4, rotation), atol=1e-10)
        assert_same(by_name(n, 0.7, rotation=rotation), reference(n, 0.7, rotation), atol=1e-10)

    def keyword_only(x, *, n):
        for i in range(n):
            qml.RX(x, wires=i)
        return qml.expval(qml.Z(0) @ qml.Z(n - 1))

    compiled = qjit(qml.qnode(DEV)(keyword_only), capture=True, static_argnames="n")
    for n in (2, 3):
        expected = qml.qnode(qml.device("default.qubit", wires=3))(keyword_only)(0.4, n=n)
        assert_same(compiled(0.4, n=n), expected, atol=1e-10)


@needs_capture
def test_dynamically_sized_parameters_in_a_qnode():
    @qml.qnode(DEV)
    def circuit(params):
        @qml.for_loop(0, params.shape[0], 1)
        def layer(i):
            qml.RX(params[i], i % 3)

        layer()
        return qml.probs()

    def f(params):
        return circuit(params), jnp.sum(params)

    captured = qjit(f, capture=True, abstracted_axes={0: "n"})
    for n in (2, 4):
        params = np.linspace(0.1, 1.0, n)
        assert_same(captured(params), qjit(f, capture=False, abstracted_axes={0: "n"})(params), atol=1e-12)


@needs_capture
def test_mid_circuit_measurements_shots_and_counts():
    @qml.qnode(DEV)
    def mcm(x):
        qml.RX(x, 0)
        qml.RY(x, 1)
        m0 = qml.measure(0, reset=True)
        m1 = catalyst_lite.measure(1, postselect=1)

        def flip():
            qml.X(2)

        qml.cond(m1, flip)()
        qml.cond(m0, flip)()  # never: wire 0 was measured after RX(x) then reset, m0 is its outcome
        return qml.expval(qml.Z(2)), qml.probs(wires=[0])

    on, off, _ = both(mcm, 1.1, seed=11)
    assert_same(on, off)
    assert_same(on, (-1.0, np.array([1.0, 0.0])))  # postselected 1, so X on wire 2; wire 0 reset

    @qml.qnode(DEV, shots=40)
    def sampled(x):
        qml.RX(x, 0)
        qml.Hadamard(1)
        return qml.sample(), qml.counts(wires=[0, 1], all_outcomes=True), qml.expval(qml.Z(0)), qml.sample(wires=[1])

    on, off, _ = both(sampled, 0.9, seed=5)
    assert_same(on, off)
    samples, (outcomes, counts) = np.asarray(on[0]), on[1]
    assert samples.shape == (40, 3) and not samples[:, 2].any()
    assert_same(outcomes, np.arange(4))
    assert int(np.sum(counts)) == 40


@needs_capture
def test_statistics_of_mid_circuit_measurement_values_one_shot():
    """expval/var/sample of outcomes and of their sums and differences, one execution per shot, as
    without capture (the same seeded shots) and within statistical bounds of default.qubit."""

    @qml.qnode(DEV, shots=2000, mcm_method="one-shot")
    def circuit(x):
        qml.RX(x, 0)
        qml.RY(x, 1)
        m0, m1 = qml.measure(0), qml.measure(1)
        return qml.expval(m0 + m1), qml.var(m0), qml.sample(m0 - m1), qml.sample([m0, m1])

    on, off, _ = both(circuit, 0.9, seed=3)
    assert_same(on, off)
    mean, var, difference, pair = map(np.asarray, on)
    np.testing.assert_array_equal(difference, pair[:, 0] - pair[:, 1])
    assert set(np.unique(difference)) == {-1, 0, 1}
    assert mean == pytest.approx(pair.sum(axis=1).mean(), abs=1e-12)
    exact = qml.qnode(qml.device("default.qubit"), mcm_method="deferred")(
        lambda x: (qml.RX(x, 0), qml.RY(x, 1), qml.expval(qml.measure(0) + qml.measure(1)))[-1])(0.9)
    assert abs(mean - exact) < 5 * np.sqrt(2 / 2000)


@needs_capture
def test_statistics_of_mid_circuit_measurements_are_a_clear_error():
    @qml.qnode(DEV)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.measure(0))

    with pytest.raises(QuantumOperationError, match="mid-circuit measurement"):
        qjit(circuit, capture=True)(0.3)

    @qml.qnode(DEV, shots=10)
    def counted(x):
        qml.RX(x, 0)
        return qml.counts(qml.measure(0) + qml.measure(1))  # the values of a sum are not known

    with pytest.raises(QuantumOperationError, match="capture=True"):
        qjit(counted, capture=True)(0.3)


@needs_capture
@pytest.mark.parametrize("mcm_method", ["one-shot", "single-branch-statistics"])
def test_probs_and_counts_of_mid_circuit_measurements(mcm_method):
    """qml.probs/qml.counts of outcomes (one, or several together) as without capture (the same
    seeded shots); probs are the frequencies of the outcomes' samples."""

    @qml.qnode(DEV, shots=500, mcm_method=mcm_method)
    def circuit(x):
        qml.RX(x, 0)
        qml.RY(2 * x, 1)
        m0, m1 = qml.measure(0), qml.measure(1)
        return qml.probs(op=m0), qml.counts(op=[m0, m1]), qml.probs(op=[m0, m1]), qml.sample([m0, m1])

    on, off, _ = both(circuit, 0.9, seed=5)
    assert_same(on, off)
    p0, (outcomes, counts), p01, pair = on
    index = np.asarray(pair)[:, 0] * 2 + np.asarray(pair)[:, 1]
    assert_same(p01, np.bincount(index, minlength=4) / 500)
    assert_same(p0, np.bincount(np.asarray(pair)[:, 0], minlength=2) / 500)
    assert_same((outcomes, counts), (np.arange(4), np.bincount(index, minlength=4)))


@needs_capture
def test_qnode_and_quantum_function_transforms_are_applied():
    @qml.transform
    def drop_pauli_x(tape):
        ops = [op for op in tape.operations if op.name != "PauliX"]
        return [tape.copy(operations=ops)], lambda results: results[0]

    @drop_pauli_x
    @qml.qnode(DEV)
    def on_qnode(x):
        qml.RX(x, 0)
        qml.X(0)
        return qml.expval(qml.Z(0))

    @qml.qnode(DEV)
    def on_qfunc(x):
        def gates():
            qml.RX(x, 0)
            qml.X(0)

        drop_pauli_x(gates)()
        qml.X(1)
        return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))

    assert_same(qjit(on_qnode, capture=True)(0.3), np.cos(0.3))
    assert_same(qjit(on_qfunc, capture=True)(0.3), (np.cos(0.3), -1.0))


# --- PennyLane's global switch, and catalyst_lite's control flow under capture --------------------


@needs_capture
def test_capture_global_follows_qml_capture_when_the_program_is_traced():
    def f(x):
        return qml.for_loop(0, 3, 1)(lambda i, a: a * 2)(x)

    qml.capture.enable()
    try:
        while_on = qjit(f)
        assert float(while_on(1.5)) == 12.0
        assert qml.capture.enabled()  # restored after tracing
    finally:
        qml.capture.disable()
    assert float(qjit(f)(1.5)) == 12.0
    assert float(while_on(2.0)) == 16.0  # already traced: the same program

    def mixed(x):
        return catalyst_lite.for_loop(0, 3, 1)(lambda i, a: a * 2)(x)

    assert float(qjit(mixed)(1.0)) == 8.0
    qml.capture.enable()
    try:
        assert float(qjit(mixed, capture=False)(1.0)) == 8.0  # off whatever the global switch
        with pytest.raises(PlxprCaptureCFCompatibilityError, match="qml.for_loop"):
            qjit(mixed)(1.0)
        assert qml.capture.enabled()
    finally:
        qml.capture.disable()


@needs_capture
@pytest.mark.parametrize(
    "control_flow, name",
    [
        (lambda x: catalyst_lite.for_loop(0, 2, 1)(lambda i, a: a)(x), "for_loop"),
        (lambda x: catalyst_lite.while_loop(lambda a: a < 0)(lambda a: a)(x), "while_loop"),
        (lambda x: catalyst_lite.cond(x > 0)(lambda: x).otherwise(lambda: -x)(), "cond"),
    ],
)
def test_catalyst_lite_control_flow_under_capture_is_refused_as_catalyst_does(control_flow, name):
    with pytest.raises(PlxprCaptureCFCompatibilityError, match=f"(?s)catalyst.{name} is not supported with PennyLane's capture enabled.*qml.{name}"):
        qjit(control_flow, capture=True)(1.0)
    assert not qml.capture.enabled()


@needs_capture
@needs_entry_points
def test_through_qml_qjit():
    @qml.qjit(compiler="catalyst_lite", capture=True)
    def f(n: int):
        assert qml.capture.enabled() and qml.compiler.active_compiler() is None  # PennyLane captures
        return qml.for_loop(0, n, 1)(lambda i, acc: acc + i)(jnp.zeros(n))

    assert isinstance(f, QJIT)
    assert_same(f(4), np.full(4, 6.0))
