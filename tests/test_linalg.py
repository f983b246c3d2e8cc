"""jax.numpy.linalg and jax.scipy.linalg inside qjit: results equal to jax.jit's.

With static shapes every commonly used function compiles. With symbolic sizes (``abstracted_axes``)
the decompositions and what is built on them compile too; functions that JAX implements with its
own nested traces (``custom_linear_solve``: inv, solve; ``custom_jvp``: det, slogdet; ``lax.cond``
or ``lax.while_loop``: expm, sqrtm, polar) compile too, as ``jax.jit`` compiles them: traced with
the call's sizes, once per size (see docs/catalyst-compatibility.md).
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

from catalyst_lite import qjit

RNG = np.random.default_rng(7)
A = RNG.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)  # symmetric positive definite
UPPER = np.triu(A) + 4 * np.eye(4)
B = RNG.normal(size=(4,))
TALL = RNG.normal(size=(5, 3))

# name -> (function, arguments); every argument's axes of length 4 share one symbolic size "n".
CASES = {
    "inv": (jnp.linalg.inv, (A,)),
    "solve": (jnp.linalg.solve, (A, B)),
    "det": (jnp.linalg.det, (A,)),
    "slogdet": (jnp.linalg.slogdet, (A,)),
    "eigh": (jnp.linalg.eigh, (SPD,)),
    "eigvalsh": (jnp.linalg.eigvalsh, (SPD,)),
    "eigvals": (jnp.linalg.eigvals, (SPD,)),
    "svd": (jnp.linalg.svd, (TALL,)),
    "qr": (jnp.linalg.qr, (TALL,)),
    "cholesky": (jnp.linalg.cholesky, (SPD,)),
    "lstsq": (lambda a, y: jnp.linalg.lstsq(a, y)[0], (TALL, TALL[:, 0])),
    "norm": (jnp.linalg.norm, (A,)),
    "norm-2": (lambda a: jnp.linalg.norm(a, 2), (A,)),
    "pinv": (jnp.linalg.pinv, (TALL,)),
    "matrix_power": (lambda a: jnp.linalg.matrix_power(a, 3), (A,)),
    "matrix_rank": (jnp.linalg.matrix_rank, (TALL,)),
    "cond": (jnp.linalg.cond, (A,)),
    "diagonal": (jnp.diagonal, (A,)),
    "trace": (jnp.trace, (A,)),
    "expm": (jsl.expm, (A / 4,)),
    "sqrtm": (jsl.sqrtm, (SPD,)),
    "funm": (lambda a: jsl.funm(a, jnp.sin), (SPD,)),
    "lu": (jsl.lu, (A,)),
    "lu_factor": (jsl.lu_factor, (A,)),
    "lu_solve": (lambda a, y: jsl.lu_solve(jsl.lu_factor(a), y), (A, B)),
    "cho_factor": (lambda a: jsl.cho_factor(a)[0], (SPD,)),
    "cho_solve": (lambda a, y: jsl.cho_solve(jsl.cho_factor(a), y), (SPD, B)),
    "solve_triangular": (jsl.solve_triangular, (UPPER, B)),
    "schur": (jsl.schur, (A,)),
    "hessenberg": (jsl.hessenberg, (A,)),
    "polar": (jsl.polar, (A,)),
    "scipy.eigh": (jsl.eigh, (SPD,)),
    "scipy.det": (jsl.det, (A,)),
}

# With symbolic sizes JAX's nested traces lose the relation between sizes (see module docstring):
# traced per size.
TRACED_PER_SIZE = {
    "inv",
    "solve",
    "det",
    "slogdet",
    "expm",
    "sqrtm",
    "funm",
    "lu_solve",
    "polar",
    "scipy.det",
}


def _call(fn):
    # A lambda, so that the functions' keyword options stay Python defaults (not qjit arguments).
    return lambda *args: fn(*args)


def _assert_same(got, expected):
    got_leaves, expected_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves):
        assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_static_shapes_match_jax_jit(name):
    fn, args = CASES[name]
    _assert_same(qjit(_call(fn))(*args), jax.jit(_call(fn))(*args))


def _symbolic_axes(args):
    return tuple({axis: "n" for axis, size in enumerate(np.shape(a)) if size == 4} for a in args)


@pytest.mark.parametrize("name", sorted(set(CASES) - set(TRACED_PER_SIZE)))
def test_symbolic_sizes_match_jax_jit(name):
    fn, args = CASES[name]
    compiled = qjit(_call(fn), abstracted_axes=_symbolic_axes(args))
    _assert_same(compiled(*args), jax.jit(_call(fn))(*args))
    # A second size runs the same trace.
    smaller = tuple(a[tuple(slice(0, 3) if s == 4 else slice(None) for s in np.shape(a))] for a in args)
    if name in ("cholesky", "cho_factor", "cho_solve", "eigh", "eigvalsh", "scipy.eigh"):
        smaller = (SPD[:3, :3], *smaller[1:])
    _assert_same(compiled(*smaller), jax.jit(_call(fn))(*smaller))


@pytest.mark.parametrize("name", sorted(TRACED_PER_SIZE))
def test_symbolic_sizes_traced_per_size_match_jax_jit(name):
    """JAX's dynamic-shape path cannot trace these with a symbolic size: each size gets a trace
    of its own, as under jax.jit, with jax.jit's results."""
    fn, args = CASES[name]
    traces = []

    def counted(*a):
        traces.append(None)
        return fn(*a)

    compiled = qjit(counted, abstracted_axes=_symbolic_axes(args))
    smaller = tuple(a[tuple(slice(0, 3) if s == 4 else slice(None) for s in np.shape(a))] for a in args)
    for call in (args, smaller, args):
        _assert_same(compiled(*call), jax.jit(_call(fn))(*call))
    # The symbolic trace, then one per size; a size that comes back is not traced again.
    assert len(traces) == 3


def test_integer_scalars_keep_their_width_when_specialized():
    """A 32-bit index computed from sizes (lax.switch converts its index to int32) stays 32-bit
    when the specialization folds it into a number: StableHLO's `case` requires it."""

    @qjit(abstracted_axes=({0: "n"},))
    def pick(x):
        branches = [lambda v: v + 1.0, lambda v: v * 2.0, lambda v: v - 1.0]
        return lax.switch(x.shape[0] - 3, branches, jnp.sum(x))

    assert [float(pick(np.ones(n))) for n in (3, 4, 9)] == [4.0, 8.0, 8.0]  # index clamped to 2


def test_custom_jvp_functions_compile_and_differentiate():
    """jax.nn.relu and jnp.linalg.det are custom_jvp functions: specialization binds them with
    their rules, so their derivatives are JAX's (relu'(0) = 0, not the 0.5 of max's)."""
    from catalyst_lite import grad

    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(qjit(jax.nn.relu)(x), jax.nn.relu(x))
    df = qjit(grad(lambda v: jnp.sum(jax.nn.relu(v))))
    np.testing.assert_array_equal(df(x), jax.grad(lambda v: jnp.sum(jax.nn.relu(v)))(x))
    np.testing.assert_allclose(qjit(grad(jnp.linalg.det))(A), jax.grad(jnp.linalg.det)(A), rtol=1e-10)
