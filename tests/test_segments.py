"""Programs that need the host run compiled: segments around host steps, resizing loops on
capacity buffers, reverse-mode loops as bounded scans (compiler/runner.py, capacity.py). Results
are compared with NumPy and jax.jit references, exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import cond, for_loop, grad, qjit, while_loop
from catalyst_lite.compiler.capacity import capacity_for
from catalyst_lite.compiler.runner import MAX_MISSES


def _append_reference(n):
    a = np.ones(1)
    for i in range(n):
        a = np.concatenate([a, a[-1:] * 0.5 + i])
    return a


@qjit
def append(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        return jnp.concatenate([a, a[-1:] * 0.5 + i])

    return step(jnp.ones([1]))


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 31, 33, 100])
def test_appending_loop_matches_numpy_at_capacity_boundaries(n):
    np.testing.assert_array_equal(append(n), _append_reference(n))


def test_appending_loop_compiles_per_capacity_not_per_size():
    for n in range(3, 40):
        append(n)
    loop = _loop_of(append)
    assert loop.supported
    # capacities 16, 32, 64 (each also with the length of a[-1:] learned: 1): not one per size
    assert 1 <= len(loop.capacities) <= 4
    assert loop.executables <= 8


@qjit
def mixed(x, n: int):
    for _ in range(20):
        x = jnp.sin(x) * 0.5 + 0.1

    @while_loop(lambda i, a: i < n, allow_array_resizing=True)
    def grow(i, a):
        return i + 1, jnp.concatenate([a, a[-1:] * 0.5])

    return grow(0, x)[1] * 2.0


def test_static_prefix_and_resizing_while_loop_run_as_segments():
    x = np.linspace(0.0, 1.0, 5)
    for n in (0, 4, 40):
        expected = jax.jit(lambda x: _mixed_reference(x, n))(x)
        np.testing.assert_array_equal(mixed(x, n), expected)
    info = mixed.inspect().last
    assert "host" in info.strategies.values()
    assert info.host_steps and info.host_steps[0] == "while_loop"


def _mixed_reference(x, n):
    for _ in range(20):
        x = jnp.sin(x) * 0.5 + 0.1
    for _ in range(n):
        x = jnp.concatenate([x, x[-1:] * 0.5])
    return x * 2.0


@qjit
def pick(flag: bool, n: int):
    a = jnp.arange(n) * 1.5

    @cond(flag)
    def b():
        return a[:2]

    @b.otherwise
    def b():
        return jnp.concatenate([a, a])

    b = b()
    return jnp.sin(b) + jnp.sum(a)


@pytest.mark.parametrize("flag", [True, False])
def test_cond_returning_different_sizes_then_static_operations(flag):
    a = np.arange(5) * 1.5
    b = a[:2] if flag else np.concatenate([a, a])
    np.testing.assert_allclose(pick(flag, 5), np.sin(b) + a.sum(), rtol=1e-15)


@qjit
def nested(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def outer(i, a):
        @for_loop(0, i, 1, allow_array_resizing=True)
        def inner(j, b):
            return jnp.concatenate([b, b[:1] + j])

        return inner(a) * 0.5

    return outer(jnp.ones([2]))


def test_nested_resizing_loops():
    a = np.ones(2)
    for i in range(6):
        for j in range(i):
            a = np.concatenate([a, a[:1] + j])
        a = a * 0.5
    np.testing.assert_array_equal(nested(6), a)


@qjit
def tail_append(n: int, m: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        return jnp.concatenate([a, a[-m:] * 0.5 + i])

    return step(jnp.ones([3]))


def test_loop_sized_by_int_arguments_stays_exact_on_repeated_calls():
    """Its sizes follow from the int arguments: the speculation of each pair of values checks
    nothing at run time, and its results stay NumPy's, whichever pair ran before."""
    for n, m in [(40, 1), (40, 2), (50, 1), (40, 1), (50, 1), (40, 2), (40, 3)] * 2:
        a = np.ones(3)
        for i in range(n):
            a = np.concatenate([a, a[-m:] * 0.5 + i])
        np.testing.assert_array_equal(tail_append(n, m), a)
    assert set(tail_append.inspect().last.speculations.values()) == {"compiled"}


