"""Host callbacks with Catalyst 0.15's API: ``pure_callback`` (result types, ``.fwd``/``.bwd``,
with ``vmap`` and ``grad``), ``accelerate``, ``debug.callback``/``debug.print``/``print_memref`` and
``debug_assert``. Programs from Catalyst's documentation; expected values from NumPy/JAX (and
checked by hand against Catalyst 0.15)."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import (
    CompileError,
    DifferentiableCompileError,
    accelerate,
    debug,
    debug_assert,
    for_loop,
    grad,
    jacobian,
    pure_callback,
    qjit,
    vmap,
)
from catalyst_lite.api_extensions.callbacks import base_callback
from catalyst_lite.errors import CallbackError, DebugAssertionError
from test_capture import needs_capture


@pure_callback
def host_sin(x) -> float:
    return np.sin(x)


def test_pure_callback_with_annotated_and_given_result_types():
    assert float(qjit(lambda x: jnp.cos(host_sin(x**2)))(0.654)) == pytest.approx(np.cos(np.sin(0.654**2)))
    add_one = qjit(lambda x: pure_callback(lambda v: v + 1, int)(x))
    assert add_one(2) == 3 and add_one(2).dtype == jnp.int64
    pair = qjit(lambda x: pure_callback(lambda v: [v, v * 2], [float, float])(x))(2.0)
    assert isinstance(pair, list) and [float(p) for p in pair] == [2.0, 4.0]


def test_pure_callback_array_results_and_symbolic_operands():
    def spectrum(x):
        x = jnp.cos(x)
        result = jax.ShapeDtypeStruct(x.shape, jnp.complex128)

        @pure_callback
        def fft(y) -> result:
            return np.fft.fft(y)

        return fft(x)

    x = jnp.array([0.1, 0.2])
    np.testing.assert_allclose(qjit(spectrum)(x), np.fft.fft(np.cos(x)), rtol=1e-12)
    total = qjit(lambda v: pure_callback(lambda a: np.sum(a) * 2, float)(v), abstracted_axes=({0: "n"},))
    assert [float(total(jnp.arange(n, dtype=float))) for n in (3, 5)] == [6.0, 20.0]
    assert "catalyst_lite.pure_callback" in total.mlir


def test_outside_qjit_the_function_is_called():
    assert host_sin(0.5) == np.sin(0.5)
    assert type(pure_callback(lambda v: v + 1, int)(2)) is int


def test_results_must_have_the_declared_types():
    # Catalyst's class and phrase first, then ours
    with pytest.raises(TypeError, match="^A function using pure_callback requires return types.*needs its result type"):
        qjit(lambda x: pure_callback(lambda v: v + 1)(x))(2)
    with pytest.raises(TypeError, match="^Callback <lambda> expected type int64"):
        qjit(lambda x: pure_callback(lambda v: v + 1.5, int)(x))(2)
    with pytest.raises(TypeError, match=r"expected type float64\[2\] but observed float64\[3\]"):
        qjit(lambda x: pure_callback(lambda v: np.ones(3), jax.ShapeDtypeStruct((2,), jnp.float64))(x))(2.0)


def test_pure_callback_under_vmap():
    np.testing.assert_allclose(qjit(vmap(host_sin))(jnp.array([0.1, 0.2])), np.sin([0.1, 0.2]), rtol=1e-15)


def test_pure_callback_inside_a_jax_loop_body():
    """A callback inside a JAX primitive's own body (lax.fori_loop), which specialization binds
    whole: XLA compiles the callback itself, as jax.jit does."""

    @qjit
    def f(x):
        return jax.lax.fori_loop(0, 3, lambda i, a: a + host_sin(a), x)

    def reference(x):
        return jax.lax.fori_loop(0, 3, lambda i, a: a + jnp.sin(a), x)

    np.testing.assert_allclose(f(0.5), jax.jit(reference)(0.5), rtol=1e-15)


@pure_callback
def product(x) -> float:
    return np.sin(x[0]) * x[1]


@product.fwd
def product_fwd(x):
    return product(x), x


@product.bwd
def product_vjp(res, dy):
    def vjp(x, dy) -> (jax.ShapeDtypeStruct((2,), jnp.float64),):
        return (np.array([np.cos(x[0]) * dy * x[1], np.sin(x[0]) * dy]),)

    return pure_callback(vjp)(res, dy)


def through_product(x):
    y = jnp.array([jnp.cos(x[0]), x[1]])
    return jnp.sin(product(y))


def jax_product(x):
    y = jnp.array([jnp.cos(x[0]), x[1]])
    return jnp.sin(jnp.sin(y[0]) * y[1])


def test_pure_callback_differentiated_with_its_fwd_and_bwd():
    """Catalyst's documented example (Catalyst 0.15 gives [-0.01071923, 0.82698717])."""
    x = jnp.array([0.1, 0.2])
    expected = jax.grad(jax_product)(x)
    np.testing.assert_allclose(qjit(grad(through_product))(x), expected, rtol=1e-12)
    np.testing.assert_allclose(qjit(jacobian(through_product))(x), expected, rtol=1e-12)
    np.testing.assert_allclose(qjit(through_product)(x), jax_product(x), rtol=1e-12)
    batch = jnp.array([[0.1, 0.2], [0.3, 0.4]])
    np.testing.assert_allclose(qjit(vmap(grad(through_product)))(batch), jax.vmap(jax.grad(jax_product))(batch))


