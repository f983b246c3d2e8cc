"""The user's Python on sizes of abstracted axes behaves as under ``jax.jit``, where they are numbers.

``if x.shape[0] > 0:``, ``if x.size:``, ``while y.shape[0] > 2:`` are decided as JAX's own shape
logic's questions are: an assumption recorded as a fact of the program, checked at each call (a
call that breaks one gets a program traced for its sizes). ``len(x)``, ``range(x.shape[0])`` and
``int(x.shape[0])`` need the size as a Python int (``float()``, ``math.sqrt()`` and NumPy on a size
as a Python number, ``[0.0] * n``, a dict key or set member): the call's sizes are then constants
of the trace, as under ``jax.jit``. Questions about integer *arguments* (``if k > 1:``) keep JAX's error,
as under ``jax.jit``. Every program is compared with ``jax.jit`` at sizes 0, 1 and more.
"""

from __future__ import annotations

import functools
import math
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import qjit
from catalyst_lite.errors import ControlFlowError


def _diff_unless_short(x):
    if x.shape[0] > 0:
        return jnp.diff(x) if x.shape[0] > 1 else x * 2
    return x


def _halve_while_long(x):
    y = x
    while y.shape[0] > 2:
        y = y[::2]
    return y


def _sum_if_not_empty(x):
    if x.size:
        return x.sum()
    return jnp.float64(-1)


def _pairs_if_even(x):
    if x.shape[0] % 2 == 0:
        return x.reshape(2, -1).sum(0)
    return x


def _first_or_zero(x):
    if len(x) == 0:
        return jnp.zeros(1)
    return x[:1]


def _weighted_by_python_loop(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc = acc + x[i] * i
    return acc


def _int_of_size(x):
    return jnp.zeros(int(x.shape[0]) + 1), float(len(x))


def _float_math_and_numpy_of_size(x):
    n = x.shape[0]
    return x * float(n) + math.sqrt(n) + np.sqrt(n) + np.log1p(x.size), complex(n).real


_WEIGHTS = {1: 10.0, 5: 50.0}


def _numpy_arrays_lists_and_dicts_of_size(x):
    # NumPy replaces the error a size raises with its own; a dict or set hashes the size.
    n = x.shape[0]
    ramp = np.zeros(n) + np.arange(n) * 0.5
    return x * jnp.asarray(ramp) + jnp.array([1.0] * n + [2.0]).sum(), _WEIGHTS.get(n, -1.0), float(n in {0, 2})


def _float_arithmetic_on_size(x):
    # `n / 2`, `n * 0.5` are numbers under jax.jit: a branch, a size and aranges computed through floats
    n = x.shape[0]
    half = jnp.ones(int(n * 0.5)) if n / 2 > 1 else jnp.zeros(1)
    scale = np.sqrt(n / 2) + np.log(n + 1.0)
    return x * jnp.arange(n * 1.0) * scale + jnp.arange(1.0, n + 1), half, jnp.arange(0, n, 0.5)


def _size_as_text(x):
    # `str()` and f-strings of a size are its digits, as under jax.jit (a dict key, a number parsed);
    # `complex(n, 1)` is a number too
    n = x.shape[0]
    return x * {"8": 2.0}.get(str(n), 1.0), float(int(f"{n}{x.size:02d}")), complex(n, 1) * 2


def _integer_protocols_of_size(x):
    # What code checks before using a size as an int (isinstance(n, int) is False for a symbolic
    # size, as for jax.export's symbolic dimensions): operator.index, math.prod of a shape, range.
    n, square = x.shape[0], jnp.outer(x, x)
    count = operator.index(n) + math.prod(square.shape) + sum(range(0, n, 2)) + divmod(n, 3)[1]
    return x * count, jnp.zeros(math.prod(x.shape) + 1), float(hasattr(n, "__index__"))


PROGRAMS = [_diff_unless_short, _halve_while_long, _sum_if_not_empty, _pairs_if_even, _first_or_zero,
            _weighted_by_python_loop, _int_of_size, _float_math_and_numpy_of_size,
            _numpy_arrays_lists_and_dicts_of_size, _float_arithmetic_on_size, _size_as_text,
            _integer_protocols_of_size]


def assert_same_as_jax_jit(got, expected):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert np.asarray(g).dtype == np.asarray(e).dtype and np.shape(g) == np.shape(e)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12)


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda fn: fn.__name__)
def test_python_on_axis_sizes_matches_jax_jit(fn):
    compiled, reference = qjit(fn, abstracted_axes={0: "n"}), jax.jit(fn)
    for n in (0, 1, 2, 5, 0, 3, 8):
        x = jnp.asarray(np.random.default_rng(n).normal(size=n))
        assert_same_as_jax_jit(compiled(x), reference(x))


