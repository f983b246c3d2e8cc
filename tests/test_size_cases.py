"""Sizes where ``jax.jit`` works must work: each call's sizes pick (or get) a program valid for them.

A trace decides JAX's comparisons of symbolic sizes at generic sizes; each decision is a fact of
the program (``n - 1 >= 0``). A call whose sizes break a fact gets a program traced for them,
either still symbolic (decided at the call's sizes, shared by every call it holds for) or, where
JAX's own path differs for static shapes, with the sizes as constants. Results are compared with
``jax.jit`` at the same, static, sizes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import for_loop, qjit
from catalyst_lite.errors import (
    ArgumentOverflowError,
    ArgumentTypeError,
    IncompatibleSizesError,
    SizeAssumptionError,
    UnsupportedOperationError,
)


def vec(n: int) -> np.ndarray:
    return np.arange(n) * 0.5 - 1.0


def assert_like(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# --- A call that breaks a fact gets a program traced for its sizes ----------------------------------

# name -> (function of a vector with a symbolic length, the lengths at which JAX decides otherwise)
BROKEN_AT_SMALL_SIZES = {
    "x[::2]": (lambda x: x[::2], (0,)),
    "x[::-1]": (lambda x: x[::-1], (0,)),
    "x[:-1]": (lambda x: x[:-1], (0,)),
    "x[1:-1]": (lambda x: x[1:-1], (0, 1)),
    "jnp.diff": (jnp.diff, (0,)),
    "jnp.insert": (lambda x: jnp.insert(x, 1, 5.0), (0,)),
    "jnp.roll": (lambda x: jnp.roll(x, 1), (0, 1)),
    "jnp.linspace(0, 1, n)": (lambda x: jnp.linspace(0.0, 1.0, x.shape[0]), (0, 1)),
}


@pytest.mark.parametrize("name", BROKEN_AT_SMALL_SIZES)
def test_sizes_that_break_a_fact_get_their_own_program(name):
    fn, small = BROKEN_AT_SMALL_SIZES[name]
    compiled = qjit(fn, abstracted_axes={0: "n"})
    assert_like(compiled(vec(5)), jax.jit(fn)(vec(5)))  # the generic program
    (generic,) = compiled.inspect().programs
    assert len(generic.facts), "the generic program holds for large sizes only"
    for n in small:
        assert_like(compiled(vec(n)), jax.jit(fn)(vec(n)))
    programs = [p.jaxpr for p in compiled.inspect().programs]
    assert programs[0] is generic.jaxpr and len(programs) <= 1 + len(small)
    for n in (7, 2, *small):  # later calls pick the program valid for their sizes: no new trace
        assert_like(compiled(vec(n)), jax.jit(fn)(vec(n)))
    assert all(a is b for a, b in zip([p.jaxpr for p in compiled.inspect().programs], programs, strict=True))


def test_a_program_traced_for_one_call_serves_every_call_its_facts_hold_for():
    """``jnp.arange(n)`` traced for ``n = -3`` is empty for every negative ``n``, as in NumPy."""
    arange = qjit(lambda n: jnp.arange(n) * 2)
    assert arange(4).tolist() == [0, 2, 4, 6]
    for n in (-3, -1, -10):
        assert arange(n).tolist() == [] and arange(n).dtype == np.arange(n).dtype
    assert len(arange.inspect().programs) == 2  # the generic one, and one for every n < 0
    assert arange(2).tolist() == [0, 2]  # the generic program again


def test_a_negative_slice_bound_counts_from_the_end_as_in_numpy():
    take = qjit(lambda x, k: x[:k], abstracted_axes=({0: "n"}, None))
    x = vec(5)
    for k in (3, 9, -1, -2, 0):
        np.testing.assert_array_equal(take(x, k), x[:k])
    assert len(take.inspect().programs) <= 3


def test_repeated_calls_check_facts_about_integer_arguments():
    """The fast path of repeated calls still picks the program for the integer arguments' values."""
    ramp = qjit(lambda n: jnp.arange(n) * 0.5)
    for n in (3, -2, 3, -2, 4, 0):
        np.testing.assert_array_equal(ramp(n), np.arange(n) * 0.5)


