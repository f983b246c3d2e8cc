"""Every kind of bad input gets a clear catalyst_lite error, and the same compiled function keeps
working for good input afterwards.

Each test feeds one kind of bad input, checks the exception's type (a :class:`CatalystLiteError`
that is also the built-in type a Python user expects) and that its message names the function, the
argument or loop, what was found and the fix; errors found while tracing also name the user's line.
"""

import re
import traceback

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import CatalystLiteError, cond, for_loop, grad, jacobian, jvp, pure_callback, qjit
from catalyst_lite import accelerate, debug_assert, value_and_grad, vjp, vmap, while_loop
from catalyst_lite.errors import (
    SymbolicShapeError,
    ArgumentOverflowError,
    ArgumentTypeError,
    ArgumentValueError,
    ArrayTooLargeError,
    CallbackError,
    ControlFlowError,
    DataDependentSliceError,
    DimensionError,
    ResultTypeError,
    UnsupportedOperationError,
)

THIS_FILE = re.escape(__file__)


@pytest.fixture(autouse=True)
def jax_config_untouched():
    """No error leaves the user's global JAX flags changed."""
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    yield
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before


def raises(error_type, *patterns):
    """``pytest.raises`` for a catalyst_lite error whose message matches every pattern, in order."""
    assert issubclass(error_type, CatalystLiteError)
    return pytest.raises(error_type, match=".*".join(patterns))


def at_line(fragment: str) -> str:
    """The message part naming this test file's line holding ``fragment``."""
    return rf"at {THIS_FILE}:\d+: `[^`]*{re.escape(fragment)}"


# --- arguments --------------------------------------------------------------------------------------


@qjit
def sized(n: int):
    return jnp.ones([n]) * 2.0


@qjit
def sized_unannotated(n):
    return jnp.ones([n]) * 2.0


@qjit(abstracted_axes={0: "n"})
def doubled(x):
    return x * 2.0


def works(f, n=3):
    """``f`` (one of the functions above) still gives the right result for good input."""
    if f is doubled:
        np.testing.assert_allclose(f(np.arange(n * 1.0)), np.arange(n) * 2.0)
    else:
        np.testing.assert_allclose(f(n), np.full(n, 2.0))


def test_too_many_arguments():
    with raises(ArgumentTypeError, "sized", "too many"):
        sized(1, 2)
    works(sized)


def test_missing_argument():
    with raises(ArgumentTypeError, "sized", "'n'"):
        sized()
    works(sized)


def test_unexpected_keyword_argument():
    with raises(ArgumentTypeError, "sized", "'m'"):
        sized(3, m=3)
    works(sized)


def test_argument_of_unsupported_type():
    with raises(ArgumentTypeError, "doubled", "'x'", "object", "static_argnums"):
        doubled(object())
    works(doubled)


def test_pytree_with_a_string_leaf():
    with raises(ArgumentTypeError, "doubled", "'x'", "str"):
        doubled({"a": np.ones(2), "b": "text"})
    works(doubled)


@pytest.mark.parametrize("array", [np.array(["a", "b"]), np.array([object()]), np.array(["2026-11-27"], dtype="datetime64[D]")],
                         ids=["strings", "objects", "dates"])
def test_an_array_jax_cannot_hold_is_named_at_the_call(array):
    """jax.jit refuses it too; the trace reached JAX, whose message named neither the function
    nor the argument."""
    with pytest.raises(TypeError):
        jax.jit(lambda x: x)(array)
    with raises(ArgumentTypeError, "doubled", "'x'", re.escape(f"dtype {array.dtype}"), "numbers and booleans"):
        doubled(array)
    works(doubled)


def test_abstracted_axes_pytree_not_matching_the_argument():
    f = qjit(lambda t: t["a"].sum() + t["b"].sum(), abstracted_axes=({"a": {0: "n"}, "c": {0: "m"}},))
    with raises(ArgumentTypeError, "abstracted_axes entry for argument 't'", "'c'", r"\{'a': \*, 'b': \*\}"):
        f({"a": np.ones(2), "b": np.ones(3)})
    g = qjit(lambda t: t["a"].sum() + t["b"].sum(), abstracted_axes=({"a": {0: "n"}, "b": {0: "m"}},))
    assert float(g({"a": np.ones(2), "b": np.ones(3)})) == 5.0


@pytest.mark.parametrize(
    "axes", [{"a": "n"}, {0: "n", "one": "m"}, ({1.5: "n"},)], ids=["str", "mixed", "float"]
)
def test_abstracted_axes_dict_whose_axes_are_not_integers(axes):
    """Was int()'s ValueError from our code; a dict keyed by the argument's keys is for a dict argument."""
    f = qjit(lambda x: x * 2.0, abstracted_axes=axes)
    with raises(ArgumentTypeError, "<lambda>", "abstracted_axes entry", "'x'", "integer axes", r"\{0: 'n'\}"):
        f(np.ones((3, 2)))
    x = np.ones((3, 2))
    np.testing.assert_allclose(qjit(lambda x: x * 2.0, abstracted_axes={0: "n"})(x), x * 2.0)


