"""The shortcuts taken for speed give the results of the general path (speed itself is measured
by ``python -m benchmarks``, never here)."""

import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import for_loop, qjit, while_loop
from catalyst_lite.errors import ArgumentValueError, DimensionError, UnsupportedOperationError


def _strategies(f):
    """How each size signature of ``f``'s one traced program runs ("xla" or "host")."""
    (program,) = f.inspect().programs
    return set(program.strategies.values())


def test_repeated_calls_take_the_validated_path_with_the_same_results():
    @qjit(abstracted_axes={0: "n"})
    def f(x, k: int):
        return x * k + 1.0

    x = np.arange(4.0)
    first = f(x, 2)
    assert f.inspect().validated_calls == 1
    np.testing.assert_array_equal(f(x, 2), first)
    np.testing.assert_array_equal(f(x, 3), x * 3 + 1.0)  # a new value of a number: same key
    np.testing.assert_array_equal(f(np.arange(6.0), 3), np.arange(6.0) * 3 + 1.0)
    assert f.inspect().validated_calls == 2  # a new shape is validated once


def test_a_bad_size_after_a_validated_call_is_still_named():
    @qjit
    def f(n: int):
        return jnp.ones((n - 1,))

    assert f(3).shape == (2,)
    with pytest.raises(ArgumentValueError, match="'n'=0"):
        f(0)


def test_converted_or_structured_arguments_are_checked_every_time():
    @qjit
    def f(x: float):
        return x * 2.0

    assert float(f(2)) == 4.0  # an int for a float annotation is converted: not a validated call
    assert f.inspect().validated_calls == 0

    @qjit
    def g(pair):
        return pair[0] + pair[1]

    assert float(g((1.0, 2.0))) == 3.0
    assert g.inspect().validated_calls == 0


def test_sizes_computed_with_comparisons_are_static():
    """``a[:1]`` computes its length with ``min``, comparisons and ``select_n``: folded, so the
    loop compiles into one program instead of running host-driven."""

    @qjit
    def f(sz: int):
        @for_loop(0, 3, 1)
        def loop(i, a):
            return a * 0.5 + (a[:1] + i)

        return loop(jnp.ones([sz]))

    expected = np.ones(4)
    for i in range(3):
        expected = expected * 0.5 + (expected[:1] + i)
    np.testing.assert_array_equal(f(4), expected)
    assert _strategies(f) == {"xla"}


def _appending(n_steps: int):
    @qjit
    def grow(sz: int):
        @for_loop(0, n_steps, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.concatenate([a * 0.5, a[:1] + i])

        return loop(jnp.ones([sz]))

    return grow


def _appending_numpy(sz: int, n_steps: int) -> np.ndarray:
    a = np.ones(sz)
    for i in range(n_steps):
        a = np.concatenate([a * 0.5, a[:1] + i])
    return a


@pytest.mark.parametrize("n_steps", [0, 5, 40])
def test_short_resizing_loops_are_unrolled_with_the_same_results(n_steps):
    from catalyst_lite.control_flow.loop_common import UNROLL_LIMIT

    grow = _appending(n_steps)
    np.testing.assert_array_equal(grow(3), _appending_numpy(3, n_steps))
    staged = _strategies(grow) == {"xla"}
    assert staged == (n_steps <= UNROLL_LIMIT)  # a long loop stays host-driven


@pytest.mark.parametrize("n_steps", [0, 5, 40])
def test_short_resizing_while_loops_of_a_known_trip_count_are_unrolled(n_steps):
    """A counter against a bound known when the program is staged: the predicate is known at
    every iteration, so a short loop is one program, as a for_loop of known bounds is."""
    from catalyst_lite.control_flow.loop_common import UNROLL_LIMIT

    @qjit
    def grow(x):
        @while_loop(lambda i, a: i < n_steps, allow_array_resizing=True)
        def loop(i, a):
            return i + 1, jnp.concatenate([a * 0.5, a[:1] + i])

        return loop(0, x)

    count, a = grow(jnp.ones(3))
    np.testing.assert_array_equal(a, _appending_numpy(3, n_steps))
    assert int(count) == n_steps
    staged = _strategies(grow) == {"xla"}
    assert staged == (n_steps <= UNROLL_LIMIT)  # a long loop stays host-driven


@pytest.mark.parametrize("x", [[1.0], [3.0, -1.0], [40.0, 70.0, 1.0]])
def test_a_resizing_loop_whose_size_depends_on_data_stays_host_driven(x):
    """How often the loop doubles its array depends on the values: no program of static shapes
    computes it, so it runs host-driven (each body compiled for the sizes it meets), with
    NumPy's results."""

    @qjit(abstracted_axes={0: "n"})
    def grow(x):
        @while_loop(lambda a: jnp.sum(a) < 100.0, allow_array_resizing=True)
        def loop(a):
            return jnp.concatenate([a, a * 2.0])

        return loop(x) + 1.0

    a = np.array(x)
    while a.sum() < 100.0:
        a = np.concatenate([a, a * 2.0])
    np.testing.assert_array_equal(grow(np.array(x)), a + 1.0)
    assert "host" in _strategies(grow)  # host-driven, not one executable
    with pytest.raises(UnsupportedOperationError, match="host-driven"):
        grow.specialized_mlir(np.array(x))


def test_a_loop_that_keeps_sizes_refuses_a_body_that_changes_them():
    with pytest.raises(DimensionError, match="allow_array_resizing"):

        @qjit
        def g(n: int):
            @for_loop(0, 3, 1)
            def loop(i, a):
                return jnp.ones([a.shape[0] + 1])

            return loop(jnp.ones([n]))


def test_defaults_are_filled_in_on_every_call():
    @qjit
    def f(x, scale=2.0):
        return x * scale

    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x), x * 2.0)
    np.testing.assert_array_equal(f(x), x * 2.0)
    np.testing.assert_array_equal(f(x, 3.0), x * 3.0)


