"""Python call semantics, as with ``jax.jit``: keywords bind by name, keyword-only parameters and
``**kwargs``, defaults left to Python, methods, qjit functions calling qjit functions (inlined),
and the checks of ``static_argnums``/``static_argnames``/``abstracted_axes``."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import grad, jacobian, qjit, value_and_grad
from catalyst_lite.errors import ArgumentTypeError, ArgumentValueError, CompileError


def f3(x, y, z):
    return x * (y - z)


# Every way of passing (x, y, z) = (3, 1, 2).
CALL_FORMS = [
    ((3.0, 1.0, 2.0), {}),
    ((3.0,), {"z": 2.0, "y": 1.0}),
    ((3.0, 1.0), {"z": 2.0}),
    ((), {"y": 1.0, "x": 3.0, "z": 2.0}),
]


@pytest.mark.parametrize("args, kwargs", CALL_FORMS)
def test_keywords_bind_by_name(args, kwargs):
    assert float(qjit(f3)(*args, **kwargs)) == f3(3.0, 1.0, 2.0)


@pytest.mark.parametrize("transform, reference", [
    (grad, jax.grad), (value_and_grad, jax.value_and_grad), (jacobian, jax.jacrev),
])
@pytest.mark.parametrize("argnums", [0, (0,)])
def test_transforms_bind_keywords_by_name(transform, reference, argnums):
    """``transform(f, argnums)(*args, **kwargs)`` inside qjit, as ``jax.grad`` binds it: keywords by
    name (and not differentiated)."""

    @qjit
    def g(*args, **kwargs):
        return transform(f3, argnums=argnums)(*args, **kwargs)

    expected = reference(f3, argnums=argnums)(3.0, 1.0, 2.0)
    for args, kwargs in CALL_FORMS[:3]:
        for got, want in zip(jax.tree_util.tree_leaves(g(*args, **kwargs)), jax.tree_util.tree_leaves(expected)):
            assert float(got) == float(want)
    # Outside qjit too.
    got = transform(f3, argnums=argnums)(3.0, z=2.0, y=1.0)
    assert jax.tree_util.tree_leaves(got)[-1] == jax.tree_util.tree_leaves(expected)[-1]


def test_argnums_count_positional_arguments_only():
    @qjit
    def g(x, y, z):
        return grad(f3, argnums=1)(x, z=z, y=y)

    with pytest.raises(ArgumentValueError, match="argnums=1 names argument 1.*1 positional"):
        g(3.0, 1.0, 2.0)


def test_static_argument_by_position_or_keyword():
    traces = []

    @qjit(static_argnums=1)
    def scaled(x, k):
        traces.append(k)
        return x * k

    x = jnp.arange(3.0)
    for call in (lambda: scaled(x, 2), lambda: scaled(x, k=2), lambda: scaled(k=2, x=x)):
        np.testing.assert_array_equal(call(), x * 2)
    assert traces == [2]  # k=2 is the same static value however it is passed
    np.testing.assert_array_equal(scaled(x, k=3), x * 3)
    assert traces == [2, 3]


# --- keyword-only parameters, **kwargs, *args, defaults ----------------------------------------------


def helper(x):
    return x + 1.0


PROGRAMS = {
    # name: (function, qjit options, calls as (args, kwargs))
    "keyword-only": (lambda x, *, scale: x * scale, {}, [((jnp.arange(3.0),), {"scale": 2.0})]),
    "keyword-only with default": (
        lambda x, *, scale=3.0: x * scale, {},
        [((jnp.arange(3.0),), {}), ((jnp.arange(3.0),), {"scale": 2.0})],
    ),
    "keyword-only static": (
        lambda x, *, mode="sum": jnp.sum(x) if mode == "sum" else jnp.max(x), {"static_argnames": "mode"},
        [((jnp.arange(3.0),), {}), ((jnp.arange(3.0),), {"mode": "max"})],
    ),
    "**kwargs": (
        lambda x, **opts: x * opts["a"] + opts.get("b", 0.0), {},
        [((jnp.arange(3.0),), {"a": 2.0}), ((jnp.arange(3.0),), {"a": 2.0, "b": 1.0})],
    ),
    "**kwargs with a static entry": (
        lambda x, **opts: x * 2.0 if opts["mode"] == "double" else x, {"static_argnames": "mode"},
        [((jnp.arange(3.0),), {"mode": "double"}), ((jnp.arange(3.0),), {"mode": "same"})],
    ),
    "*args": (lambda *xs: sum(xs), {}, [((1.0, jnp.ones(2)), {}), ((1.0, 2.0, 3.0), {})]),
    "*args with a static element": (
        lambda *xs: xs[0] ** xs[1], {"static_argnums": 1}, [((jnp.arange(3.0), 2), {})],
    ),
    "function and string defaults (not traced)": (
        lambda x, fn=helper, name="sum": getattr(jnp, name)(fn(x)), {}, [((jnp.arange(3.0),), {})],
    ),
    "array default (a constant)": (
        lambda x, w=np.array([1.0, 2.0, 3.0]): x @ w, {},
        [((jnp.ones(3),), {}), ((jnp.ones(3),), {"w": jnp.ones(3)})],
    ),
    "positional-only": (lambda x, /, y=2.0: x * y, {}, [((jnp.ones(2),), {}), ((jnp.ones(2), 3.0), {})]),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_parameters_of_every_kind(name):
    fn, options, calls = PROGRAMS[name]
    compiled = qjit(fn, **options)
    for args, kwargs in calls:
        expected = fn(*args, **kwargs)
        np.testing.assert_allclose(compiled(*args, **kwargs), expected)
        jitted = jax.jit(fn, **{k: v for k, v in options.items() if k.startswith("static")})
        np.testing.assert_allclose(jitted(*args, **kwargs), expected)


def test_a_default_left_out_is_not_an_argument():
    @qjit
    def f(x, fn=helper):
        return fn(x)

    assert float(f(1.0)) == 2.0
    with pytest.raises(ArgumentTypeError, match="'fn' is a function"):
        f(1.0, fn=helper)  # passed: an argument like any other (jax.jit refuses it too)


# --- methods --------------------------------------------------------------------------------------


class Scaler:
    def __init__(self, k):
        self.k = k
        self.traces = 0

    @qjit(static_argnums=0)
    def apply(self, x):
        self.traces += 1
        return x * self.k

    @qjit(abstracted_axes=({0: "n"},), static_argnums=0)  # one entry per non-static argument
    def total(self, x):
        return jnp.sum(x) * self.k


def test_methods_with_static_self():
    a, b = Scaler(2.0), Scaler(3.0)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(a.apply(x), x * 2.0)
    np.testing.assert_array_equal(b.apply(x), x * 3.0)
    np.testing.assert_array_equal(a.apply(x + 1.0), (x + 1.0) * 2.0)
    np.testing.assert_array_equal(Scaler.apply(a, x), x * 2.0)
    assert (a.traces, b.traces) == (1, 1)
    assert float(a.total(jnp.ones(4))) == 8.0 and float(b.total(jnp.ones(5))) == 15.0
    assert a.apply.jaxpr is not None  # the QJIT's attributes through the bound method


def test_method_with_traced_self_is_refused_as_jax_jit_refuses_it():
    class Plain:
        @qjit
        def twice(self, x):
            return x * 2.0

    with pytest.raises(ArgumentTypeError, match="'self' is a Plain.*static_argnums"):
        Plain().twice(1.0)


def test_static_methods_are_not_bound_under_qjit_or_a_qnode():
    import pennylane as qml

    class Circuits:
        @qjit
        @staticmethod
        def scaled(x):
            return x * 3.0

        @qjit
        @qml.qnode(qml.device("default.qubit", wires=1))
        @staticmethod
        def rotated(theta):
            qml.RX(theta, wires=0)
            return qml.expval(qml.Z(0))

    for owner in (Circuits, Circuits()):  # through the class and through an instance
        assert float(owner.scaled(2.0)) == 6.0
        np.testing.assert_allclose(owner.rotated(0.4), np.cos(0.4), atol=1e-12)


# --- qjit functions called while tracing: inlined ------------------------------------------------


def test_recursion_with_a_static_depth():
    @qjit(static_argnums=1)
    def rec(x, depth):
        if depth == 0:
            return x
        return rec(x * 2.0, depth - 1)

    for depth in (0, 3, 5):
        assert float(rec(1.5, depth)) == float(jax.jit(lambda x: x * 2.0**depth)(1.5))


def test_qjit_functions_called_under_jax_jit_then_directly():
    # What a jax.jit trace made while calling a qjit function (constants put on the device) is
    # not kept with the qjit program: the direct calls after it do not meet a stale tracer.
    import pennylane as qml

    @qjit
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.Z(0))

    @qjit
    def scaled(x):
        return x * jnp.array([2.0, 3.0])

    for compiled, reference in ((circuit, np.cos), (scaled, lambda x: x * np.array([2.0, 3.0]))):
        np.testing.assert_allclose(jax.jit(compiled)(0.3), reference(0.3), atol=1e-12)
        np.testing.assert_allclose(compiled(0.3), reference(0.3), atol=1e-12)
        np.testing.assert_allclose(jax.jit(lambda x: compiled(x) * 2.0)(0.4), reference(0.4) * 2.0, atol=1e-12)
        np.testing.assert_allclose(compiled(jnp.array(0.4)), reference(0.4), atol=1e-12)


def test_qjit_calling_qjit_keeps_sizes_symbolic():
    @qjit
    def inner(x):
        return jnp.concatenate([x, x * 2.0])

    @qjit(static_argnums=1)
    def inner_static(x, k):
        return x[:k] if k else x

    @qjit(abstracted_axes={0: "n"})
    def outer(x):
        return inner(x)[1:] + inner_static(x, None).sum()

    for n in (2, 5):
        x = jnp.arange(float(n))
        expected = jnp.concatenate([x, x * 2.0])[1:] + x.sum()
        np.testing.assert_array_equal(outer(x), expected)
    assert len(outer.inspect().programs) == 1 and not inner.inspect().programs  # traced once, inner inlined
    assert "pjit" not in str(outer.jaxpr)


def test_qjit_with_size_argument_called_inside_qjit():
    @qjit
    def ones(n: int):
        return jnp.ones(n)

    @qjit
    def outer(n: int):
        return ones(n + 1) * 2.0

    for n in (0, 3):
        np.testing.assert_array_equal(outer(n), np.full(n + 1, 2.0))


def test_mutual_calls_from_two_threads_do_not_wait_for_each_other():
    """Thread 1 traces ``ping``, thread 2 ``pong``; each calls the other while tracing. A lock held
    across the inner call would deadlock them; inlined calls take no lock."""
    both_tracing = threading.Barrier(2, timeout=30)

    @qjit(static_argnums=1)
    def ping(x, depth):
        if depth == 3:
            both_tracing.wait()
        return x if depth == 0 else pong(x + 1.0, depth - 1)

    @qjit(static_argnums=1)
    def pong(x, depth):
        if depth == 3:
            both_tracing.wait()
        return x if depth == 0 else ping(x * 2.0, depth - 1)

    results = {}
    threads = [
        threading.Thread(target=lambda: results.__setitem__("ping", ping(1.0, 3))),
        threading.Thread(target=lambda: results.__setitem__("pong", pong(1.0, 3))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert float(results["ping"]) == ((1.0 + 1.0) * 2.0) + 1.0
    assert float(results["pong"]) == ((1.0 * 2.0) + 1.0) * 2.0


def test_one_signature_is_traced_once_by_concurrent_callers():
    traces = []
    start = threading.Barrier(4, timeout=30)

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        traces.append(1)
        return x * 2.0

    def call(n):
        start.wait()
        return f(jnp.arange(float(n)))

    threads = [threading.Thread(target=call, args=(n,)) for n in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(traces) == 1


# --- argument checks ---------------------------------------------------------------------------


def two(x, y):
    return x + y


@pytest.mark.parametrize("options, error, match", [
    ({"static_argnums": 2}, CompileError, r"argnum 2, which is beyond the valid range of \[0, 2\)"),
    ({"static_argnums": (0, 5)}, CompileError, "argnum 5"),
    ({"static_argnums": -1}, CompileError, "negative"),
    ({"static_argnums": "y"}, TypeError, "The `static_argnums` argument to qjit must be an int"),
    ({"static_argnums": 1.0}, TypeError, "The `static_argnums` argument to qjit must be an int"),
    ({"static_argnames": 1}, TypeError, "static_argnames must be a str"),
    ({"static_argnames": "z"}, ValueError, r"invalid argname \{'z'\}"),
])
def test_static_options_are_checked_as_catalyst_checks_them(options, error, match):
    # static_argnums when the function is called (Catalyst's CompileError, a ValueError as
    # jax.jit's; a TypeError for other types), static_argnames at decoration.
    if "static_argnames" in options:
        with pytest.raises(error, match=match):
            qjit(two, **options)
    else:
        f = qjit(two, **options)
        for _ in range(2):  # every call reports it
            with pytest.raises(error, match=match):
                f(1.0, 2.0)
    if "negative" not in match:  # jax.jit raises the same built-in type (it accepts negative positions)
        with pytest.raises(ValueError if error is CompileError else error):
            jax.jit(two, **options)(1.0, 2.0)


def test_static_argnums_of_star_args_must_be_passed():
    f = qjit(lambda *xs: xs[0], static_argnums=2)
    assert float(f(1.0, 2.0, 3)) == 1.0
    with pytest.raises(CompileError, match=r"argnum 2, which is beyond the valid range of \[0, 2\)"):
        f(1.0, 2.0)


def test_static_argnames_may_name_a_keyword_of_kwargs():
    f = qjit(lambda x, **opts: x * opts["k"], static_argnames="k")
    assert float(f(2.0, k=3)) == 6.0


def test_unexpected_keyword_is_named_before_a_missing_argument():
    f = qjit(two)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        f(1.0, z=1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        jax.jit(two)(1.0, z=1.0)
    with pytest.raises(ArgumentTypeError, match="missing a required argument: 'y'"):
        f(1.0)


def test_abstracted_axes_dict_that_applies_to_no_argument():
    f = qjit(two, abstracted_axes={2: "n"})
    with pytest.raises(ArgumentValueError, match=r"applies to no argument.*axes \[2\].*'x' has 1"):
        f(jnp.ones(3), jnp.ones(3))
    g = qjit(two, abstracted_axes={0: "n"})  # scalars only: nothing to abstract, not a mistake
    assert float(g(1.0, 2.0)) == 3.0