@pytest.mark.filterwarnings("ignore:Provided arguments did not match")
@pytest.mark.parametrize("f", [sized, sized_unannotated], ids=["annotated", "unannotated"])
def test_string_where_a_size_is_expected(f):
    with raises(ArgumentTypeError, "'n'", "str"):
        f("3")
    works(f)


@pytest.mark.parametrize("bad", [2.5, float("nan"), np.float64(3.0)], ids=["float", "nan", "np_float"])
def test_non_integer_size_annotated(bad):
    """As in Catalyst, a float for an ``int`` annotation warns that it does not match and is
    traced for its own type: a size computed from it is then the unannotated function's error."""
    with pytest.warns(UserWarning, match="sized: argument 'n' is annotated int"), \
            raises(ArgumentTypeError, "sized", "must be an integer", "'n' \\(float64\\)"):
        sized(bad)
    works(sized)


def test_bool_for_an_int_annotation_promotes():
    """Catalyst converts a bool to the annotated int (no warning, no new trace)."""
    np.testing.assert_allclose(sized(True), np.full(1, 2.0))


@pytest.mark.parametrize(
    "bad, dtype", [(2.5, "float64"), (float("nan"), "float64"), (np.float64(3.0), "float64"), (True, "bool")],
    ids=["float", "nan", "np_float", "bool"],
)
def test_non_integer_size_unannotated(bad, dtype):
    # Fresh: once an int signature is compiled, a bool promotes to it (Catalyst's convention).
    fresh = qjit(sized_unannotated.original_function)
    with raises(ArgumentTypeError, "sized_unannotated", at_line("jnp.ones([n])"), "must be an integer",
                f"'n' \\({dtype}\\)", "Pass sizes as"):
        fresh(bad)
    works(fresh)


@pytest.mark.parametrize("f", [sized, sized_unannotated], ids=["annotated", "unannotated"])
def test_negative_size(f):
    with raises(ArgumentValueError, f.__name__, "negative size", "'n'=-2"):
        f(-2)
    works(f)


def test_a_size_expression_may_be_zero_but_not_negative():
    @qjit
    def f(n):
        return jnp.ones([n + 1]) * 2.0

    with raises(ArgumentValueError, "f", "negative size", "'n'=-4"):
        f(-4)
    np.testing.assert_array_equal(f(-1), np.ones(0))
    np.testing.assert_array_equal(f(2), np.full(3, 2.0))


@pytest.mark.parametrize("f", [sized, sized_unannotated], ids=["annotated", "unannotated"])
def test_size_too_large_for_memory_is_refused_before_xla_allocates(f):
    with raises(ArrayTooLargeError, f.__name__, r"shape \(1000000000000000,\)", "GiB", "'n'=1000000000000000"):
        f(10**15)
    with pytest.raises(MemoryError):  # also the built-in type
        f(10**15)
    works(f)


def test_two_dimensional_size_too_large_for_memory():
    f = qjit(lambda x: x[:, None] * x[None, :], abstracted_axes={0: "n"})
    with raises(ArrayTooLargeError, "shape", "more than"):
        f(np.ones(10**7, dtype=np.int8))
    np.testing.assert_allclose(f(np.arange(3.0)), np.outer(np.arange(3.0), np.arange(3.0)))


def test_shared_abstracted_dimension_with_different_lengths():
    f = qjit(lambda x, y: x + y, abstracted_axes={0: "n"})
    with raises(ArgumentValueError, "'n'", "'x'", "length 2", "'y'", "length 3", "differ"):
        f(np.ones(2), np.ones(3))
    np.testing.assert_allclose(f(np.ones(3), np.ones(3)), np.full(3, 2.0))


@pytest.mark.parametrize(
    "axes, args, message, good",
    [
        (({2: "n"},), (np.ones((2, 3)),), ("axis 2 of argument 'x'", "rank 2", r"0\.\.1"), (np.ones((2, 3, 4)),)),
        (({1: "n"}, None), (np.ones(3), np.ones(2)), ("axis 1 of argument 'x'", "rank 1"), (np.ones((2, 3)), np.ones(2))),
    ],
    ids=["only-argument", "with-an-unabstracted-argument"],
)
def test_abstracted_axis_beyond_rank(axes, args, message, good):
    f = qjit(lambda x, y=0.0: x + jnp.sum(y), abstracted_axes=axes)
    with raises(ArgumentValueError, *message):
        f(*args)
    np.testing.assert_allclose(f(*good), good[0] + np.sum(good[1:]))


# --- loops ------------------------------------------------------------------------------------------


