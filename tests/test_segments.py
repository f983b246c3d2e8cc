"""Programs that need the host run compiled: segments around host steps, resizing loops on
capacity buffers, reverse-mode loops as bounded scans (compiler/segments.py, capacity.py,
bounded_scan.py). Results are compared with NumPy and jax.jit references, exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import cond, for_loop, grad, qjit, while_loop
from catalyst_lite.compiler import bounded_scan, capacity
from catalyst_lite.compiler.segments import SegmentedProgram


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
    (body,) = [eqn for eqn in append.jaxpr.jaxpr.eqns if eqn.primitive.name == "for_loop"]
    loop = capacity._loops[id(body.params["body_jaxpr"].jaxpr)][1]
    assert not loop.unmaskable
    assert 1 <= len(loop._compiled) <= 4  # capacities 16, 32, 64: not one per size


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
    runner = mixed._last.runner
    plans = list(runner._segmented.values())
    assert plans and all(isinstance(p, SegmentedProgram) for p in plans)
    assert plans[0].segmentation.step.primitive.name == "while_loop"


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
def summed(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def step(i, a):
        return jnp.concatenate([a, jnp.sum(a, keepdims=True)])  # a reduction along the resized axis

    return step(jnp.ones([1]))


def test_body_that_cannot_run_on_buffers_runs_per_size():
    a = np.ones(1)
    for _ in range(5):
        a = np.concatenate([a, a.sum(keepdims=True)])
    np.testing.assert_array_equal(summed(5), a)


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


def test_reverse_mode_loop_is_one_compiled_scan_per_bucket():
    x = np.linspace(0.0, 1.0, 7)
    grad_loop(x, 20)
    scans = [s for body, s in bounded_scan._scans.values() if s.predicate is None and not s.unsupported]
    before = [len(s._compiled) for s in scans]
    for n in (21, 25, 30):  # the bucket of 32 steps
        np.testing.assert_array_equal(grad_loop(x, n), jax.jit(_grad_fori, static_argnums=1)(x, n))
    assert scans and [len(s._compiled) for s in scans] == before


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
    assert [capacity.capacity_for(n) for n in (0, 1, 16, 17, 1000)] == [16, 16, 16, 32, 1024]
