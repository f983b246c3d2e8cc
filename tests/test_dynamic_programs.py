"""Dynamic-shape programs as Catalyst users write them, at sizes 0, 1, a few and 1000, against
NumPy and default.qubit references: loops over an argument's length that index it (and so never
run for an empty one), loops that make arrays sized by their index, and the same inside QNodes."""

import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import cond, for_loop, grad, qjit, while_loop

SIZES = (0, 1, 3, 1000)


def vec(n: int) -> np.ndarray:
    return np.arange(n) * 0.5 - 1.0


# --- a loop over len(x) indexing x: never runs for an empty x -------------------------------------


@qjit(abstracted_axes={0: "n"})
def sum_of_squares(x):
    @for_loop(0, x.shape[0], 1)
    def body(i, acc):
        return acc + x[i] ** 2

    return body(0.0)


@qjit(abstracted_axes={0: "n"})
def reversed_copy(x):
    n = x.shape[0]

    @for_loop(n - 1, -1, -1)
    def body(i, out):
        return out.at[n - 1 - i].set(x[i] * 2.0)

    return body(jnp.zeros_like(x))


@qjit(abstracted_axes={0: "n"})
def pairwise(x):
    @for_loop(1, x.shape[0], 1)
    def body(i, acc):
        return acc + x[i] * x[i - 1]

    return body(0.0)


@pytest.mark.parametrize("n", SIZES)
def test_loops_over_the_length_of_an_argument_that_index_it(n):
    x = vec(n)
    assert float(sum_of_squares(x)) == pytest.approx(float(np.sum(x**2)), rel=1e-12)
    np.testing.assert_allclose(reversed_copy(x), x[::-1] * 2.0)
    assert float(pairwise(x)) == pytest.approx(float(np.sum(x[1:] * x[:-1])), rel=1e-12, abs=1e-12)


def test_an_empty_argument_first_then_others_share_the_program():
    traces = []

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        traces.append(x.shape)

        @for_loop(0, x.shape[0], 1)
        def body(i, acc):
            return acc + x[i]

        return body(0.0)

    assert float(f(vec(0))) == 0.0
    for n in (1, 4, 9, 0):
        assert float(f(vec(n))) == pytest.approx(float(np.sum(vec(n))))
    assert len(traces) == 1  # the body's `len(x) >= 1` holds whenever the loop runs


def test_an_empty_argument_that_needs_its_own_program_still_skips_the_loop():
    """`x[:-1]` of an empty `x` decides differently, so the call gets a program traced at its
    sizes; the loop body, which that call does not run, is still traced as for sizes it runs at."""

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        @for_loop(0, x.shape[0], 1)
        def body(i, acc):
            return acc + x[i] ** 2

        return body(0.0) + jnp.sum(x[:-1]) + jnp.sum(jnp.roll(x, 1)[:1])

    for n in (3, 0, 1, 5, 0):
        x = vec(n)
        expected = np.sum(x**2) + np.sum(x[:-1]) + np.sum(np.roll(x, 1)[:1])
        assert float(f(x)) == pytest.approx(float(expected), rel=1e-12, abs=1e-12)


def test_a_loop_bounded_by_an_integer_argument_indexing_an_array():
    """The guard is the loop's own bounds (`0 < m`), whatever sizes its body indexes."""

    @qjit(abstracted_axes={0: "n"})
    def f(x, m: int):
        @for_loop(0, m, 1)
        def body(i, acc):
            return acc + x[i]

        return body(0.0)

    x = vec(4)
    assert float(f(x, 3)) == pytest.approx(float(np.sum(x[:3])))
    assert float(f(vec(0), 0)) == 0.0
    assert float(f(x, 0)) == 0.0
    assert float(f(vec(1), 1)) == pytest.approx(float(vec(1)[0]))


@pytest.mark.parametrize("n", (0, 1, 3, 8))
def test_grad_of_a_loop_over_the_length_of_its_argument(n):
    @qjit(abstracted_axes={0: "n"})
    def g(x):
        def f(y):
            @for_loop(0, y.shape[0], 1)
            def body(i, acc):
                return acc + jnp.sin(y[i])

            return body(0.0)

        return grad(f)(x)

    np.testing.assert_allclose(g(vec(n)), np.cos(vec(n)), rtol=1e-12)


# --- QNodes taking dynamically sized arrays ------------------------------------------------------


def _reference_rx_chain(x: np.ndarray, wires: int = 3) -> float:
    @qml.qnode(qml.device("default.qubit", wires=wires))
    def circuit():
        for i in range(len(x)):
            qml.RX(x[i], wires=i % wires)
        return qml.expval(qml.PauliZ(0))

    return float(circuit())


@pytest.mark.parametrize("n", (0, 1, 3, 7))
def test_qnode_looping_over_its_argument(n):
    @qjit(abstracted_axes={0: "n"})
    @qml.qnode(qml.device("lightning.qubit", wires=3))
    def circuit(x):
        @for_loop(0, jnp.size(x), 1)
        def body(i):
            qml.RX(x[i], wires=i % 3)

        body()
        return qml.expval(qml.PauliZ(0))

    x = vec(n) + 0.3
    assert float(circuit(x)) == pytest.approx(_reference_rx_chain(x), abs=1e-10)


# --- loops making arrays sized by their index ----------------------------------------------------


@qjit
def triangle(n: int):
    @for_loop(0, n, 1)
    def outer(i, acc):
        @cond(i % 2 == 0)
        def part():
            return jnp.sum(jnp.arange(i, dtype=float))

        @part.otherwise
        def part():
            return jnp.max(jnp.ones(i + 1)) * i

        return acc + part()

    return outer(0.0)


@qjit
def counted_while(n: int):
    @while_loop(lambda i, acc: i < n)
    def body(i, acc):
        return i + 1, acc + jnp.sum(jnp.arange(i) * 2)

    return body(0, 0)[1]


@pytest.mark.parametrize("n", SIZES)
def test_loops_making_index_sized_arrays_match_numpy(n):
    expected = sum(float(np.sum(np.arange(i, dtype=float))) if i % 2 == 0 else float(i) for i in range(n))
    assert float(triangle(n)) == pytest.approx(expected, rel=1e-12)
    assert int(counted_while(n)) == sum(int(np.sum(np.arange(i) * 2)) for i in range(n))