@qjit
def sorted_head(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        return jnp.concatenate([a, jnp.sort(-a)[:1] + i])  # a sort along the resized axis

    return step(jnp.ones([1]))


def test_body_that_cannot_run_on_buffers_runs_per_size():
    from catalyst_lite.control_flow.loop_common import UNROLL_LIMIT

    n = UNROLL_LIMIT + 2  # a shorter loop is unrolled into one program at its int trip count
    a = np.ones(1)
    for i in range(n):
        a = np.concatenate([a, np.sort(-a)[:1] + i])
    np.testing.assert_array_equal(sorted_head(n), a)
    assert not _loop_of(sorted_head).supported


@qjit
def summed(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        # reductions and a contraction along the resized axis
        return jnp.concatenate([a, jnp.sum(a, keepdims=True) * 0.5, jnp.max(a, keepdims=True) - jnp.dot(a, a)])

    return step(jnp.ones([1]))


def test_reductions_along_a_resized_axis_run_on_buffers():
    for n in (0, 1, 4, 9, 40):  # beyond 32 steps, not unrolled
        a = np.ones(1)
        for _ in range(n):
            a = np.concatenate([a, a.sum(keepdims=True) * 0.5, a.max(keepdims=True) - a @ a])
        np.testing.assert_allclose(summed(n), a, rtol=1e-12)
    assert _loop_of(summed).supported


# Loops that keep their carried sizes but make arrays sized by the index: `jnp.ones(i)` has a new
# size every iteration, so the body runs on capacity buffers (one compilation), not per size.
@qjit
def index_sized(n: int):
    @for_loop(0, n, 1)
    def step(i, acc):
        v = jnp.arange(i, dtype=float)
        return acc + jnp.sum(jnp.ones(i)) + jnp.sum(v * v) + jnp.max(jnp.arange(i + 1)) + jnp.argmin(-jnp.arange(i + 1))

    return step(0.0)


@qjit
def while_index_sized(n: int):
    @while_loop(lambda i, acc: i < n)
    def step(i, acc):
        return i + 1, acc + jnp.prod(jnp.full(i, 2)) + jnp.any(jnp.arange(i) > 3) + jnp.all(jnp.arange(i) < 3)

    return step(0, 0)[1]


@qjit
def nested_index_sized(n: int):
    @for_loop(0, n, 1)
    def outer(i, acc):
        @for_loop(0, i, 1)  # bounded by the outer index, making arrays of both indices' sizes
        def inner(j, acc2):
            return acc2 + jnp.sum(jnp.arange(j + 1)) + jnp.sum(jnp.ones(i, dtype=int))

        return inner(acc)

    return outer(0)


def test_nested_loops_making_index_sized_arrays_run_on_buffers():
    for n in (0, 1, 2, 5, 60):
        expected = sum(sum(sum(range(j + 1)) + i for j in range(i)) for i in range(n))
        assert nested_index_sized(n) == expected
    assert _loop_of(nested_index_sized).supported


def test_loops_making_index_sized_arrays_run_on_buffers():
    for n in (0, 1, 2, 7, 100):
        expected = sum(i + sum(k * k for k in range(i)) + 2 * i for i in range(n))
        assert index_sized(n) == pytest.approx(expected, rel=1e-12)
    for n in (0, 1, 2, 7, 40):
        assert while_index_sized(n) == sum(2**i + (i > 4) + (i <= 3) for i in range(n))
    for f in (index_sized, while_index_sized):
        assert _loop_of(f).supported
        f(20)
        compiled = _loop_of(f).executables
        for n in range(21, 31):  # sizes within the capacity of n=20's run: no new compilation
            f(n)
        assert _loop_of(f).executables == compiled <= 6  # per capacity, not per iteration or size


def _grad_fori(x, n):
    return jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, n, lambda i, a: jnp.sin(a) * 0.99 + 0.01 * i, x)))(x)


@qjit
def grad_loop(x, n: int):
    def f(x):
        @for_loop(0, n, 1)
        def step(i, a):
            return jnp.sin(a) * 0.99 + 0.01 * i

        return jnp.sum(step(x))

    return grad(f)(x)


@pytest.mark.parametrize("n", [0, 1, 16, 17, 300])
def test_reverse_mode_through_traced_trip_count_equals_jax_jit(n):
    x = np.linspace(0.0, 1.0, 7)
    np.testing.assert_array_equal(grad_loop(x, n), jax.jit(_grad_fori, static_argnums=1)(x, n))


def test_int_trip_count_in_reverse_mode_is_static_as_in_jax_jit():
    x = np.linspace(0.0, 1.0, 7)
    fresh = qjit(grad_loop.original_function)
    for n in (20, 21, 20):
        np.testing.assert_array_equal(fresh(x, n), jax.jit(_grad_fori, static_argnums=1)(x, n))
    info = fresh.inspect().last
    assert info.loops == ()  # one program per trip count, no loop driven from the host
    assert info.speculations == {((), 20): "compiled", ((), 21): "compiled"}


def test_reverse_mode_loop_is_one_compiled_scan_per_bucket():
    # A trip count in an array is known only at run time (a Python int would be static, above).
    x = np.linspace(0.0, 1.0, 7)
    grad_loop(x, np.array(20))
    (before,) = grad_loop.inspect().last.loops
    for n in (21, 25, 30):  # the bucket of 32 steps
        np.testing.assert_array_equal(grad_loop(x, np.array(n)), jax.jit(_grad_fori, static_argnums=1)(x, n))
    (after,) = grad_loop.inspect().last.loops
    assert (after.kind, after.supported) == ("bounded scan", True)
    assert 32 in after.capacities and after.executables == before.executables  # no new compilation


