"""``vmap`` with Catalyst's signature: results equal to ``jax.vmap``'s (and to Catalyst 0.15's,
checked by hand with the same programs), inside and outside qjit, over functions with our control
flow, QNodes and symbolic sizes; bad axes and sizes are ``ValueError``s as in Catalyst."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import for_loop, grad, qjit, vmap
from catalyst_lite.errors import ArgumentValueError

X = jnp.arange(6.0).reshape(3, 2)


def _same(got, expected):
    got_leaves, expected_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for g, e in zip(got_leaves, expected_leaves):
        assert np.shape(g) == np.shape(e)
        np.testing.assert_allclose(g, e, rtol=1e-12)


CASES = {
    "default": (lambda v: jnp.sum(v**2), {}, (X,)),
    "in_axes=1": (lambda v: jnp.sum(v**2), {"in_axes": 1}, (X,)),
    "in_axes=-1": (jnp.sum, {"in_axes": -1}, (X,)),
    "unmapped argument": (lambda v, w: v * w, {"in_axes": (0, None)}, (X, 2.0)),
    "out_axes=1": (lambda v: v * 2, {"out_axes": 1}, (X,)),
    "out_axes=-1": (lambda v: v, {"out_axes": -1}, (X,)),
    "axis_size": (lambda v, w: v * w, {"in_axes": (0, None), "axis_size": 3}, (X, 2.0)),
    "nothing mapped with axis_size": (lambda v: v * 2, {"in_axes": None, "axis_size": 2}, (X,)),
    "pytree argument": (lambda d: d["a"] * d["b"], {}, ({"a": X, "b": jnp.ones(3)},)),
    "pytree in_axes": (lambda d: d["a"] * d["b"], {"in_axes": ({"a": 0, "b": None},)}, ({"a": X, "b": 2.0},)),
    "several results": (lambda v: (v * 2, jnp.sum(v)), {}, (X,)),
    "dict results": (lambda v: {"s": jnp.sum(v), "p": v}, {}, (X,)),
    "out_axes per result": (lambda v: (v * 2, jnp.sum(v)), {"out_axes": (1, 0)}, (X,)),
    "unmapped result": (lambda v, w: (v * 2, w), {"in_axes": (0, None), "out_axes": (0, None)}, (X, 3.0)),
    "integers": (lambda v: v * 2, {}, (jnp.arange(3),)),
    "constant result": (lambda v: jnp.ones(2), {}, (X,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inside_qjit_matches_jax_vmap(name):
    fn, options, args = CASES[name]
    _same(qjit(vmap(fn, **options))(*args), jax.vmap(fn, **options)(*args))


def test_outside_qjit_and_as_decorator():
    fn = lambda v, w: v * w  # noqa: E731
    _same(vmap(fn, in_axes=(0, None))(X, 2.0), jax.vmap(fn, in_axes=(0, None))(X, 2.0))
    _same(vmap(in_axes=1)(jnp.sum)(X), jnp.sum(X, axis=0))
    _same(vmap(fn)(X, w=X), jax.vmap(fn)(X, w=X))  # keyword arguments are mapped over axis 0


def test_nested_vmap_and_derivatives():
    _same(qjit(vmap(vmap(lambda v: v**2)))(X), X**2)
    _same(qjit(vmap(grad(lambda v: jnp.sum(v**2))))(X), 2 * X)
    _same(qjit(grad(lambda v: jnp.sum(vmap(jnp.sin)(v))))(X), jnp.cos(X))


def test_function_with_control_flow():
    def powers(v):
        @for_loop(0, 3, 1)
        def body(i, acc):
            return acc * v

        return body(1.0)

    _same(qjit(vmap(powers))(jnp.arange(3.0)), jnp.arange(3.0) ** 3)


def test_symbolic_batch_and_row_sizes():
    """The batch and row sizes are symbolic: one trace serves several shapes."""
    norms = qjit(vmap(lambda row: jnp.sum(row**2)), abstracted_axes=({0: "b", 1: "k"},))
    _same(norms(X), jnp.sum(X**2, axis=1))
    _same(norms(jnp.ones((5, 4))), jnp.full(5, 4.0))
    assert "for_loop" in str(norms.jaxpr)


def test_empty_batch():
    """As jax.vmap: an empty batch gives empty results, also when its size is symbolic."""
    assert qjit(vmap(jnp.sum))(jnp.zeros((0, 3))).shape == jax.vmap(jnp.sum)(jnp.zeros((0, 3))).shape
    sums = qjit(vmap(lambda row: (jnp.sum(row), row * 2)), abstracted_axes=({0: "b"},))
    _same(sums(jnp.ones((2, 3))), (jnp.full(2, 3.0), jnp.full((2, 3), 2.0)))
    assert [r.shape for r in sums(jnp.zeros((0, 3)))] == [(0,), (0, 3)]


def test_qnode_batch_matches_default_qubit():
    """Catalyst's documented example: a QNode mapped over a batch of parameters."""
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(x, y):
        qml.RX(jnp.pi * x[0] + y, wires=0)
        qml.RY(x[1] ** 2, wires=0)
        qml.RX(x[1] * x[2], wires=0)
        return qml.expval(qml.PauliZ(0))

    x = jnp.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]])
    y = jnp.array([jnp.pi, jnp.pi / 2, jnp.pi / 4])
    # default.qubit through JAX: the values and the gradient of their sum, in one compilation.
    jax_loss = lambda x, y: jnp.sum(jax.vmap(circuit)(x, y))  # noqa: E731
    expected, expected_grad = jax.jit(lambda x, y: (jax.vmap(circuit)(x, y), jax.grad(jax_loss)(x, y)))(x, y)
    values = qjit(vmap(circuit))(x, y)
    np.testing.assert_allclose(values, expected, rtol=1e-12)
    np.testing.assert_allclose(values, [-0.93005586, -0.97165424, -0.6987465], atol=1e-8)  # Catalyst's
    loss = lambda x, y: jnp.sum(vmap(circuit)(x, y))  # noqa: E731
    np.testing.assert_allclose(qjit(grad(loss))(x, y), expected_grad, rtol=1e-10)


