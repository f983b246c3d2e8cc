"""Multi-result primitives on dynamically-shaped operands: ``standard_multi_result_abstract_eval``
lost the dynamic-shape branch its single-result twin keeps (``jnp.linalg.inv``, every decomposition,
variadic ``reduce`` failed with a symbolic size); each gets it back with its own rules.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterator

from jax._src import core
from jax._src.lax import lax as lax_internal
from jax._src.lax import linalg as lax_linalg
from jax._src.lax import utils as lax_utils

from .dynshape import array_aval
from .patches import Patch, is_active, register_patch

__all__ = ["standard_multi_result_primitives"]


def _standard_rules(primitive: core.Primitive) -> functools.partial | None:
    """The ``partial(standard_multi_result_abstract_eval, prim, shape_rule, dtype_rule,
    weak_type_rule, ...)`` in the closure ``def_abstract_eval`` made, if that is what it is."""
    for cell in getattr(primitive.abstract_eval, "__closure__", None) or ():
        rule = cell.cell_contents
        if isinstance(rule, functools.partial) and rule.func is lax_utils.standard_multi_result_abstract_eval:
            return rule
    return None


def standard_multi_result_primitives() -> Iterator[tuple[core.Primitive, functools.partial]]:
    """Every primitive of ``lax`` and ``lax.linalg`` whose result types come from
    ``standard_multi_result_abstract_eval``, with the rules it was given."""
    for module in (lax_internal, lax_linalg):
        for value in vars(module).values():
            if isinstance(value, core.Primitive) and value.multiple_results:
                rules = _standard_rules(value)
                if rules is not None:
                    yield value, rules


def _make_abstract_eval(rules: functools.partial) -> Callable[[Any], Any]:
    _, shape_rule, dtype_rule, weak_type_rule = rules.args[:4]

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def abstract_eval(*avals: Any, **params: Any) -> Any:
            if not (is_active() and any(type(a) is core.DShapedArray for a in avals)):
                return original(*avals, **params)
            shapes, dtypes = shape_rule(*avals, **params), dtype_rule(*avals, **params)
            weak_types = weak_type_rule(*avals, **params)
            if isinstance(weak_types, bool):
                weak_types = (weak_types,) * len(shapes)
            return [array_aval(*t) for t in zip(shapes, dtypes, weak_types)], core.no_effects

        return abstract_eval

    return make


for _primitive, _rules in standard_multi_result_primitives():
    register_patch(Patch(
        f"dynamic_shapes_in_{_primitive.name}_abstract_eval", _primitive, "abstract_eval",
        _make_abstract_eval(_rules),
        "multi-result primitives accept dynamically-shaped operands, as single-result ones do",
    ))
