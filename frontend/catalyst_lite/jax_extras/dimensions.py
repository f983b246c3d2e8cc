"""Symbolic sizes inside JAX's own shape logic.

Under dynamic shapes a size is a *dimension tracer*: an ``int64[]`` value of the program being
traced. jax.numpy and the shape rules of ``lax`` were written for sizes that are Python ints (or
``jax.export`` symbolic polynomials) and do two things with them that tracers cannot do:

1. **arithmetic and min/max** (``core.min_dim(n, k)``, ``max(0, n - 1) // 2``). Arithmetic on
   tracers already stages equations (see ``stage_dimension_arithmetic`` in :mod:`.patches`);
   :func:`min_dim`/:func:`max_dim` stage ``min``/``max`` too, so the result is again a dimension.
2. **comparisons used as Python booleans** (``if d < 0: raise``, ``if start >= 0: ...``). A trace
   cannot know the answer, so it makes an *assumption*: it decides the comparison by evaluating
   it at generic, large, distinct sizes (:func:`example_value`), and records the assumption as an
   ``assume_size`` equation. When the program is specialized to concrete sizes the equation checks
   the assumption and raises :class:`~catalyst_lite.errors.SizeAssumptionError` if it is false, so
   a program never silently computes what JAX would not. (Checks that live in shape rules are in
   any case re-run by the specialized static ``jax.jit``.)

Only comparisons made *by JAX itself* are assumed, and only when they are computed from sizes and
integer arguments alone; a user's ``if n > 3:`` keeps JAX's ``TracerBoolConversionError``.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np
from jax._src import core, source_info_util
from jax._src.interpreters import mlir
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax

from ..errors import SizeAssumptionError
from .patches import Patch, is_active, register_patch

__all__ = ["assume_size_p", "example_value", "is_size_expression"]

# Generic sizes: large (so that `n >= 1`, `n - 1 >= 0` hold, as for any non-trivial size) and
# distinct (so that two unrelated sizes are never assumed equal).
_GENERIC_SIZE = 1 << 20
_GENERIC_STRIDE = 1 << 10

_COMPARISONS = {
    lax.eq_p: "==",
    lax.ne_p: "!=",
    lax.lt_p: "<",
    lax.le_p: "<=",
    lax.gt_p: ">",
    lax.ge_p: ">=",
}


# --- Sizes as values ---------------------------------------------------------------------------


def _is_scalar_int_or_bool(x: Any) -> bool:
    aval = core.get_aval(x)
    return aval.shape == () and (
        np.issubdtype(aval.dtype, np.integer) or np.issubdtype(aval.dtype, np.bool_)
    )


def example_value(tracer: pe.DynamicJaxprTracer, symbols: dict[Any, int]) -> Any:
    """The value of ``tracer`` when every size it is computed from takes a generic value.

    ``symbols`` maps each leaf variable (an argument or captured value of the trace) to its generic
    value and is extended as new leaves are met. Returns ``None`` when ``tracer`` is not a *size
    expression*: a scalar computed from sizes, integer arguments and constants by scalar
    operations only (anything computed from array data).
    """
    if not _is_scalar_int_or_bool(tracer):
        return None
    if isinstance(tracer.val, core.Literal):
        return tracer.val.val
    eqn = tracer.parent
    if eqn is None:
        return _leaf_value(tracer, symbols)
    inputs = [example_value(t, symbols) for t in eqn.in_tracers]
    if any(v is None for v in inputs):
        return None
    with core.eval_context():
        out = eqn.primitive.bind(*inputs, **eqn.params)
    if eqn.primitive.multiple_results:
        out = out[eqn.outvars.index(tracer.val)]
    return np.asarray(out).item()


def _leaf_value(tracer: pe.DynamicJaxprTracer, symbols: dict[Any, int]) -> Any:
    const = tracer._trace.frame.constvar_to_val.get(tracer.val)
    if const is not None and not isinstance(const.canonical, core.Tracer):
        return np.asarray(const.canonical).item()
    if tracer.val not in symbols:
        symbols[tracer.val] = _GENERIC_SIZE + _GENERIC_STRIDE * len(symbols)
    return symbols[tracer.val]


def is_size_expression(x: Any) -> bool:
    """``x`` is a tracer of a catalyst_lite trace computed from sizes and integers only."""
    return isinstance(x, pe.DynamicJaxprTracer) and example_value(x, {}) is not None


# --- Assumptions, checked at specialization ----------------------------------------------------

assume_size_p = core.Primitive("assume_size")
assume_size_p.multiple_results = True


def _check_assumption(lhs: Any, rhs: Any, *, comparison: str, holds: bool, where: str) -> list:
    """Raise if ``(lhs comparison rhs) != holds`` for these concrete sizes."""
    op = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
          ">": operator.gt, ">=": operator.ge}[comparison]
    lhs, rhs = np.asarray(lhs).item(), np.asarray(rhs).item()
    if bool(op(lhs, rhs)) != holds:
        stated = f"{lhs} {comparison} {rhs}" if holds else f"not ({lhs} {comparison} {rhs})"
        raise SizeAssumptionError(
            f"{where}: the program was traced with symbolic sizes assuming that "
            f"{stated}, which is false for these arguments. JAX takes a different path for "
            "such sizes (e.g. an empty array or a negative index); pass that size as a static "
            "argument (static_argnums) or avoid the case."
        )
    return []


assume_size_p.def_impl(_check_assumption)
assume_size_p.def_abstract_eval(lambda *args, **params: [])
mlir.register_lowering(assume_size_p, lambda ctx, *args, **params: [])


def _assume(predicate: pe.DynamicJaxprTracer, holds: bool) -> None:
    """Record ``predicate == holds`` in the predicate's trace."""
    eqn = predicate.parent
    trace = predicate._trace
    where = source_info_util.summarize(source_info_util.current())
    with core.set_current_trace(trace):
        assume_size_p.bind(
            *eqn.in_tracers,
            comparison=_COMPARISONS[eqn.primitive],
            holds=holds,
            where=where,
        )