def test_loop_body_changes_a_dimension_without_permission():
    @qjit
    def f(n):
        @for_loop(0, 2, 1)
        def grow(i, v):
            return jnp.ones(v.shape[0] + 1)

        return grow(jnp.ones(n))

    with raises(DimensionError, "for_loop body", "grow", "changes a dimension", "allow_array_resizing=True",
                at_line("return grow(jnp.ones(n))")):
        f(3)
    with raises(DimensionError, "grow"):  # and again: nothing half-traced was kept
        f(3)


def test_loop_body_returns_the_wrong_number_of_values():
    @qjit
    def f(n):
        @for_loop(0, n, 1)
        def body(i, a, b):
            return a + b

        return body(1.0, 2.0)

    with raises(ControlFlowError, "for_loop body", "body", "structure of its arguments",
                r"expected PyTreeDef\(\(\*, \*\)\), got PyTreeDef\(\*\)", at_line("return body(1.0, 2.0)")):
        f(3)


def test_loop_body_returns_the_wrong_structure():
    @qjit
    def f(n):
        @while_loop(lambda s: s["i"] < n)
        def body(s):
            return (s["i"] + 1, s["x"])

        return body({"i": 0, "x": 1.0})

    with raises(ControlFlowError, "while_loop body", "body", "structure"):
        f(3)


@pytest.mark.parametrize("api", ["for_loop", "while_loop"])
def test_loop_body_changes_a_carried_dtype(api):  # noqa: C901 (two loops, one test)
    @qjit
    def f(n):
        if api == "for_loop":
            @for_loop(0, n, 1)
            def body(i, x):
                return x.astype(jnp.int32)

            return body(jnp.ones(n))

        @while_loop(lambda x: jnp.sum(x) < 10)
        def body(x):
            return (x + 1).astype(jnp.int32)

        return body(jnp.ones(n))

    with raises(DimensionError, f"{api} body", "body", "changes the dtype", "f64", "i32", "types it receives"):
        f(3)


@pytest.mark.parametrize(
    "otherwise, patterns",
    [
        (lambda x: (x, x), ("branch 1 returns", "same structure")),
        (lambda x: jnp.ones(2), ("f64[]", "f64[2]", "same rank")),  # dtypes are promoted
    ],
    ids=["structure", "rank"],
)
def test_cond_branches_that_disagree(otherwise, patterns):
    @qjit
    def f(x):
        @cond(x > 0)
        def c():
            return x

        @c.otherwise
        def c():
            return otherwise(x)

        return c()

    with raises(ControlFlowError, "cond", *patterns, at_line("return c()")):
        f(1.0)
    with raises(ControlFlowError, "cond"):  # the same object fails the same way: nothing was cached
        f(1.0)


def test_cond_returning_values_without_otherwise():
    @qjit
    def f(x):
        @cond(x > 0)
        def c():
            return x

        return c()

    with raises(ControlFlowError, "cond", "no `otherwise`"):
        f(1.0)


# --- Python control flow on traced values ----------------------------------------------------------


def test_python_if_on_a_traced_value():
    @qjit
    def f(x):
        if x > 0:
            return x
        return -x

    with raises(ControlFlowError, "f", at_line("if x > 0:"), "catalyst_lite.cond", "while_loop"):
        f(1.0)
    with pytest.raises(TypeError):  # also the built-in type
        f(1.0)


def test_python_range_over_a_traced_value():
    @qjit
    def f(n):
        total = 0
        for i in range(n):
            total += i
        return total

    with raises(ControlFlowError, "f", at_line("for i in range(n):"), r"for_loop\(0, n, 1\)"):
        f(3)


def test_python_int_of_a_traced_value():
    @qjit
    def f(x):
        return jnp.ones(int(x))

    with raises(ControlFlowError, "f", at_line("int(x)"), "astype", "static"):
        f(3.0)


def test_numpy_on_a_traced_value():
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        return np.sum(np.asarray(x))

    with raises(ControlFlowError, "f", at_line("np.asarray(x)"), "jax.numpy"):
        f(np.ones(3))


def test_data_dependent_size():
    @qjit
    def f(n):
        return jnp.nonzero(jnp.arange(n) % 2)

    with pytest.raises(CatalystLiteError, match=r"nonzero.*size="):
        f(4)


# --- operations the dynamic-shape path cannot handle -----------------------------------------------


def _primitive_without_static_shape_support():
    """A stand-in for a JAX primitive that traces with symbolic sizes but fails on concrete ones."""
    prim = jax.extend.core.Primitive("only_symbolic")

    def abstract_eval(x):
        if all(isinstance(d, int) for d in x.shape):
            raise TypeError("only_symbolic cannot handle concrete shapes")
        return x

    prim.def_abstract_eval(abstract_eval)
    return prim


