"""Primitives' shapes with symbolic sizes. Primitives whose result shape is a parameter
(:data:`SHAPE_PARAMS`) hold ``None`` there for each dynamic size, which is a trailing operand of the
equation (JAX would stage a tracer in ``params``, which escapes the jaxpr). Those of
:data:`SIZE_PARAM_REWRITES` (``slice``'s bounds, ``split``'s sizes, ``pad``'s widths) are
re-expressed in primitives that take sizes as operands. Multi-result primitives (every
decomposition, variadic ``reduce``) get back the dynamic-shape branch of their abstract evaluation.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from jax._src import config, core, prng
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax as lax_internal
from jax._src.lax import linalg as lax_linalg
from jax._src.lax import slicing
from jax._src.lax import utils as lax_utils

from ..errors import SymbolicShapeError
from .dynshape import array_aval
from .patches import repair
from .tracing import dimension_value

__all__ = ["SHAPE_PARAMS", "SIZE_PARAM_REWRITES", "fill_sizes", "holds_tracer", "is_symbolic", "product"]


SHAPE_PARAMS = {
    lax_internal.broadcast_in_dim_p: "shape",
    lax_internal.iota_p: "shape",
    lax_internal.reshape_p: "new_sizes",
    slicing.dynamic_slice_p: "slice_sizes",
    slicing.gather_p: "slice_sizes",
    prng.random_bits_p: "shape",
    prng.random_split_p: "shape",
}


def _sizes_as_operands(primitive: core.Primitive, operands: list, params: dict) -> tuple[list, dict]:
    """``primitive``'s shape parameter with ``None`` for each dimension tracer, moved to trailing operands."""
    name = SHAPE_PARAMS[primitive]
    sizes = params[name]
    dynamic = [d for d in sizes if isinstance(d, core.Tracer)]
    static = tuple(None if isinstance(d, core.Tracer) else d for d in sizes)
    return [*operands, *dynamic], dict(params, **{name: static})


def fill_sizes(primitive: core.Primitive, operands: list, params: dict, size_of: Callable) -> tuple:
    """The inverse of :func:`_sizes_as_operands`: ``None`` sizes are ``size_of`` the trailing operands."""
    name = SHAPE_PARAMS[primitive]
    static = params[name]
    ndyn = sum(d is None for d in static)
    if ndyn == 0:
        return operands, params
    sizes = iter([size_of(v) for v in operands[len(operands) - ndyn :]])
    filled = tuple(next(sizes) if d is None else d for d in static)
    return operands[: len(operands) - ndyn], dict(params, **{name: filled})


def _slice_as_dynamic_slice(operand, *, start_indices, limit_indices, strides):
    """``operand[start:limit]`` as a ``dynamic_slice`` of ``limit - start`` (nothing is clamped)."""
    if strides is not None and any(s != 1 for s in strides):
        raise NotImplementedError("a strided lax.slice with symbolic bounds")
    sizes = [limit - start for start, limit in zip(start_indices, limit_indices)]
    return slicing.dynamic_slice(operand, start_indices, sizes)


def _split_as_dynamic_slices(operand, *, sizes, axis):
    """``split`` into symbolic sizes: one ``dynamic_slice`` per piece, at the running offset."""
    offsets = [0, *itertools.accumulate(sizes)]
    return [slicing.dynamic_slice_in_dim(operand, offset, size, axis) for offset, size in zip(offsets, sizes)]


def _pad_with_symbolic_widths(operand, padding_value, *, padding_config):
    """``lax.pad`` by the static widths, each symbolic one a block of ``padding_value`` concatenated."""
    if any(is_symbolic(interior) for _, _, interior in padding_config):
        raise NotImplementedError("lax.pad with a symbolic interior padding")
    static = [(0 if is_symbolic(lo) else lo, 0 if is_symbolic(hi) else hi, i) for lo, hi, i in padding_config]
    out = lax_internal.pad(operand, padding_value, static)
    for axis, (lo, hi, _) in enumerate(padding_config):
        blocks = [
            lax_internal.broadcast_in_dim(
                padding_value, tuple(width if i == axis else d for i, d in enumerate(out.shape)), ()
            )
            for width in (lo, hi)
        ]
        parts = [blocks[0]] * is_symbolic(lo) + [out] + [blocks[1]] * is_symbolic(hi)
        if len(parts) > 1:
            out = lax_internal.concatenate(parts, axis)
    return out