# name -> a function of a size JAX refuses when large (at generic sizes) and accepts when small
REFUSED_AT_LARGE_SIZES = {
    "jax.random.choice(replace=False)": lambda n: jax.random.choice(jax.random.key(0), 10, (n,), replace=False),
    "jax.random.choice of an array": lambda n: jax.random.choice(
        jax.random.key(1), jnp.arange(10.0) ** 2, (n,), replace=False
    ),
}


@pytest.mark.parametrize("name", REFUSED_AT_LARGE_SIZES)
def test_jax_refusing_generic_sizes_still_runs_the_sizes_it_accepts(name):
    # `n > 10` raises in JAX's code at generic (large) sizes: each call's sizes decide instead, and
    # a call JAX refuses (n = 11) raises jax.jit's error.
    fn = REFUSED_AT_LARGE_SIZES[name]
    compiled = qjit(fn)
    for n in (3, 0, 10, 1):
        assert_like(compiled(n), jax.jit(fn, static_argnums=0)(n))
    with pytest.raises(ValueError, match="Cannot take a larger sample"):
        compiled(11)
    assert_like(compiled(4), jax.jit(fn, static_argnums=0)(4))


def test_indexing_a_slice_whose_length_is_zero_only_at_generic_sizes():
    """``x[k:]`` of a 4-element ``x`` is empty at generic (large) ``k``, so JAX's bounds check of
    ``[i]`` raised ``IndexError`` for every ``k``: each call's sizes decide instead (NumPy's values),
    and an index that is out of bounds at the call's sizes is still JAX's ``IndexError``."""
    x = np.arange(4.0)
    pick = qjit(lambda x, k, i: x[k:][i])
    ends = qjit(lambda x, k: x[k:][-1] + x[k:k + 3][0])
    for k, i in ((1, 0), (2, 1), (0, 3), (3, 0)):
        assert_like(pick(x, k, i), x[k:][i])
    for k in (0, 1, 3):
        assert_like(ends(x, k), x[k:][-1] + x[k:k + 3][0])
    with pytest.raises(IndexError):
        ends(x, 4)


@pytest.mark.parametrize("fn", [
    lambda x, y: y[int(x.shape[0]) - 3] * jnp.ones(int(x.shape[0])),  # traced at static sizes
    lambda x, y: jnp.sum(x + y[1:]) + y[0],  # broadcast of n with m - 1 (n = 1), then y[0]
    lambda x, y: y[0] + (x + y[: x.shape[0]]),
])
def test_an_index_into_an_empty_axis_is_jax_jits_index_error_on_every_path(fn):
    """JAX refuses ``y[0]`` of an empty ``y`` with ``IndexError`` at traces of the call's sizes, with
    symbolic sizes or static ones (one definition of what JAX refusing sizes raises)."""
    compiled = qjit(fn, abstracted_axes=({0: "n"}, {0: "m"}))
    for n, m in ((3, 4), (1, 0), (3, 0), (1, 1), (1, 3)):
        x, y = vec(n), vec(m) + 1.0
        try:
            expected = jax.jit(fn)(x, y)
        except (TypeError, IndexError) as err:
            with pytest.raises(type(err)):
                compiled(x, y)
        else:
            assert_like(compiled(x, y), expected)


STATIC_INDEX_PROGRAMS = {
    "set": lambda x: x.at[0].set(5.0),
    "add_last": lambda x: x.at[-1].add(2.0),
    "set_drop": lambda x: x.at[4].set(1.0, mode="drop"),
    "get_fill": lambda x: x.at[0].get(mode="fill", fill_value=7.0),
    "zeros_set": lambda x: jnp.zeros(x.shape[0]).at[0].set(5.0) + x,
    "column": lambda x: jnp.outer(jnp.ones(2), x).at[:, 0].multiply(3.0),
    "take": lambda x: jnp.take(x, jnp.array([0, 1]), mode="clip"),
    "read": lambda x: x[-1] * 2.0 + jnp.outer(jnp.ones(2), x)[:, 0],
}


