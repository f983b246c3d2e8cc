"""What JAX's dynamic-shape path cannot trace with symbolic sizes runs as under ``jax.jit``.

``jax.lax`` control flow (``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``,
``associative_scan``), JAX's transformations (``grad``, ``jacfwd``/``jacrev``, ``vjp``,
``checkpoint``, ``custom_jvp``/``custom_vjp``), primitives with a size parameter (``fft``,
``top_k``) and ``jax.pure_callback`` of a symbolic result shape fail on symbolically-sized arrays inside JAX. Where a program of ``abstracted_axes`` (or
of an integer argument used as a size) uses them, each call's sizes are traced as constants, as
``jax.jit`` traces them: the same results, dtypes and structure as ``jax.jit``, one trace per size.
Each program is checked against ``jax.jit`` at sizes 0, 1 and more, and a size that comes back is
not traced again.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from catalyst_lite import qjit
from catalyst_lite.errors import ControlFlowError


@jax.custom_jvp
def _softplus(x):
    return jnp.log1p(jnp.exp(x))


_softplus.defjvp(lambda p, t: (_softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))


@jax.custom_vjp
def _clip_gradient(x):
    return x


_clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))


# name -> (function of one vector, the smallest length it takes)
PROGRAMS = {
    "cond": (lambda x: lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: y - 1, x), 0),
    "cond_pytree": (lambda x: lax.cond(x.sum() > 0, lambda y: {"a": y, "b": 1.0}, lambda y: {"a": -y, "b": 2.0}, x), 0),
    "switch": (lambda x: lax.switch(jnp.clip(x.shape[0], 0, 2), [jnp.sin, jnp.cos, jnp.tanh], x), 0),
    "fori_loop": (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.9 + i, x), 0),
    "while_loop": (lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, x)), 0),
    "scan": (lambda x: lax.scan(lambda c, xi: (c + xi, c * xi), 0.0, x), 0),
    "scan_carry": (lambda x: lax.scan(lambda c, _: (c * 0.5 + 1.0, c.sum()), x, None, length=4), 0),
    "map": (lambda x: lax.map(lambda xi: xi ** 2 + 1, x), 0),
    "associative_scan": (lambda x: lax.associative_scan(jnp.add, x), 0),
    "fft": (lambda x: jnp.fft.fft(x), 0),
    "pure_callback": (lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x), 0),
    "partition": (lambda x: jnp.sort(jnp.partition(jnp.concatenate([x, jnp.zeros(3)]), 1)[:2]), 0),
    "polyval_coefficients": (lambda x: jnp.polyval(x, 2.0), 0),
    "grad": (lambda x: jax.grad(lambda y: jnp.sum(jnp.sin(y) * y))(x), 1),
    "value_and_grad_aux": (lambda x: jax.value_and_grad(lambda y: (jnp.sum(y ** 2), y.mean()), has_aux=True)(x), 1),
    "jacfwd": (lambda x: jax.jacfwd(lambda y: jnp.sin(y) * y.sum())(x), 1),
    "jacrev": (lambda x: jax.jacrev(lambda y: jnp.sin(y) * y.sum())(x), 1),
    "hessian": (lambda x: jax.hessian(lambda y: jnp.sum(y ** 3))(x), 1),
    "vjp": (lambda x: jax.vjp(lambda a: a ** 2, x)[1](jnp.ones_like(x)), 1),
    "checkpoint": (lambda x: jax.grad(lambda y: jax.checkpoint(lambda z: jnp.sin(jnp.cos(z)))(y).sum())(x), 1),
    "custom_jvp": (lambda x: (_softplus(x), jax.grad(lambda y: _softplus(y).sum())(x)), 1),
    "custom_vjp": (lambda x: jax.grad(lambda y: (_clip_gradient(y) * 3).sum())(x), 1),
    # Their results meet the symbolically-sized argument (broadcast, concatenated, sized alike).
    "custom_jvp_result_times_argument": (lambda x: _softplus(x) * x, 0),
    "relu_times_argument": (lambda x: jax.nn.relu(x) * x - x, 0),
    "custom_vjp_result_plus_argument": (lambda x: _clip_gradient(x) + x[::-1], 0),
    "custom_jvp_result_concatenated": (lambda x: jnp.concatenate([_softplus(x), x, jnp.ones(x.shape[0])]), 0),
    "custom_jvp_of_2d_result_with_argument": (lambda x: _softplus(jnp.outer(x, x)) @ x, 0),
    "grad_through_scan": (lambda x: jax.grad(lambda y: lax.scan(lambda c, yi: (c * yi + 1.0, None), 1.0, y)[0])(x), 1),
    "grad_through_cond": (lambda x: jax.grad(lambda y: lax.cond(y.sum() > 0, jnp.sum, lambda z: -jnp.sum(z ** 2), y))(x), 1),
}


def assert_same_as_jax_jit(got, expected):
    """Same pytree structure, and per leaf the same dtype, shape and values."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert np.asarray(g).dtype == np.asarray(e).dtype and np.shape(g) == np.shape(e)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_abstracted_axes_match_jax_jit(name):
    fn, smallest = PROGRAMS[name]
    traces = []

    def counted(x):
        traces.append(x.shape)
        return fn(x)

    compiled = qjit(counted, abstracted_axes={0: "n"})
    reference = jax.jit(fn)
    lengths = [n for n in (0, 1, 4, 1) if n >= smallest]
    for n in lengths:
        x = jnp.asarray(np.random.default_rng(n).normal(size=n))
        assert_same_as_jax_jit(compiled(x), reference(x))
    # The symbolic trace, then one trace per distinct length (the repeated length is cached).
    assert len(traces) == 1 + len(set(lengths))


