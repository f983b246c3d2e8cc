"""Tiered compilation (``qjit(tiered_compilation=True)``, see ``compiler/tiers.py``): a new size
runs a fast-tier executable at once, the optimized one replaces it after the size's second run.
(XLA's tiers: the size-generic one, tested in test_size_generic.py, is off here.)
Correctness only; the speed is measured by ``python -m benchmarks``."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import enable_x64

from catalyst_lite import QJIT, for_loop, qjit
from catalyst_lite.compiler.tiers import TIERED_ENV_VAR


def _specializations(f):
    """The compiled specializations of ``f``'s one traced program."""
    (program,) = f._traced_programs()
    return [s for s in program.runner._executables.values() if s is not None]


def _circuit(**options):
    @qjit(size_generic=False, **options)
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @for_loop(0, 10, 1)
        def loop(i, a):
            return a * 0.5 + a0

        return a0 + loop(a0)

    return circuit


def _scaled(**options):
    @qjit(abstracted_axes={0: "n"}, size_generic=False, **options)
    def scaled(x):
        return jnp.sin(x) * 2.0 + x

    return scaled


@pytest.mark.parametrize("build, args", [(_circuit, (1000,)), (_scaled, (np.linspace(0.0, 1.0, 1001),))])
def test_fast_tier_results_equal_the_optimized_and_untiered_ones(build, args):
    tiered, plain = build(tiered_compilation=True), build(tiered_compilation=False)
    fast = tiered(*args)
    (spec,) = _specializations(tiered)
    assert not spec.optimized
    tiered(*args)  # the second run starts the optimized compilation
    QJIT.wait_for_compilations()
    assert spec.optimized
    optimized = tiered(*args)
    np.testing.assert_array_equal(fast, optimized)
    np.testing.assert_array_equal(optimized, plain(*args))


def test_a_sum_may_differ_in_the_last_bits_at_the_fast_tier_only():
    """XLA rounds a reduction differently at optimization level 0 on some sizes: close, and
    exactly the untiered result once optimized."""

    def total(**options):
        return qjit(abstracted_axes={0: "n"}, size_generic=False, **options)(lambda x: jnp.sum(x * x))

    tiered, plain = total(tiered_compilation=True), total(tiered_compilation=False)
    for n in (1000, 1037, 1074, 1111):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_allclose(tiered(x), plain(x), rtol=1e-13)
        tiered(x)
    QJIT.wait_for_compilations()
    for n in (1000, 1037, 1074, 1111):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_array_equal(tiered(x), plain(x))


def test_sizes_run_once_are_not_optimized():
    f = _scaled(tiered_compilation=True)
    for n in (3, 4, 5):
        f(np.ones(n))
    QJIT.wait_for_compilations()
    assert [s.optimized for s in _specializations(f)] == [False, False, False]


def test_disabled_tiering_compiles_optimized_at_once():
    f = _scaled(tiered_compilation=False)
    f(np.ones(3))
    assert [s.optimized for s in _specializations(f)] == [True]


def test_the_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setenv(TIERED_ENV_VAR, "1")
    f = _scaled()
    f(np.ones(3))
    assert [s.tiered for s in _specializations(f)] == [True]
    monkeypatch.setenv(TIERED_ENV_VAR, "0")
    g = _scaled()
    g(np.ones(3))
    assert [s.tiered for s in _specializations(g)] == [False]


def test_tiered_programs_compose_with_jax_transformations():
    f = _scaled(tiered_compilation=True)
    x = np.linspace(0.0, 1.0, 5)
    f(x), f(x)
    QJIT.wait_for_compilations()
    with enable_x64():  # the outer transformations in catalyst_lite's 64-bit types
        expected = jax.grad(lambda x: jnp.sum(jnp.sin(x) * 2.0 + x))(x)
        np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(f(x)))(x), expected)
        np.testing.assert_array_equal(jax.jit(f)(x), f(x))


def test_threads_calling_new_and_repeated_sizes_get_correct_results():
    f = _scaled(tiered_compilation=True)
    sizes = [3 + k % 6 for k in range(24)]
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            x = np.linspace(0.0, 1.0, sizes[k])
            results[k] = [np.asarray(f(x)) for _ in range(3)]
        except BaseException as e:  # reported below, with the thread's traceback lost otherwise
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    QJIT.wait_for_compilations()
    assert not errors
    for k, outs in results.items():
        x = np.linspace(0.0, 1.0, sizes[k])
        for out in outs:
            np.testing.assert_allclose(out, np.sin(x) * 2.0 + x, rtol=1e-15)
    assert all(s.optimized for s in _specializations(f))