def _like_jax_jit(compiled, fn, *args):
    try:
        expected = jax.jit(fn)(*args)
    except IndexError:
        with pytest.raises(IndexError):
            compiled(*args)
    else:
        assert_like(compiled(*args), expected)


@pytest.mark.parametrize("name", STATIC_INDEX_PROGRAMS)
def test_a_static_index_into_an_axis_empty_at_run_time_is_jax_jits(name):
    """``x.at[0].set(5.)`` of a symbolic ``n`` that is 0 at a call: JAX refuses an index into an axis
    it knows is empty (IndexError); the generic program's scatter gave ``[]``. Only such an index
    makes a program depend on the size being 0: it is traced again only for a call where it is."""
    traces = []
    fn = STATIC_INDEX_PROGRAMS[name]
    compiled = qjit(lambda x: (traces.append(1), fn(x))[1], abstracted_axes={0: "n"})
    for n in (3, 1, 5):
        _like_jax_jit(compiled, fn, vec(n))
    assert len(traces) == 1
    for n in (0, 4, 0):
        _like_jax_jit(compiled, fn, vec(n))


@pytest.mark.parametrize("update", [lambda a: a.at[0].set(5.0), lambda a: a.at[-1].add(1.0) * 2.0])
def test_a_static_index_into_an_axis_a_loop_emptied_is_jax_jits(update):
    """A length computed by a resizing loop that reaches 0, then a static index: checked where the
    length is known, with ``jax.jit``'s IndexError (it gave ``[]``)."""
    def lite(x, k):
        @for_loop(0, k, 1, allow_array_resizing=True)
        def shrink(i, a):
            return a[1:]

        return update(shrink(x))

    compiled = qjit(lite, abstracted_axes=({0: "n"}, None))
    for n, k in ((5, 2), (3, 3), (4, 1), (2, 2), (0, 0)):
        try:
            expected = jax.jit(update)(vec(n)[k:])
        except IndexError:
            with pytest.raises(IndexError, match="out of bounds"):
                compiled(vec(n), k)
        else:
            assert_like(compiled(vec(n), k), expected)


def test_a_reduction_without_identity_of_an_empty_array_is_jax_jits_error():
    top = qjit(lambda x: jnp.max(x), abstracted_axes={0: "n"})
    assert top(vec(3)) == 0.0
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        top(vec(0))
    assert top(vec(4)) == 0.5


def test_a_requirement_jax_jit_refuses_is_reported_before_other_decisions():
    """``x.reshape(-1, 3)`` needs 3 to divide ``n``: at ``n = 7`` that is the error, not the
    later ``+ x`` whose sizes then differ."""
    rows = qjit(lambda x: x.reshape(-1, 3).ravel() + x, abstracted_axes={0: "n"})
    assert_like(rows(vec(6)), vec(6) * 2)
    with pytest.raises(IncompatibleSizesError, match=r"does not evenly divide 7.*n = 7 \(axis 0 of argument 'x'\)"):
        rows(vec(7))


# --- Sizes that agree only at call time ------------------------------------------------------------

AGREE_AT_CALL_TIME = {
    "x[:k] + jnp.ones(k)": (
        lambda x, k: x[:k] + jnp.ones(k), ({0: "n"}, None), lambda n: (vec(9), n), (1,),
    ),
    "jnp.ones(n) + jnp.ones(m)": (
        lambda n, m: jnp.ones(n) + jnp.arange(m), None, lambda n: (n, n), (0, 1),
    ),
    "dot of two axes": (jnp.dot, ({0: "n"}, {0: "m"}), lambda n: (vec(n), vec(n) + 1), ()),
    "concatenate along axis 1": (
        lambda x, y: jnp.concatenate([x, y], axis=1), ({0: "n"}, {0: "m"}),
        lambda n: (np.ones((n, 2)), np.zeros((n, 1))), (),
    ),
    "where": (lambda x, y: jnp.where(x > 0, x, y), ({0: "n"}, {0: "m"}), lambda n: (vec(n), -vec(n)), ()),
    "stack": (lambda x, y: jnp.stack([x, y]), ({0: "n"}, {0: "m"}), lambda n: (vec(n), vec(n)), ()),
}


