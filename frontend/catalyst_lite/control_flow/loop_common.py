"""Pieces shared by the two loop primitives: tracing a body with the design documents' loop
expansion, the loops' output type, and running a body at concrete sizes."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from ..jax_extras import OutputType, ShapedArray
from ..jax_extras.dynshape import (
    DIM_AVAL,
    DimensionMismatch,
    ExpansionStrategy,
    NestedBody,
    expand_args,
    expand_results,
    output_type_of,
    trace_nested,
)
from ..jax_extras.tracing import DShapedArray, OutDBIdx
from .common import (
    dimension_error,
    get_ambient_values,
    normalize_results,
    set_ambient_values,
)

__all__ = ["trace_loop", "loop_output_type", "dims_unchanged"]


def trace_loop(
    body: Callable,
    prefix: Sequence[Any],
    init: tuple,
    strategy: ExpansionStrategy,
    api: str,
) -> tuple[NestedBody, list[Any], int]:
    """Expand the arguments of a loop and trace its body (design doc steps 1-2).

    The body's explicit arguments are the ``prefix`` values (the index of a ``for_loop``), the
    flattened user carries, then the ambient carries. Returns the traced body, the expanded inputs
    (implicit dimensions first) and the number of implicit ones. A resizing loop whose result
    changes a size that its initial value has as a static number is traced once more with that
    size carried as an implicit dimension.
    """
    flat_init, in_tree = tree_flatten(init)
    ambient = get_ambient_values()
    values = [*prefix, *flat_init, *ambient]
    force_dynamic: frozenset[tuple[int, int]] = frozenset()
    while True:
        expanded, in_type = expand_args(values, strategy, force_dynamic)
        try:
            nested = _trace_loop_body(body, in_type, in_tree, len(init), strategy, api, len(prefix))
        except DimensionMismatch as err:
            if err.axis is None or (len(prefix) + err.position, err.axis) in force_dynamic:
                raise dimension_error(err, api, body) from None
            force_dynamic |= {(len(prefix) + err.position, err.axis)}
            continue
        return nested, expanded, len(expanded) - len(values)


def _trace_loop_body(
    body: Callable,
    in_type: tuple,
    in_tree: PyTreeDef,
    n_user_args: int,
    strategy: ExpansionStrategy,
    api: str,
    n_prefix: int,
) -> NestedBody:
    n_ambient = len(get_ambient_values())
    outer_ambient = get_ambient_values()

    def flat_body(*explicit: Any) -> list[Any]:
        prefix, rest = explicit[:n_prefix], explicit[n_prefix:]
        user, ambient = rest[: len(rest) - n_ambient], rest[len(rest) - n_ambient :]
        set_ambient_values(ambient)
        results = body(*prefix, *tree_unflatten(in_tree, list(user)))
        flat = normalize_results(results, n_user_args, in_tree, api, body)
        return [*flat, *get_ambient_values()]

    def expand(explicit_args: list[Any], results: list[Any]):
        return expand_results(explicit_args[n_prefix:], results, strategy)

    try:
        return trace_nested(flat_body, in_type, None, f"{api} body", expand)
    finally:
        set_ambient_values(outer_ambient)


def loop_output_type(
    body: NestedBody, strategy: ExpansionStrategy, const_operand: Callable[[int], int]
) -> OutputType:
    """The loop equation's output type: implicit dimensions (resizing only), then the carries.

    With preserved dimensions a result's dimension is a body constant, i.e. ``InDBIdx`` of the
    operand that feeds it; when resizing, each carry's dynamic dimension ``j`` is the implicit
    result at the same position as the implicit argument that carried it in (``OutDBIdx``).
    """
    nc, ni = body.nconsts, body.nimplicit_out
    if strategy.preserve_dimensions:
        return output_type_of(body.jaxpr, 0, lambda k: const_operand(k) if k < nc else None)
    out_type: list[tuple[Any, bool]] = [(DIM_AVAL, False)] * ni
    position = 0
    for v in body.jaxpr.outvars[ni:]:
        aval = v.aval
        if type(aval) is DShapedArray:
            shape = []
            for d in aval.shape:
                if isinstance(d, int):
                    shape.append(d)
                else:
                    shape.append(OutDBIdx(position))
                    position += 1
            aval = aval.update(shape=tuple(shape))
        out_type.append((aval, True))
    return tuple(out_type)


def dims_unchanged(jaxpr: Any, nconsts: int, nimplicit: int) -> bool:
    """True when a resizing loop's body returns every implicit dimension unchanged."""
    return list(jaxpr.outvars[:nimplicit]) == list(jaxpr.invars[nconsts : nconsts + nimplicit])