def test_unsupported_operation_while_specializing_is_named():
    prim = _primitive_without_static_shape_support()

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        return prim.bind(x) * 2.0

    with raises(UnsupportedOperationError, "f", at_line("prim.bind(x)"), "primitive 'only_symbolic'",
                "specialized sizes", "TypeError: only_symbolic cannot handle", "static shape"):
        f(np.ones(3))


# --- recovery ---------------------------------------------------------------------------------------


def test_same_function_works_after_every_kind_of_bad_call():
    """One compiled function, many bad calls in a row (bad arguments, and a static option that
    selects a bad program), then good calls at several sizes."""

    @qjit(abstracted_axes=({0: "n"}, None), static_argnames="mode")
    def f(x, k, mode="ok"):
        @for_loop(0, k, 1)
        def body(i, acc):
            if mode == "resize":
                return jnp.concatenate([acc, acc])
            if mode == "python_if" and acc[0] > 0:
                return acc
            if mode == "jax_scan":
                return jax.lax.associative_scan(jnp.add, acc)
            return acc + x

        return body(jnp.zeros(x.shape[0]))

    bad_calls = [
        ((np.ones(3),), {}),
        ((np.ones(3), 2, "ok", 3), {}),
        ((np.ones(3), "2"), {}),
        ((np.ones(3), 2.5), {}),
        (("x", 2), {}),
        ((np.ones(3),), {"kk": 2}),
        ((np.ones(3), 2), {"mode": "resize"}),
        ((np.ones(3), 2), {"mode": "python_if"}),
    ]
    for args, kwargs in bad_calls:
        with pytest.raises(CatalystLiteError):
            f(*args, **kwargs)
    # JAX's associative_scan takes no symbolic size: traced with the call's sizes, as jax.jit
    # traces it. (Not fft: jaxlib 0.7.1's XLA aborts on an fft inside a loop, under jax.jit too.)
    np.testing.assert_allclose(f(np.ones(3), 2, mode="jax_scan"), np.zeros(3))
    for n in [0, 2, 5]:
        np.testing.assert_allclose(f(np.arange(n * 1.0), 3), 3 * np.arange(n * 1.0))


def test_user_exception_while_tracing_is_left_unchanged():
    """The user's exception object itself, without notes; its traceback shows the user's line."""
    error = KeyError("user problem")

    @qjit
    def f(n):
        raise error

    with pytest.raises(KeyError) as info:
        f(3)
    assert info.value is error and error.args == ("user problem",)
    assert not hasattr(error, "__notes__")
    assert any(frame.line == "raise error" for frame in traceback.extract_tb(error.__traceback__))