def test_integer_size_argument_is_a_constant_of_its_trace():
    """An integer argument used as a size, then lax control flow: as jax.jit with the argument
    static."""

    def f(n, x):
        v = jnp.ones(n) * x
        return lax.fori_loop(0, 3, lambda i, c: c * 2 + i, v), lax.cond(x > 0, jnp.sum, jnp.prod, v)

    compiled, reference = qjit(f), jax.jit(f, static_argnums=0)
    for n, x in [(3, 1.5), (0, 2.0), (1, -1.0), (3, -2.0)]:
        assert_same_as_jax_jit(compiled(n, x), reference(n, x))


def test_user_errors_are_the_ones_jax_jit_raises():
    """A program that fails with symbolic sizes and with the call's sizes alike raises what
    jax.jit raises (the user's own exception, JAX's shape error)."""

    class Mine(Exception):
        pass

    def own(x):
        lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)
        raise Mine("from the user's code")

    def mismatch(x):
        return lax.fori_loop(0, 2, lambda i, c: c + jnp.ones(c.shape[0] + 1), x)

    with pytest.raises(Mine, match="from the user's code"):
        qjit(own, abstracted_axes={0: "n"})(jnp.ones(3))
    with pytest.raises(TypeError) as expected:
        jax.jit(mismatch)(jnp.ones(3))
    with pytest.raises(type(expected.value)):
        qjit(mismatch, abstracted_axes={0: "n"})(jnp.ones(3))


def test_data_dependent_python_control_flow_still_names_the_fix():
    """A Python ``if`` on a traced value fails under jax.jit too: the error is catalyst_lite's
    ControlFlowError, which is also JAX's class (``except jax.errors...`` keeps working)."""

    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(f)(jnp.ones(3))
    with pytest.raises(ControlFlowError, match="catalyst_lite.cond") as raised:
        qjit(f, abstracted_axes={0: "n"})(jnp.ones(3))
    assert isinstance(raised.value, jax.errors.TracerBoolConversionError)

    def g(x):
        return jnp.zeros(int(x.sum()))

    with pytest.raises(jax.errors.ConcretizationTypeError, match="static argument"):
        qjit(g)(jnp.ones(3))


