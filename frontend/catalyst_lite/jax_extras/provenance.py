"""Where a traced scalar comes from: recognizing ``x[i, j]`` (static indices) while tracing.

A circuit's parameters are usually read one by one from one array (``params[layer, wire]``).
Stacking hundreds of such scalars back into a vector costs XLA one small kernel each to compile;
recognizing that they are elements of one array lets the compiled circuit read them with a single
gather instead. This reads JAX 0.7's tracing equations (``tracer.parent``), hence its place here.

>>> import numpy as np
>>> from catalyst_lite import qjit
>>> @qjit
... def where_from(p):
...     source, index = static_element_source(p[1, 2])
...     assert source is p
...     return index
>>> int(where_from(np.ones((3, 4))))
6
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tracing import DynamicJaxprTracer

__all__ = ["static_element_source"]


def _parent(tracer: Any) -> Any:
    return getattr(tracer, "parent", None) if isinstance(tracer, DynamicJaxprTracer) else None


def static_element_source(value: Any) -> tuple[Any, int] | None:
    """``(array, flat index)`` when the traced scalar ``value`` is ``array[static indices]``
    (a one-element ``slice`` then ``squeeze``, as ``x[i, j]`` traces); ``None`` otherwise."""
    squeeze = _parent(value)
    if squeeze is None or squeeze.primitive.name != "squeeze" or len(squeeze.in_tracers) != 1:
        return None
    sliced = squeeze.in_tracers[0]
    cut = _parent(sliced)
    if cut is None or cut.primitive.name != "slice":
        return None
    start, limit, strides = (cut.params[k] for k in ("start_indices", "limit_indices", "strides"))
    source = cut.in_tracers[0]
    shape = source.aval.shape
    if any(not isinstance(d, int) for d in shape) or (strides and any(s != 1 for s in strides)):
        return None
    if any(l - s != 1 for s, l in zip(start, limit)):
        return None
    return source, int(np.ravel_multi_index(tuple(start), shape))