def _custom_jvp_raising(error, runs=None):
    @jax.custom_jvp
    def g(x):
        return jnp.sin(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        if runs is not None:
            runs.append(1)
        raise error

    return g


def _raises_user_error(error):
    def body(*_):
        raise error

    return body


def _branch_raising(error, x):
    branches = cond(jnp.sum(x) > 0)(_raises_user_error(error))
    branches.otherwise(lambda: x)
    return branches()


@pytest.mark.parametrize(
    "program",
    [
        # a custom_jvp's rule runs when catalyst_lite.grad differentiates at specialization,
        lambda g, err, x: grad(lambda y: jnp.sum(g(y)))(x),
        # ... when JAX differentiates while tracing (static and symbolic sizes),
        lambda g, err, x: jax.grad(lambda y: jnp.sum(g(y)))(x),
        lambda g, err, x: jax.jvp(g, (x,), (x,))[1],
        # in a loop body, a branch, and a callback at run time
        lambda g, err, x: for_loop(0, 2, 1)(_raises_user_error(err))(x),
        lambda g, err, x: _branch_raising(err, x),
        lambda g, err, x: pure_callback(_raises_user_error(err), jax.ShapeDtypeStruct((), jnp.float64))(jnp.sum(x)),
    ],
    ids=["catalyst_lite.grad", "jax.grad", "jax.jvp", "for_loop", "cond", "pure_callback"],
)
@pytest.mark.parametrize("axes", [None, {0: "n"}], ids=["static", "symbolic"])
def test_user_exceptions_arrive_unchanged(program, axes):
    """The user's own exception is the one the caller gets: same class, same object."""
    err = KeyError("the user's own")
    g = _custom_jvp_raising(err)
    x = np.ones(3) if axes else 1.0

    @qjit(abstracted_axes=axes)
    def f(x):
        return program(g, err, x)

    with pytest.raises(KeyError) as info:
        f(x)
    assert info.value is err


@pytest.mark.parametrize("differentiate", [
    lambda g, x: jax.grad(lambda y: jnp.sum(g(y)))(x),
    lambda g, x: jax.jvp(g, (x,), (x,))[1],
], ids=["jax.grad", "jax.jvp"])
def test_a_custom_jvp_rule_that_raises_runs_once(differentiate):
    """The rule is the user's code: its exception is not JAX failing on a symbolic size (the
    program is not traced again with the call's sizes), and it gets no note of ours."""
    err, runs = KeyError("the user's own"), []
    g = _custom_jvp_raising(err, runs)
    with pytest.raises(KeyError) as info:
        qjit(lambda x: differentiate(g, x), abstracted_axes={0: "n"})(np.ones(2))
    assert info.value is err and len(runs) == 1
    assert not any("catalyst_lite" in note for note in getattr(err, "__notes__", ()))


@pytest.mark.parametrize(
    "body,call,fix",
    [
        (lambda x: jnp.squeeze(x), r"jnp\.squeeze\(x\) without axis", r"axis=1"),
        (lambda x: x[x[:, 0] > 0], r"boolean-mask indexing", r"jnp\.where"),
    ],
)
def test_calls_without_a_symbolic_result_shape_name_the_fix(body, call, fix):
    f = qjit(body, abstracted_axes={0: "n"})
    with pytest.raises(SymbolicShapeError, match=f"{call}.*{fix}"):
        f(np.ones((3, 1)))
    # Each later call with another size reports it again (the trace failed, nothing is cached).
    with pytest.raises(SymbolicShapeError):
        f(np.ones((4, 1)))


@pytest.mark.parametrize(
    "body",
    [
        lambda x: x[: jnp.sum(x > 0)],  # the count of positive entries
        lambda x: x[jnp.argmax(x):],
        lambda x: x[jnp.sum(x > 0) : jnp.sum(x > 0) + 1],
        lambda x: jnp.cumsum(x)[: jnp.sum(x > 1)] * 2.0,
    ],
)
@pytest.mark.parametrize("axes", [None, {0: "n"}])
def test_slice_bound_computed_from_data_is_jax_jits_index_error_with_the_fixes(body, axes):
    x = np.array([1.0, -1.0, 2.0])
    with pytest.raises(IndexError, match="static start/stop/step") as jax_error:
        jax.jit(body)(x)
    with pytest.raises(DataDependentSliceError) as ours:
        qjit(body, abstracted_axes=axes)(x)
    message = str(ours.value)
    assert str(jax_error.value).split(".")[0] in message  # JAX's words first, then ours:
    assert "<lambda>" in message and "computed from array data" in message  # the function, the value
    assert all(fix in message for fix in ("int argument", "abstracted_axes", "jnp.where", "lax.dynamic_slice"))
    assert isinstance(ours.value, IndexError)


@pytest.mark.parametrize("index", [
    lambda x: x > 0,  # a whole-array mask
    lambda x: (x > 0)[:, 0],  # a mask of the first axis
    lambda x: (slice(None), (x > 0)[0]),  # a mask among other indices
])
@pytest.mark.parametrize("abstracted_axes", [None, {0: "n"}])
def test_a_traced_boolean_mask_is_jaxs_index_error(index, abstracted_axes):
    """As under jax.jit (and Catalyst): JAX's NonConcreteBooleanIndexError, an IndexError, whether
    sizes are symbolic or not, with our words."""
    def body(x):
        return x[index(x)]

    x = np.arange(6.0).reshape(3, 2) - 2
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
        jax.jit(body)(x)
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError) as info:
        qjit(body, abstracted_axes=abstracted_axes)(x)
    assert isinstance(info.value, IndexError)


# --- Catalyst's words first ------------------------------------------------------------------------

def _double(x):
    return x * 2.0


def _one_or_tuple(x):
    return cond(x > 0)(lambda: x).otherwise(lambda: (x,))()


def _three_or_four(x):
    return cond(x > 0)(lambda: jnp.ones(3)).otherwise(lambda: jnp.ones(4))()


def _sized_or_three(k):
    return cond(k > 0)(lambda: jnp.ones(k)).otherwise(lambda: jnp.ones(3))()


def _vector_predicate(x):
    return cond(jnp.array([x, x]))(lambda: x).otherwise(lambda: -x)()