# primitive -> (its size-carrying parameters, an equivalent in primitives that take sizes as operands)
SIZE_PARAM_REWRITES: dict[core.Primitive, tuple[tuple[str, ...], Callable[..., Any]]] = {
    slicing.slice_p: (("start_indices", "limit_indices"), _slice_as_dynamic_slice),
    lax_internal.split_p: (("sizes",), _split_as_dynamic_slices),
    lax_internal.pad_p: (("padding_config",), _pad_with_symbolic_widths),
}


def is_symbolic(d: Any) -> bool:
    """A size (or width) that is a tracer, not a number."""
    return isinstance(d, core.Tracer)


def product(sizes: Sequence[Any], symbolic: Callable[[Any], bool] = is_symbolic,
            multiply: Callable[[Any, Any], Any] = operator.mul, constant: Callable[[int], Any] = int) -> Any:
    """The product of ``sizes``, multiplied where a size is ``symbolic`` only (no ``* 1``)."""
    static = math.prod(d for d in sizes if not symbolic(d))
    dynamic = [d for d in sizes if symbolic(d)]
    if not dynamic:
        return static
    out = functools.reduce(multiply, dynamic)
    return out if static == 1 else multiply(out, constant(static))


def holds_tracer(value: Any, in_avals: bool = False) -> bool:
    """``value`` is a tracer or holds one: in nested tuples and lists, or (``in_avals``) as a size of
    an abstract value (``pure_callback``'s ``result_avals`` of a symbolic shape)."""
    if isinstance(value, (tuple, list)):
        return any(holds_tracer(v, in_avals) for v in value)
    shape = getattr(value, "shape", ()) if in_avals and isinstance(value, core.AbstractValue) else ()
    return is_symbolic(value) or any(map(is_symbolic, shape))


@repair(pe.DynamicJaxprTrace, "default_process_primitive",
        "sizes in a SHAPE_PARAMS parameter are trailing operands; SIZE_PARAM_REWRITES rewritten")
def _default_process_primitive(original, self, primitive, tracers, params, source_info=None):
    # The result type is computed from the parameters *with* the tracers (the shape rule needs
    # them); the equation is then emitted in the SHAPE_PARAMS form, which specialization fills in.
    names, rewrite = SIZE_PARAM_REWRITES.get(primitive, ((), None))
    if holds_tracer([params.get(name) for name in names]):
        with core.set_current_trace(self):
            return rewrite(*tracers, **params)
    if not (primitive in SHAPE_PARAMS and holds_tracer(params.get(SHAPE_PARAMS[primitive]))):
        _refuse_sizes_in_params(primitive, params)
        return original(self, primitive, tracers, params, source_info)
    out_aval, effects = primitive.abstract_eval(*(t.aval for t in tracers), **params)
    operands, staged_params = _sizes_as_operands(primitive, list(tracers), params)
    operands = [self.to_jaxpr_tracer(x, source_info) for x in operands]
    # A static-shape operand (a constant sliced by a loop's index) gets a `ShapedArray` result:
    # its sizes become the equation's variables only in a dynamic-shape type.
    out_aval = array_aval(out_aval.shape, out_aval.dtype, out_aval.weak_type)
    # A size captured from an enclosing trace is a constant of this one, in the result too.
    out_aval = self._lift_tracers_in_aval(out_aval, source_info)
    (out,) = self.emit_eqn(operands, [out_aval], primitive, staged_params, effects, source_info)
    return out


def _refuse_sizes_in_params(primitive: core.Primitive, params: dict[str, Any]) -> None:
    """A size tracer in any other parameter would escape the jaxpr: refuse it while tracing."""
    for name, value in params.items():
        if holds_tracer(value):
            raise NotImplementedError(
                f"primitive {primitive.name!r} takes a symbolic size in its parameter {name!r}, "
                "which JAX 0.7's dynamic-shape path cannot stage"
            )


