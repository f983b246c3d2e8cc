"""A counter-based PRNG on raw ``uint32[2]`` keys (Threefry-2x32, as ``jax.random``), drawn with
the ``threefry2x32`` primitive directly: ``jax.random``'s typed keys do not survive
catalyst_lite's specialization.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry_2x32

from ..control_flow import for_loop

__all__ = ["key_from_seed", "mark_unseeded", "is_unseeded_key", "host_key", "fold_in", "split", "uniform", "sample_indices"]


def key_from_seed(seed: int) -> jax.Array:
    """The key ``jax.random.PRNGKey(seed)`` holds, for a seed below ``2**32``: a concrete array
    even while tracing, so that it is a constant of the traced program (which a call may replace)."""
    with jax.ensure_compile_time_eval():
        return jnp.asarray(np.array([0, seed % 2**32], np.uint32))


_unseeded: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def mark_unseeded(key: jax.Array) -> None:
    """Mark ``key`` (a constant of a traced program, see :func:`key_from_seed`) as a placeholder
    that every call of the program replaces with :func:`host_key`."""
    _unseeded[id(key)] = key


def is_unseeded_key(value: object) -> bool:
    """True when ``value`` is (this very object) a key passed to :func:`mark_unseeded`.

    >>> key = key_from_seed(0)
    >>> before = is_unseeded_key(key)
    >>> mark_unseeded(key)
    >>> before, is_unseeded_key(key), is_unseeded_key(key_from_seed(0))
    (False, True, False)
    """
    return _unseeded.get(id(value)) is value


def host_key() -> jax.Array:
    """A fresh key from the operating system's entropy (a program without a seed, on each call)."""
    return jax.device_put(np.frombuffer(os.urandom(8), np.uint32))


def fold_in(key: jnp.ndarray, data: Any) -> jnp.ndarray:
    """The key of stream ``data`` (maybe traced) of ``key``, as ``jax.random.fold_in``."""
    if isinstance(data, (int, np.integer)):
        return threefry_2x32(key, jnp.asarray(np.array([0, data], np.uint32)))
    return threefry_2x32(key, jnp.stack([jnp.uint32(0), jnp.asarray(data).astype(jnp.uint32)]))


def _bits(key: jnp.ndarray, count: int) -> jnp.ndarray:
    return threefry_2x32(key, lax.iota(jnp.uint32, count))


def split(key: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Two independent keys from ``key``: the next carried key and one to draw with."""
    bits = _bits(key, 4)
    return bits[:2], bits[2:]


def uniform(key: jnp.ndarray, shape: tuple[int, ...]) -> jnp.ndarray:
    """``float64`` numbers uniform in ``[0, 1)`` with 53 random bits each."""
    size = int(np.prod(shape, dtype=np.int64))
    bits = _bits(key, 2 * max(size, 1))[: 2 * size].reshape(size, 2).astype(jnp.uint64)
    mantissa = ((bits[:, 0] >> 5) << 26) | (bits[:, 1] >> 6)
    return (mantissa.astype(jnp.float64) * 2.0**-53).reshape(shape)


def sample_indices(key: jnp.ndarray, probs: jnp.ndarray, shots: Any) -> jnp.ndarray:
    """``shots`` indices drawn from the distribution ``probs`` (by inverting its CDF); a traced
    ``shots`` draws each from its own stream, in a counted loop (Threefry takes no symbolic length)."""
    cdf = jnp.cumsum(probs)
    last = probs.shape[0] - 1
    if isinstance(shots, (int, np.integer)):
        u = uniform(key, (shots,)) * cdf[-1]
        return jnp.minimum(jnp.searchsorted(cdf, u, side="right", method="sort"), last)

    @for_loop(0, shots, 1)
    def draw(i, samples):
        u = uniform(fold_in(key, i), ()) * cdf[-1]
        index = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), last).astype(samples.dtype)
        return lax.dynamic_update_index_in_dim(samples, index, i, 0)

    return draw(jnp.zeros((shots,), jnp.int32))