# (program, argument, the built-in class, Catalyst's phrase, a phrase of ours)
CATALYST_WORDED = {
    "jvp params": (lambda x: jvp(_double, x, [1.0]), 1.0, ValueError, "'params' argument must be a Sequence", "list or a tuple"),
    "jvp count": (lambda x: jvp(_double, [x], [1.0, 2.0]), 1.0, TypeError,
                  "number of tangents and number of differentiable parameters in catalyst.jvp do not match", "2 tangents"),
    "jvp dtype": (lambda x: jvp(_double, [x], [1]), 1.0, TypeError, "dtypes must be equal", "tangent 0 is int64"),
    "jvp shape": (lambda x: jvp(_double, [x], [jnp.ones(2)]), 1.0, ValueError,
                  "catalyst.jvp called with different function params and tangent shapes", "float64\\[2\\]"),
    "vjp count": (lambda x: vjp(_double, [x], [1.0, 2.0]), 1.0, TypeError,
                  "number of cotangent and number of function output parameters in catalyst.vjp do not match", "2 cotangents"),
    "vjp dtype": (lambda x: vjp(_double, [x], [1]), 1.0, TypeError,
                  "function output params and cotangents arguments to catalyst.vjp do not match; dtypes must be equal", "int64"),
    "vjp shape": (lambda x: vjp(_double, [x], [jnp.ones(2)]), 1.0, ValueError,
                  "catalyst.vjp called with different function output params and cotangent shapes", "float64\\[2\\]"),
    "vmap in_axes": (lambda x: vmap(_double, in_axes=(0, 0))(x), np.ones(3), ValueError, "Invalid 'in_axes'", "in_axes=\\(0, 0\\)"),
    "vmap batch": (lambda x: vmap(lambda a, b: a + b)(x, x[1:]), np.ones(3), ValueError, "Invalid batch sizes", "\\[3, 2\\]"),
    "vmap rank": (lambda x: vmap(_double)(x), 1.0, ValueError,
                  "Axis specifier 0 is out of bounds for argument 0. The argument only has 0 dimensions", "rank 0"),
    "grad method": (lambda x: grad(_double, method="spline")(x), 1.0, ValueError,
                    "Invalid differentiation method 'spline'. Supported methods are: auto fd", "'auto' or 'fd'"),
    "cond structure": (_one_or_tuple, 1.0, TypeError,
                       "Control flow requires a consistent return structure across all branches!", "branch 1 returns"),
    "cond shape": (_three_or_four, 1.0, TypeError,
                   "Control flow requires a consistent array shape per result across all branches!", "f64\\[4\\]"),
    "cond size symbolic in one branch": (_sized_or_three, 2, TypeError,
                                         "Control flow requires a consistent number of results across all branches!",
                                         "f64\\[\\?\\]"),
    "cond array predicate": (_vector_predicate, 1.0, TypeError,
                             "Array with multiple elements is not a valid predicate", "must hold one element"),
    "while_loop predicate not a bool": (lambda x: while_loop(lambda i: (44, 33))(lambda i: i + 1)(x), 1.0, TypeError,
                                        "A single boolean scalar was expected, got the value of tree-shape", "tuple"),
    "while_loop predicate an int": (lambda x: while_loop(lambda i: 33)(lambda i: i + 1)(x), 1.0, TypeError,
                                    "A single boolean scalar was expected, got the value 33", "needs a boolean scalar"),
    "while_loop predicate an array": (lambda x: while_loop(lambda v: v)(lambda v: v + 1)(x), np.ones(2), TypeError,
                                      "A single boolean scalar was expected, got the value float64[2]", "f64\\[2\\]"),
    "shape": (lambda x: jnp.empty([2, 3.0]) + x, 1.0, TypeError, "Shapes must be 1D sequences of integer scalars", "must be an integer"),
    "grad result": (lambda x: grad(_double)(x), np.ones(2), CatalystLiteError, "only supports scalar-output functions", "float64\\[2\\]"),
    "grad argument": (lambda x: grad(_double)(x), 1, CatalystLiteError,
                      "only supports differentiation on floating-point arguments", "int64"),
    "grad complex result": (lambda x: grad(lambda a: 1j * a)(x), 1.0, TypeError,  # jax.grad's TypeError too
                            "only supports differentiation on floating-point results", "complex128\\[\\]"),
    "grad step": (lambda x: grad(_double, method="fd", h="tiny")(x), 1.0, ValueError, "Invalid h value", "finite non-zero"),
    "grad of a non-function": (lambda x: grad("string!")(x), 1.0, TypeError,  # jax.grad's TypeError too
                               "Non-differentiable object passed", "not a function"),
    "vjp integer result": (lambda x: vjp(lambda a, n: (a * 2.0, n), [x, 3], [1.0, 0]), 1.0, CatalystLiteError,
                           "only supports differentiation on floating-point results", "result 1 is int64\\[\\]"),
}


@pytest.mark.parametrize("program,arg,builtin,catalyst_phrase,ours", CATALYST_WORDED.values(), ids=CATALYST_WORDED.keys())
def test_errors_catalyst_raises_start_with_its_words(program, arg, builtin, catalyst_phrase, ours):
    with pytest.raises(builtin, match=re.escape(catalyst_phrase)) as raised:
        qjit(program)(arg)
    assert isinstance(raised.value, CatalystLiteError)
    assert re.search(ours, str(raised.value)), str(raised.value)


# --- results and options of transformations ---------------------------------------------------------


def _loop_not_called(x):
    @for_loop(0, 3, 1)
    def loop(i, a):
        return a + 1.0

    return loop