def test_comparison_of_two_abstracted_axes_is_decided_per_call():
    def f(x, y):
        if x.shape[0] > y.shape[0]:
            return x[: y.shape[0]] + y
        return x + y[: x.shape[0]]

    compiled = qjit(f, abstracted_axes=({0: "n"}, {0: "m"}))
    for n, m in [(3, 2), (2, 3), (2, 2), (0, 1), (4, 1)]:
        x, y = jnp.arange(float(n)), jnp.arange(float(m)) * 10
        assert_same_as_jax_jit(compiled(x, y), jax.jit(f)(x, y))


def test_a_decision_is_a_fact_shared_by_the_sizes_it_holds_for():
    """``if x.shape[0] > 0`` is decided once for every non-empty length: no trace per size."""
    traces = []

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        traces.append(None)
        if x.shape[0] > 0:
            return x * 2
        return x - 1

    for n in (3, 4, 7, 1):
        np.testing.assert_allclose(f(jnp.ones(n)), 2 * np.ones(n))
    assert len(traces) == 1
    assert f(jnp.ones(0)).shape == (0,)
    assert len(traces) == 2


def test_integer_arguments_keep_jax_jit_errors():
    def branch(x, k):
        if k > 1:
            return x
        return -x

    def loop(x, k):
        for _ in range(k):
            x = x + 1
        return x

    def scale(x, k):
        return x * math.sqrt(k)

    def repeat(x, k):
        return x * jnp.array([1.0] * k).sum()

    for fn, jax_error in [(branch, jax.errors.TracerBoolConversionError),
                          (loop, jax.errors.TracerIntegerConversionError),
                          (scale, jax.errors.ConcretizationTypeError),
                          (repeat, TypeError)]:
        with pytest.raises(jax_error):
            jax.jit(fn)(jnp.ones(3), 2)
        with pytest.raises(ControlFlowError) as raised:
            qjit(fn, abstracted_axes={0: "n"})(jnp.ones(3), 2)
        assert isinstance(raised.value, jax_error)


def test_an_integer_argument_as_a_dict_key_is_an_error_not_a_miss():
    """Hashed by identity it was never found: 1.0 whatever k. (jax.jit refuses to hash a tracer,
    unless PennyLane is imported: PennyLane makes JAX's tracers hashable by identity.)"""

    def lookup(x, k):
        return x * {2: 3.0}.get(k, 1.0)

    with pytest.raises(ControlFlowError, match="static argument") as raised:
        qjit(lookup, abstracted_axes={0: "n"})(jnp.ones(3), 2)
    assert isinstance(raised.value, TypeError)
    np.testing.assert_array_equal(qjit(lookup, static_argnums=1)(jnp.ones(3), 2), np.full(3, 3.0))


def test_sizes_passed_to_static_arguments_of_jax_jit_helpers_stay_symbolic():
    """JAX hashes a jax.jit helper's static arguments in its own code: by identity, so that a size
    (of an axis, or an integer argument) keeps one program for every call."""

    @functools.partial(jax.jit, static_argnums=1)
    def padded(x, k):
        return jnp.concatenate([x, jnp.zeros(k)])

    def f(x, k):
        return padded(x, x.shape[0]), padded(x, k)

    compiled = qjit(f, abstracted_axes={0: "n"})
    for n, k in [(3, 1), (0, 2), (5, 0), (1, 4)]:
        x = jnp.arange(float(n))
        assert_same_as_jax_jit(compiled(x, k), jax.jit(f, static_argnums=1)(x, k))
    assert len(compiled.inspect().programs) == 1


def test_data_dependent_branch_keeps_jax_jit_error():
    def f(x):
        if x.shape[0] + x.sum() > 0:
            return x
        return -x

    with pytest.raises(ControlFlowError, match="catalyst_lite.cond"):
        qjit(f, abstracted_axes={0: "n"})(jnp.ones(3))


def test_numpy_on_an_integer_argument_or_loop_index_keeps_jax_jit_error():
    # NumPy math on an integer value (not a size of an abstracted axis) is JAX's
    # TracerArrayConversionError, under jax.jit and here; NumPy shape arithmetic on sizes works.
    from catalyst_lite import for_loop

    def root(x, k):
        return x * np.sqrt(k)

    def indexed_roots(x, k):
        return jax.lax.fori_loop(0, k, lambda i, s: s + np.sqrt(i), x)

    def catalyst_indexed_roots(x, k):
        return for_loop(0, k, 1)(lambda i, s: s + np.sqrt(i))(x)

    for fn in (root, indexed_roots):
        with pytest.raises(jax.errors.TracerArrayConversionError):
            jax.jit(fn)(jnp.ones(3), 2)
    for fn in (root, indexed_roots, catalyst_indexed_roots):
        with pytest.raises(jax.errors.TracerArrayConversionError):
            qjit(fn)(jnp.ones(3), 2)

    @qjit
    def flat(k: int):
        return jnp.zeros(np.prod(jnp.ones((k, 2)).shape))

    assert flat(3).shape == (6,)
