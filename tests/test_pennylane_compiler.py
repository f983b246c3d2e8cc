"""catalyst_lite as a PennyLane compiler: discovery through the ``pennylane.compilers`` entry
points, ``qml.qjit(compiler="catalyst_lite")``, ``qml.for_loop``/``qml.while_loop``/``qml.cond``
dispatching to our primitives while we trace, and PennyLane's plain Python everywhere else."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import QJIT
from catalyst_lite.control_flow import cond_p, for_loop_p, while_loop_p
from catalyst_lite.pennylane_compiler import COMPILER_NAME, PennyLaneOps, TracingContext

pytestmark = pytest.mark.skipif(
    not qml.compiler.available(COMPILER_NAME),
    reason="entry points not installed: run `pip install -e .`",
)


@pytest.fixture(autouse=True)
def jax_config_untouched():
    """Every test leaves the user's global JAX flags as it found them."""
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    yield
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before


def eqns_of(qjitted: QJIT, primitive) -> list:
    """The top-level equations of ``primitive`` in the last traced program."""
    return [e for e in qjitted.jaxpr.jaxpr.eqns if e.primitive is primitive]


def is_traced_input(var, qjitted: QJIT) -> bool:
    """True when ``var`` is an argument of the traced program (not a literal)."""
    return any(var is v for v in qjitted.jaxpr.jaxpr.invars)


def has_dynamic_size(var) -> bool:
    """True when some dimension of ``var`` is a traced size rather than an ``int``."""
    return any(not isinstance(d, int) for d in getattr(var.aval, "shape", ()))


# --- discovery -----------------------------------------------------------------------------------


def test_listed_among_available_compilers():
    assert COMPILER_NAME in qml.compiler.available_compilers()
    assert qml.compiler.available("catalyst_lite")


def test_entry_points_are_the_plugin_objects():
    from pennylane.compiler.compiler import AvailableCompilers

    eps = AvailableCompilers.names_entrypoints[COMPILER_NAME]
    assert eps["context"].load() is TracingContext
    assert eps["ops"].load() is PennyLaneOps
    assert eps["qjit"].load().__module__ == "catalyst_lite.pennylane_compiler"


def test_no_active_compiler_outside_qjit():
    assert qml.compiler.active_compiler() is None
    assert not qml.compiler.active()
    assert not TracingContext.is_tracing()


def test_active_while_catalyst_lite_traces():
    seen = []

    def f(x: float):
        seen.append((qml.compiler.active_compiler(), qml.compiler.active()))
        return x + 1.0

    compiled = qml.qjit(f, compiler="catalyst_lite")
    assert float(compiled(1.0)) == 2.0
    assert seen == [("catalyst_lite", True)]
    assert qml.compiler.active_compiler() is None


def test_another_dynamic_shape_trace_is_not_ours():
    """Catalyst also traces with JAX dynamic shapes; only our own trace may claim the name."""
    seen = []

    def f(x):
        seen.append(TracingContext.is_tracing())
        return x

    jax.config.update("jax_dynamic_shapes", True)
    try:
        jax.make_jaxpr(f)(1.0)
    finally:
        jax.config.update("jax_dynamic_shapes", False)
    assert seen == [False]


# --- qml.qjit ------------------------------------------------------------------------------------


def test_qjit_without_options():
    @qml.qjit(compiler="catalyst_lite")
    def double(x):
        return x * 2

    assert isinstance(double, QJIT)
    np.testing.assert_array_equal(double(np.arange(3.0)), [0.0, 2.0, 4.0])


def test_qjit_called_with_the_function():
    compiled = qml.qjit(lambda n: jnp.ones((n,)), compiler="catalyst_lite")
    assert isinstance(compiled, QJIT)
    assert compiled(4).shape == (4,)


def test_qjit_with_abstracted_axes_traces_once():
    traces = []

    @qml.qjit(compiler="catalyst_lite", abstracted_axes={0: "n"})
    def total(x):
        traces.append(x.shape)
        return jnp.sum(x * 2.0)

    assert float(total(np.arange(4.0))) == 12.0
    assert float(total(np.arange(6.0))) == 30.0
    assert len(traces) == 1
    assert "?" in total.mlir


def test_qjit_with_static_argnums():
    @qml.qjit(compiler="catalyst_lite", static_argnums=1)
    def power(x, k):
        return x**k

    assert float(power(2.0, 3)) == 8.0


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'not_an_option'"):
        qml.qjit(lambda x: x, compiler="catalyst_lite", not_an_option=True)


def test_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="compiles a function"):
        qml.qjit(42, compiler="catalyst_lite")


# --- control flow dispatch -----------------------------------------------------------------------


def test_for_loop_dispatches_with_traced_bound_and_dynamic_array():
    @qml.qjit(compiler="catalyst_lite")
    def cumulative(n: int):
        @qml.for_loop(0, n, 1)
        def body(i, acc):
            return acc.at[i].set(i * 1.0 + jnp.where(i > 0, acc[i - 1], 0.0))

        return body(jnp.zeros(n))

    np.testing.assert_array_equal(cumulative(5), np.cumsum(np.arange(5.0)))
    (eqn,) = eqns_of(cumulative, for_loop_p)
    assert any(is_traced_input(v, cumulative) for v in eqn.invars)  # the bound n
    assert has_dynamic_size(eqn.outvars[-1])  # f64[n]