@pytest.mark.parametrize(
    "program, shown, path",
    [
        (lambda x: "done", "'done' of type str", r"\(result\)"),
        (lambda x: {"value": x, "unit": "m"}, "'m' of type str", r"\(result\['unit'\]\)"),
        (lambda x: (x, object()), "of type object", r"\(result\[1\]\)"),
        (_loop_not_called, "of type ForLoopCallable", r"\(result\)", ),
    ],
    ids=["str", "str-in-a-dict", "object-in-a-tuple", "loop-not-called"],
)
def test_a_result_that_is_not_an_array_names_the_function_and_the_result(program, shown, path):
    """jax.jit raises a TypeError naming neither the function nor the result."""
    with pytest.raises(TypeError):
        jax.jit(program)(1.0)
    fix = "Call the function" if program is _loop_not_called else "jnp.asarray"
    with raises(ResultTypeError, program.__name__, shown, path, "arrays, numbers and pytrees", fix):
        qjit(program)(1.0)


@pytest.mark.parametrize("argnums", [0.0, "x", [0, 1.0]], ids=["float", "str", "float-in-a-list"])
@pytest.mark.parametrize("transform", [grad, jacobian, value_and_grad])
def test_differentiation_argnums_of_a_non_integer_type(transform, argnums):
    """Catalyst's ValueError and phrase (ours failed iterating a float); good argnums still work."""

    @qjit
    def f(x, y):
        return transform(lambda a, b: a * b, argnums=argnums)(x, y)

    catalyst_phrase = "argnums should be an integer or a Sequence of integers"
    words = (catalyst_phrase, re.escape(repr(argnums)), transform.__name__, "argnums=0")
    words += (at_line("argnums=argnums"),)
    with raises(ArgumentValueError, *words):
        f(2.0, 3.0)
    expected = jax.jit(lambda x, y: jax.grad(lambda a, b: a * b, argnums=(0, 1))(x, y))(2.0, 3.0)
    ours = qjit(lambda x, y: grad(lambda a, b: a * b, argnums=(0, 1))(x, y))(2.0, 3.0)
    np.testing.assert_allclose(ours, expected)


@pytest.mark.parametrize("measure_with", ["qml.measure", "catalyst_lite.measure"])
def test_a_mid_circuit_measurement_on_a_missing_wire_names_the_users_line(measure_with):
    """qml.measure calls catalyst_lite's measure: PennyLane's frame was named as the line."""
    import pennylane as qml
    from catalyst_lite import measure
    from catalyst_lite.errors import WireError

    measure_fn = qml.measure if measure_with == "qml.measure" else measure

    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit(x):
        qml.RX(x, wires=0)
        measure_fn(5)
        return qml.expval(qml.PauliZ(0))

    with raises(WireError, "measure acts on wire 5", r"\[0, 1\]", at_line("measure_fn(5)")):
        qjit(circuit)(0.3)


def _wire_missing(qml):
    qml.RX(0.3, wires=5)
    return qml.expval(qml.PauliZ(0))


def _sample_without_shots(qml):
    qml.RX(0.3, wires=0)
    return qml.sample(wires=0)


def _observable_on_a_missing_wire(qml):
    return qml.expval(qml.PauliZ(3))


@pytest.mark.parametrize(
    "body, error_name, words",
    [
        (_wire_missing, "WireError", ("RX acts on wire 5", r"\[0, 1\]")),
        (_observable_on_a_missing_wire, "WireError", ("expval acts on wire 3",)),
        (_sample_without_shots, "CompileError", ("qml.sample", "shots=None", "set_shots")),
    ],
    ids=["gate", "observable", "sample"],
)
def test_a_circuit_error_found_after_the_quantum_function_returns_names_the_qnode(body, error_name, words):
    """Gates and measurements are applied after the QNode's function returns: the message named
    neither it nor the compiled function calling it; default.qubit refuses each program too."""
    import pennylane as qml
    from catalyst_lite import errors

    @qml.qnode(qml.device("default.qubit", wires=2))
    def bell_part():
        return body(qml)

    with pytest.raises(Exception):
        bell_part()

    @qjit
    def outer(x):
        return bell_part() * x

    with raises(getattr(errors, error_name), *words, r"\(in the QNode bell_part\)"):
        outer(1.0)


def test_a_traced_wire_outside_the_device_names_the_qnode():
    import pennylane as qml

    @qml.qnode(qml.device("default.qubit", wires=2))
    def rotated(w):
        qml.RX(0.3, wires=w)
        return qml.expval(qml.PauliZ(0))

    compiled = qjit(lambda w: rotated(w) * 2.0)
    outside = r"device: \{4\} \(a traced wire of the QNode rotated;"
    with pytest.raises(qml.exceptions.WireError, match=outside):
        compiled(4)
    np.testing.assert_allclose(compiled(1), 2.0 * rotated(1))


