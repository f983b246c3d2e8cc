"""A host callback that runs whenever the program runs, even when nothing reads its results (JAX's
dead-code elimination may remove a ``jax.pure_callback``): :data:`kept_callback_p` carries an
unordered effect of its own, which JAX keeps through DCE and allows in control flow, custom
derivatives and remat. Primitives registered with :func:`keep_when_unused` stay in
:func:`.tracing.prune_jaxpr`'s programs.

>>> import numpy as np
>>> import jax, jax.numpy as jnp
>>> calls = []
>>> def host(x):
...     calls.append(float(x))
...     return (np.asarray(x * 2),)
>>> def f(x):
...     kept_callback(host, (jax.ShapeDtypeStruct((), jnp.float32),), x)
...     return x + 1
>>> float(jax.jit(f)(jnp.float32(1.0))), calls
(2.0, [1.0])
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax._src import callback as _callback
from jax._src import core, effects
from jax._src.interpreters import batching, mlir

__all__ = ["HOST_CALLBACK_EFFECT", "kept_callback", "kept_callback_p", "keep_when_unused", "kept_when_unused"]


class HostCallbackEffect(effects.Effect):
    def __repr__(self) -> str:
        return "HostCallbackEffect"


HOST_CALLBACK_EFFECT = HostCallbackEffect()
for _allowed in (effects.lowerable_effects, effects.control_flow_allowed_effects,
                 effects.custom_derivatives_allowed_effects, effects.remat_allowed_effects):
    _allowed.add_type(HostCallbackEffect)

kept_callback_p = core.Primitive("kept_host_callback")
kept_callback_p.multiple_results = True


def _impl(*args: Any, callback: Callable, result_avals: tuple) -> list[Any]:
    return [jax.numpy.asarray(r) for r in callback(*(np.asarray(a) for a in args))]


def _lower(ctx: Any, *args: Any, callback: Callable, result_avals: tuple) -> Sequence[Any]:
    result, _, _ = _callback.emit_python_callback(
        ctx, lambda *xs: tuple(callback(*xs)), None, list(args), ctx.avals_in, ctx.avals_out,
        has_side_effect=True,
    )
    return result


def _batched(args: Sequence[Any], dims: Sequence[Any], *, callback: Callable, result_avals: tuple):
    """One call per slice of the mapped operands (``lax.map``), the others passed whole."""
    mapped = [jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims) if d is not batching.not_mapped]

    def one(slices: list[Any]) -> list[Any]:
        it = iter(slices)
        operands = [a if d is batching.not_mapped else next(it) for a, d in zip(args, dims)]
        return kept_callback_p.bind(*operands, callback=callback, result_avals=result_avals)

    outs = jax.lax.map(one, mapped)
    return list(outs), [0] * len(outs)


kept_callback_p.def_impl(_impl)
kept_callback_p.def_effectful_abstract_eval(
    lambda *avals, callback, result_avals: (list(result_avals), {HOST_CALLBACK_EFFECT})
)
mlir.register_lowering(kept_callback_p, _lower, cacheable=False)
batching.primitive_batchers[kept_callback_p] = _batched


def kept_callback(callback: Callable, result_types: Sequence[Any], *args: Any) -> list[Any]:
    """Call ``callback`` (NumPy in, arrays of ``result_types`` out) whenever the program runs."""
    avals = tuple(core.ShapedArray(tuple(t.shape), np.dtype(t.dtype)) for t in result_types)
    return kept_callback_p.bind(*args, callback=callback, result_avals=avals)


_KEPT: set = set()


def keep_when_unused(primitive: core.Primitive) -> None:
    """Its equations stay in a pruned program even when nothing reads their results."""
    _KEPT.add(primitive)


def kept_when_unused(primitive: core.Primitive) -> bool:
    return primitive in _KEPT
