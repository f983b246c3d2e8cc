"""Reshapes and splits of symbolic sizes: ``-1`` is the symbolic quotient, checked at call time.

Each program is traced once by ``qjit`` with a symbolic axis and run at several lengths, against
``jax.jit`` at the same (static) length: the same result where ``jax.jit`` succeeds, and a
catalyst_lite error naming the sizes where ``jax.jit`` refuses the reshape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import for_loop, qjit
from catalyst_lite.errors import ArgumentValueError

# Programs of one array whose axis 0 is symbolic (name -> function).
RESHAPES = {
    "x.reshape(-1, 3)": lambda x: x.reshape(-1, 3),
    "x.reshape(3, -1)": lambda x: x.reshape(3, -1),
    "x.reshape(-1, 2, 3)": lambda x: x.reshape(-1, 2, 3) * 2.0,
    "x.reshape(2, -1, 3)": lambda x: x.reshape(2, -1, 3),
    "x.reshape(-1)": lambda x: x.reshape(-1),
    "jnp.ravel": lambda x: jnp.ravel(x) + 1.0,
    "jnp.reshape(order='F')": lambda x: jnp.reshape(x, (-1, 3), order="F"),
    "jnp.reshape((3, -1), order='F')": lambda x: jnp.reshape(x, (3, -1), order="F"),
    "its size sizes another array": lambda x: jnp.zeros((x.reshape(-1, 3).shape[0], 3)) + x.reshape(-1, 3),
    "x.reshape(n // 2, 2)": lambda x: x.reshape(x.shape[0] // 2, 2),
    "x.reshape(2, 3) (static shape)": lambda x: x.reshape(2, 3),
    "round trip, then added to x": lambda x: x.reshape(-1, 3).ravel() + x,
    "rows summed, then a strided slice": lambda x: x.reshape(-1, 2).sum(axis=1) + x[::2],
    "jnp.split into 2": lambda x: jnp.split(x, 2)[1] * 3.0,
    "jnp.split into 3, all parts": lambda x: jnp.stack(jnp.split(x, 3)),
}
# Programs of an (n, 2) array.
RESHAPES_2D = {
    "(n, 2) -> (-1, 4)": lambda x: x.reshape(-1, 4),
    "(n, 2) -> (4, -1)": lambda x: x.reshape(4, -1),
    "(n, 2) -> (2, -1)": lambda x: x.reshape(2, -1),
    "(n, 2) -> (-1,)": lambda x: x.reshape(-1),
    "(n, 2) -> (-1, n)": lambda x: x.reshape(-1, x.shape[0]),
    "(n, 2) -> (2, n)": lambda x: x.reshape(2, x.shape[0]),
    "(n, 2) -> (2, -1, 2)": lambda x: x.reshape(2, -1, 2),
}


def jax_jit_outcome(fn, *args):
    """``jax.jit``'s result, or ``None`` if it refuses these sizes."""
    try:
        return jax.jit(fn)(*args)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def assert_like_jax_jit(compiled, fn, *args):
    expected = jax_jit_outcome(fn, *args)
    if expected is None:
        with pytest.raises(ArgumentValueError, match="elements|evenly|divide"):
            compiled(*args)
        return
    got = compiled(*args)
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e)


@pytest.mark.parametrize("name", RESHAPES)
def test_reshape_of_a_symbolic_axis_is_jax_jits(name):
    fn = RESHAPES[name]
    compiled = qjit(fn, abstracted_axes={0: "n"})
    for n in (6, 12, 7, 18):
        assert_like_jax_jit(compiled, fn, jnp.arange(float(n)))
    assert len(compiled.inspect().programs) == 1  # traced once


@pytest.mark.parametrize("name", RESHAPES_2D)
def test_reshape_of_a_symbolic_matrix_is_jax_jits(name):
    fn = RESHAPES_2D[name]
    compiled = qjit(fn, abstracted_axes={0: "n"})
    for n in (4, 2, 6, 3):
        assert_like_jax_jit(compiled, fn, jnp.arange(2.0 * n).reshape(n, 2))


def test_minus_one_is_the_symbolic_quotient_in_the_jaxpr():
    """The traced size of ``-1`` is ``n // 3`` (JAX computed ``n * (1 // 3)``, i.e. 0)."""
    f = qjit(lambda x: x.reshape(-1, 3), abstracted_axes={0: "n"})
    assert f(np.arange(9.0)).shape == (3, 3)
    eqns = f.jaxpr.jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["require_size", "div", "reshape"]
    n = f.jaxpr.jaxpr.invars[0]
    assert eqns[1].invars[0] is n and eqns[1].invars[1].val == 3
    assert "mul" not in str(f.jaxpr)


