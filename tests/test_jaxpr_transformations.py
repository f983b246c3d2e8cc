"""JAX's own interpreters on catalyst_lite's jaxprs (inside ``dynamic_jaxprs()``), before any
specialization: ``jax.core.eval_jaxpr`` eagerly and under ``jax.jit`` (sizes static), ``jax.vmap``
over array arguments, ``jax.jvp``/``jax.linearize``/``jax.grad`` with respect to float arguments.
Results are compared with running the same programs through qjit, and with NumPy/JAX references.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import dynamic_jaxprs
from catalyst_lite.errors import SymbolicShapeError
from test_design_documents import circuit_001, make_g, overview, overview_reference


def as_function(program, *sizes):
    """The traced jaxpr of a qjit program as a Python function of its explicit arguments: the
    implicit size arguments (``sizes``) come first, as numbers."""
    closed = program.jaxpr
    return lambda *args: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *sizes, *args)


# --- programs of the design documents ------------------------------------------------------------


@pytest.mark.parametrize("sz", [1, 4])
def test_overview_evaluates_eagerly_and_under_jit(sz):
    with dynamic_jaxprs():
        eager = jax.core.eval_jaxpr(overview.jaxpr.jaxpr, overview.jaxpr.consts, sz)
        jitted = jax.jit(lambda n: jax.core.eval_jaxpr(overview.jaxpr.jaxpr, overview.jaxpr.consts, n),
                         static_argnums=0)(sz)
    np.testing.assert_array_equal(eager[0], overview(sz))
    np.testing.assert_array_equal(jitted[0], overview_reference(sz))


def test_001_overview_evaluates_under_jit():
    with dynamic_jaxprs():
        (out,) = jax.jit(as_function(circuit_001), static_argnums=0)(3)
    np.testing.assert_allclose(out, circuit_001(3))


@pytest.fixture(scope="module")
def examples():
    """The programs of "Input type deduction in loops" (examples 1 and 2), traced at size 4."""
    x, y = np.arange(1.0, 5.0), np.full(4, 0.5)
    g1, g2 = make_g(True), make_g(False)
    g1(x, y), g2(x, y)
    return g1, g2


XS = np.stack([np.arange(1.0, 5.0), np.linspace(-1.0, 1.0, 4), np.full(4, 0.9)])
YS = np.stack([np.full(4, 0.5), np.arange(4.0), np.linspace(2.0, 3.0, 4)])


@pytest.mark.parametrize("example", [0, 1])
def test_examples_vmap_and_jit_match_qjit(examples, example):
    g = examples[example]
    with dynamic_jaxprs():
        f = lambda x, y: as_function(g, x.shape[0])(x, y)[-1]
        batched = jax.vmap(f)(XS, YS)
        jitted = jax.jit(jax.vmap(f))(XS, YS)
    expected = [g(x, y) for x, y in zip(XS, YS)]
    np.testing.assert_allclose(batched, expected, rtol=1e-12)
    np.testing.assert_allclose(jitted, expected, rtol=1e-12)


def test_example1_jvp_linearize_and_grad_match_qjit_and_reference(examples):
    g1 = examples[0]
    x, y, tx, ty = XS[0], YS[0], np.linspace(0.1, 0.4, 4), np.full(4, -0.2)
    reference = lambda x, y: jnp.sum(y * x**10)
    with dynamic_jaxprs():
        f = lambda x, y: as_function(g1, 4)(x, y)[0]
        value, tangent = jax.jvp(f, (x, y), (tx, ty))
        _, linear = jax.linearize(f, x, y)
        gradient = jax.grad(f, argnums=(0, 1))(x, y)
        jitted_gradient = jax.jit(jax.grad(f, argnums=(0, 1)))(x, y)
    ref_value, ref_tangent = jax.jvp(reference, (x, y), (tx, ty))
    qjit_value, qjit_tangent = jax.jvp(g1, (x, y), (tx, ty))
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose([tangent, linear(tx, ty)], [ref_tangent] * 2, rtol=1e-12)
    np.testing.assert_allclose([value, tangent], [qjit_value, qjit_tangent], rtol=1e-12)
    for g in (gradient, jitted_gradient):
        np.testing.assert_allclose(g, jax.grad(reference, argnums=(0, 1))(x, y), rtol=1e-12)


def test_example2_resizing_loop_has_zero_derivative_and_its_size(examples):
    g2 = examples[1]
    x, y = XS[1], YS[1]
    with dynamic_jaxprs():
        outs = as_function(g2, 4)(x, y)
        _, tangent = jax.jvp(lambda y: as_function(g2, 4)(x, y)[-1], (y,), (np.ones(4),))
    assert float(outs[-1]) == float(g2(x, y)) == 14.0 and float(tangent) == 0.0  # 4 + 10 ones


def test_a_traced_size_under_jit_is_a_clear_error():
    with dynamic_jaxprs(), pytest.raises(SymbolicShapeError, match="static"):
        jax.jit(lambda n: as_function(overview)(n))(3)


def test_dynamic_jaxprs_is_scoped_to_the_block():
    with dynamic_jaxprs():
        pass
    with pytest.raises(Exception):
        jax.core.eval_jaxpr(overview.jaxpr.jaxpr, overview.jaxpr.consts, 3)
