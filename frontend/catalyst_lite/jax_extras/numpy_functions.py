"""jax.numpy functions that need a symbolic-size path of their own: ``len`` in ``jnp.interp`` and
``jnp.convolve`` is :func:`symbolic_len`, a symbolic convolution padding pads the input first,
``jnp.searchsorted`` sorts (its binary search is a scan of a length computed from the size), short
static scans of symbolic carries (``jnp.polyval``) run unrolled, and a symbolic dimension's index
dtype is ``jax.jit``'s (``n < 2**31`` is assumed, a checked fact).

>>> import numpy as np, jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes=({0: "n"}, None))
... def where_to_insert(edges, x):
...     return jnp.searchsorted(edges, x)
>>> where_to_insert(np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.5, 9.0])).tolist()
[1, 2, 3]
"""

from __future__ import annotations

import builtins
import functools
import types
from typing import Any, Callable

import jax
import numpy as np
from jax._src.lax import control_flow
from jax._src.lax import convolution
from jax._src.lax import lax
from jax._src.lax import utils as lax_utils
from jax._src.numpy import lax_numpy

from .dimensions import decide_size_comparison
from .patches import Patch, is_active, register_patch
from .shapes import is_symbolic, registered_patch

__all__ = ["symbolic_len"]


def symbolic_len(x: Any) -> Any:
    """``len(x)``; the symbolic length when ``x``'s leading axis is symbolic (while tracing)."""
    shape = getattr(x, "shape", None)
    if is_active() and shape and is_symbolic(shape[0]):
        return shape[0]
    return builtins.len(x)


def _make_symbolic_len_patch(original: Callable) -> Callable:
    # The function as JAX wrote it (under its jax.jit), but whose `len` is `symbolic_len`.
    fn = getattr(original, "__wrapped__", original)
    namespace = dict(fn.__globals__, len=symbolic_len)
    clone = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__

    def patched(*args: Any, **kwargs: Any) -> Any:
        return (clone if is_active() else original)(*args, **kwargs)

    return functools.wraps(original)(patched)


for _name in ("_conv", "_interp"):
    register_patch(Patch(
        f"symbolic_len_in_{_name.lstrip('_')}", lax_numpy, _name, _make_symbolic_len_patch,
        "len() of an array with a symbolic leading axis is its symbolic length",
    ))


@registered_patch("searchsorted_of_a_symbolic_length", lax_numpy, "_searchsorted_via_scan",
                  "jnp.searchsorted of a symbolic length searches by sorting (a scan needs a static length)")
def _make_searchsorted_via_scan(original: Callable) -> Callable:
    # A binary search by `lax.scan` needs a static length and cannot carry the queries' symbolic
    # shape; the sort-based method finds the same indices.
    def searchsorted_via_scan(unrolled, sorted_arr, query, side, dtype):
        if is_active() and any(map(is_symbolic, (*np.shape(sorted_arr), *np.shape(query)))):
            return lax_numpy._searchsorted_via_sort(sorted_arr, query, side, dtype)
        return original(unrolled, sorted_arr, query, side, dtype)

    return searchsorted_via_scan


@registered_patch("convolution_with_symbolic_padding", convolution, "conv_general_dilated",
                  "a convolution padded by symbolic widths pads its input first (lax.pad takes them)")
def _make_conv_general_dilated(original: Callable) -> Callable:
    # Its padding must be Python ints (`operator.index`); `jnp.convolve` of a symbolic-length
    # kernel pads by `m - 1`. Pad the input first (a `pad` of symbolic widths), convolve unpadded.
    def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, *args, **kwargs):
        if (
            is_active()
            and not isinstance(padding, str)
            and any(is_symbolic(p) for pair in padding for p in pair)
            and all(d == 1 for d in lhs_dilation or ())
        ):
            numbers = kwargs.get("dimension_numbers", args[1] if len(args) > 1 else None)
            spec = convolution.conv_dimension_numbers(np.shape(lhs), np.shape(rhs), numbers).lhs_spec
            config = [(0, 0, 0)] * np.ndim(lhs)
            for axis, (lo, hi) in zip(spec[2:], padding):
                config[axis] = (lo, hi, 0)
            lhs = lax.pad(lhs, lax._const(lhs, 0), config)
            padding = [(0, 0)] * len(padding)
        return original(lhs, rhs, window_strides, padding, lhs_dilation, *args, **kwargs)

    return conv_general_dilated


# Scans up to this length whose carries have symbolic shapes are unrolled while tracing.
_UNROLLED_SCAN_LENGTH = 64


@registered_patch("short_scans_of_symbolic_carries_unrolled", control_flow, "scan",
                  "jax.numpy's short static scans whose carries have symbolic shapes run unrolled (polyval)")
def _make_scan(original: Callable) -> Callable:
    # JAX's scan cannot carry arrays of symbolic shapes (its body's sizes are unrelated to the
    # caller's): jax.numpy's short static scans (`jnp.polyval`) run their steps in Python.
    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
        leaves, xs_leaves = jax.tree_util.tree_leaves((init, xs)), jax.tree_util.tree_leaves(xs)
        steps = length if length is not None or not xs_leaves else np.shape(xs_leaves[0])[0]
        if not (
            is_active()
            and isinstance(steps, (int, np.integer))
            and steps <= _UNROLLED_SCAN_LENGTH
            and any(is_symbolic(d) for leaf in leaves for d in np.shape(leaf))
        ):
            return original(f, init, xs, length, reverse, unroll, _split_transpose)
        carry, ys = init, []
        for i in reversed(range(steps)) if reverse else range(steps):
            carry, y = f(carry, jax.tree_util.tree_map(lambda x: x[i], xs))
            ys.append(y)
        if reverse:
            ys.reverse()
        if not ys:
            return original(f, init, xs, length, reverse, unroll, _split_transpose)
        return carry, jax.tree_util.tree_map(lambda *y: lax_numpy.stack(y), *ys)

    return scan


_INT32_MAX = int(np.iinfo(np.int32).max)


@registered_patch("index_dtype_of_a_symbolic_dimension", lax_utils, "int_dtype_for_dim",
                  "a symbolic dimension's index dtype is int32, assuming it is below 2**31 (a checked fact)")
def _make_int_dtype_for_dim(original: Callable) -> Callable:
    # jax.jit gives indices of a dimension below 2**31 the dtype int32 (`jnp.searchsorted`'s
    # result); JAX's default for a symbolic dimension is int64. Decide it as jax.jit does.
    def int_dtype_for_dim(d, *, signed):
        if is_active() and is_symbolic(d):
            bound = _INT32_MAX if signed else 2 * _INT32_MAX + 1
            small = decide_size_comparison(d, bound, "<=", generic_answer=True)
            if small is not None:
                return np.dtype(f"{'' if signed else 'u'}int{32 if small else 64}")
        return original(d, signed=signed)

    return int_dtype_for_dim
