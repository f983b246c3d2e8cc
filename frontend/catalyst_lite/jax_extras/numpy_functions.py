"""jax.numpy and jax.random functions that need a symbolic-size path of their own: ``len`` in
``jnp.interp`` and ``jnp.convolve`` is :func:`symbolic_len`, a symbolic convolution padding pads the
input first, ``jnp.searchsorted`` sorts (its binary search is a scan of a length computed from the
size), short static scans of symbolic carries (``jnp.polyval``) run unrolled, and a symbolic
dimension's index dtype is ``jax.jit``'s (``n < 2**31`` is assumed, a checked fact).
``random_bits``/``random_split`` take symbolic sizes as trailing operands; ``permutation``/``shuffle``,
whose sorting rounds depend on the size, are one ``shuffle`` equation running JAX's own at
specialization (the numbers are jax.jit's).

>>> import jax, numpy as np, jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes=({0: "n"}, None))
... def where_to_insert(edges, x):
...     return jnp.searchsorted(edges, x)
>>> where_to_insert(np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.5, 9.0])).tolist()
[1, 2, 3]
>>> @qjit(abstracted_axes={0: "n"})
... def noisy(x):
...     return x + jax.random.uniform(jax.random.key(0), x.shape)
>>> bool(np.allclose(noisy(np.zeros(3)), jax.random.uniform(jax.random.key(0), (3,))))
True
"""

from __future__ import annotations

import builtins
import functools
import types
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core, prng
from jax._src import random as jax_random
from jax._src.interpreters import mlir
from jax._src.lax import control_flow
from jax._src.lax import convolution
from jax._src.lax import lax
from jax._src.lax import utils as lax_utils
from jax._src.numpy import lax_numpy

from .dimensions import computed_from_sizes, decide_size_comparison
from .lowering import opaque_call, register_dynamic_lowering
from .patches import Patch, is_active, register_patch, repair
from .shapes import is_symbolic

__all__ = ["symbolic_len", "shuffle_p"]


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


@repair(lax_numpy, "_arange",
        "jnp.arange of sizes and non-integers (`arange(1.0, n + 1)`, `arange(0, n, 0.5)`) as jax.jit's")
def _arange(original: Callable, start, stop=None, step=None, dtype=None, out_sharding=None):
    # JAX's symbolic path takes integers only (and gives an integer dtype); jax.jit's, for numbers:
    # the dtype of the arguments (sizes are Python ints there), ceil((stop - start) / step) values.
    bounds = [v for v in (start, stop, step) if v is not None]
    if not (
        any(computed_from_sizes(v) for v in bounds)
        and all(computed_from_sizes(v) or np.ndim(v) == 0 and not isinstance(v, core.Tracer)
                for v in bounds)
        and not all(core.is_dim(v) for v in bounds)
    ):
        return original(start, stop, step, dtype, out_sharding)
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if dtype is None:
        as_numbers = [0 if core.is_dim(v) else v for v in (start, stop, step)]
        dtype = jnp.result_type(*as_numbers)
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    size = jnp.maximum(jnp.ceil((jnp.asarray(stop) - start) / step), 0).astype(int)
    return jnp.asarray(start, dtype) + jnp.asarray(step, dtype) * lax.iota(dtype, size)


@repair(lax_numpy, "_searchsorted_via_scan",
        "jnp.searchsorted of a symbolic length searches by sorting (a scan needs a static length)")
def _searchsorted_via_scan(original: Callable, unrolled, sorted_arr, query, side, dtype):
    # A binary search by `lax.scan` needs a static length and cannot carry the queries' symbolic
    # shape; the sort-based method finds the same indices.
    if any(map(is_symbolic, (*np.shape(sorted_arr), *np.shape(query)))):
        return lax_numpy._searchsorted_via_sort(sorted_arr, query, side, dtype)
    return original(unrolled, sorted_arr, query, side, dtype)


@repair(convolution, "conv_general_dilated",
        "a convolution padded by symbolic widths pads its input first (lax.pad takes them)")
