"""``@qjit`` end to end: results against NumPy, the trace-once contract, the argument layout
(abstracted axes, pytrees, static arguments, annotations), isolation from the user's JAX setup,
and errors for bad input."""

import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import CatalystLiteError, QJIT, qjit

SIZES = [0, 1, 3, 7]


@pytest.fixture(autouse=True)
def jax_config_untouched():
    """Every test leaves the user's global JAX flags as it found them."""
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    yield
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before


def assert_matches(actual, expected):
    """Same shape and values as the NumPy reference (pytrees compared leaf by leaf)."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree
    for a, e in zip(a_leaves, e_leaves):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=1e-12)


class Counter:
    """Wraps a function and counts how often Python runs it (i.e. how often it is traced)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)  # keeps the signature and annotations visible
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


# --- decorator forms ------------------------------------------------------------------------------


def test_bare_decorator():
    @qjit
    def f(x):
        return x * 2.0 + 1.0

    x = np.arange(4.0)
    assert isinstance(f, QJIT)
    assert f.__name__ == "f"
    assert_matches(f(x), x * 2.0 + 1.0)


def test_decorator_with_options():
    @qjit(abstracted_axes={0: "n"}, keep_intermediate=False)
    def f(x):
        return jnp.sum(x * x)

    for n in SIZES:
        x = np.linspace(0.0, 1.0, n)
        assert_matches(f(x), np.sum(x * x))


def test_unknown_option_is_rejected():
    with pytest.raises(TypeError, match="no_such_option"):
        qjit(lambda x: x, no_such_option=1)


# --- integer arguments that size arrays -----------------------------------------------------------

SIZED = {
    "ones": (lambda n: jnp.ones([n]), lambda n: np.ones([n])),
    "zeros_2d": (lambda n: jnp.zeros((n, 2)), lambda n: np.zeros((n, 2))),
    "full": (lambda n: jnp.full([n], 2.5), lambda n: np.full([n], 2.5)),
    "arange": (lambda n: jnp.arange(n), lambda n: np.arange(n)),
    "n_plus_1": (lambda n: jnp.ones((n + 1,), dtype=float), lambda n: np.ones((n + 1,))),
    "two_n": (lambda n: jnp.zeros([2 * n]) + 3.0, lambda n: np.zeros([2 * n]) + 3.0),
    "arange_times_n": (lambda n: jnp.arange(n) * n, lambda n: np.arange(n) * n),
}


@pytest.mark.parametrize("name", SIZED)
@pytest.mark.parametrize("annotated", [True, False], ids=["annotated", "unannotated"])
def test_integer_argument_sizes_arrays(name, annotated):
    build, reference = SIZED[name]
    if annotated:

        def f(n: int):
            return build(n)

    else:

        def f(n):
            return build(n)

    compiled = qjit(f)
    for n in SIZES:
        assert_matches(compiled(n), reference(n))


def test_empty_has_the_requested_shape():
    @qjit
    def f(n: int):
        return jnp.empty([n, 3])

    for n in SIZES:
        out = f(n)
        assert out.shape == (n, 3) and out.dtype == np.float64


def test_integer_argument_dtype_is_int64():
    @qjit
    def f(n: int):
        return jnp.arange(n)

    assert f(3).dtype == np.int64


# --- elementwise ops, reductions, matmul ----------------------------------------------------------