def test_differentiating_a_callback_needs_fwd_and_bwd():
    with pytest.raises(DifferentiableCompileError, match="define its forward and backward"):
        qjit(grad(lambda x: host_sin(x)))(0.5)

    @pure_callback
    def half(x) -> float:
        return np.sin(x)

    half.fwd(lambda x: (half(x), x))
    with pytest.raises(DifferentiableCompileError, match=r"^Pure callback .*half is missing reverse pass.*backward \(.bwd\)"):
        qjit(grad(lambda x: half(x)))(0.5)
    assert issubclass(DifferentiableCompileError, CompileError)


def test_a_callback_without_derivative_fails_when_traced_only_where_the_derivative_needs_it():
    """jax.grad rejects a pure callback without a derivative; so does grad, while tracing (an
    annotated function: at decoration, as Catalyst's compiler), with Catalyst's words. A callback
    the derivative does not go through (stop_gradient, an integer argument) runs."""
    with pytest.raises(ValueError):
        jax.grad(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((), jnp.float64), x))(0.5)
    with pytest.raises(DifferentiableCompileError, match="^Compilation failed: pure_callback .*no derivative"):

        @qjit
        def program(x: float):
            return grad(lambda v: 2 * host_sin(v))(x)

    f = lambda x, n: pure_callback(np.cos, float)(jax.lax.stop_gradient(x)) * x + pure_callback(float, float)(n) * x
    np.testing.assert_allclose(qjit(grad(f))(0.5, 3), jax.grad(lambda x, n: np.cos(0.5) * x + n * x)(0.5, 3))


def test_a_value_stands_for_its_type_as_a_result_type():
    """As in Catalyst, a result type may be a value of that type: a Python number, an array, or a
    pytree of them."""
    for value in (0, 2.5, 1j, True, jnp.arange(3.0), np.ones((2, 2), np.int32)):
        got = qjit(lambda x: pure_callback(lambda v: v, value)(x))(value)
        np.testing.assert_array_equal(got, np.asarray(value))
        assert np.asarray(got).dtype == jnp.asarray(value).dtype
    got = qjit(lambda x: pure_callback(lambda v: {"y": v * 2}, {"y": 1.0})(x))(0.25)
    assert float(got["y"]) == 0.5


def test_bwd_receives_the_cotangent_structured_as_the_results():
    @pure_callback
    def parts(w) -> {"s": jax.ShapeDtypeStruct((), jnp.float64), "v": jax.ShapeDtypeStruct((2,), jnp.float64)}:
        return {"s": np.sum(w ** 2), "v": np.sin(w)}

    seen = []

    @parts.fwd
    def parts_fwd(w):
        return parts(w), w

    @parts.bwd
    def parts_bwd(w, dy):
        seen.append(sorted(dy))  # traced once: the keys of dy
        return (2 * w * dy["s"] + jnp.cos(w) * dy["v"],)

    def reference(w):
        return jnp.sum(w ** 2) * 3.0 + jnp.sum(jnp.sin(w) * jnp.array([1.0, -1.0]))

    def through(w):
        out = parts(w)
        return out["s"] * 3.0 + jnp.sum(out["v"] * jnp.array([1.0, -1.0]))

    w = jnp.array([0.3, -0.7])
    np.testing.assert_allclose(qjit(grad(through))(w), jax.grad(reference)(w), rtol=1e-12)
    assert seen[0] == ["s", "v"]


