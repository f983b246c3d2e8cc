"""Catalyst 0.15's control-flow conventions, from its documentation and checked side by side with
it: ``cond`` predicates converted as Python converts them, branch results promoted to one dtype,
what branches may (not) return, and which dimensions a resizing loop's results keep or share."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import cond, for_loop, qjit, switch, while_loop
from catalyst_lite.errors import ControlFlowError

# --- predicates ----------------------------------------------------------------------------------


def _choose(pred_of):
    """A qjit program returning 1.0 when ``pred_of(x)`` holds, else 2.0."""

    def f(x):
        @cond(pred_of(x))
        def c():
            return 1.0

        @c.otherwise
        def c():
            return 2.0

        return c()

    return f


@pytest.mark.parametrize(
    "x",
    [0, 3, -2, 0.0, 0.5, -1e-300, float("nan"), 0j, 1j, np.int32(0), np.float32(2.0)],
)
def test_numeric_predicates_are_converted_as_python_converts_them(x):
    expected = 1.0 if bool(x) else 2.0
    traced = qjit(_choose(lambda v: v))
    assert float(traced(x)) == expected  # a traced predicate
    assert float(qjit(_choose(lambda v: x))(1.0)) == expected  # a Python/NumPy number


def test_one_element_array_predicates():
    f = qjit(_choose(lambda v: v))
    assert float(f(jnp.array([3]))) == 1.0
    assert float(f(jnp.array([0.0]))) == 2.0
    assert float(f(np.array(True))) == 1.0


@pytest.mark.parametrize("pred", [jnp.array([1, 2]), np.zeros((1, 1)), "yes", None])
def test_other_predicates_are_type_errors(pred):
    with pytest.raises(TypeError, match="predicate"):
        qjit(_choose(lambda v: pred))(1.0)


def test_symbolic_array_predicate_is_a_type_error():
    with pytest.raises(ControlFlowError, match=r"(?s)one element, got bool\[n\].*`return c\(\)`"):

        @qjit
        def f(n: int):
            return _choose(lambda v: jnp.ones([v]) > 0)(n)


def test_numeric_predicate_in_else_if_and_in_qml_cond():
    @qjit
    def f(x: int):
        @cond(x > 0)
        def c():
            return 1

        @c.else_if(x + 2)  # true unless x == -2
        def c():
            return 3

        @c.otherwise
        def c():
            return 2

        return c()

    assert [int(f(x)) for x in (5, 0, -2)] == [1, 3, 2]

    dev = qml.device("default.qubit", wires=1)

    @qjit
    @qml.qnode(dev)
    def circuit(flip: int):
        qml.cond(flip, qml.PauliX)(wires=0)
        return qml.probs(wires=0)

    np.testing.assert_allclose(circuit(1), [0.0, 1.0])
    np.testing.assert_allclose(circuit(0), [1.0, 0.0])


# --- promoted results ----------------------------------------------------------------------------


def test_documented_promotion_of_an_int_branch():
    @qjit
    def f(x: float):
        @cond(x > 1.5)
        def cond_fn():
            return x**2

        @cond_fn.otherwise
        def cond_fn():
            return 6

        return cond_fn()

    assert f(1.5).dtype == jnp.float64 and float(f(1.5)) == 6.0
    assert float(f(2.0)) == 4.0
    eqn = next(e for e in f.jaxpr.jaxpr.eqns if e.primitive.name == "cond")
    assert [v.aval.dtype for v in eqn.outvars] == [jnp.float64]
    for branch in eqn.params["branch_jaxprs"]:  # the int branch returns a float64 too
        assert [v.aval.dtype for v in branch.jaxpr.outvars] == [jnp.float64]
    assert float(jax.grad(f)(2.0)) == 4.0 and float(jax.grad(f)(1.0)) == 0.0


@pytest.mark.parametrize(
    "a,b",
    [
        (jnp.int64, jnp.float64),
        (jnp.bool_, jnp.int64),
        (jnp.float32, jnp.int32),
        (jnp.float32, jnp.float64),
        (jnp.float64, jnp.complex128),
        (jnp.uint32, jnp.int32),
        (jnp.int16, jnp.int32),
    ],
)
def test_branch_dtypes_promote_as_jnp_promote_types(a, b):
    @qjit
    def f(x: float):
        @cond(x > 0.0)
        def c():
            return jnp.ones(3, dtype=a), jnp.abs(x).astype(b)

        @c.otherwise
        def c():
            return jnp.zeros(3, dtype=b), jnp.abs(x).astype(a)

        return c()

    expected = jnp.promote_types(a, b)
    for x in (2.0, -3.0):
        arr, scalar = f(x)
        assert arr.dtype == expected and scalar.dtype == expected
        np.testing.assert_array_equal(arr, np.full(3, 1 if x > 0 else 0, dtype=expected))
        assert scalar == np.asarray(abs(x)).astype(b if x > 0 else a).astype(expected)


def test_documented_switch_promotion_to_complex():
    @qjit
    def foo(i):
        @switch(i)
        def my_switch():
            return complex(1, 3)

        @my_switch.branch(2)
        def my_branch():
            return 1.4

        @my_switch.branch(3)
        def my_branch2():
            return 2

        return my_switch()

    assert foo(1) == 1 + 3j and foo(2) == 1.4 + 0j and foo(3) == 2 + 0j
    assert foo(2).dtype == jnp.complex128


def test_promotion_inside_loops_qnodes_and_qml_cond():
    dev = qml.device("default.qubit", wires=1)

    @qjit
    @qml.qnode(dev)
    def circuit(x: float):
        def rotate():
            qml.RX(x, wires=0)
            return x

        def skip():
            return 0

        r = qml.cond(x > 1.0, rotate, skip)()

        @for_loop(0, 3, 1)
        def loop(i, acc):
            @cond(i % 2 == 0)
            def c():
                return i

            @c.otherwise
            def c():
                return 0.5

            return acc + c()

        return qml.expval(qml.PauliZ(0)), r, loop(0.0)

    for x in (2.0, 0.5):
        z, r, acc = circuit(x)
        assert r.dtype == jnp.float64 and float(r) == (x if x > 1.0 else 0.0)
        np.testing.assert_allclose(z, np.cos(x) if x > 1.0 else 1.0)
        assert float(acc) == 2.5


# --- what branches may return --------------------------------------------------------------------


def _branches(first, second):
    def f(n: int, x: float):
        @cond(x > 0.0)
        def c():
            return first(n, x)

        @c.otherwise
        def c():
            return second(n, x)

        return c()

    return f


@pytest.mark.parametrize(
    "first,second,match",
    [
        (lambda n, x: (x, x), lambda n, x: [x, x], "tuple and a list"),
        (lambda n, x: x, lambda n, x: (x,), "same structure"),
        (lambda n, x: {"a": x}, lambda n, x: {"b": x}, "same structure"),
        (lambda n, x: x, lambda n, x: None, "same structure"),
        (lambda n, x: jnp.ones(3), lambda n, x: jnp.ones((3, 1)), "rank"),
        (lambda n, x: jnp.ones(3), lambda n, x: jnp.ones(4), "number"),
        (lambda n, x: jnp.ones(n), lambda n, x: jnp.ones(3), "number"),
        (lambda n, x: jnp.ones((2, n)), lambda n, x: jnp.ones((n, n)), "number"),
    ],
)
def test_branches_that_catalyst_rejects_are_type_errors(first, second, match):
    with pytest.raises(TypeError, match=match):
        qjit(_branches(first, second))


@pytest.mark.parametrize("pred", [True, False, 0, 1.5])
def test_python_predicates_trace_every_branch(pred):
    # The result is a traced value of the branches' joined type (int and float: float64),
    # whichever branch the Python predicate picks.
    @qjit
    def f(x):
        @cond(pred)
        def c():
            return 1

        @c.otherwise
        def c():
            return x * 2.0

        r = c()
        return r.astype(jnp.float32), r

    low, r = f(3.0)
    assert r.dtype == jnp.float64 and low.dtype == jnp.float32
    assert float(r) == (1.0 if pred else 6.0)


@pytest.mark.parametrize("pred", [True, False])
def test_branches_that_do_not_fit_are_refused_whatever_a_python_predicate_picks(pred):
    with pytest.raises(TypeError, match="same structure"):
        qjit(lambda x: cond(pred)(lambda: x).otherwise(lambda: (x,))())(1.0)


def test_symbolic_sizes_may_differ_between_branches():
    f = qjit(_branches(lambda n, x: jnp.ones((2, n)) * x, lambda n, x: jnp.zeros((2, n + 1))))
    np.testing.assert_array_equal(f(3, 2.0), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(f(3, -1.0), np.zeros((2, 4)))


# --- resizing loops: dimensions kept and shared --------------------------------------------------


def _result_dims(program, primitive):
    eqn = next(e for e in program.jaxpr.jaxpr.eqns if e.primitive.name == primitive)
    return eqn, [v.aval.shape for v in eqn.outvars[eqn.params["num_implicit_inputs"] :]]


def test_resizing_for_loop_keeps_unchanged_and_shares_equal_dimensions():
    @qjit
    def f(n: int):
        a, b, c = jnp.ones(n), jnp.zeros(n), jnp.ones((n, n))

        @for_loop(0, 3, 1, allow_array_resizing=True)
        def loop(i, a, b, c):
            grown = jnp.ones(b.shape[0] + 1)
            return a + 1.0, grown, c * 2.0

        a2, b2, c2 = loop(a, b, c)
        return a2 + jnp.ones(n), b2, c2 + jnp.ones((n, n))  # a2 and c2 are still of size n

    a2, b2, c2 = f(4)
    np.testing.assert_array_equal(a2, np.full(4, 5.0))
    np.testing.assert_array_equal(b2, np.ones(7))
    np.testing.assert_array_equal(c2, np.full((4, 4), 9.0))
    (n,) = f.jaxpr.jaxpr.invars
    _, shapes = _result_dims(f, "for_loop")
    assert shapes[0] == (n,) and shapes[2] == (n, n) and shapes[1][0] is not n


def test_resizing_while_loop_shares_sizes_that_always_agree():
    @qjit
    def f(n: int):
        @while_loop(lambda a, b, i: i < 3, allow_array_resizing=True)
        def loop(a, b, i):
            grown = jnp.ones(a.shape[0] + 1)
            return grown, grown * 2.0, i + 1

        a, b, _ = loop(jnp.ones(n), jnp.ones(n), 0)
        return a + b  # one size

    np.testing.assert_array_equal(f(2), np.full(5, 3.0))
    _, shapes = _result_dims(f, "while_loop")
    assert shapes[0] == shapes[1] and shapes[0][0] is not f.jaxpr.jaxpr.invars[0]


@pytest.mark.parametrize("iterations", [0, 1, 2, 3])
def test_kept_and_shared_dimensions_are_sound(iterations):
    # Sizes that swap, or that agree only after the first iteration, are not kept nor shared.
    @qjit
    def f(n: int, m: int, k: int):
        @for_loop(0, k, 1, allow_array_resizing=True)
        def swap(i, a, b):
            return b, a

        @for_loop(0, k, 1, allow_array_resizing=True)
        def same_after_one(i, a, b):
            c = jnp.ones(a.shape[0] + 1)
            return c, c

        @for_loop(0, k, 1, allow_array_resizing=True)
        def swap_equal(i, a, b):
            return b * 2.0, a

        return swap(jnp.ones(n), jnp.zeros(m)), same_after_one(jnp.ones(n), jnp.zeros(m)), swap_equal(
            jnp.ones(n), jnp.ones(n)
        )

    (a, b), (c, d), (e, g) = f(2, 5, iterations)
    odd = iterations % 2 == 1
    assert (a.shape, b.shape) == (((5,), (2,)) if odd else ((2,), (5,)))
    assert (c.shape, d.shape) == (((2,), (5,)) if iterations == 0 else ((2 + iterations,),) * 2)
    assert e.shape == g.shape == (2,)
    _, shapes = _result_dims(f, "for_loop")
    n = f.jaxpr.jaxpr.invars[0]
    assert shapes[0][0] is not n and shapes[1][0] is not n