ELEMENTWISE = {
    "add_scalar": lambda a, b: a + 1.5,
    "rmul_scalar": lambda a, b: 3 * a,
    "sub_arrays": lambda a, b: a - b,
    "mul_arrays": lambda a, b: a * b,
    "div": lambda a, b: a / (b + 1.0),
    "pow": lambda a, b: a**2,
    "neg": lambda a, b: -a,
    "sin": lambda a, b: np.sin(a) if isinstance(a, np.ndarray) else jnp.sin(a),
    "where": lambda a, b: (np if isinstance(a, np.ndarray) else jnp).where(a > b, a, b),
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_on_abstracted_arrays(name):
    op = ELEMENTWISE[name]
    f = qjit(lambda a, b: op(a, b), abstracted_axes={0: "n"})
    rng = np.random.default_rng(0)
    for n in SIZES:
        a, b = rng.normal(size=n), rng.normal(size=n)
        assert_matches(f(a, b), op(a, b))


def test_elementwise_mixes_traced_size_and_scalar():
    @qjit
    def f(n: int, x: float):
        a = jnp.arange(n) * x
        return a + n, a * a - 1.0

    for n in SIZES:
        a = np.arange(n) * 0.5
        assert_matches(f(n, 0.5), (a + n, a * a - 1.0))


REDUCTIONS = ["sum", "prod", "mean", "cumsum", "max", "min", "argmax"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    f = qjit(lambda x: getattr(jnp, name)(x), abstracted_axes={0: "n"})
    for n in [1, 4, 9]:
        x = np.random.default_rng(n).normal(size=n)
        assert_matches(f(x), getattr(np, name)(x))


def test_reduction_over_one_axis_of_a_2d_array():
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        return jnp.sum(x, axis=0), jnp.sum(x, axis=1)

    for n in [1, 5]:
        x = np.arange(3.0 * n).reshape(n, 3)
        assert_matches(f(x), (x.sum(axis=0), x.sum(axis=1)))


def test_matmul_with_shared_and_separate_dimensions():
    @qjit(abstracted_axes=({0: "n", 1: "k"}, {0: "k", 1: "m"}))
    def f(a, b):
        return a @ b, jnp.matmul(a, b).sum()

    rng = np.random.default_rng(1)
    for n, k, m in [(1, 1, 1), (2, 3, 4), (5, 2, 3)]:
        a, b = rng.normal(size=(n, k)), rng.normal(size=(k, m))
        assert_matches(f(a, b), (a @ b, (a @ b).sum()))


def test_vector_dot_with_traced_length():
    @qjit
    def f(n: int):
        v = jnp.arange(n) * 1.0
        return v @ v

    for n in SIZES:
        v = np.arange(n) * 1.0
        assert_matches(f(n), v @ v)


def test_indexing_a_static_shape_with_a_traced_int():
    @qjit
    def f(x, i: int):
        return x[i]

    x = np.arange(5.0) * 3
    for i in range(5):
        assert_matches(f(x, i), x[i])


def test_indexing_a_dynamic_array_with_a_traced_int():
    @qjit
    def f(n: int):
        a = jnp.arange(n) * 10
        return a[n - 1], a[0]

    for n in [1, 4, 9]:
        a = np.arange(n) * 10
        assert_matches(f(n), (a[n - 1], a[0]))


# --- abstracted_axes ----------------------------------------------------------------------------------


def _implicit_inputs(closed_jaxpr):
    """Leading ``i64[]`` inputs that size later inputs (the implicit dimension arguments)."""
    invars = closed_jaxpr.jaxpr.invars
    shape_vars = {id(d) for v in invars for d in getattr(v.aval, "shape", ()) if not isinstance(d, int)}
    return [v for v in invars if id(v) in shape_vars]


def test_abstracted_axes_one_dict_for_every_argument():
    f = Counter(lambda x, y, s: x.T @ y + s)
    compiled = qjit(f, abstracted_axes={0: "n"})  # axis 0 of every argument that has one
    for n in [1, 4, 6]:
        x, y = np.arange(n * 2.0).reshape(n, 2), np.arange(n * 1.0)
        assert_matches(compiled(x, y, 0.5), x.T @ y + 0.5)
    assert f.calls == 1
    # One name is one shared dimension: a single implicit argument.
    assert len(_implicit_inputs(compiled.jaxpr)) == 1
    with pytest.raises(ValueError, match="'n'"):
        compiled(np.ones((2, 2)), np.ones(3), 0.5)


def test_abstracted_axes_per_argument_dicts_and_name_tuples():
    f = Counter(lambda a, b, c: (a.sum(axis=1) + b, c))
    compiled = qjit(f, abstracted_axes=({0: "n"}, ("n",), None))
    c = np.ones((2, 2))
    for n in [1, 3, 8]:
        a, b = np.arange(n * 3.0).reshape(n, 3), np.arange(n * 1.0)
        assert_matches(compiled(a, b, c), (a.sum(axis=1) + b, c))
    assert f.calls == 1
    assert len(_implicit_inputs(compiled.jaxpr)) == 1


def test_abstracted_axes_tuple_with_none_keeps_axis_static():
    f = Counter(lambda x: x * 2.0)
    compiled = qjit(f, abstracted_axes=((None, "m"),))
    for m in [1, 4]:
        x = np.ones((2, m))
        assert_matches(compiled(x), x * 2.0)
    assert f.calls == 1
    compiled(np.ones((3, 4)))  # axis 0 is not abstracted: a new length means a new trace
    assert f.calls == 2


def test_abstracted_axes_as_a_pytree_matching_the_argument():
    f = Counter(lambda d: d["a"] * d["b"] + 1.0)
    compiled = qjit(f, abstracted_axes=({"a": {0: "n"}, "b": {0: "n"}},))
    for n in [2, 5]:
        d = {"a": np.arange(n * 1.0), "b": np.full(n, 3.0)}
        assert_matches(compiled(d), d["a"] * d["b"] + 1.0)
    assert f.calls == 1


def test_distinct_names_are_distinct_dimensions():
    @qjit(abstracted_axes=({0: "n"}, {0: "m"}))
    def f(x, y):
        return jnp.sum(x) * jnp.sum(y)

    assert_matches(f(np.ones(2), np.ones(5)), 10.0)
    assert len(_implicit_inputs(f.jaxpr)) == 2


@pytest.mark.parametrize(
    "axes", [{0: "n"}, ({0: "n"}, {0: "n"}), (("n",), ("n",))], ids=["dict", "dicts", "tuples"]
)
def test_shared_dimension_with_different_lengths(axes):
    f = qjit(lambda left, right: (left @ right.T, left + 1.0), abstracted_axes=axes)
    with pytest.raises(ValueError) as info:
        f(np.ones((3, 2)), np.ones((4, 2)))
    message = str(info.value)
    for part in ("'n'", "'left'", "'right'", "3", "4"):
        assert part in message
    assert isinstance(info.value, CatalystLiteError)
    # The same object keeps working for good input afterwards.
    a, b = np.ones((4, 2)), np.arange(8.0).reshape(4, 2)
    assert_matches(f(a, b), (a @ b.T, a + 1.0))


def test_shared_dimension_mismatch_is_reported_before_tracing():
    # A user who meant "rows of a" and "rows of b" as one name: with these shapes the program would
    # not even trace (contracting 4 with n), so the length check must come first.
    f = qjit(lambda a, b: a @ b, abstracted_axes={0: "n"})
    with pytest.raises(ValueError, match="'n'.*'a'.*length 3.*'b'.*length 4"):
        f(np.ones((3, 4)), np.ones((4, 2)))


def test_shared_dimension_mismatch_after_a_successful_call():
    f = qjit(lambda left, right: left + right, abstracted_axes={0: "n"})
    assert_matches(f(np.ones(2), np.ones(2)), np.full(2, 2.0))
    with pytest.raises(ValueError, match="'n'.*'left'.*length 3.*'right'.*length 5"):
        f(np.ones(3), np.ones(5))


# --- ahead-of-time compilation from annotations ---------------------------------------------------


def test_annotated_function_is_traced_at_decoration():
    spec = jax.ShapeDtypeStruct((3,), jnp.float64)

    def f(n: int, x: float, flag: bool, v: spec):
        return jnp.where(flag, jnp.ones([n]) * x, 0.0), v * x

    counted = Counter(f)
    compiled = qjit(counted)
    assert counted.calls == 1
    assert compiled.jaxpr is not None  # available before the first call
    for n in [0, 2, 5]:
        out = compiled(n, 1.5, True, np.arange(3.0))
        assert_matches(out, (np.ones(n) * 1.5, np.arange(3.0) * 1.5))
    assert_matches(compiled(2, 2.0, False, np.ones(3)), (np.zeros(2), np.full(3, 2.0)))
    assert counted.calls == 1


def test_string_annotations_are_understood():
    calls = []

    def f(n: "int"):
        calls.append(n)
        return jnp.ones([n])

    compiled = qjit(f)
    assert len(calls) == 1
    assert_matches(compiled(4), np.ones(4))
    assert len(calls) == 1
    # As in Catalyst: a value that does not fit the annotation is traced for its own type, with a
    # warning; a float size then fails in the trace.
    with pytest.warns(UserWarning, match="did not match declared signature"), \
            pytest.raises(TypeError, match="size must be an integer.*'n'"):
        compiled(2.5)


def test_unannotated_function_is_traced_at_first_call():
    f = Counter(lambda n: jnp.ones([n]))
    compiled = qjit(f)
    assert f.calls == 0 and compiled.jaxpr is None
    compiled(2)
    assert f.calls == 1 and compiled.jaxpr is not None


def test_numpy_scalars_for_annotated_parameters():
    @qjit
    def f(n: int, x: float):
        return jnp.full([n], x)

    assert_matches(f(np.int32(3), np.float32(2.0)), np.full(3, 2.0))
    assert_matches(f(2, 1), np.full(2, 1.0))  # an int is a fine float


# --- pytrees, static arguments ----------------------------------------------------------------------


def test_pytrees_in_and_out():
    @qjit(abstracted_axes={0: "n"})
    def f(params, pair):
        w, b = pair
        return {"y": params["x"] * w + b, "stats": (jnp.sum(params["x"]), [params["x"].shape[0]])}

    for n in [1, 4]:
        x = np.arange(n * 1.0)
        out = f({"x": x}, (np.full(n, 2.0), 1.0))
        assert set(out) == {"y", "stats"}
        assert_matches(out["y"], x * 2.0 + 1.0)
        assert_matches(out["stats"][0], x.sum())
        assert int(out["stats"][1][0]) == n


def test_static_argnums_retrace_only_on_new_value():
    f = Counter(lambda x, k: x * k if k > 0 else -x)
    compiled = qjit(f, static_argnums=1, abstracted_axes=({0: "n"},))
    x = np.arange(3.0)
    assert_matches(compiled(x, 2), x * 2)
    assert_matches(compiled(np.arange(5.0), 2), np.arange(5.0) * 2)
    assert f.calls == 1
    assert_matches(compiled(x, -1), -x)
    assert f.calls == 2
    assert_matches(compiled(x, 2), x * 2)
    assert f.calls == 2


def test_static_argnames_with_keyword_and_default():
    calls = []

    @qjit(static_argnames="mode")
    def f(n, mode="ones"):
        calls.append(mode)
        return jnp.ones([n]) if mode == "ones" else jnp.zeros([n])

    assert_matches(f(3), np.ones(3))
    assert_matches(f(4, mode="zeros"), np.zeros(4))
    assert_matches(f(5, mode="ones"), np.ones(5))
    assert calls == ["ones", "zeros"]


def test_unhashable_static_argument():
    f = qjit(lambda x, opts: x, static_argnums=1)
    with pytest.raises(TypeError, match="'opts'.*hashable"):
        f(1.0, [1, 2])


def test_static_argnames_must_name_a_parameter():
    with pytest.raises(ValueError, match="'nope'"):
        qjit(lambda x: x, static_argnames="nope")


# --- the traced program -----------------------------------------------------------------------------


def test_jaxpr_of_ones_sz_plus_one():
    @qjit
    def f(sz):
        return jnp.ones((sz + 1,), dtype=float)

    for sz in [0, 2, 6]:
        assert_matches(f(sz), np.ones(sz + 1))
    jaxpr = f.jaxpr.jaxpr
    assert [e.primitive.name for e in jaxpr.eqns] == ["add", "broadcast_in_dim"]
    (sz,) = jaxpr.invars
    add, bcast = jaxpr.eqns
    assert add.invars[0] is sz
    (b,) = add.outvars
    assert bcast.params["shape"] == (None,)
    assert bcast.invars[-1] is b  # the dynamic size is the trailing operand
    # Two outputs: the implicit dimension first, then the array whose shape is that dimension.
    out_dim, out_array = jaxpr.outvars
    assert out_dim is b
    assert out_array is bcast.outvars[0]
    assert out_array.aval.shape == (b,)
    assert out_array.aval.dtype == np.float64


def test_python_function_runs_once_for_five_sizes():
    f = Counter(lambda n: jnp.arange(n) * 2 + jnp.ones([n]))
    compiled = qjit(f)
    for n in [1, 2, 3, 5, 8]:
        assert_matches(compiled(n), np.arange(n) * 2 + np.ones(n))
    assert f.calls == 1


def test_python_function_runs_once_for_five_array_lengths():
    f = Counter(lambda x: jnp.cumsum(x) / x.shape[0])
    compiled = qjit(f, abstracted_axes={0: "n"})
    for n in [1, 2, 3, 5, 8]:
        x = np.arange(1.0, n + 1)
        assert_matches(compiled(x), np.cumsum(x) / n)
    assert f.calls == 1


# --- isolation from the user's JAX ------------------------------------------------------------------


def test_global_config_untouched_before_during_and_after():
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    started, release = threading.Event(), threading.Event()
    seen_during, results = [], []

    @qjit
    def f(n):
        started.set()
        assert release.wait(30)
        return jnp.ones([n])

    worker = threading.Thread(target=lambda: results.append(f(3)))
    worker.start()
    try:
        assert started.wait(30)
        # While another thread traces and compiles, this thread sees the user's settings.
        seen_during.append((jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64))
        seen_during.append(jnp.ones(2).dtype)
        seen_during.append(jax.jit(lambda x: x * 2)(jnp.ones(2)).dtype)
    finally:
        release.set()
        worker.join(60)
    assert seen_during == [before, jnp.zeros(1).dtype, jnp.zeros(1).dtype]
    assert_matches(results[0], np.ones(3))
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before


def test_global_config_restored_when_tracing_fails_halfway():
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)

    @qjit
    def f(n):
        jnp.ones([n])
        raise RuntimeError("user error in the middle of tracing")

    with pytest.raises(RuntimeError, match="middle of tracing"):
        f(3)
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before
    # JAX still works as usual, and so do other compiled functions.
    assert jax.jit(lambda x: x + 1)(jnp.ones(2)).dtype == jnp.zeros(1).dtype
    assert_matches(qjit(lambda n: jnp.ones([n]))(2), np.ones(2))


def test_users_jax_jit_unaffected():
    @jax.jit
    def user_fn(x):
        return jnp.ones(x.shape[0]) * x

    x32 = jnp.arange(3.0)
    expected = user_fn(x32)

    @qjit(abstracted_axes={0: "n"})
    def g(x):
        return user_fn(x) + 1.0  # a jax.jit function called from a qjit function

    for n in [2, 4]:
        assert_matches(g(np.arange(n * 1.0)), np.arange(n * 1.0) + 1.0)
    after = user_fn(x32)
    assert after.dtype == expected.dtype
    assert_matches(after, expected)
    # No dynamic shapes leak into the user's traces.
    closed = jax.make_jaxpr(lambda v: v * 2)(x32)
    assert all(isinstance(d, int) for v in closed.jaxpr.invars for d in v.aval.shape)


# --- bad input ---------------------------------------------------------------------------------------


def _sized():
    @qjit
    def f(n: int):
        return jnp.ones([n]) * 2.0

    return f


def _good_call_still_works(f):
    assert_matches(f(3), np.full(3, 2.0))


def test_wrong_argument_count():
    f = _sized()
    with pytest.raises(TypeError, match="f:.*too many"):
        f(1, 2)
    with pytest.raises(TypeError, match="'n'"):
        f()
    _good_call_still_works(f)


def test_float_for_an_int_annotation():
    """Catalyst warns that the arguments do not match the annotations and compiles for their own
    types (here the float size then fails to trace); a bool promotes to the annotated int."""
    f = _sized()
    with pytest.warns(UserWarning, match="did not match declared signature.*annotated int.*2.5"), \
            pytest.raises(TypeError, match="'n'"):
        f(2.5)
    assert_matches(f(True), np.full(1, 2.0))
    _good_call_still_works(f)


def test_abstracted_axes_with_wrong_number_of_entries():
    f = qjit(lambda x, y: x + y, abstracted_axes=({0: "n"},))
    with pytest.raises(ValueError, match="1 entries.*2"):
        f(np.ones(2), np.ones(2))


@pytest.mark.filterwarnings("ignore:Provided arguments did not match")
def test_errors_are_catalyst_lite_errors():
    f = _sized()
    for bad in [(2.5,), ("3",), (1, 2)]:
        with pytest.raises(CatalystLiteError):
            f(*bad)


def test_qjit_without_arguments_called_while_another_traces_is_staged_into_it():
    inner = qjit(lambda: jnp.arange(3.0) * 2.0)
    np.testing.assert_array_equal(inner(), [0.0, 2.0, 4.0])  # compiled and validated first

    @qjit
    def outer(n: int):
        return inner() + jnp.ones([n])[:3]

    np.testing.assert_array_equal(outer(5), np.arange(3.0) * 2.0 + 1.0)
    assert any(e.primitive.name == "mul" for e in outer.jaxpr.jaxpr.eqns)  # inlined, not a constant


def test_full_collections_wait_while_tracing_and_thresholds_are_restored_after():
    """The collector stays on (for every thread); only its full collections wait for the trace
    to end, and the user's own settings are kept."""
    import gc

    seen = []
    before = gc.get_threshold()

    def f(x):
        seen.append((gc.isenabled(), gc.get_threshold()[:2], gc.get_threshold()[2] > before[2]))
        return x + 1.0

    qjit(f)(1.0)
    assert seen == [(True, before[:2], True)] and gc.get_threshold() == before

    def bad(x):
        raise ValueError("user error while tracing")

    with pytest.raises(ValueError):
        qjit(bad)(1.0)
    assert gc.get_threshold() == before  # restored after a failed trace too

    def sets_thresholds(x):
        gc.set_threshold(500, 5, 5)
        return x

    try:
        qjit(sets_thresholds)(2.0)
        assert gc.get_threshold() == (500, 5, 5)  # a user's own setting is kept
        gc.disable()
        qjit(f)(2.0)
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.set_threshold(*before)
