"""``jax.random`` with symbolic sizes: ``random_bits``/``random_split`` take them as trailing operands
(:data:`~.shapes.SHAPE_PARAMS`); ``permutation``/``shuffle``, whose sorting rounds depend on the
size, are one ``shuffle`` equation running JAX's own at specialization (the numbers are jax.jit's).

>>> import jax, numpy as np
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes={0: "n"})
... def noisy(x):
...     return x + jax.random.uniform(jax.random.key(0), x.shape)
>>> bool(np.allclose(noisy(np.zeros(3)), jax.random.uniform(jax.random.key(0), (3,))))
True
"""

from __future__ import annotations

from jax._src import core, prng
from jax._src import random as jax_random
from jax._src.interpreters import mlir

from .lowering import opaque_call, register_dynamic_lowering
from .patches import is_active
from .shapes import registered_patch

__all__ = ["shuffle_p"]


@registered_patch("random_split_of_symbolic_shape", prng.random_split_p, "abstract_eval",
                  "keys split into a symbolic number have a DShapedArray type")
@registered_patch("random_bits_of_symbolic_shape", prng.random_bits_p, "abstract_eval",
                  "random bits of a symbolic shape have a DShapedArray type")
def _make_keyed_abstract_eval(original):
    # `random_bits`'s and `random_split`'s build a `ShapedArray` (and sharding) of `keys.shape + shape`.
    def abstract_eval(keys_aval, *, shape, **params):
        if not (is_active() and any(isinstance(d, core.Tracer) for d in shape)):
            return original(keys_aval, shape=shape, **params)
        aval, effects = original(keys_aval, shape=(1,) * len(shape), **params)
        return core.DShapedArray((*keys_aval.shape, *shape), aval.dtype, False), effects

    return abstract_eval


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
register_dynamic_lowering(
    prng.random_bits_p,
    lambda ctx, *ops, bit_width, shape: opaque_call(ctx, "random_bits", ops, f"bit_width={bit_width}"),
)
register_dynamic_lowering(
    prng.random_split_p, lambda ctx, *ops, shape: opaque_call(ctx, "random_split", ops, "")
)
register_dynamic_lowering(
    shuffle_p, lambda ctx, key, x, *, axis: opaque_call(ctx, "shuffle", (key, x), f"axis={axis}")
)


@registered_patch("shuffle_of_symbolic_size", jax_random, "_shuffle",
                  "permutation/shuffle of a symbolic axis is JAX's shuffle, run at specialization")
def _make_shuffle(original):
    def shuffle(key, x, axis):
        if is_active() and not core.is_constant_dim(x.shape[axis]):
            return shuffle_p.bind(key, x, axis=axis)
        return original(key, x, axis)

    return shuffle
