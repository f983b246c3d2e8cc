"""Calling a qjit program from inside JAX transformations (``jax.grad``, ``jax.vmap``, ``jax.jit``...).

A qjit program computes in 64 bits, the caller's JAX may not: results are cast to the caller's
types, and in reverse mode a ``jax.custom_vjp`` runs the backward pass in 64 bits too.

>>> import jax
>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> f = qjit(lambda x: jnp.sum(x ** 3))
>>> jax.grad(f)(jnp.arange(3.0)).tolist()
[0.0, 3.0, 12.0]
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import tree_flatten, tree_map, tree_unflatten

from ..jax_extras import Tracer, x64_scope
from ..jax_extras.autodiff import is_reverse_mode_value

__all__ = ["call_from_transformation"]

_32_BIT = {
    np.dtype("float64"): np.dtype("float32"),
    np.dtype("int64"): np.dtype("int32"),
    np.dtype("uint64"): np.dtype("uint32"),
    np.dtype("complex128"): np.dtype("complex64"),
}


def call_from_transformation(run: Callable[..., Any], leaves: Sequence[Any]) -> Any:
    """``run(*leaves)`` (some leaves tracers of an outer JAX transformation), adapted to the
    caller's types."""
    if jax.config.jax_enable_x64:
        with x64_scope():
            return run(*leaves)
    leaves = [_in_caller_precision(x) for x in leaves]
    if any(is_reverse_mode_value(x) for x in leaves):
        return _with_backward_pass_in_64_bits(run, leaves)
    with x64_scope():
        return _to_caller_types(run(*leaves))


def _in_caller_precision(x: Any) -> Any:
    """``x`` with its value computed in its own (32-bit) type: ``jax.grad(f)(numpy_float64)`` with
    x64 off hands over a ``float32`` tracer still holding the float64 array. Multiplying by one
    (exact) materializes it."""
    if isinstance(x, Tracer) and jnp.issubdtype(x.dtype, jnp.number):
        return x * np.ones((), x.dtype)
    return x


def _to_caller_types(tree: Any) -> Any:
    """Each array of ``tree`` cast to the caller's (32-bit) type."""
    return tree_map(lambda x: x.astype(_32_BIT[x.dtype]) if x.dtype in _32_BIT else x, tree)


def _with_backward_pass_in_64_bits(run: Callable[..., Any], leaves: Sequence[Any]) -> Any:
    """``run(*leaves)`` as a ``jax.custom_vjp`` whose forward and backward passes run in 64 bits."""
    result_types: list[Any] = []  # the 64-bit results' tree and dtypes, set by the forward pass

    @jax.custom_vjp
    def call(*xs: Any) -> Any:
        with x64_scope():
            return _to_caller_types(run(*xs))

    def forward(*xs: Any) -> tuple[Any, Any]:
        with x64_scope():
            results, pullback = jax.vjp(run, *xs)
            flat, tree = tree_flatten(results)
            result_types[:] = [tree, [r.dtype for r in flat]]
            return _to_caller_types(results), pullback

    def backward(pullback: Any, cotangents: Any) -> tuple[Any, ...]:
        tree, dtypes = result_types
        with x64_scope():
            flat = [_as_dtype(c, d) for c, d in zip(tree.flatten_up_to(cotangents), dtypes)]
            return tuple(_to_caller_types(pullback(tree_unflatten(tree, flat))))

    call.defvjp(forward, backward)
    return call(*leaves)


def _as_dtype(cotangent: Any, dtype: np.dtype) -> Any:
    """A cotangent in its result's 64-bit type (``float0`` ones stay)."""
    if jnp.result_type(cotangent) == jax.dtypes.float0:
        return cotangent
    return jnp.asarray(cotangent, dtype)