BAD = {
    "batch sizes differ": (lambda v, w: v * w, {}, (X, jnp.ones(4)), "different sizes"),
    "axis_size differs": (lambda v: v * 2, {"axis_size": 4}, (X,), "axis_size=4"),
    # Catalyst's phrases first where Catalyst rejects the program too
    "axis_size beyond the batch": (
        lambda v: v * 2, {"axis_size": 4}, (X,),
        r"^Invalid 'axis_size'; the default batch is expected to be None, or less than or equal",
    ),
    "axis_size zero": (lambda v: v * 2, {"axis_size": 0}, (X,), r"^Invalid batch size; it must be a non-zero integer"),
    "in_axes entry not an int": (
        lambda v, w: v * w, {"in_axes": (0.5, None)}, (X, 2.0),
        r"^Invalid 'in_axes'; it must be an int or a tuple of PyTrees with integer leaves",
    ),
    "out_axes entry not an int": (
        lambda v: (v, v), {"out_axes": (0.5, None)}, (X,),
        r"^Invalid 'out_axes'; it must be an int or a tuple of PyTree with integer leaves",
    ),
    "in_axes a list": (
        lambda v, w: v * w, {"in_axes": [0, None]}, (X, 2.0),
        r"^Invalid 'in_axes'; it must be an int or match the length of positional arguments",
    ),
    "out_axes count": (
        lambda v: v, {"out_axes": (0, 1)}, (X,),
        r"^Invalid 'out_axes'; it must be an int or match the number of function results",
    ),
    "nothing mapped": (lambda v: v * 2, {"in_axes": None}, (X,), "pass axis_size"),
    "in_axes too short": (lambda v, w: v * w, {"in_axes": (0,)}, (X, X), "in_axes"),
    "axis out of bounds": (lambda v: v, {"in_axes": 2}, (X,), "out of bounds"),
    "scalar mapped": (lambda v: v, {}, (2.0,), "out of bounds"),
    "out_axes structure": (lambda v: (v, v), {"out_axes": (0,)}, (X,), "out_axes"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_axes_and_sizes_are_value_errors(name):
    fn, options, args, message = BAD[name]
    with pytest.raises(ArgumentValueError, match=message):
        qjit(vmap(fn, **options))(*args)
    assert issubclass(ArgumentValueError, ValueError)  # Catalyst raises ValueError


@pytest.mark.parametrize("in_axes", ["a", [0, None], 1.5])
def test_bad_in_axes_type(in_axes):
    with pytest.raises(ValueError, match="in_axes"):
        vmap(jnp.sum, in_axes=in_axes)


def test_jax_vmap_of_control_flow_whose_predicate_differs_between_examples():
    """Batching a function whose ``cond`` and ``while_loop`` predicates depend on the batched
    value (our ``vmap`` and ``jax.vmap`` inside qjit, ``jax.vmap`` of the qjit function and of its
    traced jaxpr):
    each example takes its own branch and number of iterations, as with ``lax.cond``/``lax.while_loop``."""
    from catalyst_lite import cond, dynamic_jaxprs, while_loop

    def ours(x):
        @cond(x > 0.5)
        def branch():
            return jnp.sin(x) * 2.0

        @branch.otherwise
        def branch():
            return x - 1.0

        @while_loop(lambda carry: carry[0] < x * 10.0)
        def count(carry):
            return carry[0] + 1.0, carry[1] * 1.5

        return branch(), count((0.0, 1.0))

    def reference(x):
        y = jax.lax.cond(x > 0.5, lambda: jnp.sin(x) * 2.0, lambda: x - 1.0)
        z = jax.lax.while_loop(lambda c: c[0] < x * 10.0, lambda c: (c[0] + 1.0, c[1] * 1.5), (0.0, 1.0))
        return y, z

    xs = jnp.array([0.1, 0.7, 0.25, 0.9, 0.5])
    want = jax.tree.leaves(jax.vmap(reference)(xs))
    program = qjit(ours)
    program(xs[0])
    closed = program.jaxpr
    with dynamic_jaxprs():
        from_jaxpr = jax.vmap(lambda x: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x))(xs)
    for got_all in (qjit(vmap(ours))(xs), qjit(jax.vmap(ours))(xs), jax.vmap(program)(xs), from_jaxpr):
        for got, expected in zip(jax.tree.leaves(got_all), want):
            np.testing.assert_allclose(got, expected, rtol=1e-12)


# An element of an array mapped over its symbolic axis, used where jax.numpy wants a static type
# (an index, a start of dynamic_slice): (function, abstracted_axes, arguments of length n).
OVER_SYMBOLIC_AXIS = {
    "index by a mapped arange": (lambda x: jax.vmap(lambda i: x[i] * i)(jnp.arange(x.shape[0])), {0: "n"}),
    "mapped arange and array": (
        lambda x: jax.vmap(lambda i, e: x[i - 1] * e)(jnp.arange(x.shape[0]), x), {0: "n"}),
    "rows as indices": (lambda x, ix: jax.vmap(lambda r: x[r[0]] + x[r[1]])(ix), ({0: "n"}, {0: "n"})),
    "columns as indices": (
        lambda x, ix: jax.vmap(lambda c: x[c[0]] * c[1], in_axes=1)(ix.T), ({0: "n"}, {0: "n"})),
    "lax.map of an arange": (lambda x: jax.lax.map(lambda i: x[i] + 1.0, jnp.arange(x.shape[0])), {0: "n"}),
    "dynamic_slice at a mapped start": (
        lambda x: jax.vmap(lambda i: jax.lax.dynamic_slice(x, (i,), (1,)))(jnp.arange(x.shape[0])), {0: "n"}),
    "scatter at a mapped index": (
        lambda x: jax.vmap(lambda i: x.at[i].set(0.0))(jnp.arange(x.shape[0])), {0: "n"}),
}


@pytest.mark.parametrize("name", sorted(OVER_SYMBOLIC_AXIS))
def test_jax_vmap_over_a_symbolic_axis_gives_elements_of_static_type(name):
    """``jax.vmap``/``lax.map`` over an axis of symbolic size inside qjit: each element has static
    sizes (a scalar index, a row of known length), as under ``jax.jit``; indexing with it raised
    "Indexing mode not yet supported"."""
    fn, axes = OVER_SYMBOLIC_AXIS[name]
    program = qjit(fn, abstracted_axes=axes)
    for n in (3, 1, 4):
        x = np.linspace(0.1, 1.1, n)
        args = (x, np.arange(2 * n).reshape(n, 2) % n)[: fn.__code__.co_argcount]
        _same(program(*args), jax.jit(fn)(*args))