# --- sizes given as numbers (JAX's interpreters on catalyst_lite's jaxprs) ------------------------


def _static_size(x: Any) -> int:
    size = dimension_value(x)
    if size is None or isinstance(size, core.Tracer):
        raise SymbolicShapeError(
            "a catalyst_lite jaxpr evaluated by JAX with static shapes (jax.core.eval_jaxpr under "
            "jax.jit, jax.vmap, jax.jvp...) needs its sizes as numbers, but a size is traced here. "
            "Pass the sizes as static values (e.g. jax.jit(..., static_argnums=...)), or call the "
            "qjit function itself."
        )
    return size


def _is_integer_number(x: Any) -> bool:
    """A Python or NumPy integer (or boolean) scalar, or a concrete one: what sizes are made of."""
    if isinstance(x, core.Tracer):
        return False
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and np.shape(x) == () and (np.issubdtype(dtype, np.integer) or dtype == np.bool_)


@repair(core.EvalTrace, "process_primitive")
@repair(pe.DynamicJaxprTrace, "process_primitive")
def _static_sizes(original: Callable, self, primitive, tracers, params):
    """With dynamic shapes off, sizes given as numbers make static shapes; integer sizes fold."""
    # In `dynamic_jaxprs()` (dynamic shapes off), JAX's interpreters evaluate our jaxprs: a
    # shape-carrying primitive with numbers as size operands is bound with a static shape, and
    # (while `jax.jit` stages) integer arithmetic on numbers is folded, so sizes stay numbers.
    if config.dynamic_shapes.value:
        return original(self, primitive, tracers, params)
    if primitive in SHAPE_PARAMS and None in (params.get(SHAPE_PARAMS[primitive]) or ()):
        operands, params = fill_sizes(primitive, list(tracers), params, _static_size)
        return primitive.bind_with_trace(self, operands, params)
    if isinstance(self, pe.DynamicJaxprTrace) and tracers and all(_is_integer_number(x) for x in tracers):
        with core.eval_context():
            return primitive.bind_with_trace(core.eval_trace, tracers, params)
    return original(self, primitive, tracers, params)


# --- multi-result primitives (`standard_multi_result_abstract_eval` lost its dynamic-shape branch) --


def _standard_rules(primitive: core.Primitive) -> functools.partial | None:
    """The ``partial(standard_multi_result_abstract_eval, ...)`` in ``primitive.abstract_eval``'s closure."""
    for cell in getattr(primitive.abstract_eval, "__closure__", None) or ():
        rule = cell.cell_contents
        if isinstance(rule, functools.partial) and rule.func is lax_utils.standard_multi_result_abstract_eval:
            return rule
    return None


def standard_multi_result_primitives() -> Iterator[tuple[core.Primitive, functools.partial]]:
    """The ``lax`` and ``lax.linalg`` primitives typed by ``standard_multi_result_abstract_eval``."""
    for module in (lax_internal, lax_linalg):
        for value in vars(module).values():
            if isinstance(value, core.Primitive) and value.multiple_results:
                rules = _standard_rules(value)
                if rules is not None:
                    yield value, rules


def _dynamic_abstract_eval(rules: functools.partial) -> Callable[..., Any]:
    _, shape_rule, dtype_rule, weak_type_rule = rules.args[:4]

    def abstract_eval(original: Callable[..., Any], *avals: Any, **params: Any) -> Any:
        if not any(type(a) is core.DShapedArray for a in avals):
            return original(*avals, **params)
        shapes, dtypes = shape_rule(*avals, **params), dtype_rule(*avals, **params)
        weak_types = weak_type_rule(*avals, **params)
        if isinstance(weak_types, bool):
            weak_types = (weak_types,) * len(shapes)
        return [array_aval(*t) for t in zip(shapes, dtypes, weak_types)], core.no_effects

    return abstract_eval


for _primitive, _rules in standard_multi_result_primitives():
    _why = "multi-result primitives accept dynamically-shaped operands, as single-result ones do"
    repair(_primitive, "abstract_eval", _why)(_dynamic_abstract_eval(_rules))
