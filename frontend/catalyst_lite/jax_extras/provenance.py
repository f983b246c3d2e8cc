"""Where a traced scalar comes from: ``x[i, j]`` with static indices, or scalars computed alike.

Circuit parameters read one by one (``params[layer, wire]``) or computed by one formula cost XLA a
kernel each to stack; recognized, they are one strided slice or gather (:func:`static_element_source`)
or the formula on vectors (:func:`vectorized_stack`).

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

from dataclasses import dataclass, field
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from .tracing import DynamicJaxprTracer, Literal, Tracer


def _parent(tracer: Any) -> Any:
    return getattr(tracer, "parent", None) if isinstance(tracer, DynamicJaxprTracer) else None


def static_element_source(value: Any) -> tuple[Any, int] | None:
    """``(array, flat index)`` when the traced scalar ``value`` is ``array[static indices]``
    (a one-element ``slice`` then ``squeeze``, as ``x[i, j]`` traces); ``None`` otherwise."""
    squeeze = _parent(value)
    if squeeze is None or squeeze.primitive.name != "squeeze" or len(squeeze.in_tracers) != 1:
        return None
    cut = _parent(squeeze.in_tracers[0])
    if cut is None or cut.primitive.name != "slice":
        return None
    start, limit, strides = (cut.params[k] for k in ("start_indices", "limit_indices", "strides"))
    source = cut.in_tracers[0]
    shape = source.aval.shape
    steps = [*(strides or ()), *(l - s for s, l in zip(start, limit))]  # strides and lengths: all 1
    if any(not isinstance(d, int) for d in shape) or any(k != 1 for k in steps):
        return None
    return source, int(np.ravel_multi_index(tuple(start), shape))


# --- scalars computed alike ------------------------------------------------------------------------

ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "neg", "max", "min", "abs", "sign", "pow", "integer_pow", "sqrt",
    "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
    "convert_element_type", "square",
})
"""Scalar primitives a formula may be made of (they apply elementwise to vectors alike)."""

MAX_DEPTH = 6


@dataclass
class _Node:
    """How one scalar is computed: ``kind`` ``"const"`` (``value``), ``"element"`` (``value``: its
    flat index in ``source``), ``"leaf"`` (``value``: a tracer shared by all) or ``"op"``."""

    kind: str
    key: Any  # equal keys: the same computation up to constants and element indices
    value: Any = None
    source: Any = None
    eqn: Any = None
    children: list = field(default_factory=list)


def _node(x: Any, depth: int) -> _Node:
    if isinstance(x, Tracer) and not isinstance(x, DynamicJaxprTracer):
        # Another transformation's tracer (jax.grad's, jax.vmap's inside qjit): no recorded formula.
        return _Node("leaf", ("leaf", id(x)), x)
    if not isinstance(x, DynamicJaxprTracer):
        return _Node("const", ("const", np.asarray(x).dtype), x)
    if isinstance(x.val, Literal):
        return _Node("const", ("const", x.aval.dtype), x.val.val)
    element = static_element_source(x)
    if element is not None:
        return _Node("element", ("element", id(element[0])), element[1], element[0])
    eqn = _parent(x)
    if (depth > 0 and eqn is not None and eqn.primitive.name in ELEMENTWISE
            and not eqn.primitive.multiple_results
            and all(getattr(t, "shape", None) == () for t in eqn.in_tracers)):
        children = [_node(t, depth - 1) for t in eqn.in_tracers]
        key = (eqn.primitive, repr(sorted(eqn.params.items())), x.aval.dtype, *(c.key for c in children))
        return _Node("op", key, eqn=eqn, children=children)
    return _Node("leaf", ("leaf", id(x)), x)


def _rebuilt(nodes: Sequence[_Node], count: int) -> Any:
    """The vector of the scalars ``nodes`` describe (all with one key)."""
    first = nodes[0]
    if first.kind == "const":
        return np.array([n.value for n in nodes], dtype=first.key[1])
    if first.kind == "element":
        return _elements(jnp.reshape(first.source, (-1,)), np.array([n.value for n in nodes]))
    if first.kind == "leaf":
        return first.value
    operands = [jnp.broadcast_to(_rebuilt([n.children[k] for n in nodes], count), (count,))
                for k in range(len(first.children))]
    return first.eqn.primitive.bind(*operands, **first.eqn.params)


def _elements(flat: Any, indices: np.ndarray) -> Any:
    """``flat[indices]``: a strided slice when the indices step evenly upwards (``weights[l, w, k]``
    read in order), else a gather. A gather's derivative in reverse mode is a scatter, which XLA
    compiles as a loop of its own; a slice's is a pad."""
    step = int(indices[1] - indices[0])
    if step > 0 and np.array_equal(indices, indices[0] + step * np.arange(len(indices))):
        return lax.slice(flat, (int(indices[0]),), (int(indices[-1]) + 1,), (step,))
    return jnp.take(flat, indices, mode="clip")


def vectorized_stack(values: Sequence[Any]) -> Any:
    """``jnp.stack(values)`` computed at once when the traced scalars ``values`` are all computed by
    one formula of elementwise operations whose inputs are shared tracers, constants and elements
    of one array (``x * angles[g]``, ``params[layer, wire] / 2``); ``None`` otherwise.

    >>> import numpy as np
    >>> from catalyst_lite import qjit
    >>> @qjit
    ... def scaled(x: float):
    ...     stack = vectorized_stack([x * a for a in (1.0, 2.0, 3.0)])
    ...     assert stack.parent.primitive.name == "mul"  # one vector product, not three
    ...     return stack
    >>> scaled(2.0).tolist()
    [2.0, 4.0, 6.0]
    """
    if len(values) < 2 or not any(isinstance(v, DynamicJaxprTracer) for v in values):
        return None
    nodes = [_node(v, MAX_DEPTH) for v in values]
    if any(n.key != nodes[0].key for n in nodes) or nodes[0].kind in ("const", "leaf"):
        return None
    return _rebuilt(nodes, len(values))