@pytest.mark.parametrize(
    "body, args",
    [
        (lambda x, y: x + y, (np.ones(3), np.ones(4))),
        (lambda x, y: jnp.where(x > 0, x, y), (np.ones((2, 3)), np.ones(2))),
        (lambda x, y: x * y[:, None], (np.ones((2, 3)), np.ones(3))),
    ],
    ids=["add", "where", "outer-axis"],
)
def test_static_shapes_that_do_not_broadcast_name_the_function_and_line(body, args):
    """jax.jit's error (a TypeError or a ValueError) names neither; ours is both."""
    with pytest.raises((TypeError, ValueError)):
        jax.jit(body)(*args)

    def combine(x, y):
        return body(x, y)

    named = rf"Incompatible shapes.*\(in \S*combine \(at {THIS_FILE}:\d+"
    with pytest.raises(TypeError, match=named) as raised:
        qjit(combine)(*args)
    assert isinstance(raised.value, ValueError)



@pytest.mark.parametrize(
    "bound, error, words",
    [
        (None, ControlFlowError, ("upper bound must be an integer scalar", r"got None \(NoneType\)")),
        ("3", ControlFlowError, ("upper bound must be an integer scalar", r"got '3' \(str\)")),
        ([3], ControlFlowError, ("upper bound must be an integer scalar", r"got \[3\] \(list\)")),
        (2**70, ArgumentOverflowError, (f"upper bound {2**70} does not fit in a 64-bit integer", "smaller")),
    ],
    ids=["none", "str", "list", "beyond-64-bits"],
)
def test_a_for_loop_bound_that_is_not_an_integer_scalar_names_the_loop(bound, error, words):
    """Were JAX's TypeError naming no loop (None, a str, a list) and Python's 'int too large to
    convert to C long'."""

    @qjit
    def f(x):
        @for_loop(0, bound, 1)
        def count(i, a):
            return a + 1.0

        return count(x)

    with raises(error, "for_loop", "count", *words, at_line("return count(x)")):
        f(1.0)

    @qjit
    def g(x):
        return for_loop(0, 3, 1)(lambda i, a: a + 1.0)(x)

    assert float(g(1.0)) == 1.0 + len(range(0, 3, 1))


def _cond_without_predicate(x):
    @cond
    def positive():
        return x

    return positive()


def _while_loop_without_condition(x):
    @while_loop
    def grow(a):
        return a * 2.0

    return grow(x)


@pytest.mark.parametrize(
    "program, words",
    [
        (lambda x: for_loop(0, 3, 1)(5)(x), ("for_loop", "loop body function", r"got 5 \(int\)",
         "@for_loop")),
        (lambda x: while_loop(lambda a: a < 3)(5)(x), ("while_loop", "loop body function", r"got 5 \(int\)")),
        (lambda x: while_loop(5)(lambda a: a + 1)(x), ("while_loop", "condition function first", r"got 5")),
        (lambda x: cond(x > 0)(5)(), ("cond", "branch function", r"got 5 \(int\)", r"@cond\(x > 0\)")),
        (lambda x: cond(x > 0)(lambda: x).otherwise(2.0)(), ("otherwise", "branch function", r"got 2\.0")),
        (_cond_without_predicate, ("cond takes the predicate first", "positive", r"@cond\(x > 0\)")),
        (_while_loop_without_condition, ("while_loop", "loop body function", "condition comes first")),
    ],
    ids=["for-body", "while-body", "while-condition", "cond-branch", "otherwise", "cond-no-predicate",
         "while-no-condition"],
)
def test_control_flow_decorators_given_the_wrong_thing_name_the_usage(program, words):
    """Were Python's "'int' object is not callable", CondCallable.__init__'s missing argument, or
    (a while_loop without its condition) a loop object returned as the result."""
    with raises(ControlFlowError, *words):
        qjit(program)(1.0)


@pytest.mark.parametrize(
    "program, error, words",
    [
        (lambda x: vmap(5)(x), ArgumentTypeError, ("Expected a callable value, got 5", r"vmap\(f\)\(x\)")),
        (lambda x: pure_callback(5, float)(x), CallbackError,
         ("pure_callback calls a Python function, got 5",)),
        (lambda x: accelerate(5)(x), CallbackError,
         ("accelerate calls a Python function, got 5", "@accelerate")),
        (lambda x: debug_assert("yes", "x is fine") or x, ArgumentTypeError,
         ("debug_assert", "needs a boolean scalar condition, got str")),
    ],
    ids=["vmap", "pure_callback", "accelerate", "debug_assert"],
)
def test_an_api_given_the_wrong_kind_of_value_names_the_usage(program, error, words):
    """Were Python's "'int' object is not callable" and JAX's TypeError naming no API (jax.vmap raises a
    TypeError too)."""
    with pytest.raises(TypeError):
        jax.vmap(5)
    with raises(error, *words):
        qjit(program)(jnp.ones(2))
