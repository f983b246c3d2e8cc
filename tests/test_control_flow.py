"""for_loop, while_loop and cond against NumPy references: traced bounds, negative steps, zero-trip
loops, nesting, captures from every enclosing scope, loop-index-sized arrays, resizing loops,
conds in loops and loops in conds, branches of different sizes, and the errors of bad bodies."""

import inspect

import numpy as np
import jax
import jax.numpy as jnp
import pytest

from catalyst_lite import cond, for_loop, qjit, while_loop
from catalyst_lite.errors import ControlFlowError, DimensionError, SizeAssumptionError, SymbolicShapeError


# --- for_loop -------------------------------------------------------------------------------------


@qjit
def strided_sum(lower: int, upper: int, step: int):
    @for_loop(lower, upper, step)
    def body(i, s):
        return s + i

    return body(0)


@pytest.mark.parametrize(
    "lower,upper,step", [(0, 10, 1), (3, 20, 4), (10, 0, -1), (7, 0, -2), (5, 5, 1), (5, 0, 1), (0, 5, -1)]
)
def test_traced_bounds_negative_steps_zero_trips(lower, upper, step):
    assert int(strided_sum(lower, upper, step)) == sum(range(lower, upper, step))


def test_a_loop_with_a_traced_step_indexes_an_empty_array_it_never_runs_over():
    @qjit(abstracted_axes={0: "n"})
    def f(x, step):
        forward = for_loop(0, x.shape[0], step)(lambda i, s: s + x[i] * (i + 1))(0.0)
        backward = for_loop(x.shape[0] - 1, -1, -step)(lambda i, s: s * 2.0 + x[i])(0.0)
        return forward, backward

    for n, step in [(0, 1), (0, 3), (5, 2), (1, 1), (0, 2), (6, 4)]:
        x = np.arange(1.0, n + 1.0)
        forward = sum(x[i] * (i + 1) for i in range(0, n, step))
        backward = 0.0
        for i in range(n - 1, -1, -step):
            backward = backward * 2.0 + x[i]
        np.testing.assert_allclose(f(x, step), (forward, backward))


def test_a_while_loop_indexes_an_empty_array_it_never_runs_over():
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        @while_loop(lambda k, s: k < x.shape[0])
        def total(k, s):
            return k + 1, s + x[k] * (k + 1)

        return total(0, 0.0)

    for n in (0, 3, 0, 1, 5):
        x = np.arange(1.0, n + 1.0)
        k, s = f(x)
        assert int(k) == n and float(s) == sum(x * np.arange(1, n + 1))


def test_single_and_multiple_carries_and_pytrees():
    @qjit
    def f(n: int):
        @for_loop(0, n, 1)
        def two(i, a, b):
            return a + 1, b * 2

        @for_loop(0, n, 1)
        def tree(i, d):
            return {"x": d["x"] + i, "y": (d["y"][0] - 1,)}

        return two(0, 1), tree({"x": 0, "y": (10,)})

    (a, b), d = f(4)
    assert (int(a), int(b)) == (4, 16)
    assert int(d["x"]) == 6 and int(d["y"][0]) == 6


def test_nested_loops_capture_from_every_scope():
    @qjit
    def f(n: int, m: int):
        x = jnp.ones([n]) * 3.0

        @for_loop(0, m, 1)
        def outer(i, acc):
            y = acc * 0.5

            @for_loop(0, i, 1)
            def inner(j, a):
                return a + x * j + y

            return inner(acc)

        return outer(jnp.zeros([n]))

    def reference(n, m):
        x, acc = np.ones(n) * 3.0, np.zeros(n)
        for i in range(m):
            y, a = acc * 0.5, acc
            for j in range(i):
                a = a + x * j + y
            acc = a
        return acc

    for n, m in [(3, 4), (5, 6), (1, 0)]:
        np.testing.assert_allclose(f(n, m), reference(n, m))