@qjit
def grad_while(x, m: float):
    def f(x):
        @while_loop(lambda i, a: i < m)
        def step(i, a):
            return i + 1.0, jnp.sin(a) * 0.99

        return jnp.sum(step(0.0, x)[1])

    return grad(f)(x)


@pytest.mark.parametrize("m", [0.0, 7.0])
def test_reverse_mode_through_while_loop_equals_jax_jit(m):
    x = np.linspace(0.0, 1.0, 7)
    expected = jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, int(m), lambda i, a: jnp.sin(a) * 0.99, x)))(x)
    np.testing.assert_array_equal(grad_while(x, m), expected)


def test_capacity_buckets():
    assert [capacity_for(n) for n in (0, 1, 16, 17, 1000)] == [16, 16, 16, 32, 1024]


# --- speculation: the whole program compiled at the sizes its host steps found -------------------


def _speculations(f):
    return [key for key, s in f.inspect().last.speculations.items() if s == "compiled"]


def test_repeated_call_runs_one_speculative_program():
    for n in (7, 7, 7, 300, 300, 300):
        np.testing.assert_array_equal(append(n), _append_reference(n))
    info = append.inspect().last
    # One per value of n, none of whose predictions failed.
    assert all(info.speculations[(), n] == "compiled" for n in (7, 300))
    assert not info.misses.get(((), 7)) and not info.misses.get(((), 300))
    # The program's result is a jax.Array; its size was fixed by the prediction.
    assert isinstance(append(300), jax.Array) and append(300).shape == (301,)


@qjit
def until(x, limit):
    @while_loop(lambda a: a[-1] < limit, allow_array_resizing=True)
    def grow(a):
        return jnp.concatenate([a, a[-1:] + 1.0])

    return grow(x) * 2.0


def _until_reference(x, limit):
    while x[-1] < limit:
        x = np.concatenate([x, x[-1:] + 1.0])
    return x * 2.0


def test_speculation_that_misses_falls_back_and_gives_up():
    # The trip count depends on data the speculation is not keyed on: each new limit misses.
    x = np.ones(2)
    for limit in (3.0, 3.0, 10.0, 30.0, 60.0, 100.0, 100.0, 3.0):
        np.testing.assert_array_equal(until(x, limit), _until_reference(x, limit))
    misses = until.inspect().last.misses
    assert sum(misses.values()) >= 1  # (a miss leaves the replays of the run that followed it)
    assert all(m <= MAX_MISSES for m in misses.values())


def test_speculated_results_keep_bits_of_jax_jit():
    x = np.linspace(0.0, 1.0, 5)
    expected = jax.jit(lambda x: _mixed_reference(x, 4))(x)
    for _ in range(4):
        np.testing.assert_array_equal(mixed(x, 4), expected)
    assert _speculations(mixed)


def test_small_sizes_computed_in_the_body_get_capacities_of_their_own():
    append(40)
    assert 1 in _loop_of(append).learned  # the length of a[-1:]


@qjit
def branchy(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        @cond(i % 3 == 0)
        def b():
            return a * 2.0

        @b.otherwise
        def b():
            return a + 1.0

        return jnp.concatenate([a, b()[-1:]])

    return step(jnp.ones([1]))


@qjit
def indexed(n: int, idx):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        return jnp.concatenate([a, a[idx] * 0.5 + i, jnp.take(a, jnp.array([0, -1, 7]))])

    return step(jnp.ones([3]))


def _loop_of(f):
    """The first loop of ``f``'s last program that ran on capacity buffers."""
    return next(loop for loop in f.inspect().last.loops if loop.kind == "capacity buffers")


def test_cond_and_indexing_gathers_run_on_buffers():
    for n in (0, 1, 5, 40):
        a = np.ones(1)
        for i in range(n):
            a = np.concatenate([a, (a * 2.0 if i % 3 == 0 else a + 1.0)[-1:]])
        np.testing.assert_array_equal(branchy(n), a)
    idx = np.array([0, 2, 1])
    for n in (0, 1, 6, 20, 40):  # beyond 32 steps, not unrolled
        a = np.ones(3)
        for i in range(n):
            taken = np.array([a[k] if k < len(a) else np.nan for k in (0, len(a) - 1, 7)])  # jnp.take fills
            a = np.concatenate([a, a[idx] * 0.5 + i, taken])
        np.testing.assert_array_equal(indexed(n, idx), a)
    assert _loop_of(branchy).supported and _loop_of(indexed).supported