def test_bwd_may_return_cotangents_for_the_differentiated_arguments_only():
    """Catalyst lets ``.bwd`` return one cotangent per differentiated argument; a result nobody
    uses reaches ``.bwd`` as a zero cotangent."""
    b = jnp.array([[2.0], [-1.0]])

    @pure_callback
    def matmul(x, y) -> (jax.ShapeDtypeStruct((3, 1), jnp.float64), jax.ShapeDtypeStruct((), jnp.float64)):
        return x @ y, np.sum(x)

    @matmul.fwd
    def matmul_fwd(x, y):
        return matmul(x, y), y

    @matmul.bwd
    def matmul_bwd(y, dy):
        return dy[0] @ y.T + dy[1]  # x's cotangent only: y is not differentiated

    got = qjit(jacobian(lambda x, y: matmul(x, y)[0]))(jnp.ones((3, 2)), b)
    np.testing.assert_allclose(got, jax.jacobian(lambda x: x @ b)(jnp.ones((3, 2))), rtol=1e-12)


def test_a_callback_runs_when_only_its_derivative_is_used():
    """Under grad the callback's results are not needed, only its .fwd residuals: it still runs
    (it may keep state for .bwd, or check its results), as Catalyst runs it."""
    calls = []

    @pure_callback
    def scaled(x) -> float:
        calls.append(float(x))
        return 3.0 * x

    @scaled.fwd
    def scaled_fwd(x):
        return scaled(x), None

    @scaled.bwd
    def scaled_bwd(_, dy):
        return (3.0 * dy,)

    assert float(qjit(grad(lambda x: scaled(x) * 2.0))(0.5)) == 6.0
    assert calls == [0.5]
    unused = qjit(lambda x: (scaled(x), x + 1.0)[1])  # a result nobody reads: still called
    assert float(unused(2.0)) == 3.0 and calls == [0.5, 2.0]


def test_debug_callbacks_run_in_program_order(capsys):
    state = {"x": 0}
    read = debug.callback(lambda: print(state["x"]))
    write = debug.callback(lambda v: state.update(x=int(v)))

    @qjit
    def f(v):
        read()
        write(v)
        read()
        write(v + 1)
        read()

    f(7)
    assert capsys.readouterr().out.split() == ["0", "7", "8"]


def test_base_callback_runs_on_each_call_in_program_order_with_numpy_arguments():
    calls = []

    @base_callback
    def log(tag, x):  # no annotation: called for its effects; what it returns is dropped
        calls.append((int(tag), np.asarray(x).copy()))
        return "dropped"

    @base_callback
    def scaled(x) -> jax.ShapeDtypeStruct((2,), jnp.float64):  # an annotation declares results
        return 2.0 * x

    @qjit
    def f(x):
        log(0, x)
        y = scaled(x)
        log(tag=1, x=y)
        return y + 1.0

    xs = [np.array([0.5, -1.0]), np.array([3.0, 4.0])]
    for x in xs + xs:  # each call runs the callbacks again, also the same program's
        np.testing.assert_allclose(f(x), 2.0 * x + 1.0)
    expected = [(tag, v) for x in xs + xs for tag, v in ((0, x), (1, 2.0 * x))]
    assert [tag for tag, _ in calls] == [tag for tag, _ in expected]
    for (_, seen), (_, v) in zip(calls, expected):
        np.testing.assert_array_equal(seen, v)
    assert log(2, 5) == "dropped" and calls[-1][0] == 2  # outside qjit it is simply called


def test_accelerate_of_a_function_jax_jit_cannot_compile_is_catalysts_error():
    def branchy(x):
        return 0.0 if x > 0 else 1.0

    with pytest.raises(ValueError, match="^Function branchy must be jax.jit-able"):
        qjit(lambda x: accelerate(branchy)(x))(1.0)
    assert accelerate(branchy)(1.0) == 0.0  # outside qjit: Python runs it