def test_loop_index_sizes_arrays_and_resizing_while():
    @qjit
    def triangle(n: int):
        @for_loop(1, n + 1, 1, allow_array_resizing=True)
        def body(i, acc):
            return jnp.ones([acc.shape[0] + i]) * i

        return body(jnp.zeros([0]))

    for n in (1, 3, 5):
        np.testing.assert_array_equal(triangle(n), np.full(n * (n + 1) // 2, float(n)))

    @qjit(abstracted_axes={0: "n"})
    def doubling(x):
        @while_loop(lambda a: a.shape[0] < 50, allow_array_resizing=True)
        def grow(a):
            return jnp.ones([a.shape[0] * 2]) * (jnp.sum(a) + 1.0)

        return grow(x)

    def doubling_reference(x):
        while x.shape[0] < 50:
            x = np.ones(x.shape[0] * 2) * (np.sum(x) + 1.0)
        return x

    for n in (1, 3, 7, 60):
        np.testing.assert_allclose(doubling(np.ones(n)), doubling_reference(np.ones(n)))


# Slices of a fixed-size array by a loop's index: `x[:i]` is all of `x` only when `i >= len(x)`,
# which a loop from 0 does not reach at its first iterations.
_INDEX_SLICES = (
    lambda x, i, n: jnp.sum(x[:i]),
    lambda x, i, n: jnp.mean(x[i:]),
    lambda x, i, n: jnp.sum(x[: n - i]),
    lambda x, i, n: x[:i].shape[0] * 1.0,
    lambda x, i, n: jnp.sum(jax.lax.dynamic_slice(x, (i,), (3,))),
)


def _index_slices_reference(x, i, n):
    x = np.asarray(x)
    start = min(i, len(x) - 3)  # dynamic_slice clamps its start
    return [np.sum(x[:i]), np.mean(x[i:]), np.sum(x[: n - i]), x[:i].shape[0], np.sum(x[start : start + 3])]


@pytest.mark.parametrize("constant", [np.arange(8.0), jnp.arange(8.0)], ids=["numpy", "jax"])
def test_a_for_loop_slices_a_closed_over_array_by_its_index(constant):
    @qjit
    def f(n: int):
        @for_loop(0, n, 1)
        def body(i, acc):
            return tuple(a + s(jnp.asarray(constant), i, n) for a, s in zip(acc, _INDEX_SLICES))

        return body((0.0,) * len(_INDEX_SLICES))

    for n in (0, 1, 5):
        expected = np.sum([_index_slices_reference(constant, i, n) for i in range(n)], axis=0)
        np.testing.assert_allclose(f(n), expected if n else np.zeros(len(_INDEX_SLICES)))


def test_a_while_loop_slices_an_argument_by_its_counter():
    @qjit
    def f(x, n: int):
        @while_loop(lambda state: state[0] < n)
        def body(state):
            k, total, count = state
            return k + 1, total + jnp.sum(x[:k]) + jnp.mean(x[k:]), count + x[k:].shape[0]

        return body((0, 0.0, 0))[1:]

    x = np.arange(8.0)
    for n in (0, 1, 5):
        total = sum(np.sum(x[:k]) + np.mean(x[k:]) for k in range(n))
        np.testing.assert_allclose(f(x, n), (total, sum(len(x[k:]) for k in range(n))))


def test_a_while_loop_slices_by_a_bound_whose_sign_is_known_at_run_time():
    # `n - k` is >= 0 while the loop runs, but while tracing `k` is any integer: the slice counts a
    # negative bound from the end, as Python does, at run time (no Python `if` on it).
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        n = x.shape[0]

        @while_loop(lambda k, s: k < n)
        def body(k, s):
            return k + 1, (s + jnp.sum(x[: n - k]) * 10.0 + jnp.sum(x[k - n :]) + jnp.sum(x[n - k - 1 :: -2]) * 100.0
                           + jnp.sum(x[k - n : n - k - 1]) * 1000.0)

        return body(0, 0.0)[1]

    for n in (1, 4, 0):
        x = np.arange(1.0, n + 1.0)
        expected = sum(np.sum(x[: n - k]) * 10.0 + np.sum(x[k - n :]) + np.sum(x[n - k - 1 :: -2]) * 100.0
                       + np.sum(x[k - n : n - k - 1]) * 1000.0 for k in range(n))
        np.testing.assert_allclose(f(x), expected)


def test_a_while_loop_combines_a_slice_by_its_counter_with_an_array_of_that_size():
    # `x[k:]` and `x[:n - k]` have n - k elements whenever `jnp.ones(n - k)` is an array: they
    # broadcast together (an equality checked when the program runs).
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        n = x.shape[0]

        @while_loop(lambda k, s, y: k < n)
        def body(k, s, y):
            y = y.at[: n - k].add(jnp.ones(n - k) * k)
            return k + 1, s + jnp.sum(x[k:] * jnp.arange(n - k)), y

        return body(0, 0.0, x)[1:]

    for n in (2, 0):
        x = np.arange(1.0, n + 1.0)
        y = x.copy()
        for k in range(n):
            y[: n - k] += k
        total, result = f(x)
        np.testing.assert_allclose(total, sum(np.sum(x[k:] * np.arange(n - k)) for k in range(n)))
        np.testing.assert_allclose(result, y)


def test_a_while_loop_whose_slice_and_array_sizes_part_raises_when_it_runs():
    # Counting k down from 0, `x[:n - k]` stops at n elements while `jnp.ones(n - k)` grows: the
    # sizes assumed equal while tracing are not, and the run says so rather than broadcasting.
    @qjit
    def f(x):
        n = x.shape[0]

        @while_loop(lambda k, s: k > -2)
        def body(k, s):
            return k - 1, s + jnp.sum(x[: n - k] + jnp.ones(n - k))

        return body(0, 0.0)

    with pytest.raises(SizeAssumptionError, match="4 == 5"):
        f(jnp.arange(4.0))


def test_a_for_loop_slices_by_bounds_whose_sign_changes_with_its_index():
    # `i - 2` is negative at the first iterations and not at the last: each slice counts it as
    # Python does, whatever sizes the program was first traced at (an empty loop first).
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        @for_loop(0, x.shape[0], 1)
        def body(i, s):
            return (s + jnp.sum(x[i - 2 : i]) + 10.0 * jnp.sum(x[::-1][: i - 1]) + 100.0 * jnp.sum(jnp.ones(i)[i - 1 :])
                    + 1000.0 * jnp.sum(x[: 2 - i]))

        return body(0.0)

    for n in (0, 1, 2, 5):
        x = np.arange(1.0, n + 1.0)
        expected = sum(np.sum(x[i - 2 : i]) + 10.0 * np.sum(x[::-1][: i - 1]) + 100.0 * np.sum(np.ones(i)[i - 1 :])
                       + 1000.0 * np.sum(x[: 2 - i]) for i in range(n))
        np.testing.assert_allclose(f(x), expected)


def _assert_loop_sums_match_numpy(loop, of_jnp, of_numpy, x, trip_counts):
    """``sum(of_jnp(x, i))`` over ``range(n)`` by ``loop`` (one trace, ``n`` symbolic) equals NumPy's."""

    @qjit
    def f(n: int):
        if loop == "for_loop":
            return for_loop(0, n, 1)(lambda i, s: s + jnp.sum(of_jnp(jnp.asarray(x), i)))(0.0)
        step = while_loop(lambda i, s: i < n)(lambda i, s: (i + 1, s + jnp.sum(of_jnp(jnp.asarray(x), i))))
        return step(0, 0.0)[1]

    for n in trip_counts:
        np.testing.assert_allclose(f(n), sum(np.sum(of_numpy(x, i)) for i in range(n)))


_CLAMPED_SLICES = (  # (of jnp, of NumPy): slices of a fixed-length array by a loop's index
    (lambda x, i: x[i // 2 : i], lambda x, i: x[i // 2 : i]),
    (lambda x, i: x[jnp.maximum(i - 3, 0) : i + 1], lambda x, i: x[max(i - 3, 0) : i + 1]),
    (lambda x, i: x[: i % 4], lambda x, i: x[: i % 4]),
)


@pytest.mark.parametrize("loop", ["for_loop", "while_loop"])
@pytest.mark.parametrize("which", range(len(_CLAMPED_SLICES)))
def test_a_loop_slices_by_bounds_clamped_by_a_fixed_length(loop, which):
    # Of an 8-long array, `x[i // 2 : i]` is empty at the first iteration and at the last ones
    # of a long loop (both bounds clamped to 8), not in between: a decision about its size must
    # not rest on the loop's first and last iterations alone.
    _assert_loop_sums_match_numpy(loop, *_CLAMPED_SLICES[which], np.arange(8.0) ** 1.5, (1, 2, 20, 0, 5))


_SIZES_THROUGH_FLOATS = (  # (of jnp, of NumPy): sizes computed from a loop's index through floats
    (lambda x, i: x[: jnp.ceil(i / 2).astype(int)], lambda x, i: x[: int(np.ceil(i / 2))]),
    (lambda x, i: x[: (i * 1.5).astype(int)], lambda x, i: x[: int(i * 1.5)]),
    (lambda x, i: jnp.arange(1.0, i + 1), lambda x, i: np.arange(1.0, i + 1)),
)


@pytest.mark.parametrize("loop", ["for_loop", "while_loop"])
@pytest.mark.parametrize("which", range(len(_SIZES_THROUGH_FLOATS)))
def test_a_loop_slices_by_a_bound_computed_through_floats(loop, which):
    _assert_loop_sums_match_numpy(loop, *_SIZES_THROUGH_FLOATS[which], np.arange(1.0, 13.0), (0, 1, 2, 5, 8))


def test_a_program_traced_at_one_calls_sizes_decides_nothing_about_a_loop_index_for_others():
    # The user's `if` on two abstracted axes has the program traced at the call's sizes; at n = 2
    # `i - 2` is negative at every iteration, at n = 5 it is not: the program must not keep n = 2's
    # answer for other calls.
    @qjit(abstracted_axes=({0: "n"}, {0: "m"}))
    def f(x, y):
        scale = 2.0 if x.shape[0] > y.shape[0] else 3.0
        return for_loop(0, x.shape[0], 1)(lambda i, s: s + scale * jnp.sum(x[i - 2 : i]))(0.0)

    for n, m in ((2, 1), (5, 1), (3, 7)):
        x = np.arange(1.0, n + 1.0)
        expected = (2.0 if n > m else 3.0) * sum(np.sum(x[i - 2 : i]) for i in range(n))
        np.testing.assert_allclose(f(x, np.ones(m)), expected)


def test_jax_needing_a_size_computed_from_a_loop_index_as_a_number_says_so():
    # Not the hint about a Python `if`: the user wrote none.
    f = qjit(lambda x: for_loop(0, x.shape[0], 1)(lambda i, s: s + jnp.sum(jnp.linspace(0.0, 1.0, i + 1)))(0.0),
             abstracted_axes={0: "n"})
    with pytest.raises(SymbolicShapeError, match="loop's index or counter is needed as a Python number"):
        f(np.ones(3))


def test_preserved_while_loop_is_one_program():
    @qjit(abstracted_axes={0: "n"})
    def f(a):
        @while_loop(lambda i, a: i < 100)
        def body(i, a):
            return i + 1, a * 0.99 + jnp.sin(a)

        return body(0, a)[1]

    def reference(a):
        for _ in range(100):
            a = a * 0.99 + np.sin(a)
        return a

    for n in (2, 9):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_allclose(f(x), reference(x), rtol=1e-12)
    assert f.specialized_mlir(np.ones(4)).count("stablehlo.while") >= 1


# --- cond -----------------------------------------------------------------------------------------


@qjit
def classify(x: float):
    @cond(x > 10.0)
    def c():
        return 2

    @c.else_if(x > 0.0)
    def c():
        return 1

    @c.otherwise
    def c():
        return 0

    return c()


@pytest.mark.parametrize("x,expected", [(20.0, 2), (5.0, 1), (-1.0, 0), (10.0, 1)])
def test_else_if_chain(x, expected):
    assert int(classify(x)) == expected


def test_cond_without_otherwise_returning_nothing():
    @qjit
    def f(x: float):
        @cond(x > 0.0)
        def c():
            return None

        assert c() is None
        return x

    assert float(f(2.0)) == 2.0


def test_cond_branches_of_different_sizes():
    @qjit
    def f(n: int, x: float):
        @cond(x > 0)
        def c():
            return jnp.ones([n]) * x

        @c.otherwise
        def c():
            return jnp.zeros([n + 2])

        return c()

    np.testing.assert_array_equal(f(3, 2.0), np.full(3, 2.0))
    np.testing.assert_array_equal(f(3, -1.0), np.zeros(5))
    (eqn,) = [e for e in f.jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
    assert eqn.params["nimplicit_outputs"] == 1


def test_cond_in_loop_and_loop_in_cond():
    @qjit
    def f(n: int, flag: bool):
        a = jnp.ones([n])

        @for_loop(0, 6, 1)
        def loop(i, a):
            @cond(i % 2 == 0)
            def b():
                return a * 2.0

            @b.otherwise
            def b():
                return a + 1.0

            return b()

        @cond(flag)
        def c():
            @while_loop(lambda v: jnp.sum(v) < 100.0)
            def w(v):
                return v * 2.0

            return w(loop(a))

        @c.otherwise
        def c():
            return a

        return c()

    def reference(n, flag):
        a = np.ones(n)
        if not flag:
            return a
        v = a
        for i in range(6):
            v = v * 2.0 if i % 2 == 0 else v + 1.0
        while np.sum(v) < 100.0:
            v = v * 2.0
        return v

    for n, flag in [(3, True), (3, False), (1, True), (8, True)]:
        np.testing.assert_array_equal(f(n, flag), reference(n, flag))


def test_resizing_cond_inside_resizing_loop():
    # The initial size is symbolic, so both branches return symbolic sizes (which may differ);
    # with `jnp.zeros([1])` the branches would return f64[2] and f64[1]: rejected, as Catalyst
    # rejects a number in one branch that is not that number in the other.
    @qjit
    def f(n: int, m: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            @cond(i % 2 == 0)
            def b():
                return jnp.ones([a.shape[0] + 1]) * i

            @b.otherwise
            def b():
                return a

            return b()

        return loop(jnp.zeros([m]))

    def reference(n, m):
        a = np.zeros(m)
        for i in range(n):
            if i % 2 == 0:
                a = np.ones(a.shape[0] + 1) * i
        return a

    for n, m in ((0, 1), (1, 1), (5, 1), (6, 2)):
        np.testing.assert_array_equal(f(n, m), reference(n, m))


def _read_if_inside(x, i, w):
    # A branch that reads x[i] only when i is inside x: taken or not, for an empty x too.
    @cond(i < x.shape[0])
    def read():
        return x[i] * w

    @read.else_if(i < x.shape[0] + 2)
    def read():
        return w * 0.5

    @read.otherwise
    def read():
        return -w

    return read()


def _read_unless_outside(x, i, w):
    # The same guard as the otherwise branch's complement: x[i] is read when i is not outside.
    @cond(i >= x.shape[0])
    def read():
        return w

    @read.otherwise
    def read():
        return x[jnp.minimum(i, x.shape[0] - 1)] + x[i]

    return read()


def _read_if_inside_reference(x, i, w):
    return x[i] * w if i < len(x) else w * 0.5 if i < len(x) + 2 else -w


@pytest.mark.parametrize("n", [0, 1, 3])
def test_cond_branch_indexing_an_array_runs_only_when_taken(n):
    # `x[i]` of an empty x fails while tracing (JAX: "out of bounds for axis 0 with size 0"); a
    # branch that reads it only when `i < len(x)` is never taken then, and must not fail.
    x = np.arange(1.0, n + 1.0)
    first = qjit(_read_if_inside, abstracted_axes={0: "n"})
    second = qjit(_read_unless_outside, abstracted_axes={0: "n"})
    for i in range(n + 4):
        np.testing.assert_allclose(first(x, i, 3.0), _read_if_inside_reference(x, i, 3.0))
        expected = 3.0 if i >= n else x[min(i, n - 1)] + x[i]
        np.testing.assert_allclose(second(x, i, 3.0), expected)


def test_cond_branch_taken_where_it_cannot_run_is_an_index_error():
    @qjit(abstracted_axes={0: "n"})
    def read(x, i):
        @cond(i <= x.shape[0])  # off by one: x[len(x)]
        def value():
            return x[i]

        @value.otherwise
        def value():
            return 0.0

        return value()

    np.testing.assert_allclose(read(np.arange(3.0), 1), 1.0)
    with pytest.raises(IndexError):
        read(np.zeros(0), 0)  # as NumPy: x[0] of an empty x


# --- eager use outside qjit -----------------------------------------------------------------------


def test_eager_semantics_outside_qjit():
    @for_loop(0, 4, 1)
    def f(i, a):
        return a + i

    assert f(10) == 16

    @while_loop(lambda x: x < 100)
    def w(x):
        return x * 3

    assert w(1) == 243

    @cond(False)
    def c():
        return "a"

    @c.otherwise
    def c():
        return "b"

    assert c() == "b"


# --- bodies that keep their sizes through size arithmetic ----------------------------------------

# name -> (a step keeping its argument's shape through computed sizes, the data's rank)
SIZE_KEEPING_STEPS = {
    "roll": (lambda a: jnp.roll(a, 1), 1),
    "rotate by concatenation": (lambda a: jnp.concatenate([a[1:], a[:1]]), 1),
    "rotate right by concatenation": (lambda a: jnp.concatenate([a[-1:], a[:-1]]), 1),
    "edge-padded stencil": (lambda a: (lambda p: 0.5 * p[1:-1] + 0.25 * (p[:-2] + p[2:]))(jnp.pad(a, 1, mode="edge")), 1),
    "rotate rows": (lambda a: jnp.concatenate([a[:, 1:], a[:, :1]], axis=1) * 0.5, 2),
}


@pytest.mark.parametrize("step,rank", SIZE_KEEPING_STEPS.values(), ids=SIZE_KEEPING_STEPS.keys())
def test_loop_bodies_whose_sizes_are_expressions_equal_to_their_arguments(step, rank):
    # The result's size is computed (n - min(n, 1) + min(n, 1), ...), equal to n for every n.
    axes = {rank - 1: "n"}

    @qjit(abstracted_axes=axes)
    def with_for(x):
        return for_loop(0, 3, 1)(lambda i, a: step(a))(x)

    @qjit(abstracted_axes=axes)
    def with_while(x):
        return while_loop(lambda a, k: k < 3)(lambda a, k: (step(a), k + 1))(x, 0)[0]

    for n in (0, 1, 2, 5):
        if n == 0 and step is SIZE_KEEPING_STEPS["edge-padded stencil"][0]:
            continue  # JAX refuses to edge-pad an empty axis
        x = np.arange(2.0 * n).reshape(2, n) if rank == 2 else np.arange(float(n))
        expected = x
        for _ in range(3):
            expected = jax.jit(step)(expected)
        np.testing.assert_allclose(with_for(x), expected)
        np.testing.assert_allclose(with_while(x), expected)


# --- bad bodies -----------------------------------------------------------------------------------


def test_resizing_without_permission_names_loop_and_fix():
    with pytest.raises(DimensionError, match=r"grow.*argument 0.*allow_array_resizing=True"):

        @qjit
        def f(n: int):
            @for_loop(0, 3, 1)
            def grow(i, a):
                return jnp.ones([a.shape[0] + 1])

            return grow(jnp.ones([n]))


@pytest.mark.parametrize(
    "body,match",
    [
        (lambda i, a, b: a, "structure"),
        (lambda i, a, b: (a, b, a), "structure"),
        (lambda i, a, b: (a.astype(jnp.int32), b), "dtype"),
        (lambda i, a, b: (a, b[None]), "rank"),
    ],
)
def test_wrong_results_are_clear_errors(body, match):
    @qjit
    def f(n):  # not annotated: traced at the first call
        return for_loop(0, 2, 1)(body)(jnp.ones([n]), jnp.ones([n]))

    with pytest.raises((DimensionError, ControlFlowError), match=match):
        f(3)
    with pytest.raises((DimensionError, ControlFlowError)):  # every call reports it again
        f(4)


def test_bad_predicates_and_branch_structures():
    @qjit
    def non_scalar(n):
        x = jnp.ones([n])

        @cond(x > 0)
        def c():
            return 1

        @c.otherwise
        def c():
            return 0

        return c()

    with pytest.raises(ControlFlowError, match="boolean scalar predicate"):
        non_scalar(3)

    @qjit
    def mismatched(x):
        @cond(x > 0)
        def c():
            return x, x

        @c.otherwise
        def c():
            return x

        return c()

    with pytest.raises(ControlFlowError, match="same structure"):
        mismatched(1.0)

    with pytest.raises(ControlFlowError, match="otherwise"):

        @qjit
        def missing_otherwise(x: float):
            @cond(x > 0)
            def c():
                return x

            return c()


def test_zero_step_is_a_clear_value_error():
    from catalyst_lite.errors import ArgumentValueError

    with pytest.raises(ArgumentValueError, match="step must not be zero"):
        for_loop(0, 3, 0)(lambda i, a: a)(1)  # eagerly

    @qjit
    def f(step: int, x: float):
        @for_loop(0, 3, step)
        def preserved(i, a):
            return a * 2.0

        @for_loop(0, 3, step, allow_array_resizing=True)
        def resizing(i, a):
            return jnp.ones([a.shape[0] + 1]) * x

        return preserved(x), resizing(jnp.ones([1]))

    with pytest.raises(ArgumentValueError, match=r"\(preserved\): step must not be zero, and it is 0"):
        f(0, 1.0)
    preserved, resized = f(1, 1.5)  # the same object works afterwards
    assert float(preserved) == 12.0 and resized.shape == (4,)
    assert float(f(2, 1.5)[0]) == 6.0


@pytest.mark.parametrize("transform", ["none", "grad", "vmap"])
@pytest.mark.parametrize("resizing", [False, True])
def test_a_step_zero_at_run_time_names_the_loop_body_the_value_and_the_fix(transform, resizing):
    # A traced step known only at run time: the error named no function ("compiled loop").
    def f(x, s):
        @for_loop(0, 6, s - 1, allow_array_resizing=resizing)
        def accumulate(i, a):
            return a * 1.5 + i

        return jnp.sum(accumulate(x))

    def python(x, s):
        a = x
        for i in range(0, 6, s - 1):
            a = a * 1.5 + i
        return np.sum(a)

    x = {"none": np.arange(3.0), "grad": 0.5, "vmap": np.arange(3.0)}[transform]
    compiled = qjit({"none": f, "grad": jax.grad(f), "vmap": jax.vmap(f, in_axes=(0, None))}[transform])
    for s in (2, 3, -1):
        expected = {
            "none": lambda: python(x, s),
            "grad": lambda: (python(x + 1e-6, s) - python(x - 1e-6, s)) / 2e-6,
            "vmap": lambda: [python(v, s) for v in x],
        }[transform]()
        np.testing.assert_allclose(compiled(x, s), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="range"):
        python(x, 1)
    with pytest.raises(ValueError, match=r"for_loop \(accumulate\): step must not be zero, and it is 0.*"
                                         r"Pass a nonzero step"):
        compiled(x, 1)


def test_vmap_over_a_for_loop_step_names_the_unsupported_loop():
    # A step batched by jax.vmap is no constant of the program: the loop's guard of its facts
    # must not read it as one (it did, failing with an AttributeError of JAX's BatchTrace).
    @qjit
    def f(steps):
        def one(s):
            @for_loop(0, 10, s)
            def body(i, acc):
                return acc + i

            return body(0)

        return jax.vmap(one)(steps)

    with pytest.raises(ControlFlowError, match="jax.vmap of a for_loop whose bounds"):
        f(jnp.array([1, 2, 3]))


def test_control_flow_outside_a_quantum_circuit_has_no_operation():
    # Catalyst's `.operation` (the quantum operation of control flow called in a circuit): called
    # in a classical program there is none; Catalyst's words say so.
    from catalyst_lite import switch

    @cond(True)
    def branch():
        return 1

    @branch.otherwise
    def branch():
        return 0

    @switch(0)
    def case():
        return 2

    @for_loop(0, 3, 1)
    def doubled(i, x):
        """Doubles x."""
        return 2 * x

    @while_loop(lambda k: k < 4)
    def counted(k):
        return k + 1

    assert qjit(lambda: branch())() == 1 and qjit(lambda: case())() == 2
    assert qjit(lambda x: doubled(x))(1.5) == 12.0 and qjit(lambda: counted(0))() == 4
    for callable_ in (branch, case, doubled, counted):
        with pytest.raises(AttributeError, match="and thus has no associated quantum operation"):
            callable_.operation
    # Catalyst lays its phrase out on indented lines for loops; users' patterns follow it
    with pytest.raises(AttributeError, match=r"\n {16}The for_loop\(\) was not called .*,\n {16}and"):
        doubled.operation
    # a decorated loop still looks like its body, without the index it binds
    assert doubled.__name__ == "doubled" and doubled.__doc__ == "Doubles x."
    assert list(inspect.signature(doubled).parameters) == ["x"]


WEAKLY_TYPED_CARRIES = {
    # name -> (catalyst_lite program of n, the same with lax.fori_loop / lax.while_loop)
    "float_init_f32_body": (
        lambda n: for_loop(0, n, 1)(lambda i, c: c + jnp.float32(1.5))(0.0),
        lambda n: jax.lax.fori_loop(0, n, lambda i, c: c + jnp.float32(1.5), 0.0),
    ),
    "int_init_float_body": (
        lambda n: for_loop(0, n, 1)(lambda i, c: c + 1.5)(0),
        lambda n: jax.lax.fori_loop(0, n, lambda i, c: c + 1.5, 0),
    ),
    "int_init_int32_body": (
        lambda n: for_loop(0, n, 1)(lambda i, c: c + jnp.int32(i))(1),
        lambda n: jax.lax.fori_loop(0, n, lambda i, c: c + jnp.int32(i), 1),
    ),
    "pytree_with_a_strong_carry": (
        lambda n: for_loop(0, n, 1)(lambda i, c, d: (c * jnp.float32(2), d + 1))(1.0, np.int32(0)),
        lambda n: jax.lax.fori_loop(0, n, lambda i, cd: (cd[0] * jnp.float32(2), cd[1] + 1),
                                    (1.0, np.int32(0))),
    ),
    "while_counter_and_f32": (
        lambda n: while_loop(lambda i, c: i < n)(lambda i, c: (i + 1, c * jnp.float32(2)))(0, 1.0),
        lambda n: jax.lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * jnp.float32(2)),
                                     (0, 1.0)),
    ),
}


@pytest.mark.parametrize("name", WEAKLY_TYPED_CARRIES)
def test_weakly_typed_loop_inits_take_the_body_dtype_as_lax_loops_do(name):
    # A Python 0.0 or 0 starting a carry whose body returns float32 (float) raised DimensionError.
    from jax.experimental import enable_x64

    fn, reference = WEAKLY_TYPED_CARRIES[name]
    compiled = qjit(fn)
    for n in (0, 1, 4):
        with enable_x64():
            expected = jax.jit(reference)(n)
        for got, want in zip(jax.tree_util.tree_leaves(compiled(n)), jax.tree_util.tree_leaves(expected)):
            assert np.dtype(got.dtype) == np.dtype(want.dtype), (got, want)
            np.testing.assert_array_equal(got, want)