def test_for_loop_with_stop_only():
    @qml.qjit(compiler="catalyst_lite")
    def triangle(n: int):
        @qml.for_loop(n)
        def body(i, total):
            return total + i

        return body(0)

    assert int(triangle(5)) == 10
    assert len(eqns_of(triangle, for_loop_p)) == 1


def test_while_loop_dispatches_with_traced_bound_and_dynamic_array():
    @qml.qjit(compiler="catalyst_lite")
    def doubled(n: int):
        @qml.while_loop(lambda x, k: k < n)
        def body(x, k):
            return x * 2.0, k + 1

        return body(jnp.ones(n), 0)

    x, k = doubled(3)
    np.testing.assert_array_equal(x, [8.0, 8.0, 8.0])
    assert int(k) == 3
    (eqn,) = eqns_of(doubled, while_loop_p)
    assert any(is_traced_input(v, doubled) for v in eqn.invars)  # n, captured by the predicate
    assert any(has_dynamic_size(v) for v in eqn.outvars)  # f64[n]


def test_cond_dispatches_with_traced_predicate_and_dynamic_array():
    @qml.qjit(compiler="catalyst_lite")
    def signed_ones(n: int):
        x = jnp.ones(n)
        return qml.cond(n > 2, lambda: x, lambda: -x)()

    np.testing.assert_array_equal(signed_ones(3), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(signed_ones(2), [-1.0, -1.0])
    (eqn,) = eqns_of(signed_ones, cond_p)
    assert any(has_dynamic_size(v) for v in eqn.outvars)


def test_cond_with_elif_branches():
    @qml.qjit(compiler="catalyst_lite")
    def sign(x: float):
        return qml.cond(x > 0, lambda: 1.0, lambda: -1.0, elifs=((x == 0, lambda: 0.0),))()

    assert [float(sign(v)) for v in (3.0, 0.0, -2.0)] == [1.0, 0.0, -1.0]
    assert len(eqns_of(sign, cond_p)) == 1


def test_cond_as_decorator_with_otherwise():
    @qml.qjit(compiler="catalyst_lite")
    def clipped(x: float):
        @qml.cond(x > 1.0)
        def branch():
            return 1.0

        @branch.otherwise
        def branch():
            return x

        return branch()

    assert float(clipped(5.0)) == 1.0
    assert float(clipped(0.5)) == 0.5


def test_derivatives_dispatch_to_ours():
    def f(x):
        g = qml.grad(lambda y: jnp.sin(y) * y**2)(x)
        _, jvp_out = qml.jvp(lambda y: y**3, (x,), (1.0,))
        return g, qml.jacobian(lambda y: jnp.stack([y, y**2]))(x), jvp_out

    compiled = qml.qjit(f, compiler="catalyst_lite")
    for x in (0.3, 1.7):
        g, jac, jvp_out = compiled(x)
        np.testing.assert_allclose(g, np.cos(x) * x**2 + 2 * x * np.sin(x), rtol=1e-12)
        np.testing.assert_allclose(jac, [1.0, 2 * x], rtol=1e-12)
        np.testing.assert_allclose(jvp_out, 3 * x**2, rtol=1e-12)
    assert "differentiate" in str(compiled.jaxpr)


# --- fallback outside qjit -----------------------------------------------------------------------


def test_for_loop_outside_qjit_is_plain_python():
    @qml.for_loop(0, 4, 1)
    def body(i, acc):
        return acc + [i]

    assert body([]) == [0, 1, 2, 3]  # a list carry: only plain Python can run this


def test_while_loop_outside_qjit_is_plain_python():
    @qml.while_loop(lambda k: k < 5)
    def body(k):
        return k + 2

    result = body(0)
    assert result == 6 and type(result) is int


def test_cond_outside_qjit_is_plain_python():
    assert qml.cond(True, lambda: "yes", lambda: "no")() == "yes"
    assert qml.cond(False, lambda: "yes", lambda: "no")() == "no"


def test_control_flow_under_jax_jit_stays_pennylanes():
    """A plain ``jax.jit`` is not catalyst_lite: PennyLane's own JAX path runs."""

    @jax.jit
    def f(x):
        @qml.for_loop(0, 3, 1)
        def body(i, acc):
            return acc + x

        return body(0.0)

    assert float(f(2.0)) == 6.0


# --- documentation -------------------------------------------------------------------------------


def test_docs_usage_example_runs():
    """docs/pennylane.md's "Use" section is real code: run it and check what its comments claim."""
    import pathlib
    import re

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "pennylane.md").read_text()
    block = re.search(r"## Use\n\n```python\n(.*?)```", doc, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "docs/pennylane.md", "exec"), namespace)
    np.testing.assert_array_equal(namespace["cumulative"](5), [0.0, 1.0, 3.0, 6.0, 10.0])
    assert float(namespace["clipped_total"](np.arange(3.0))) == 3.0
    assert float(namespace["clipped_total"](np.arange(9.0))) == 10.0