def test_accelerate_traces_jax_functions_into_the_program():
    square = accelerate(lambda x: jnp.sin(x) ** 2)
    x = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(qjit(lambda v: jnp.cos(square(jnp.sqrt(v))))(x), jnp.cos(jnp.sin(jnp.sqrt(x)) ** 2))
    np.testing.assert_allclose(qjit(accelerate(jax.jit(lambda v: v * 2), dev=jax.devices()[0]))(x), x * 2)
    m = jnp.array([[0.1, 0.2], [0.3, 0.4]])
    expm = accelerate(jax.scipy.linalg.expm)  # Catalyst's documented example (its gradient: see below)
    np.testing.assert_allclose(qjit(lambda v: expm(jnp.sin(v)))(m), jax.scipy.linalg.expm(jnp.sin(m)))
    np.testing.assert_allclose(qjit(grad(lambda v: jnp.sum(square(v))))(x), jnp.sin(2 * x))
    with pytest.raises(ValueError, match="jax.Device"):
        accelerate(dev="cpu")


def test_debug_callback_and_print_run_when_the_program_runs(capsys):
    @debug.callback
    def show(y):
        print("Value of y =", y)

    def f(x):
        y = jnp.sin(x)
        show(y)
        debug.print("x = {0:.2f}, y = {y:.3f}", x, y=y)
        return y**2

    compiled = qjit(f)
    capsys.readouterr()
    for x in (0.54, 1.52):
        assert float(compiled(x)) == pytest.approx(np.sin(x) ** 2)
        assert capsys.readouterr().out == f"Value of y = {np.sin(x)}\nx = {x:.2f}, y = {np.sin(x):.3f}\n"
    assert float(qjit(grad(f))(0.54)) == pytest.approx(2 * np.sin(0.54) * np.cos(0.54))
    assert capsys.readouterr().out.count("Value of y") == 1  # the forward pass only
    f(0.54)  # outside qjit: called directly
    assert capsys.readouterr().out.startswith("Value of y = ")


def test_debug_print_of_values_and_in_loops(capsys):
    @qjit
    def f(n, v):
        debug.print(v)
        debug.print_memref(v)

        @for_loop(0, n, 1)
        def body(i, acc):
            debug.print("i={i} acc={acc}", i=i, acc=acc)
            return acc + i

        return body(0)

    assert int(f(3, jnp.arange(3.0))) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[0. 1. 2.]"
    assert lines[1].startswith("MemRef: base@ = 0x") and lines[1].endswith("rank = 1 offset = 0 sizes = [3] strides = [1] data =")
    assert lines[2:] == ["[0,  1,  2]", "i=0 acc=0", "i=1 acc=0", "i=2 acc=1"]


def test_mid_circuit_outcomes_reach_callbacks_as_catalysts_traced_bools(capsys):
    # Catalyst's measure returns a traced bool, which debug.print, debug.callback and pure_callback take.
    from catalyst_lite import measure

    seen = []

    @qjit
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit(x: float):
        qml.RX(x, 0)
        m0, m1 = measure(0), measure(1)
        debug.print("m0={} m1={m1}", m0, m1=m1)
        debug.callback(lambda a, b: seen.append((bool(a), bool(b))))(m0, m1)
        flipped = pure_callback(lambda a: np.logical_not(a), result_type=bool)(m0)
        return flipped, qml.expval(qml.Z(0))

    for x, bit in ((0.0, False), (np.pi, True)):  # deterministic outcomes
        flipped, z = circuit(x)
        assert bool(flipped) is (not bit) and float(z) == pytest.approx(np.cos(x))
        assert capsys.readouterr().out == f"m0={jnp.asarray(bit)} m1={jnp.asarray(False)}\n"
    assert seen == [(False, False), (True, False)]