@pytest.mark.parametrize("name", AGREE_AT_CALL_TIME)
def test_sizes_equal_at_call_time_run_with_one_program(name):
    fn, axes, args, static = AGREE_AT_CALL_TIME[name]
    compiled = qjit(fn, abstracted_axes=axes)
    for n in (3, 5, 2):
        assert_like(compiled(*args(n)), jax.jit(fn, static_argnums=static)(*args(n)))
    assert len(compiled.inspect().programs) == 1  # one program for every call with equal sizes


def test_a_length_1_axis_broadcasts_as_with_jax_jit():
    add = qjit(lambda x, y: x + y, abstracted_axes=({0: "n"}, {0: "m"}))
    for n, m in ((3, 3), (3, 1), (1, 4), (4, 4)):
        assert_like(add(vec(n), vec(m)), jax.jit(lambda x, y: x + y)(vec(n), vec(m)))


@pytest.mark.parametrize(
    "fn, axes, args, sizes",
    [
        (lambda x, y: x + y, ({0: "n"}, {0: "m"}), (vec(2), vec(3)), ("n = 2", "m = 3")),
        (lambda x, k: x[:k] + jnp.ones(k), ({0: "n"}, None), (vec(4), 6), ("n = 4", "k = 6")),
        (jnp.dot, ({0: "n"}, {0: "m"}), (vec(2), vec(5)), ("n = 2", "m = 5")),
    ],
    ids=["broadcast", "slice and ones", "dot"],
)
def test_sizes_that_disagree_are_an_error_naming_them(fn, axes, args, sizes):
    compiled = qjit(fn, abstracted_axes=axes)
    with pytest.raises(IncompatibleSizesError) as info:
        compiled(*args)
    message = str(info.value)
    assert all(s in message for s in sizes) and "argument" in message
    assert "JitTracer" not in message and "Var(id=" not in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)  # as JAX's


# --- jax.numpy functions that failed at every size -------------------------------------------------

