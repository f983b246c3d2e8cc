"""Differentiation of and inside qjit programs: ``grad``, ``value_and_grad``, ``jacobian``, ``jvp``
and ``vjp`` inside qjit (against ``jax.grad`` & co. of equivalent ``lax`` programs where JAX can
differentiate them, against central finite differences where it cannot: while loops, traced trip
counts, resizing loops), JAX's own transformations applied to qjit functions, and bad input."""

import contextlib
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import disable_x64

from catalyst_lite import (
    CatalystLiteError,
    cond,
    for_loop,
    grad,
    jacobian,
    jvp,
    qjit,
    value_and_grad,
    vjp,
    while_loop,
)

SIZES = [1, 3, 6]


def close(actual, expected, rtol=1e-9, atol=1e-9):
    """Same structure, shapes and values (pytrees compared leaf by leaf)."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree
    for a, e in zip(a_leaves, e_leaves):
        assert np.shape(a) == np.shape(e)
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol)


def central_difference_grad(f, x, h=1e-6):
    """The gradient of the scalar function ``f`` at the float64 array ``x``, by central differences."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (float(f(x + e)) - float(f(x - e))) / (2 * h)
    return g


def data(n):
    return np.linspace(0.1, 0.9, n)


def with_x64(fn, *args):
    """``fn(*args)`` with 64-bit JAX, for references computed by plain JAX (the global flag, restored
    after: JAX's caches of traced loop bodies do not see a thread-local one)."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        return jax.tree_util.tree_map(np.asarray, fn(*args))
    finally:
        jax.config.update("jax_enable_x64", before)


# --- the transformations inside qjit, on plain JAX code -------------------------------------------


def energy(x):
    return jnp.sum(jnp.sin(x) * x)


@pytest.mark.parametrize("n", SIZES)
def test_grad_value_and_grad_jacobian_with_symbolic_size(n):
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        value, g = value_and_grad(energy)(x)
        return value, g, grad(energy)(x), jacobian(lambda y: jnp.sin(y) * y)(x)

    x = data(n)
    expected = with_x64(
        lambda x: (*jax.value_and_grad(energy)(x), jax.grad(energy)(x), jax.jacrev(lambda y: jnp.sin(y) * y)(x)), x
    )
    close(f(x), expected)


@pytest.mark.parametrize("n", SIZES)
def test_jvp_and_vjp_with_symbolic_size(n):
    def fn(x, s):
        return jnp.sin(x) * s, jnp.sum(x ** 2)

    @qjit(abstracted_axes={0: "n"})
    def f(x, t):
        outs, tangents = jvp(fn, [x, 2.0], [t, 1.0], argnums=[0, 1])
        res, cts = vjp(fn, [x, 2.0], [t, 1.0], argnums=[0, 1])
        return outs, tangents, res, cts

    x, t = data(n), np.cos(data(n))
    expected = with_x64(
        lambda x, t: (*jax.jvp(fn, (x, 2.0), (t, 1.0)), jax.vjp(fn, x, 2.0)[0], jax.vjp(fn, x, 2.0)[1]((t, 1.0))),
        x, t,
    )
    close(f(x, t), expected)


def test_argnums_tuple_and_pytree_arguments():
    def fn(params, x):
        return jnp.sum(params["w"] * x) + params["b"] ** 2 * jnp.sum(x)

    @qjit
    def f(params, x):
        return grad(fn, argnums=(0, 1))(params, x)

    params, x = {"w": np.array([1.0, 2.0]), "b": 3.0}, np.array([0.5, -1.0])
    close(f(params, x), with_x64(jax.grad(fn, argnums=(0, 1)), params, x))


def test_finite_differences_agree_with_automatic_differentiation():
    fn = lambda y: jnp.sum(jnp.exp(y) * y)

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        return (
            grad(fn, method="fd", h=1e-8)(x),
            jacobian(lambda y: jnp.exp(y) * y, method="fd", h=1e-8)(x),
            jvp(fn, [x], [jnp.ones_like(x)], method="fd", h=1e-8)[1],
        )

    x = data(4)
    g = with_x64(jax.grad(fn), x)
    close(f(x), (g, with_x64(jax.jacrev(lambda y: jnp.exp(y) * y), x), jnp.sum(g)), rtol=1e-6, atol=1e-8)


def test_nested_and_higher_order():
    @qjit
    def f(x: float):
        return grad(grad(lambda y: y ** 4))(x), grad(lambda y: grad(lambda z: z * y ** 2)(y))(x)

    close(f(2.0), (48.0, 4.0))  # d/dy (d/dz z y^2) = d/dy y^2 = 2y


def test_grad_of_a_qjit_function_inside_qjit():
    inner = qjit(lambda y: jnp.sum(y ** 3))

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        return grad(inner)(x)

    close(f(data(3)), 3 * data(3) ** 2)


def test_outside_qjit_the_transformations_compile_themselves():
    close(grad(energy)(data(3)), with_x64(jax.grad(energy), data(3)))
    close(jvp(lambda x: x ** 2, [3.0], [1.0]), (9.0, 6.0))
    close(vjp(lambda x: x ** 2, [3.0], [1.0]), (9.0, (6.0,)))


# --- through our control flow ---------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_for_loop_static_and_traced_bounds_against_fori_loop(n):
    def ours(x, steps):
        @for_loop(0, steps, 1)
        def body(i, v):
            return jnp.sin(v) * x + i

        return jnp.sum(body(x))

    def reference(x, steps):
        return jnp.sum(lax.fori_loop(0, steps, lambda i, v: jnp.sin(v) * x + i, x))

    @qjit(abstracted_axes={0: "n"})
    def f(x, steps):
        static = grad(lambda y: ours(y, 3))(x)
        traced = grad(ours)(x, steps)  # the trip count is an argument: only known at run time
        return static, traced, jvp(ours, [x, steps], [jnp.ones_like(x)], argnums=0)[1]

    x = data(n)
    g3 = with_x64(jax.grad(reference), x, 3)
    g5 = with_x64(jax.grad(reference), x, 5)
    close(f(x, 5), (g3, g5, np.sum(g5)))


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_derivatives_of_values_passed_through_unchanged(steps):
    # Results that are an argument itself, or a loop's initial value when it does not run.
    def power(x, steps):
        @for_loop(0, steps, 1)
        def body(i, v):
            return v * x

        return body(1.0)

    @qjit
    def f(x, steps):
        identity = vjp(lambda a, b: (a, b * 2.0), [0.25, 0.5], [1.0, 3.0], argnums=[0, 1])
        return identity, grad(power)(x, steps), vjp(power, [x, steps], 1.0)[1]

    reference = with_x64(jax.grad(lambda x: lax.fori_loop(0, steps, lambda i, v: v * x, 1.0)), 1.5)
    close(f(1.5, steps), (((0.25, 1.0), (1.0, 6.0)), reference, reference))


@pytest.mark.parametrize("n", SIZES)
def test_while_loop_reverse_mode_against_finite_differences(n):
    def ours(x):
        # The trip count depends on the data (until the norm falls below 0.05).
        @while_loop(lambda v, k: jnp.sum(v ** 2) > 0.05)
        def shrink(v, k):
            return v * jnp.cos(x) * 0.7, k + 1

        v, k = shrink(x, 0)
        return jnp.sum(v * x) + k

    f = qjit(lambda x: (ours(x), grad(ours)(x), vjp(ours, [x], [2.0])[1]), abstracted_axes={0: "n"})
    x = data(n)
    value, g, ct = f(x)
    expected = central_difference_grad(lambda y: f(y)[0], x)
    close(g, expected, rtol=1e-5, atol=1e-7)
    close(ct, 2 * expected, rtol=1e-5, atol=1e-7)


def test_while_loop_forward_mode_against_lax_while_loop():
    def ours(x):
        @while_loop(lambda v, k: k < 4)
        def body(v, k):
            return v * x + 1.0, k + 1

        return body(x, 0)[0]

    def reference(x):
        return lax.while_loop(lambda c: c[1] < 4, lambda c: (c[0] * x + 1.0, c[1] + 1), (x, 0))[0]

    f = qjit(lambda x: jvp(ours, [x], [jnp.ones_like(x)]), abstracted_axes={0: "n"})
    x = data(3)
    close(f(x), with_x64(lambda x: jax.jvp(reference, (x,), (jnp.ones_like(x),)), x))


def test_cond_both_modes_against_lax_cond():
    def ours(x):
        @cond(jnp.sum(x) > 1.0)
        def branch():
            return jnp.sum(x ** 2)

        @branch.otherwise
        def branch():
            return jnp.sum(jnp.sin(x))

        return branch()

    reference = lambda x: lax.cond(jnp.sum(x) > 1.0, lambda: jnp.sum(x ** 2), lambda: jnp.sum(jnp.sin(x)))
    f = qjit(lambda x: (grad(ours)(x), jvp(ours, [x], [jnp.ones_like(x)])[1]), abstracted_axes={0: "n"})
    for x in (data(2), data(5)):  # sums 1.0 and 2.5: both branches
        g = with_x64(jax.grad(reference), x)
        close(f(x), (g, np.sum(g)))


def grow_with_for_loop(x, steps):
    """A resizing loop with a known, short trip count: unrolled into one XLA program."""

    @for_loop(0, steps, 1, allow_array_resizing=True)
    def grow(i, v):
        return jnp.concatenate([v, jnp.sin(v[-1:]) * x])

    return jnp.sum(grow(jnp.ones(1)))


def grow_with_while_loop(x, steps):
    """A resizing while loop: host-driven, one compiled body per size."""

    @while_loop(lambda v: v.shape[0] <= steps, allow_array_resizing=True)
    def grow(v):
        return jnp.concatenate([v, jnp.sin(v[-1:]) * x])

    return jnp.sum(grow(jnp.ones(1)))


@pytest.mark.parametrize("ours", [grow_with_for_loop, grow_with_while_loop])
def test_resizing_loops_both_modes_against_finite_differences(ours):
    @qjit
    def derivatives(x: float, steps: int):
        return grad(ours)(x, steps), jvp(ours, [x, steps], [1.0], argnums=0)[1]

    value = qjit(ours)
    for steps in (1, 3):
        g, t = derivatives(0.8, steps)
        expected = central_difference_grad(lambda y: value(float(y), steps), np.array(0.8))
        close((g, t), (expected, expected), rtol=1e-6, atol=1e-8)


# --- JAX's transformations applied to qjit functions ----------------------------------------------


def cubic(x):
    return jnp.sum(x ** 3 + jnp.sin(x))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x64-off"])
@pytest.mark.parametrize("n", [1, 4])
def test_jax_transformations_of_a_qjit_function(n, x64):
    # float32 data in both modes: with x64 off (the user's own configuration, see settings.py)
    # float32 is JAX's default type; with it on (as after `import catalyst_lite`) it is explicit.
    with contextlib.nullcontext() if x64 else disable_x64():
        _check_jax_transformations_of_a_qjit_function(n)


def _check_jax_transformations_of_a_qjit_function(n):
    f = qjit(cubic)
    x = jnp.asarray(data(n), dtype=jnp.float32)
    close(jax.grad(f)(x), jax.grad(cubic)(x), rtol=1e-6)
    close(jax.jacobian(qjit(jnp.sin))(x), jax.jacobian(jnp.sin)(x), rtol=1e-6)
    close(jax.jvp(f, (x,), (x,)), jax.jvp(cubic, (x,), (x,)), rtol=1e-6)
    one = jnp.ones((), jnp.float32)
    close(jax.vjp(f, x)[1](one), jax.vjp(cubic, x)[1](one), rtol=1e-6)
    close(jax.vmap(f)(jnp.stack([x, 2 * x])), jax.vmap(cubic)(jnp.stack([x, 2 * x])), rtol=1e-6)
    close(jax.jit(f)(x), cubic(x), rtol=1e-6)
    close(jax.jit(jax.grad(f))(x), jax.grad(cubic)(x), rtol=1e-6)


def test_jax_grad_of_a_qjit_function_with_a_while_loop():
    @qjit
    def f(y):
        @while_loop(lambda v, i: i < 5)
        def loop(v, i):
            return v * y, i + 1

        return loop(1.0, 0)[0]

    close(jax.grad(f)(1.5), 5 * 1.5 ** 4, rtol=1e-6)
    close(jax.jvp(f, (1.5,), (1.0,))[1], 5 * 1.5 ** 4, rtol=1e-6)
    close(jax.jit(jax.grad(f))(1.5), 5 * 1.5 ** 4, rtol=1e-6)  # values hidden: by forward mode


def _counted(kind, x0):
    """A qjit program of ``(x, n)`` looping ``n`` times (``n`` traced under ``jax.jit``), or while
    its data sums under ``n + 2.5``; the reference: its iterations from ``x0`` as a ``lax.fori_loop``
    of a Python count."""

    def step(a, x):
        return jnp.sin(a) * x + 0.5 * a

    def program(x, n):
        if kind == "for":
            return for_loop(0, n, 1)(lambda i, a: step(a, x))(x)
        if kind == "while":
            return while_loop(lambda v: v[1] < n)(lambda v: (step(v[0], x), v[1] + 1))((x, 0))[0]
        return while_loop(lambda v: jnp.sum(v) < n + 2.5)(lambda v: step(v, x) + 1.0)(x)  # data

    def data_steps(x, trips):
        return lax.fori_loop(0, trips, lambda i, a: step(a, x) + 1.0, x)

    def reference(x, n):
        if kind == "data":
            trips = 0
            while float(jnp.sum(data_steps(x0, trips))) < n + 2.5:
                trips += 1
            assert trips > 1
            return data_steps(x, trips)
        return lax.fori_loop(0, n, lambda i, a: step(a, x), x)

    return qjit(program), reference


@pytest.mark.parametrize("kind", ["for", "while", "data"])
def test_reverse_mode_under_jax_jit_of_a_loop_with_a_traced_trip_count(kind):
    """jax.jit(jax.grad(f)), jax.grad(jax.jit(f)), jax.jit of jax.vjp and jax.jacrev of a qjit
    program whose loop runs a traced number of times (an int argument under jax.jit, or the
    data): JAX cannot transpose such a loop and the values are hidden, so the derivatives are
    taken in forward mode; references: the same iterations as a lax.fori_loop of a known count."""
    x, n = jnp.array([0.3, -1.2, 0.8]), 3
    f, reference = _counted(kind, x)
    loss = lambda g: lambda x, n: jnp.sum(g(x, n) ** 2)
    expected = jax.grad(lambda x: loss(reference)(x, n))(x)
    close(jax.grad(jax.jit(loss(f)))(x, n), expected)  # first traced under reverse mode
    close(jax.jit(jax.grad(loss(f)))(x, n), expected)
    close(jax.jit(jax.jacrev(f))(x, n), jax.jacrev(lambda x: reference(x, n))(x))
    cotangent = jnp.array([1.0, -2.0, 0.5])
    close(jax.jit(lambda x, n: jax.vjp(lambda x: f(x, n), x)[1](cotangent))(x, n),
          jax.vjp(lambda x: reference(x, n), x)[1](cotangent))


def test_reverse_mode_under_jax_jit_of_a_circuit_with_a_traced_layer_count():
    """jax.grad(jax.jit(qnode)) with a for_loop of an int argument's count of layers (as in
    Catalyst's JAX integration); reference: default.qubit's QNode with a Python loop."""
    import pennylane as qml

    def layers(p1, n, p2):
        @for_loop(0, n, 1)
        def layer(i):
            qml.RX(p1, wires=0), qml.RY(p2, wires=1), qml.CNOT(wires=[0, 1])

        layer()
        return qml.expval(qml.PauliZ(1))

    def python_layers(p1, n, p2):
        for _ in range(n):
            qml.RX(p1, wires=0), qml.RY(p2, wires=1), qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    circuit = qjit(qml.qnode(qml.device("default.qubit", wires=2))(layers))
    reference = qml.qnode(qml.device("default.qubit", wires=2))(python_layers)
    args = (-4.5, 3, 4.3)
    close(jax.grad(jax.jit(circuit), argnums=(0, 2))(*args), jax.grad(reference, argnums=(0, 2))(*args))
    close(jax.jit(jax.grad(circuit, argnums=(0, 2)))(*args), jax.grad(reference, argnums=(0, 2))(*args))


@pytest.mark.parametrize("predicate", ["count", "data"])
def test_jax_reverse_mode_of_a_while_loop_inside_qjit(predicate):
    """jax.grad/jax.vjp inside qjit keep the while_loop and transpose it at specialization, as
    catalyst_lite.grad does (JAX refuses to transpose a lax.while_loop); references: the same
    iterations as a lax.fori_loop of the trip count the data gives."""
    x = jnp.array([0.3, -1.2, 2.0])
    keep_going = {"count": lambda v: v[1] < 3, "data": lambda v: jnp.sum(v[0] ** 2) < 40.0}[predicate]

    def loop(x):
        return while_loop(keep_going)(lambda v: (jnp.sin(v[0]) * x + 1.5 * v[0], v[1] + 1))((x, 0))

    trips = int(qjit(loop)(x)[1])  # the trip count, to build the reference
    assert trips > 1

    def reference(x):
        return lax.fori_loop(0, trips, lambda i, a: jnp.sin(a) * x + 1.5 * a, x)

    def loss(f):
        return lambda x: jnp.sum(f(x) ** 2)

    def result(x):
        return loop(x)[0]

    close(qjit(jax.grad(loss(result)))(x), jax.grad(loss(reference))(x))
    close(qjit(lambda x: jax.vjp(result, x)[1](x))(x), jax.vjp(reference, x)[1](x))
    close(qjit(lambda x: jax.linearize(result, x)[1](x))(x), jax.jvp(reference, (x,), (x,))[1])
    close(qjit(jax.grad(loss(result)), abstracted_axes={0: "n"})(x), jax.grad(loss(reference))(x))
    close(qjit(jax.jacfwd(result))(x), jax.jacfwd(reference)(x))


@pytest.mark.parametrize("loop_kind", ["while_count", "while_data", "for_traced"])
def test_jax_batched_reverse_mode_of_loops_of_unknown_trip_count_inside_qjit(loop_kind):
    """jax.jacrev (a vmap of the pullback) and jax.vmap of a jax.vjp of a while_loop, or a for_loop
    of a traced trip count: the loop's deferred pullback under JAX's batching is the loop's
    Jacobian contracted with the batched cotangents (raised NeedsCallSizes 'a size escaped'). A
    loop vmapped under reverse mode stays a loop (its lax.while_loop: JAX's reverse-mode error).
    References: lax.fori_loop of the same trip count under jax.jit, static."""
    x = jnp.array([0.3, -1.2, 2.0])

    def loop(x, n):
        step = lambda a: jnp.sin(a) * x + 1.5 * a  # noqa: E731
        if loop_kind == "for_traced":
            return for_loop(0, n, 1)(lambda i, a: step(a))(x)
        keep_going = {"while_count": lambda v: v[1] < n, "while_data": lambda v: jnp.sum(v[0] ** 2) < 40.0}
        return while_loop(keep_going[loop_kind])(lambda v: (step(v[0]), v[1] + 1))((x, 0))

    trips = int(qjit(loop)(x, 3)[1]) if loop_kind == "while_data" else 3  # the reference's trip count
    loop_result = (lambda x, n: loop(x, n)[0]) if loop_kind != "for_traced" else loop

    def reference(x, n):
        return lax.fori_loop(0, n, lambda i, a: jnp.sin(a) * x + 1.5 * a, x)

    cts = jnp.stack([x, 2.0 * x])
    for transform in (
        lambda f: jax.jacrev(f),
        lambda f: lambda x: jax.vmap(jax.vjp(f, x)[1])(cts),
        lambda f: jax.jacrev(lambda x: jnp.sum(f(x) ** 2)),
        # a vmapped loop (examples of one trip count, also for the data predicate)
        lambda f: jax.grad(lambda x: jnp.sum(jax.vmap(f)(jnp.stack([x, x[::-1]])) ** 2)),
        lambda f: lambda x: jax.jacrev(jax.vmap(f))(jnp.stack([x, x])),
    ):
        got = qjit(lambda x, n: transform(lambda x: loop_result(x, n))(x))(x, trips)
        expected = jax.jit(lambda x, n: transform(lambda x: reference(x, n))(x), static_argnums=1)(x, trips)
        close(got, expected)


def test_second_jax_derivatives_of_a_while_loop_inside_qjit_explain_catalyst_lites_way():
    # jax.hessian / jax.grad of jax.grad / jax.jvp of jax.vjp of a while_loop raised NeedsCallSizes
    # ("a size escaped JAX's nested trace"); catalyst_lite.jacobian(catalyst_lite.grad(f)) computes it.
    from catalyst_lite.errors import DifferentiationError

    def energy(x, n):
        a = while_loop(lambda v: v[1] < n)(lambda v: (jnp.sin(v[0]) * x + 1.5 * v[0], v[1] + 1))((x, 0))[0]
        return jnp.sum(a ** 2)

    def reference(x, n):
        return jnp.sum(lax.fori_loop(0, n, lambda i, a: jnp.sin(a) * x + 1.5 * a, x) ** 2)

    x = jnp.array([0.3, -1.2, 2.0])
    for second in (jax.hessian, lambda f: jax.grad(lambda x: jax.grad(f)(x)[0]),
                   lambda f: lambda x: jax.jvp(lambda y: jax.vjp(f, y)[1](1.0)[0], (x,), (x,))[1],
                   lambda f: lambda x: jax.vmap(jax.grad(f))(jnp.stack([x, 2.0 * x]))):
        with pytest.raises(DifferentiationError, match=r"catalyst_lite.jacobian\(catalyst_lite.grad\(f\)\)"):
            qjit(lambda x, n: second(lambda x: energy(x, n))(x))(x, 3)
    close(qjit(lambda x, n: jacobian(grad(lambda x: energy(x, n)))(x))(x, 3),
          jax.jit(lambda x, n: jax.hessian(lambda x: reference(x, n))(x), static_argnums=1)(x, 3))


@pytest.mark.parametrize("outer", [jax.jit, jax.grad, lambda f: jax.jit(jax.grad(f))], ids=["jit", "grad", "jit-grad"])
def test_a_program_first_traced_under_a_jax_transformation_is_reusable_after_it(outer):
    # The program's NumPy constants and the circuit's key are made while the transformation
    # traces; the cached program must hold none of its tracers.
    weights = np.array([0.5, -1.25, 2.0])
    import pennylane as qml

    @qjit
    def f(x):
        return jnp.sum(weights * jnp.sin(x * weights))

    @qjit
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x * weights[0], wires=0)
        return qml.expval(qml.Z(0))

    reference = lambda x: jnp.sum(weights * jnp.sin(x * weights))
    close(outer(f)(0.3), outer(reference)(0.3), rtol=1e-12)
    close(f(0.3), reference(0.3), rtol=1e-12)
    close(outer(circuit)(0.3), outer(lambda x: jnp.cos(x * weights[0]))(0.3), rtol=1e-12)
    close(circuit(0.3), np.cos(0.3 * weights[0]), rtol=1e-12)


def test_a_size_argument_traced_by_jax_jit_is_a_clear_error():
    f = qjit(lambda n: jnp.ones(n).sum())
    with pytest.raises(CatalystLiteError, match="argument 'n' sets an array size"):
        jax.jit(f)(3)
    assert float(jax.jit(f, static_argnums=0)(3)) == 3.0


# --- bad input ------------------------------------------------------------------------------------


def test_differentiating_an_integer_argument_names_it():
    with pytest.raises(TypeError, match="argument 'count'.*int64"):
        qjit(lambda x, n: grad(lambda x, count: x * count, argnums=1)(x, n))(1.0, 2)


def test_grad_of_a_non_scalar_result():
    with pytest.raises(CatalystLiteError, match="one real scalar.*float64\\[2\\]"):
        qjit(lambda x: grad(lambda y: y * 2.0)(x))(np.ones(2))


def test_argnums_out_of_range_and_bad_options():
    with pytest.raises(ValueError, match="argnums=2"):
        qjit(lambda x: grad(lambda y: y * 2.0, argnums=2)(x))(1.0)
    with pytest.raises(ValueError, match="method"):
        grad(energy, method="adjoint")
    with pytest.raises(ValueError, match="h"):
        grad(energy, method="fd", h=0.0)
    with pytest.raises(TypeError, match="tangents"):
        qjit(lambda x: jvp(lambda y: y, [x], [x, x]))(1.0)


# --- quantum circuits -----------------------------------------------------------------------------


def test_gradient_of_a_circuit_backpropagates_through_the_state_vector():
    qml = pytest.importorskip("pennylane")
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x, layers):
        @for_loop(0, layers, 1)
        def layer(i):
            qml.RX(x * (i + 1), wires=0)
            qml.CNOT(wires=[0, 1])

        layer()
        return qml.expval(qml.PauliZ(1))

    @qjit
    def f(x: float, layers: int):
        return grad(circuit)(x, layers)

    value = qjit(circuit)
    expected = central_difference_grad(lambda y: value(float(y), 3), np.array(0.3))
    close(f(0.3, 3), expected, rtol=1e-6, atol=1e-8)
    close(f(0.3, 1), -np.sin(0.3), rtol=1e-9)  # <Z_1> = cos(x) after RX(x) and CNOT

    # JAX's own jax.grad, the number of layers computed from the data (a trip count JAX cannot
    # transpose a loop of): against central differences of default.qubit (PennyLane runs the
    # QNode outside qjit).
    data_layers = qjit(lambda x: jax.grad(circuit)(x, jnp.int64(x > 0.0) + 2))
    by_default_qubit = central_difference_grad(lambda y: float(circuit(float(y), 3)), np.array(0.3))
    close(data_layers(0.3), by_default_qubit, rtol=1e-6, atol=1e-8)


def test_jax_grad_of_numpy_float64_arguments_with_x64_off():
    # jax.grad hands over float32 tracers whose values are still the float64 NumPy arrays.
    def f(p):
        return jnp.cos(p[0, 1] / 2) * jnp.sum(p**2)

    p = np.array([[0.3, 1.2]])
    with disable_x64():
        expected = jax.grad(f)(p)
        assert np.allclose(jax.grad(qjit(f))(p), expected, atol=1e-6)
        assert jax.grad(qjit(f))(p).dtype == expected.dtype


# lax.fori_loop over sizes inside qjit: (function of (x, s), abstracted_axes); jax.jit's bounds are numbers.
FORI_OVER_SIZES = {
    "product over x.shape[0]": (lambda x, s: lax.fori_loop(0, x.shape[0], lambda i, c: c * x[i], s), {0: "n"}),
    "pytree carry": (lambda x, s: lax.fori_loop(
        0, x.shape[0], lambda i, c: (c[0] + x[i] * c[1], c[1] * s), (s, 1.0))[0], {0: "n"}),
    "from n // 2": (lambda x, s: lax.fori_loop(x.shape[0] // 2, x.shape[0], lambda i, c: c + jnp.sin(x[i] * c), s),
                    {0: "n"}),
    "empty when n > 2": (lambda x, s: lax.fori_loop(x.shape[0], 2, lambda i, c: c * s + i, s), {0: "n"}),
    "array carry": (lambda x, s: jnp.sum(lax.fori_loop(0, x.shape[0], lambda i, c: c * s + x[i], x)), {0: "n"}),
}


@pytest.mark.parametrize("name", sorted(FORI_OVER_SIZES))
def test_jax_transformations_of_a_qjit_function_with_a_fori_loop_over_sizes(name):
    """A ``lax.fori_loop`` whose bound is a size (``x.shape[0]``) is our for_loop: jax.grad, jacrev,
    jvp and vmap of the qjit function equal jax.jit's (a scan there); JAX's while_loop raised
    "Reverse-mode differentiation does not work" or a TypeError ('>=' between 'Var' and 'int')."""
    fn, axes = FORI_OVER_SIZES[name]
    program, reference = qjit(fn, abstracted_axes=(axes, {})), jax.jit(fn)
    for n in (4, 1, 3):
        x, s = jnp.linspace(0.5, 1.5, n), 0.7
        close(program(x, s), reference(x, s))
        close(jax.grad(program, argnums=(0, 1))(x, s), jax.grad(reference, argnums=(0, 1))(x, s))
        close(jax.jacrev(program, argnums=1)(x, s), jax.jacrev(reference, argnums=1)(x, s))
        close(jax.jvp(lambda t: program(x, t), (s,), (1.0,)), jax.jvp(lambda t: reference(x, t), (s,), (1.0,)))
        close(jax.vmap(program, in_axes=(None, 0))(x, jnp.arange(2.0)),
              jax.vmap(reference, in_axes=(None, 0))(x, jnp.arange(2.0)))


# lax.while_loop / lax.scan inside qjit whose body reads an array of symbolic size (bounds not sizes).
JAX_LOOPS_READING_SIZED_ARRAYS = {
    "while up to len(x)": lambda x, s: lax.while_loop(
        lambda c: c[0] < x.shape[0], lambda c: (c[0] + 1, c[1] * s + x[c[0]]), (0, 0.0))[1],
    "while of a fixed count": lambda x, s: jnp.sum(lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * s + x), (0, x))[1]),
    "fori_loop of static bounds (a scan)": lambda x, s: lax.fori_loop(0, 3, lambda i, c: c * s + x[i % 2], s),
    "scan over a range": lambda x, s: lax.scan(lambda c, k: (c * s + x[0] * k, c), s, jnp.arange(3.0))[0],
}


@pytest.mark.parametrize("name", sorted(JAX_LOOPS_READING_SIZED_ARRAYS))
def test_jax_transformations_of_a_qjit_function_with_a_jax_loop_reading_a_sized_array(name):
    """``lax.while_loop``/``lax.scan`` whose body reads ``x`` of an abstracted axis: jax.jvp,
    jax.vmap and jax.grad of the qjit function equal jax.jit's (a TypeError, '>=' between 'Var'
    and 'int': JAX's rules of the loop read the body's symbolic sizes)."""
    fn = JAX_LOOPS_READING_SIZED_ARRAYS[name]
    program, reference = qjit(fn, abstracted_axes=({0: "n"}, {})), jax.jit(fn)
    for n in (4, 2, 5):
        x, s = jnp.linspace(0.5, 1.5, n), 0.7
        close(program(x, s), reference(x, s))
        close(jax.jvp(lambda t: program(x, t), (s,), (1.0,)), jax.jvp(lambda t: reference(x, t), (s,), (1.0,)))
        close(jax.vmap(program, in_axes=(None, 0))(x, jnp.arange(2.0)),
              jax.vmap(reference, in_axes=(None, 0))(x, jnp.arange(2.0)))
        if "while" not in name:  # (JAX's while_loop has no reverse mode)
            close(jax.grad(program, argnums=(0, 1))(x, s), jax.grad(reference, argnums=(0, 1))(x, s))


def test_jax_grad_of_a_qjit_function_with_a_fori_loop_over_an_int_argument():
    """``lax.fori_loop(0, n, ...)`` with ``n`` an integer argument (a size): as jax.jit with ``n`` static."""

    def f(n, s):
        return lax.fori_loop(0, n, lambda i, c: c * 1.1 + jnp.sin(s * i), s)

    program, reference = qjit(f), jax.jit(f, static_argnums=0)
    for n in (4, 0, 1):
        close(jax.grad(program, argnums=1)(n, 0.7), jax.grad(reference, argnums=1)(n, 0.7))
        close(jax.vjp(lambda t: program(n, t), 0.7)[1](1.0), jax.vjp(lambda t: reference(n, t), 0.7)[1](1.0))