def _conv_general_dilated(original: Callable, lhs, rhs, window_strides, padding, lhs_dilation=None, *args,
                          **kwargs):
    # Its padding must be Python ints (`operator.index`); `jnp.convolve` of a symbolic-length
    # kernel pads by `m - 1`. Pad the input first (a `pad` of symbolic widths), convolve unpadded.
    if (
        not isinstance(padding, str)
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


# Scans up to this length whose carries have symbolic shapes are unrolled while tracing.
_UNROLLED_SCAN_LENGTH = 64


@repair(control_flow, "scan",
        "jax.numpy's short static scans whose carries have symbolic shapes run unrolled (polyval)")
def _scan(original: Callable, f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    # JAX's scan cannot carry arrays of symbolic shapes (its body's sizes are unrelated to the
    # caller's): jax.numpy's short static scans (`jnp.polyval`) run their steps in Python.
    leaves, xs_leaves = jax.tree_util.tree_leaves((init, xs)), jax.tree_util.tree_leaves(xs)
    steps = length if length is not None or not xs_leaves else np.shape(xs_leaves[0])[0]
    if not (
        isinstance(steps, (int, np.integer))
        and 0 < steps <= _UNROLLED_SCAN_LENGTH
        and any(is_symbolic(d) for leaf in leaves for d in np.shape(leaf))
    ):
        return original(f, init, xs, length, reverse, unroll, _split_transpose)
    carry, ys = init, [None] * steps
    for i in reversed(range(steps)) if reverse else range(steps):
        carry, ys[i] = f(carry, jax.tree_util.tree_map(lambda x: x[i], xs))
    return carry, jax.tree_util.tree_map(lambda *y: lax_numpy.stack(y), *ys)


_INT32_MAX = int(np.iinfo(np.int32).max)


@repair(lax_utils, "int_dtype_for_dim",
        "a symbolic dimension's index dtype is int32, assuming it is below 2**31 (a checked fact)")
def _int_dtype_for_dim(original: Callable, d, *, signed):
    # jax.jit gives indices of a dimension below 2**31 the dtype int32 (`jnp.searchsorted`'s
    # result); JAX's default for a symbolic dimension is int64. Decide it as jax.jit does.
    if is_symbolic(d):
        bound = _INT32_MAX if signed else 2 * _INT32_MAX + 1
        small = decide_size_comparison(d, bound, "<=", generic_answer=True)
        if small is not None:
            return np.dtype(f"{'' if signed else 'u'}int{32 if small else 64}")
    return original(d, signed=signed)


# --- jax.random ----------------------------------------------------------------------------------


@repair(prng.random_split_p, "abstract_eval", "keys split into a symbolic number have a DShapedArray type")
@repair(prng.random_bits_p, "abstract_eval", "random bits of a symbolic shape have a DShapedArray type")
def _abstract_eval(original, keys_aval, *, shape, **params):
    # `random_bits`'s and `random_split`'s build a `ShapedArray` (and sharding) of `keys.shape + shape`.
    if not any(isinstance(d, core.Tracer) for d in shape):
        return original(keys_aval, shape=shape, **params)
    aval, effects = original(keys_aval, shape=(1,) * len(shape), **params)
    return core.DShapedArray((*keys_aval.shape, *shape), aval.dtype, False), effects


# --- shuffle: JAX's own, run at specialization ------------------------------------------------------

_jax_shuffle = jax_random._shuffle  # the jitted `_shuffle(key, x, axis)` of jax.random


def _shuffle(key, x, *, axis):
    return _jax_shuffle(key, x, axis)


shuffle_p = core.Primitive("shuffle")
shuffle_p.def_impl(_shuffle)
shuffle_p.def_abstract_eval(lambda key_aval, x_aval, *, axis: x_aval)
mlir.register_lowering(shuffle_p, mlir.lower_fun(_shuffle, multiple_results=False))


# In `.mlir`, the dynamic program, these are opaque calls: JAX's threefry and its shuffle's
# number of rounds are computed from sizes that are only known at specialization.
def _opaque_lowering(name: str, option: str | None, ctx: Any, *operands: Any, **params: Any) -> list:
    return opaque_call(ctx, name, operands, "" if option is None else f"{option}={params[option]}")


for _primitive, _option in ((prng.random_bits_p, "bit_width"), (prng.random_split_p, None), (shuffle_p, "axis")):
    register_dynamic_lowering(_primitive, functools.partial(_opaque_lowering, _primitive.name, _option))


@repair(jax_random, "_shuffle",
        "permutation/shuffle of a symbolic axis is JAX's shuffle, run at specialization")
def _repaired_shuffle(original, key, x, axis):
    if not core.is_constant_dim(x.shape[axis]):
        return shuffle_p.bind(key, x, axis=axis)
    return original(key, x, axis)