def _called_by_jax(depth: int = 2) -> bool:
    """The caller ``depth`` frames up is JAX's own code, not the user's."""
    module = sys._getframe(depth).f_globals.get("__name__", "")
    return module.startswith("jax.")


def _make_bool(original):
    # JAX's shape logic branches on comparisons of sizes. With symbolic sizes the answer is an
    # assumption, decided at generic sizes and checked when the program is specialized.
    def __bool__(self):
        if (
            is_active()
            and _called_by_jax()
            and self.parent is not None
            and self.parent.primitive in _COMPARISONS
        ):
            answer = example_value(self, {})
            if answer is not None:
                _assume(self, bool(answer))
                return bool(answer)
        return original(self)

    return __bool__


# --- min / max of sizes --------------------------------------------------------------------------


def _make_extremum(original, staged):
    # `core.min_dim`/`max_dim` only know ints and `jax.export` polynomials; a dimension tracer
    # gets a staged `min`/`max`, itself a dimension tracer.
    def extremum(d1, d2):
        if is_active() and (isinstance(d1, core.Tracer) or isinstance(d2, core.Tracer)):
            return staged(d1, d2)
        return original(d1, d2)

    return extremum


def _staged_min(d1: Any, d2: Any) -> Any:
    from jax import numpy as jnp

    return jnp.minimum(d1, d2)


def _staged_max(d1: Any, d2: Any) -> Any:
    from jax import numpy as jnp

    return jnp.maximum(d1, d2)


register_patch(
    Patch(
        "assume_size_comparisons",
        pe.DynamicJaxprTracer,
        "__bool__",
        _make_bool,
        "JAX's comparisons of symbolic sizes become assumptions checked at specialization",
    )
)
register_patch(
    Patch(
        "symbolic_min_dim",
        core,
        "min_dim",
        lambda original: _make_extremum(original, _staged_min),
        "min of symbolic sizes is a staged min (a dimension tracer)",
    )
)
register_patch(
    Patch(
        "symbolic_max_dim",
        core,
        "max_dim",
        lambda original: _make_extremum(original, _staged_max),
        "max of symbolic sizes is a staged max (a dimension tracer)",
    )
)