def test_calls_the_dispatcher_runs_by_itself_give_jax_jit_results():
    """Repeated calls of every argument kind (arrays, NumPy arrays, pytrees, several arguments,
    Python scalars) run on the function's C++ dispatcher: jax.jit's results, and other shapes,
    dtypes, structures and transformations still take the checked path."""
    import jax

    def leaves_plus_one(tree):
        return jax.tree_util.tree_map(lambda a: a * 2.0 + 1.0, tree)

    f, reference = qjit(leaves_plus_one), jax.jit(leaves_plus_one)
    tree = {"a": jnp.arange(3.0), "b": [np.ones(2), 4.0]}
    calls = [(jnp.arange(3.0),), (np.arange(3.0),), (tree,), (2.5,), (3,),
             (np.arange(4, dtype=np.float32),), ({"a": jnp.arange(5.0)},)]
    for args in calls * 3:  # the first round traces, the later ones run on the dispatcher
        for got, want in zip(jax.tree_util.tree_leaves(f(*args)), jax.tree_util.tree_leaves(reference(*args))):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(f(x)))(jnp.arange(3.0)), 2.0 * np.ones(3))

    g = qjit(lambda a, b, c, d, e: a + b * c - d / e)
    args = [jnp.arange(1.0, 4.0) + k for k in range(5)]
    for _ in range(3):
        np.testing.assert_array_equal(g(*args), jax.jit(lambda a, b, c, d, e: a + b * c - d / e)(*args))

    @qjit
    def outer(x):
        return g(x, x, x, x, x) * 2.0  # inlined while outer is traced, though g has dispatch data

    np.testing.assert_array_equal(outer(args[0]), (args[0] + args[0] ** 2 - 1.0) * 2.0)


def test_int_arguments_that_set_sizes_or_trip_counts_dispatch_by_value():
    """A program that reads Python int arguments (a traced trip count of a resizing loop, a
    size) runs, for repeated values, on a dispatcher that takes them by value, as jax.jit's
    static arguments: each value its own results, other argument types the checked path."""

    @qjit
    def append(x, n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.concatenate([a, a[-1:] * 0.5 + i])

        return loop(x)

    @qjit
    def zeros_plus(x, n: int):
        return jnp.zeros(n) + x

    def append_numpy(x, n):
        a = np.asarray(x)
        for i in range(n):
            a = np.concatenate([a, a[-1:] * 0.5 + i])
        return a

    x = jnp.ones(2)
    for n in (3, 4, 3, 4, 0, 3, 4, 4, 0):  # each value is traced, speculated, then dispatched
        np.testing.assert_array_equal(append(x, n), append_numpy(x, n))
        np.testing.assert_array_equal(zeros_plus(2.5, n), np.zeros(n) + 2.5)
    np.testing.assert_array_equal(append(jnp.ones(3), 3), append_numpy(np.ones(3), 3))  # another shape
    np.testing.assert_array_equal(append(x, n=3), append_numpy(x, 3))  # a keyword: the checked path
    append.clear_cache()
    np.testing.assert_array_equal(append(x, 4), append_numpy(x, 4))


def test_the_dispatcher_forgets_what_clear_cache_and_eviction_drop():
    f = qjit(lambda x: x * 2.0 + jnp.sum(x), abstracted_axes={0: "n"}, size_generic=False, cache_size=2)
    for n in (1, 2, 1, 2, 3, 1, 3, 2):  # full from the second size on: evictions, recompilations
        x = np.arange(float(n))
        np.testing.assert_array_equal(f(jnp.asarray(x)), x * 2.0 + x.sum())
    assert f.cache_info().executables == 2
    f.clear_cache()
    np.testing.assert_array_equal(f(jnp.arange(3.0)), np.arange(3.0) * 2.0 + 3.0)
    assert f.cache_info().executables == 1
