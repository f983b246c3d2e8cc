"""Primitives whose result shape is a parameter with ``None`` for each dynamic size.

For these, the dynamic sizes are the trailing operands of the equation, in order. A primitive
listed here that JAX itself stages with dimension *tracers* in that parameter (``gather``'s
``slice_sizes`` for ``x[1:]`` of a symbolic axis) is staged in this form by the
``sizes_in_params_become_operands`` patch: a tracer inside ``params`` would escape the jaxpr.
"""

from __future__ import annotations

from typing import Any

from jax._src import core
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing

from .patches import Patch, is_active, register_patch

__all__ = ["SHAPE_PARAMS", "sizes_as_operands"]

SHAPE_PARAMS = {
    lax_internal.broadcast_in_dim_p: "shape",
    lax_internal.iota_p: "shape",
    lax_internal.reshape_p: "new_sizes",
    slicing.dynamic_slice_p: "slice_sizes",
    slicing.gather_p: "slice_sizes",
}


def sizes_as_operands(
    primitive: core.Primitive, operands: list[Any], params: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Move the dimension tracers of ``primitive``'s shape parameter to trailing operands, leaving
    ``None`` in their place (the :data:`SHAPE_PARAMS` convention)."""
    name = SHAPE_PARAMS[primitive]
    sizes = params[name]
    dynamic = [d for d in sizes if isinstance(d, core.Tracer)]
    static = tuple(None if isinstance(d, core.Tracer) else d for d in sizes)
    return [*operands, *dynamic], dict(params, **{name: static})


def _has_size_tracers(primitive: core.Primitive, params: dict[str, Any]) -> bool:
    name = SHAPE_PARAMS.get(primitive)
    return name is not None and any(isinstance(d, core.Tracer) for d in params.get(name, ()))


def _make_default_process_primitive(original):
    # The result type is computed from the parameters *with* the tracers (the shape rule needs
    # them); the equation is then emitted in the SHAPE_PARAMS form, which specialization fills in.
    def default_process_primitive(self, primitive, tracers, params, source_info=None):
        if not (is_active() and _has_size_tracers(primitive, params)):
            return original(self, primitive, tracers, params, source_info)
        out_aval, effects = primitive.abstract_eval(*(t.aval for t in tracers), **params)
        operands, staged_params = sizes_as_operands(primitive, list(tracers), params)
        operands = [self.to_jaxpr_tracer(x, source_info) for x in operands]
        (out,) = self.emit_eqn(operands, [out_aval], primitive, staged_params, effects, source_info)
        return out

    return default_process_primitive


register_patch(
    Patch(
        "sizes_in_params_become_operands",
        pe.DynamicJaxprTrace,
        "default_process_primitive",
        _make_default_process_primitive,
        "dimension tracers in a SHAPE_PARAMS parameter are staged as trailing operands",
    )
)