def test_print_memref_of_higher_ranks_is_catalysts_layout(capsys):
    """Catalyst's runtime separates the innermost elements by a comma and rank + 1 spaces, ends
    each row with ", " and starts the next on a new line indented by its depth; integers and bools
    print in full, floats with 6 significant digits (checked against Catalyst 0.15's output)."""
    show = qjit(lambda x: (debug.print_memref(x), x)[1])
    show(np.arange(6).reshape(2, 3) * 100)
    show(np.arange(8.0).reshape(2, 2, 2) + 0.5)
    show(np.array([1.5, -2.25, 1e6]))
    show(np.array([True, False]))
    data = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("MemRef")]
    assert data == [
        "[[0,   100,   200], ", " [300,   400,   500]]",
        "[[[0.5,    1.5], ", "  [2.5,    3.5]], ", " [[4.5,    5.5], ", "  [6.5,    7.5]]]",
        "[1.5,  -2.25,  1e+06]",
        "[1,  0]",
    ]


def test_debug_print_formats_jax_arrays(capsys):
    """Catalyst formats the values as JAX arrays: a container shows their reprs, a format spec
    applies to a scalar, and dtypes are kept."""
    @qjit
    def f(x, k):
        debug.print("{d} {x:.2f} {k!r}", d={"a": x}, x=x, k=k)
        return x

    f(1.5, np.int32(3))
    expected = f"{ {'a': jnp.asarray(np.float64(1.5))} } 1.50 {jnp.asarray(np.int32(3))!r}"
    assert capsys.readouterr().out.strip() == expected


def test_debug_callback_must_return_none():
    with pytest.raises(ValueError, match="^debug.callback is expected to return None"):
        qjit(lambda x: debug.callback(lambda v: 5)(x))(1.0)


def test_debug_assert():
    def f(x):
        debug_assert(x < 5, "x was greater than 5")
        return x * 8

    compiled = qjit(f)
    assert int(compiled(4)) == 32
    for _ in range(2):  # the fast path of a repeated call raises it too
        with pytest.raises(RuntimeError, match="^x was greater than 5$") as info:
            compiled(6)
        assert isinstance(info.value, DebugAssertionError)
    assert int(compiled(3)) == 24
    assert int(qjit(f, disable_assertions=True)(6)) == 48
    with pytest.raises(DebugAssertionError):
        f(6)  # outside qjit: checked at once

    @qjit
    def loop(n):
        @for_loop(0, n, 1)
        def body(i, acc):
            debug_assert(i < 2, "i too big")
            return acc + i

        return body(0)

    assert int(loop(2)) == 1
    with pytest.raises(RuntimeError, match="i too big"):
        loop(3)
    with pytest.raises(TypeError, match="boolean scalar"):
        qjit(lambda x: debug_assert(x < 5, "array"))(jnp.ones(2))


@needs_capture
def test_under_program_capture():
    """As in Catalyst, vmap, callbacks and debug helpers also work in captured programs (vmap's
    loop is then PennyLane's qml.for_loop)."""
    def f(x):
        debug_assert(x < 5, "x too big")
        return host_sin(x) * 2 + jnp.sum(vmap(lambda r: r * 2)(jnp.ones(3) * x))

    captured = qjit(f, capture=True)
    assert float(captured(0.5)) == pytest.approx(2 * np.sin(0.5) + 3.0)
    with pytest.raises(DebugAssertionError, match="x too big"):
        captured(7.0)
    x = jnp.array([0.1, 0.2])
    np.testing.assert_allclose(qjit(grad(through_product), capture=True)(x), jax.grad(jax_product)(x), rtol=1e-12)
    assert not qml.capture.enabled()


def test_a_callback_failing_on_an_xla_worker_thread_raises_its_own_exception():
    """XLA runs a larger program on its own threads, where the callback cannot see the calling
    thread's record: its exception still reaches the caller as itself (it was XLA's
    ``XlaRuntimeError`` from the second call on)."""

    def refuse(v):
        raise KeyError(float(v))

    @qjit
    def f(x):
        y = jnp.sin(x) @ jnp.cos(x).T  # large enough for XLA's worker threads
        debug.callback(refuse)(y[0, 0])
        return y

    x = np.ones((300, 300))
    for _ in range(3):
        with pytest.raises(KeyError):
            f(x)

    # The failures stay with their calls: a later program with a callback runs (JAX kept a failed
    # effect token, which failed every later such program with the same error).
    seen = []

    @qjit
    def g(v):
        debug.callback(seen.append)(v)
        return v + 1.0

    assert float(g(2.0)) == 3.0 and seen == [2.0]
