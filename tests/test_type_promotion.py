"""Catalyst's convention for arguments of other types: a call whose signature was never traced
runs a compiled signature its arguments promote to (same structure, static values and shapes,
every dtype converting without loss by ``jnp.promote_types``), its arguments converted; results
are then those of the compiled signature's types. Other calls are traced for their own types.

References: ``jax.jit`` of the same function on the promoted arguments; "no new trace" is read
from ``QJIT.inspect()`` and the identity of ``compiled_function``."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest
from jax.core import ShapedArray

from catalyst_lite import qjit


def _programs(f) -> int:
    return len(f.inspect().programs)


def _assert_same(out, reference):
    """Equal values and dtypes (the compiled signature's, not the arguments')."""
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(reference)):
        assert np.dtype(a.dtype) == np.dtype(b.dtype)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_arguments_that_promote_run_the_compiled_signature():
    def fn(x):
        return x * 2 + 1

    f = qjit(fn)
    _assert_same(f(np.float64(1.5)), jax.jit(fn)(np.float64(1.5)))
    compiled = f.compiled_function
    for x in [np.int32(3), np.float32(0.25), np.uint8(7), np.int64(-2), True, 4, np.bool_(False)]:
        _assert_same(f(x), jax.jit(fn)(np.float64(x)))  # float64 results, not x's type
        assert f.compiled_function is compiled
    assert _programs(f) == 1


def test_arguments_that_do_not_promote_are_traced_for_their_own_types():
    def fn(x):
        return x * 2 + 1

    f = qjit(fn)
    f(np.int64(3))
    compiled = f.compiled_function
    _assert_same(f(np.float32(0.5)), jax.jit(fn)(np.float32(0.5)))  # float -> int loses: new trace
    assert f.compiled_function is not compiled and _programs(f) == 2
    _assert_same(f(np.complex64(1 + 2j)), jax.jit(fn)(np.complex64(1 + 2j)))  # complex -> float too
    assert _programs(f) == 3


def test_the_most_recently_traced_signature_wins_and_exact_ones_run_as_they_are():
    def fn(x):
        return x / 3

    f = qjit(fn)
    f(np.float32(1.0))
    f(np.float64(1.0))  # float64 does not promote to float32: traced
    latest = f.compiled_function
    # int32 promotes to both; it runs the latest, as Catalyst does.
    _assert_same(f(np.int32(2)), jax.jit(fn)(np.float64(2)))
    assert f.compiled_function is latest
    # A signature traced before runs as it is.
    _assert_same(f(np.float32(2.0)), jax.jit(fn)(np.float32(2.0)))
    assert _programs(f) == 2


def test_jit_compile_says_whether_the_arguments_are_promoted():
    f = qjit(lambda x: x + 1)
    assert f.jit_compile((np.ones(2),)) is False
    assert f.jit_compile((np.ones(2, np.int16),)) is True
    assert f.jit_compile((np.ones(3, np.int16),)) is False  # another shape: traced anew
    assert _programs(f) == 2


def test_pytrees_and_static_arguments():
    def fn(d, k):
        return d["a"] * d["b"] + k

    f = qjit(fn, static_argnums=1)
    f({"a": np.float64(2.0), "b": np.ones(2)}, 1)
    compiled = f.compiled_function
    args = {"a": np.int32(3), "b": np.arange(2, dtype=np.float32)}
    promoted = {"a": np.float64(3), "b": np.arange(2.0)}
    _assert_same(f(args, 1), jax.jit(fn, static_argnums=1)(promoted, 1))
    assert f.compiled_function is compiled
    f(args, 2)  # another static value: its own signature, its own types
    assert f.compiled_function is not compiled and _programs(f) == 2
    f({"a": np.float64(1.0), "b": np.ones(3)}, 1)  # another shape: traced
    assert _programs(f) == 3


def test_symbolic_sizes_fit_as_without_promotion():
    """An abstracted axis takes any length, whatever the dtype; an int argument that sizes an
    array is converted and still sets the size."""
    def scaled(x):
        return x * 0.5 + jnp.sum(x)

    f = qjit(scaled, abstracted_axes={0: "n"})
    f(np.arange(3.0))
    x = np.arange(5, dtype=np.int32)
    _assert_same(f(x), jax.jit(scaled)(x.astype(np.float64)))
    assert _programs(f) == 1

    def ones(n):
        return jnp.ones(n) * n

    g = qjit(ones)
    g(3)
    compiled = g.compiled_function
    _assert_same(g(True), jax.jit(ones, static_argnums=0)(1))  # a bool promotes to the int64 size
    assert g.compiled_function is compiled
    _assert_same(g(np.int32(4)), jax.jit(ones, static_argnums=0)(np.int32(4)))  # an array: its own
    assert g.compiled_function is not compiled


def test_annotated_signature_with_abstracted_axes():
    @qjit(abstracted_axes={0: "n"})
    def f(x: ShapedArray((3,), jnp.float64)):
        return jnp.cumsum(x)

    annotated = f.compiled_function
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # promoted: no "did not match declared signature"
        out = f(np.arange(4, dtype=np.int8))
    _assert_same(out, jnp.cumsum(np.arange(4.0)))
    assert f.compiled_function is annotated and _programs(f) == 1


def test_qnode_arguments_promote():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    f = qjit(circuit)
    f(np.float64(0.5))
    compiled = f.compiled_function
    out = f(np.int32(1))
    assert f.compiled_function is compiled and np.dtype(out.dtype) == np.float64
    np.testing.assert_allclose(out, circuit(1.0))


def test_arguments_that_do_not_fit_the_annotations_warn_only_when_traced():
    """Catalyst warns when it compiles for arguments that do not fit the annotations; a later
    call that promotes to the signature compiled for them runs it without a warning."""
    @qjit
    def f(x: ShapedArray((), jnp.int8)):
        return x * 3

    with pytest.warns(UserWarning, match="did not match declared signature"):
        f(np.float32(1.5))
    traced = f.compiled_function
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same(f(np.int16(2)), jax.jit(lambda x: x * 3)(np.float32(2)))  # int16 -> float32
    assert f.compiled_function is traced and _programs(f) == 2


def test_a_static_value_mutated_since_its_trace_is_a_new_signature():
    """A static argument is looked up by its hash: mutated (its hash with it), it is another
    value, never promoted to the program traced for its old value."""
    class Scale:
        def __init__(self, k):
            self.k = k

        def __hash__(self):
            return hash(self.k)

        def __eq__(self, other):
            return isinstance(other, Scale) and other.k == self.k

    f = qjit(lambda x, s: x * s.k, static_argnums=1)
    scale = Scale(2)
    assert float(f(1.5, scale)) == 3.0
    scale.k = 3
    assert float(f(np.int32(2), scale)) == 6.0  # int32 would promote to the old value's program
    assert _programs(f) == 2


@pytest.mark.parametrize(
    "x", [np.float64(1.5), np.complex128(1.5 + 2j), np.float32(1.5), np.int64(2), 1.5, 2, True]
)
def test_numpy_scalars_keep_their_dtype_and_python_numbers_are_weak(x):
    """As in jax.jit: a NumPy scalar (np.float64 and np.complex128 subclass Python's float and
    complex) is strongly typed, a Python number weakly, alone or as a pytree leaf."""

    def add(a, tree):
        return a + tree["y"], tree["s"] * tree["y"]

    arguments = (x, {"s": x, "y": jnp.ones(2, jnp.float32)})
    for got, expected in zip(qjit(add)(*arguments), jax.jit(add)(*arguments)):
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected)


def test_an_int_beyond_int64_is_refused_rather_than_promoted():
    f = qjit(lambda x: x + 1)
    f(1.0)
    with pytest.raises(OverflowError, match="64-bit"):
        f(2**70)


def test_an_array_is_not_promoted_to_a_python_number_s_signature():
    """A Python int may be read by value (here: a trip count, compiled per value); an array of
    the same dtype is a new signature, traced with its value unknown, not run by value."""

    def fn(n, x):
        return jax.lax.fori_loop(0, n, lambda i, c: c * 1.5 + i, x)

    f = qjit(fn)
    _assert_same(f(3, 1.0), jax.jit(fn)(3, 1.0))
    assert _programs(f) == 1
    for n in (np.array(4), jnp.asarray(5)):
        _assert_same(f(n, 1.0), jax.jit(fn)(n, 1.0))
    assert _programs(f) == 2  # the Python int's and one for the arrays
    _assert_same(f(6, 1.0), jax.jit(fn)(6, 1.0))  # a Python int still runs its own
    assert _programs(f) == 2
