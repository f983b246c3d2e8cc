"""Catalyst's ahead-of-time convention: a function without parameters, or whose parameters are all
annotated with types (``int``, ``float``, dtypes, ``jax.core.ShapedArray``), is traced when
``@qjit`` runs; bad annotations raise there, and bad ``static_argnums`` when the function is
called (Catalyst's error types), as Catalyst 0.15 does."""

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.core import ShapedArray

from catalyst_lite import CompileError, qjit


def _counting():
    calls = []
    return calls, lambda: calls.append(1)


def test_function_without_parameters_is_compiled_at_decoration():
    calls, count = _counting()

    @qjit
    def f():
        count()
        return jnp.arange(3.0) * 2

    assert len(calls) == 1 and f.jaxpr is not None and "stablehlo" in f.mlir
    np.testing.assert_array_equal(f(), [0.0, 2.0, 4.0])
    assert len(calls) == 1  # the first call did not trace


def test_shaped_array_annotations_are_compiled_at_decoration():
    calls, count = _counting()

    @qjit
    def f(x: ShapedArray((3,), jnp.float64), k: ShapedArray((), jnp.int64), s: jnp.float32):
        count()
        return x * k + s

    assert len(calls) == 1
    assert [str(v.aval) for v in f.jaxpr.jaxpr.invars] == ["float64[3]", "int64[]", "float32[]"]
    assert "tensor<3xf64>" in f.mlir
    np.testing.assert_array_equal(f(jnp.ones(3), 2, np.float32(0.5)), np.full(3, 2.5))
    # Arguments whose dtypes promote to the annotated ones are converted, as Catalyst does.
    np.testing.assert_array_equal(f(np.arange(3), np.int32(3), np.float32(1.0)), [1.0, 4.0, 7.0])
    assert len(calls) == 1
    # Another shape is traced for itself, with Catalyst's warning.
    with pytest.warns(UserWarning, match="did not match declared signature"):
        np.testing.assert_array_equal(f(jnp.ones(4), 1, np.float32(0.0)), np.ones(4))
    assert len(calls) == 2


def test_annotations_with_abstracted_axes_are_compiled_at_decoration_for_every_size():
    calls, count = _counting()

    @qjit(abstracted_axes=({0: "n"}, {}))
    def f(x: ShapedArray((3,), jnp.float64), k: ShapedArray((), jnp.int64)):
        count()
        return x * k + jnp.sum(x)

    assert len(calls) == 1 and "tensor<?xf64>" in f.mlir
    for n in (3, 5, 1):
        x = np.arange(float(n))
        np.testing.assert_array_equal(f(x, 2), x * 2 + x.sum())
    assert len(calls) == 1  # the program traced at decoration serves every length


@pytest.mark.parametrize("annotation", [list, dict, tuple, str, np.ndarray])
def test_classes_that_are_not_jax_types_raise_at_decoration(annotation):
    # Catalyst's phrase first, then ours
    with pytest.raises(TypeError, match=f"^{re.escape(repr(annotation))} is not a valid JAX type: .*not a JAX type"):

        @qjit
        def f(x: annotation):
            return x


def test_negative_annotated_sizes_raise_at_decoration():
    with pytest.raises(ValueError, match="non-negative"):

        @qjit
        def f(x: ShapedArray((-1,), jnp.float64)):
            return x


@pytest.mark.parametrize("annotation", [None, 3, "SomeForwardReference", list[int], Any])
def test_other_annotations_are_traced_at_the_first_call(annotation):
    @qjit
    def f(x: annotation, y: float):
        return x * y

    assert f.jaxpr is None
    assert float(f(2.0, 3.0)) == 6.0


def test_static_arguments_leave_annotated_functions_to_the_first_call():
    @qjit(static_argnums=1)
    def f(x: float, y: list):  # `list` is not checked: nothing is compiled ahead of time
        return x * len(y)

    assert f.jaxpr is None and float(f(2.0, (1, 2))) == 4.0
    assert f.compile_options.static_argnums == (1,)


@pytest.mark.parametrize("argnums", [-2, -1, 100, (0, 5)])
def test_out_of_range_static_argnums_raise_compile_errors_when_called(argnums):
    @qjit(static_argnums=argnums)
    def f(x):
        return x

    with pytest.raises(CompileError, match="is beyond the valid range"):
        f(5)


@pytest.mark.parametrize("argnums", [1.0, [1.0], ["x"]])
def test_static_argnums_of_other_types_raise_type_errors_when_called(argnums):
    @qjit(static_argnums=argnums)
    def f(x, y):
        return x + y

    with pytest.raises(TypeError, match="The `static_argnums` argument to"):
        f(5, 6)


def test_static_argnames_and_unhashable_static_arguments():
    with pytest.raises(ValueError, match=r"qjitted function has invalid argname \{'xx', 'yy'\}"):

        @qjit(static_argnames=["xx", "yy"])
        def g(x, y):
            return x

    @qjit(static_argnames="x", static_argnums=[1])
    def f(x, y):
        return x + len(y)

    assert f.compile_options.static_argnums == (0, 1)
    with pytest.raises(ValueError, match="hashable"):
        f(1, [1, 2])


PAIR = ShapedArray((2,), jnp.int32)


def test_string_annotations_are_evaluated_where_the_function_is_defined():
    @qjit
    def f(x: "PAIR", y: "float"):  # as with `from __future__ import annotations`
        return x * y

    assert [(v.aval.shape, v.aval.dtype) for v in f.jaxpr.jaxpr.invars] == [((2,), jnp.int32), ((), jnp.float64)]
    np.testing.assert_array_equal(f(np.array([1, 2], np.int32), 1.5), [1.5, 3.0])


@pytest.mark.parametrize("hint", ["jax.Array", "np.ndarray", "list", "Sequence[float]", "NotDefinedAnywhere"])
def test_string_annotations_naming_other_classes_are_type_hints(hint):
    """As Catalyst, which ignores string annotations (`from __future__ import annotations`): a
    string naming a class that is not a JAX type asks for nothing (it was a TypeError at
    decoration); the function is traced at its first call, for the arguments' own types."""
    def double(x, y: float):
        return jax.tree_util.tree_map(lambda v: v * y, x)

    double.__annotations__ = {"x": hint, "y": "float"}
    f = qjit(double)
    assert f.jaxpr is None
    for x in (np.arange(3), [1.0, 2]):
        out, expected = f(x, 2.0), jax.jit(double)(x, 2.0)
        assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(expected)
        for o, e in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(expected)):
            assert o.dtype == e.dtype
            np.testing.assert_array_equal(o, e)