def test_shapes_that_do_not_broadcast_raise_what_jax_jit_raises():
    """JAX raises a ValueError on its dynamic-shape path and a TypeError under jax.jit: the error
    is both."""

    def f(x):
        return x + jnp.ones(4)

    with pytest.raises(TypeError):
        jax.jit(f)(jnp.ones(3))
    for compiled in (qjit(f), qjit(f, abstracted_axes={0: "n"})):
        with pytest.raises(TypeError, match="Incompatible shapes") as raised:
            compiled(jnp.ones(3))
        assert isinstance(raised.value, ValueError)


def test_nested_qjit_function_traced_per_size():
    """A qjit function inlined into another's trace, whose lax.cond JAX cannot trace with
    symbolic sizes: the outer function is traced per size."""

    def inner_fn(x):
        return lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: y - 1, x)

    inner = qjit(inner_fn, abstracted_axes={0: "n"})
    outer = qjit(lambda x: inner(x) + 1, abstracted_axes={0: "n"})
    for n in (3, 1, 0, 4):
        x = jnp.arange(float(n)) - 2
        assert_same_as_jax_jit(outer(x), jax.jit(lambda x: inner_fn(x) + 1)(x))


def test_ahead_of_time_function_is_traced_at_each_call():
    """An annotated function is traced when @qjit runs; when JAX cannot trace it with symbolic
    sizes, each call traces it with its own, as jax.jit with the size static."""

    def f(n: int):
        return lax.cond(n > 2, lambda v: v * 2, lambda v: v, jnp.ones(n))

    compiled, reference = qjit(f), jax.jit(f, static_argnums=0)
    for n in (3, 1, 0, 3):
        assert_same_as_jax_jit(compiled(n), reference(n))


def test_training_step_over_a_batch_of_any_size():
    """A user's model code over an abstracted batch axis: an MLP with log_softmax, a gradient
    step, an explicit Euler loop, each as jax.jit computes it at batch sizes 0, 1 and 5."""

    def mlp(w1, w2, x):
        return jax.nn.log_softmax(jax.nn.relu(x @ w1) @ w2)

    def step(params, x, y):
        def loss(p):
            return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

        value, grads = jax.value_and_grad(loss)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    def euler(y0):
        return lax.fori_loop(0, 10, lambda i, y: y + 0.1 * (-y), y0)

    w1, w2 = jnp.arange(12.0).reshape(3, 4) / 10, jnp.arange(8.0).reshape(4, 2) / 10
    params = {"w": jnp.ones(3), "b": jnp.float64(0.5)}
    compiled_mlp = qjit(mlp, abstracted_axes=(None, None, {0: "b"}))
    compiled_step = qjit(step, abstracted_axes=(None, {0: "b"}, {0: "b"}))
    compiled_euler = qjit(euler, abstracted_axes={0: "b"})
    for b in (0, 1, 5):
        x, y = jnp.arange(3.0 * b).reshape(b, 3) / 10, jnp.arange(float(b))
        assert_same_as_jax_jit(compiled_mlp(w1, w2, x), jax.jit(mlp)(w1, w2, x))
        # (the mean of an empty batch is NaN, under jax.jit as well: NaNs compare equal here)
        assert_same_as_jax_jit(compiled_step(params, x, y), jax.jit(step)(params, x, y))
        assert_same_as_jax_jit(compiled_euler(y), jax.jit(euler)(y))


@pytest.mark.parametrize("where", ["function", "lax.cond branch", "lax.scan body", "jax.grad", "jax.vmap"])
def test_user_exception_runs_the_function_once(where):
    """The user's own exception propagates from the first trace, as under jax.jit, wherever JAX
    runs the user's code: the function is not run again with static sizes."""
    runs = []

    def raising(y):
        runs.append(None)
        raise LookupError("user's")

    fn = {
        "function": raising,
        "lax.cond branch": lambda x: lax.cond(x.sum() > 0, raising, jnp.sin, x),
        "lax.scan body": lambda x: lax.scan(lambda c, xi: (raising(c), xi), x, x),
        "jax.grad": lambda x: jax.grad(lambda y: raising(y).sum())(x),
        "jax.vmap": lambda x: jax.vmap(raising)(x),
    }[where]
    with pytest.raises(LookupError, match="user's"):
        qjit(fn, abstracted_axes={0: "n"})(jnp.ones(3))
    assert len(runs) == 1