GRID = np.array([-2.0, 0.25, 1.0, 4.0])
TRACED_ONCE = {
    "jnp.searchsorted": lambda x: jnp.searchsorted(jnp.sort(x), GRID),
    "jnp.searchsorted of symbolic queries": lambda x: jnp.searchsorted(GRID, x, side="right"),
    "jnp.digitize": lambda x: jnp.digitize(x, GRID),
    "jnp.interp": lambda x: jnp.interp(GRID, x, x * x),
    "jnp.histogram": lambda x: jnp.histogram(x, bins=3, range=(-1.0, 2.0)),
    "jnp.convolve": lambda x: jnp.convolve(x, jnp.array([1.0, 2.0, 0.5])),
    "jnp.correlate": lambda x: jnp.correlate(x, jnp.array([1.0, -1.0]), mode="same"),
    "jnp.piecewise": lambda x: jnp.piecewise(x, [x < 0], [lambda t: -t, lambda t: t * t]),
    "jnp.unique(size=)": lambda x: jnp.unique(x, size=3, fill_value=0.0),
    "jnp.geomspace": lambda x: jnp.geomspace(1.0, 8.0, x.shape[0]),
    "jnp.pad by a symbolic width": lambda x: jnp.pad(x, (x.shape[0] // 2, 1)),
    "jnp.diagonal": lambda x: jnp.diagonal(jnp.outer(x, x + 1.0)),
    "jnp.polyval": lambda x: jnp.polyval(jnp.array([1.0, -2.0, 0.5]), x),
}


@pytest.mark.parametrize("name", TRACED_ONCE)
def test_jax_numpy_functions_are_traced_once(name):
    fn = TRACED_ONCE[name]
    compiled = qjit(fn, abstracted_axes={0: "n"})
    for n in (4, 7):
        for got, expected in zip(jax.tree_util.tree_leaves(compiled(vec(n))), jax.tree_util.tree_leaves(jax.jit(fn)(vec(n)))):
            assert_like(got, expected)
    assert len(compiled.inspect().programs) == 1


def test_convolution_of_two_symbolic_lengths_has_a_program_per_ordering():
    """``jnp.convolve`` swaps its operands when the first is shorter: one program for each case."""
    conv = qjit(jnp.convolve, abstracted_axes=({0: "n"}, {0: "m"}))
    for n, m in ((5, 2), (6, 3), (2, 4), (3, 5)):
        assert_like(conv(vec(n), vec(m) + 2), jax.jit(jnp.convolve)(vec(n), vec(m) + 2))
    assert len(conv.inspect().programs) == 2


def test_jax_code_that_needs_a_size_as_a_python_int_is_traced_per_size():
    """Where JAX's own code needs a concrete size (``jnp.vander`` asks ``len(x)`` for its number
    of columns, which sizes its result), the call is traced with its sizes as constants, as
    ``jax.jit`` does; so is a user's own ``int(x.shape[0])`` (a number under ``jax.jit``), while
    ``int(k)`` of an integer argument stays an error, as under ``jax.jit``."""
    compiled = qjit(jnp.vander, abstracted_axes={0: "n"})
    for n in (3, 4, 3):
        assert_like(compiled(vec(n)), jax.jit(jnp.vander)(vec(n)))
    assert len(compiled.inspect().programs) == 2  # one per size: no generic program

    by_columns = qjit(jnp.vander, abstracted_axes=({0: "n"}, None))
    for k in (2, 3, 2, 4):  # the fast path of repeated calls checks k's value too
        assert_like(by_columns(vec(3), k), jnp.vander(vec(3), k))

    of_size = lambda x: jnp.zeros(int(x.shape[0]))  # noqa: E731
    assert_like(qjit(of_size, abstracted_axes={0: "n"})(vec(3)), jax.jit(of_size)(vec(3)))
    with pytest.raises(TypeError, match="needs a concrete one"):
        qjit(lambda x, k: x * jnp.zeros(int(k)), abstracted_axes={0: "n"})(vec(3), 3)


# --- Errors ---------------------------------------------------------------------------------------


def test_a_size_assumption_about_a_loop_size_is_a_size_assumption_error():
    """A size that only exists inside a loop (an array the loop shrinks) cannot be checked before
    the call: breaking a fact about it is a SizeAssumptionError (a ValueError), as jax.jit fails."""

    @qjit
    def shrink(n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def body(i, a):
            return a[1:] * jnp.max(a)

        return body(jnp.ones(3))

    assert shrink(2).tolist() == [1.0]
    with pytest.raises(SizeAssumptionError, match="assuming"):
        shrink(4)


def test_an_integer_argument_beyond_int64_is_an_overflow_error_naming_it():
    ones = qjit(lambda n: jnp.ones(n))
    with pytest.raises(ArgumentOverflowError, match=r"argument 'n' = 1180591620717411303424") as info:
        ones(2**70)
    assert isinstance(info.value, OverflowError)
    ones(3)  # and the same function keeps working
    with pytest.raises(OverflowError):
        ones(-(2**64))


def test_specialized_mlir_of_a_host_driven_program_is_a_clear_error():
    @qjit
    def grow(n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def body(i, a):
            return jnp.concatenate([a, a[:1]])

        return body(jnp.ones(1))

    assert grow(3).shape == (4,)
    with pytest.raises(UnsupportedOperationError, match="grow: no single StableHLO program.*host-driven"):
        grow.specialized_mlir(3)


def test_sizes_are_named_in_messages():
    """A loop body's sizes print as the arguments they come from, not as ``?``."""

    @qjit(abstracted_axes={0: "n"})
    def grow(x):
        @for_loop(0, 2, 1)
        def body(i, a):
            return jnp.concatenate([a, jnp.ones(1)])

        return body(x)

    with pytest.raises(TypeError, match=r"receives f64\[n\] but returns f64\[n \+ 1\]"):
        grow(vec(3))


def test_a_size_argument_traced_by_an_outer_jit_is_named():
    ones = qjit(lambda n: jnp.arange(n) * 1.0)
    with pytest.raises(ArgumentTypeError, match="argument 'n' sets an array size"):
        jax.jit(ones)(3)
