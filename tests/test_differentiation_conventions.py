"""Catalyst 0.15's differentiation conventions: ``argnums`` defaults, the forms of tangents and
cotangents and their checks, forward finite differences, pytree arguments, and the JAX
conventions outside qjit. Expected values from JAX and NumPy; the same programs were run through
Catalyst 0.15 (its results are quoted where they are the point)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import DifferentiableCompileError, for_loop, grad, jacobian, jvp, qjit, value_and_grad, vjp
from catalyst_lite.errors import ArgumentIndexError


def f2(x, y):
    return x * y + jnp.sin(x)


def assert_tree_close(got, expected, rtol=1e-12, atol=0.0):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# --- argnums -------------------------------------------------------------------------------------


def test_jvp_and_vjp_differentiate_argument_0_by_default():
    jvp_default = qjit(lambda x, y: jvp(f2, [x, y], [1.0]))(1.0, 2.0)
    assert_tree_close(jvp_default, jax.jvp(lambda x: f2(x, 2.0), (1.0,), (1.0,)))
    vjp_default = qjit(lambda x, y: vjp(f2, [x, y], [1.0]))(1.0, 2.0)
    assert_tree_close(vjp_default, (f2(1.0, 2.0), jax.grad(f2)(1.0, 2.0)))  # a bare cotangent


def test_argnums_select_and_shape_the_results():
    both = qjit(lambda x, y: jvp(f2, [x, y], [1.0, 0.5], argnums=[0, 1]))(1.0, 2.0)
    assert_tree_close(both, jax.jvp(f2, (1.0, 2.0), (1.0, 0.5)))
    second = qjit(lambda x, y: vjp(f2, [x, y], [1.0], argnums=1))(1.0, 2.0)
    assert_tree_close(second, (f2(1.0, 2.0), jnp.asarray(1.0)))
    pair = qjit(lambda x, y: vjp(f2, [x, y], [1.0], argnums=(0, 1)))(1.0, 2.0)
    assert_tree_close(pair, (f2(1.0, 2.0), jax.grad(f2, argnums=(0, 1))(1.0, 2.0)))
    last = qjit(grad(lambda a, b: a * b, argnums=-1))(1.0, 2.0)
    assert float(last) == 1.0
    one_in_a_list = qjit(grad(lambda a, b: a * b, argnums=[1]))(1.0, 2.0)
    assert_tree_close(one_in_a_list, (jnp.asarray(1.0),))
    # An integer argument left out of argnums (the default 0) is not differentiated.
    assert_tree_close(qjit(lambda x, n: jvp(lambda a, b: a * b, [x, n], [1.0]))(1.0, 2), (2.0, 2.0))


def test_argnums_beyond_the_arguments_is_an_index_error():
    with pytest.raises(IndexError, match="argnums=1"):
        qjit(grad(lambda a: a * 2, argnums=1))(1.0)
    with pytest.raises(ArgumentIndexError):
        qjit(lambda x, y: jvp(lambda a, b: a * b, [x, y], [1.0], argnums=2))(1.0, 2.0)


def test_pytree_and_list_arguments():
    value, grads = qjit(value_and_grad(lambda pair: pair[0] * pair[1]))([1.0, 2.0])
    assert float(value) == 2.0 and isinstance(grads, list) and [float(g) for g in grads] == [2.0, 1.0]
    value, grads = qjit(value_and_grad(lambda d: d["a"] * d["b"]))({"a": 1.0, "b": 3.0})
    assert {k: float(v) for k, v in grads.items()} == {"a": 3.0, "b": 1.0}
    assert_tree_close(qjit(jacobian(lambda a: {"x": a * 2, "y": a**2}))(jnp.ones(2)),
                      jax.jacobian(lambda a: {"x": a * 2, "y": a**2})(jnp.ones(2)))


# --- tangents and cotangents ---------------------------------------------------------------------


def test_cotangents_in_any_structure():
    double = lambda x: x * 2  # noqa: E731
    x = jnp.ones(3)
    for cotangent in (jnp.ones(3), [jnp.ones(3)]):
        assert_tree_close(qjit(lambda v: vjp(double, [v], cotangent))(x), (2 * x, 2 * x))

    def fd(x):
        return {"a": x * 2, "b": jnp.sum(x)}

    expected = (fd(x), 2 * x + 2.0)  # cotangent a = 1, b = 2
    for cotangent in ({"a": jnp.ones(3), "b": 2.0}, [{"a": jnp.ones(3), "b": 2.0}]):
        assert_tree_close(qjit(lambda v: vjp(fd, [v], cotangent))(x), expected)
    ft = lambda x: (x * 2, jnp.sum(x))  # noqa: E731
    assert_tree_close(qjit(lambda v: vjp(ft, [v], [jnp.ones(3), 2.0]))(x), (ft(x), 2 * x + 2.0))


def test_tangents_are_flattened_over_the_differentiated_arguments():
    g = lambda d: d["a"] * d["b"]  # noqa: E731
    x = jnp.ones(3)
    expected = jax.jvp(g, ({"a": x, "b": 2 * x},), ({"a": jnp.ones(3), "b": jnp.zeros(3)},))
    for tangents in ([{"a": jnp.ones(3), "b": jnp.zeros(3)}], [jnp.ones(3), jnp.zeros(3)]):
        assert_tree_close(qjit(lambda v: jvp(g, [{"a": v, "b": v * 2}], tangents))(x), expected)
    nested = qjit(lambda a, b: jvp(lambda u, v: u * v, [a, b], [(1.0, 0.0)], argnums=[0, 1]))(1.0, 2.0)
    assert_tree_close(nested, (2.0, 2.0))


BAD_TANGENTS = {
    # name: (program, error type, message) -- Catalyst raises the same built-in types.
    "cotangent dtype": (lambda x: vjp(lambda v: v * 2, [x], [jnp.ones(3, dtype=jnp.float32)]), TypeError, "dtypes"),
    "cotangent integer": (lambda x: vjp(lambda v: v * 2, [x], [jnp.ones(3, dtype=int)]), TypeError, "dtypes"),
    "cotangent shape": (lambda x: vjp(lambda v: v * 2, [x], [jnp.ones(4)]), ValueError, "shape"),
    "cotangent count": (lambda x: vjp(lambda v: v * 2, [x], [x, x]), TypeError, "2 cotangents for 1 results"),
    "tangent dtype": (lambda x: jvp(lambda v: v * 2, [x], [jnp.ones(3, dtype=jnp.float32)]), TypeError, "dtypes"),
    "tangent shape": (lambda x: jvp(lambda v: v * 2, [x], [jnp.ones(4)]), ValueError, "shape"),
    "tangent count": (lambda x: jvp(lambda v: v * 2, [x], [x, x]), TypeError, "2 tangents"),
    "tangents not a sequence": (lambda x: jvp(lambda v: v * 2, [x], x), ValueError, "tangents must be a list"),
    "params not a sequence": (lambda x: jvp(lambda v: v * 2, x, [x]), ValueError, "params must be a list"),
}


@pytest.mark.parametrize("name", sorted(BAD_TANGENTS))
def test_tangents_and_cotangents_are_checked_when_tracing(name):
    program, error, message = BAD_TANGENTS[name]
    with pytest.raises(error, match=message):
        qjit(program)(jnp.ones(3))


def test_python_int_tangent_of_a_float_argument_is_refused():
    with pytest.raises(TypeError, match="int64"):
        qjit(lambda x: jvp(lambda v: v**2, [x], [1]))(1.0)


# --- finite differences --------------------------------------------------------------------------


def forward_difference(f, x, h):
    return (f(x + h) - f(x)) / h


def test_method_fd_is_a_forward_difference():
    square = lambda v: v**2  # noqa: E731
    got = float(qjit(grad(square, method="fd", h=0.1))(1.0))
    assert got == pytest.approx(2.1, abs=1e-12)  # Catalyst's documented 2.1 (central: 2.0)
    assert got == pytest.approx(forward_difference(square, 1.0, 0.1), abs=1e-12)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(qjit(grad(lambda v: jnp.sum(v**2), method="fd", h=0.1))(x), 2 * x + 0.1)
    np.testing.assert_allclose(qjit(jacobian(square, method="fd", h=0.1))(x), np.diag(2 * x + 0.1))
    assert_tree_close(qjit(lambda v: jvp(square, [v], [1.0], method="fd", h=0.1))(1.0), (1.0, 2.1))
    assert_tree_close(qjit(lambda v: vjp(square, [v], [1.0], method="fd", h=0.1))(1.0), (1.0, 2.1))
    default_step = float(qjit(grad(square, method="fd"))(1.0))  # h = 1e-7
    assert default_step == pytest.approx(forward_difference(square, 1.0, 1e-7), rel=1e-8)


def test_fd_jvp_takes_one_difference_per_scalar_input():
    """jvp(method="fd") is the forward-difference Jacobian times the tangents: no cross term."""
    h = 1e-3
    product = lambda a, b: a * b  # noqa: E731
    got = qjit(lambda a, b: jvp(product, [a, b], [2.0, 3.0], method="fd", h=h, argnums=[0, 1]))(0.5, 1.0)
    # Linear in each argument: 2 * b + 3 * a exactly (one difference along (2, 3) adds 6h).
    assert_tree_close(got, (0.5, 3.5), rtol=1e-9)

    def f(v):
        return jnp.stack([v[0] ** 3, v[0] * v[1]])

    x, t = np.array([0.5, 1.0]), np.array([2.0, 3.0])
    columns = [forward_difference(lambda s: np.asarray(f(x + s * e)), 0.0, h) for e in np.eye(2)]
    expected = np.stack(columns, axis=1) @ t
    assert_tree_close(qjit(lambda v: jvp(f, [v], [jnp.asarray(t)], method="fd", h=h))(x), (f(x), expected), rtol=1e-9)


def test_fd_derivative_of_an_unrelated_result_is_exactly_zero():
    """f(x) and the shifted evaluations are rounded alike, so an entry that does not depend on
    the shifted input is 0, not a rounding error divided by h."""
    x = jnp.linspace(0.1, 2.0, 4)
    jac = qjit(jacobian(lambda y: jnp.exp(y) * y, method="fd", h=1e-8), abstracted_axes={0: "n"})(x)
    assert np.all(np.asarray(jac)[~np.eye(4, dtype=bool)] == 0.0)
    np.testing.assert_allclose(np.diag(jac), jnp.exp(x) * (x + 1), rtol=1e-6)


# Functions of complex arguments, holomorphic or not, and complex results of real arguments.
COMPLEX_FUNCTIONS = {
    "abs squared": lambda z, x: jnp.abs(z) ** 2 * x,
    "real and imaginary parts": lambda z, x: jnp.real(z) * jnp.imag(z) + x,
    "holomorphic": lambda z, x: jnp.sin(z) * z * x,
    "non-holomorphic": lambda z, x: z**2 * jnp.conj(z) * x,
    "complex result of real": lambda z, x: jnp.exp(1j * x) * jnp.abs(z),
}


@pytest.mark.parametrize("name", COMPLEX_FUNCTIONS)
@pytest.mark.parametrize("method", ["auto", "fd"])
def test_complex_arguments_and_results_follow_jax(name, method):
    """Finite differences step a complex input along h and i*h (grad(|z|^2) is 2 conj(z), not
    2 Re(z)); jacobian of a complex result is d f / d Re(x), as jax.jacfwd (jacrev refuses it)."""
    f, z, x = COMPLEX_FUNCTIONS[name], jnp.array([1 + 2j, 0.5 - 1j]), jnp.array([0.3, -1.2])
    ct, t = jnp.array([0.3 + 0.7j, -1.0 + 0.2j]), (jnp.array([0.1 - 0.4j, 2.0 + 1j]), jnp.array([0.5, 1.5]))
    out = f(z, x)
    ct = ct if jnp.iscomplexobj(out) else jnp.real(ct)
    options, rtol = dict(method=method, h=1e-7), 1e-10 if method == "auto" else 1e-5
    assert_close = functools.partial(assert_tree_close, rtol=rtol, atol=rtol)
    _, pullback = jax.vjp(f, z, x)
    got = qjit(lambda z, x: vjp(f, [z, x], ct, argnums=(0, 1), **options))(z, x)
    assert_close(got, (out, pullback(ct)))
    got = qjit(lambda z, x: jvp(f, [z, x], list(t), argnums=(0, 1), **options))(z, x)
    assert_close(got, jax.jvp(f, (z, x), t))
    # The Jacobian of a complex result w.r.t. a complex z: jacfwd's (holomorphic=True: along 1).
    if jnp.iscomplexobj(out):
        expected = (jax.jacfwd(f, holomorphic=True)(z, x), jax.jacfwd(f, argnums=1)(z, x))
    else:
        expected = jax.jacrev(f, argnums=(0, 1))(z, x)
    assert_close(qjit(jacobian(f, argnums=(0, 1), **options))(z, x), expected)
    if not jnp.iscomplexobj(out):
        scalar = lambda z, x: jnp.sum(f(z, x))  # noqa: E731
        got = qjit(grad(scalar, argnums=(0, 1), **options))(z, x)
        assert_close(got, jax.grad(scalar, argnums=(0, 1))(z, x))


def test_jacobian_of_complex_results_in_containers_loops_and_callbacks():
    """Mixed real and complex results; a loop (reverse mode only) and a callback with a .bwd only."""
    from catalyst_lite import pure_callback

    @pure_callback
    def sine(v) -> jax.ShapeDtypeStruct((3,), jnp.float64):
        return np.sin(np.asarray(v))

    sine.fwd(lambda v: (sine(v), v))
    sine.bwd(lambda v, dy: (dy * jnp.cos(v),))

    def f(x, n):
        phases = for_loop(0, n, 1)(lambda i, a: a * jnp.exp(1j * x))(jnp.ones(3, complex))
        return {"c": phases * jnp.exp(1j * sine(x)), "r": jnp.sum(x**2)}

    def reference(x):
        return {"c": jnp.exp(3j * x) * jnp.exp(1j * jnp.sin(x)), "r": jnp.sum(x**2)}

    x = jnp.array([0.3, -1.2, 2.0])
    assert_tree_close(qjit(jacobian(f))(x, 3), jax.jacfwd(reference)(x))
    assert_tree_close(qjit(jacobian(f, method="fd", h=1e-7))(x, 3), jax.jacfwd(reference)(x), rtol=1e-5)


def test_step_options_as_catalyst_accepts_them():
    assert float(qjit(grad(lambda a: a * 2, h=0.1))(1.0)) == 2.0  # h unused with method="auto"
    assert float(qjit(grad(lambda a: a * a, method="fd", h=-0.1))(1.0)) == pytest.approx(1.9)
    with pytest.raises(ValueError, match="non-zero"):
        grad(lambda a: a, method="fd", h=0.0)
    with pytest.raises(ValueError, match="method"):
        grad(lambda a: a, method="foo")


# --- outside qjit: the JAX counterparts ----------------------------------------------------------


def test_outside_qjit_jvp_and_vjp_follow_jax():
    assert_tree_close(jvp(f2, [1.0, 2.0], [1.0, 0.0]), jax.jvp(f2, (1.0, 2.0), (1.0, 0.0)))
    primals, cotangents = vjp(f2, [1.0, 2.0], 1.0)
    expected_primals, pullback = jax.vjp(f2, 1.0, 2.0)
    assert_tree_close((primals, cotangents), (expected_primals, pullback(1.0)))
    with pytest.raises(TypeError, match="tangents"):
        jvp(f2, [1.0, 2.0], [1.0])  # jax.jvp needs one tangent per argument too


def test_outside_qjit_grad_is_exact():
    assert float(grad(lambda v: v**2, method="fd", h=0.1)(1.0)) == 2.0  # as jax.grad (Catalyst too)
    assert_tree_close(jacobian(lambda a, b: a * b, argnums=[0, 1])(jnp.ones(2), jnp.ones(2)),
                      jax.jacobian(lambda a, b: a * b, argnums=(0, 1))(jnp.ones(2), jnp.ones(2)))


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program, argument",
    [
        (grad(lambda a: a * 2.0), 1),  # an integer argument
        (grad(lambda a: jnp.int64(2)), 1.0),  # an integer result
        (grad(lambda a: a * 2), jnp.ones(2)),  # grad of a vector
        (jacobian(lambda a: (a > 0).astype(int)), jnp.ones(2)),
    ],
)
def test_not_differentiable_is_catalysts_error(program, argument):
    with pytest.raises(DifferentiableCompileError):
        qjit(program)(argument)


@pytest.mark.parametrize("wrap", [lambda y: (y,), lambda y: [y], lambda y: {"v": y}], ids=["tuple", "list", "dict"])
def test_grad_of_a_container_of_one_scalar_keeps_the_container(wrap):
    """Catalyst: inside qjit, the gradient of a function returning ``(y,)`` or ``{"v": y}`` comes
    in that container (the arguments' structure inside it), as ``jacobian`` does; outside qjit it
    is ``jax.grad``'s TypeError."""
    f = lambda a, b: wrap(a * jnp.sin(b))
    x, y = 2.0, 0.3
    scalar = lambda a, b: a * jnp.sin(b)
    expected = jax.grad(scalar, argnums=(0, 1))(x, y)
    g = qjit(lambda a, b: grad(f, argnums=(0, 1))(a, b))(x, y)
    assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(wrap((0.0, 0.0)))
    np.testing.assert_allclose(jax.tree_util.tree_leaves(g), expected)
    value, g1 = qjit(lambda a: value_and_grad(f)(a, y))(x)
    np.testing.assert_allclose(jax.tree_util.tree_leaves((value, g1)), [scalar(x, y), expected[0]])
    assert jax.tree_util.tree_structure(g1) == jax.tree_util.tree_structure(wrap(0.0))
    with pytest.raises(TypeError, match="scalar-output"):
        grad(f)(x, y)
    with pytest.raises(TypeError, match="scalar-output"):
        jax.grad(f)(x, y)


def test_argnums_naming_an_argument_twice_gives_its_gradient_twice():
    """Each position of argnums gets its argument's gradient (Catalyst 0.15 returns a zero for a
    repeated one; jax.grad fails with a StopIteration)."""
    f = lambda a, b: a * b ** 2
    expected = [jax.grad(f, argnums=k)(2.0, 3.0) for k in (1, 0, 1)]
    np.testing.assert_allclose(qjit(lambda a, b: grad(f, argnums=(1, 0, 1))(a, b))(2.0, 3.0), expected)
    np.testing.assert_allclose(grad(f, argnums=(1, 0, 1))(2.0, 3.0), expected)
    with pytest.raises(ValueError, match="twice"):
        qjit(lambda a, b: jvp(f, (a, b), (1.0, 1.0), argnums=(0, 0)))(2.0, 3.0)


def test_grad_inside_a_jax_loop_body():
    """catalyst_lite.grad inside a JAX primitive's own body (lax.fori_loop), which specialization
    binds whole: XLA compiles the derivative itself."""

    @qjit
    def f(x):
        return jax.lax.fori_loop(0, 3, lambda i, a: a + grad(jnp.sin)(a), x)

    reference = jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, a: a + jax.grad(jnp.sin)(a), x))
    np.testing.assert_allclose(f(0.5), reference(0.5), rtol=1e-15)


def test_jax_grad_through_a_for_loop_whose_trip_count_comes_from_data():
    """JAX cannot transpose a loop of traced length: the loop's derivative is taken at
    specialization (as catalyst_lite.grad takes it). The body's own lax.scan carries primals and
    tangents in one equation, whose primals stay known to JAX's linearization. Against jax.grad
    of the unrolled loop."""

    def layers(x, n):
        @for_loop(0, n, 1)
        def body(i, a):
            return jax.lax.scan(lambda c, _: (jnp.sin(c) * x, None), a, None, length=2)[0] + i

        return body(x)

    def unrolled(x, n):
        a = x
        for i in range(n):
            a = jnp.sin(jnp.sin(a) * x) * x + i
        return a

    program = qjit(lambda x: jax.grad(lambda y: layers(y, jnp.int64(y > 0) + 3))(x))
    np.testing.assert_allclose(program(0.7), jax.grad(unrolled)(0.7, 4), rtol=1e-12)
    np.testing.assert_allclose(program(-0.7), jax.grad(unrolled)(-0.7, 3), rtol=1e-12)