def test_exact_cancellation_needs_no_check():
    """``(n, 2) -> (-1, 2)`` and ``(n, m) -> (m, -1)``: the quotient is ``n`` itself."""
    f = qjit(lambda x: x.reshape(-1, 2), abstracted_axes={0: "n"})
    g = qjit(lambda x: x.T.reshape(x.shape[1], -1), abstracted_axes={0: "n", 1: "m"})
    assert f(np.ones((5, 2))).shape == (5, 2)
    np.testing.assert_array_equal(g(np.arange(6.0).reshape(2, 3)), np.arange(6.0).reshape(2, 3).T)
    for compiled in (f, g):
        assert "require_size" not in str(compiled.jaxpr) and " div " not in str(compiled.jaxpr)


def test_indivisible_size_is_an_error_naming_the_sizes():
    f = qjit(lambda x: x.reshape(-1, 3), abstracted_axes={0: "n"})
    assert f(np.ones(6)).shape == (2, 3)
    with pytest.raises(ArgumentValueError, match=r"7 elements.*\(3\) does not evenly divide 7.*'n'=7"):
        f(np.ones(7))
    assert f(np.ones(0)).shape == (0, 3)


def test_traced_size_and_minus_one():
    """``jnp.reshape(x, (k, -1))`` with an integer argument ``k`` (JAX: InconclusiveDimension)."""

    def fn(x, k):
        return jnp.reshape(x, (k, -1)) * 2.0

    f = qjit(fn, abstracted_axes=({0: "n"}, None))
    for n, k in ((6, 2), (6, 3), (12, 4), (4, 1)):
        np.testing.assert_array_equal(f(np.arange(float(n)), k), np.arange(float(n)).reshape(k, -1) * 2.0)
    with pytest.raises(ArgumentValueError, match=r"\(2\) does not evenly divide 7.*'k'=2.*'n'=7"):
        f(np.arange(7.0), 2)
    with pytest.raises(ArgumentValueError, match=r"\(0\) does not evenly divide 6"):
        f(np.arange(6.0), 0)
    assert len(f.inspect().programs) == 1


def test_static_array_reshaped_by_a_size_argument():
    @qjit
    def f(k: int):
        return jnp.arange(12.0).reshape(-1, k).sum(axis=0)

    for k in (1, 2, 3, 4, 6, 12):
        np.testing.assert_array_equal(f(k), np.arange(12.0).reshape(-1, k).sum(axis=0))
    with pytest.raises(ArgumentValueError, match=r"\(5\) does not evenly divide 12"):
        f(5)


@pytest.mark.parametrize("reshape", [lambda x, s: x.reshape(s), jax.lax.reshape], ids=["x.reshape", "lax.reshape"])
def test_reshape_to_a_wrong_element_count_is_an_error(reshape):
    f = qjit(lambda x: reshape(x, (x.shape[0] // 2, 2)), abstracted_axes={0: "n"})
    assert f(np.ones(8)).shape == (4, 2)
    with pytest.raises(ArgumentValueError, match=r"cannot reshape an array of 7 elements into a shape of 6"):
        f(np.ones(7))


def test_reshape_inside_a_loop_body():
    @qjit
    def f(n: int):
        x = jnp.arange(3 * n, dtype=float)

        @for_loop(0, 3, 1)
        def body(i, acc):
            return acc + x.reshape(-1, 3).sum(axis=1)

        return body(jnp.zeros(n))

    for n in (1, 4):
        np.testing.assert_allclose(f(n), 3 * np.arange(3.0 * n).reshape(-1, 3).sum(axis=1))


@pytest.mark.parametrize("sections", [1, 2, 3, 4])
def test_array_split_of_a_symbolic_axis(sections):
    def fn(x):
        return [p * (i + 1) for i, p in enumerate(jnp.array_split(x, sections))]

    compiled = qjit(fn, abstracted_axes={0: "n"})
    for n in (7, 6, 2, 0):
        assert_like_jax_jit(compiled, fn, jnp.arange(float(n)))


def test_split_into_unequal_sections_is_an_error():
    f = qjit(lambda x: jnp.split(x, 3), abstracted_axes={0: "n"})
    assert [p.shape for p in f(np.ones(6))] == [(2,), (2,), (2,)]
    with pytest.raises(ArgumentValueError, match=r"jnp.split into 3 sections: the axis of 7 elements"):
        f(np.ones(7))
