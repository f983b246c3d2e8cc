"""Size requirements: what a call's sizes must satisfy for ``jax.jit`` to accept the call at all
(unlike an assumption, :mod:`.dimensions`, there is no other path): a reshape keeps the number of
elements, its ``-1`` is a whole quotient, ``jnp.split`` into sections divides evenly. Each is a
``require_size`` equation checked at specialization (at once in a guided trace), raising
:class:`BrokenRequirement`.

>>> import numpy as np, jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes={0: "n"})
... def rows(x):
...     return x.reshape(-1, 3)
>>> rows(np.arange(6.0)).shape, rows(np.arange(12.0)).shape
((2, 3), (4, 3))
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np
from jax._src import core
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax
from jax._src.numpy import lax_numpy

from ..errors import CompileError
from .dimensions import generic_values, user_call_site
from .rules import size_check_primitive
from .patches import repair
from .shapes import fill_sizes, is_symbolic, product
from .size_facts import current_scope

__all__ = ["require_size_p", "require", "size_quotient", "BrokenRequirement"]

# relation -> whether it holds for (lhs, rhs)
_RELATIONS = {"==": lambda lhs, rhs: lhs == rhs, "divides": lambda lhs, rhs: lhs != 0 and rhs % lhs == 0}


class BrokenRequirement(CompileError):
    """A requirement false at a call's sizes (``jax.jit`` refuses them); ``inputs``: the inputs involved."""

    def __init__(self, message: str, inputs: frozenset[int] = frozenset()):
        super().__init__(message)
        self.inputs = inputs


def _check_requirement(lhs: Any, rhs: Any, *, relation: str, message: str, where: str) -> list:
    lhs, rhs = int(np.asarray(lhs)), int(np.asarray(rhs))
    if not _RELATIONS[relation](lhs, rhs):
        raise BrokenRequirement(f"{where}: {message.format(lhs=lhs, rhs=rhs)}.")
    return []


def _requirement_holds(lhs: Any, rhs: Any, *, relation: str, **_: Any) -> Any:
    """Whether the requirement holds, as a flag (traced, on a loop's capacity buffers)."""
    if relation == "==":
        return lhs == rhs
    return (lhs != 0) & (rhs % jnp.where(lhs == 0, 1, lhs) == 0)  # divides


require_size_p = size_check_primitive("require_size", _check_requirement, _requirement_holds)


def require(lhs: Any, rhs: Any, relation: str, message: str) -> None:
    """Record that ``lhs relation rhs`` (``"=="`` or ``"divides"``) must hold, ``message`` filled with the
    call's sizes; in a guided trace, one false at the call's sizes raises at once."""
    where = user_call_site()
    _check_at_point(lhs, rhs, relation, message, where)
    trace = next(d._trace for d in (lhs, rhs) if is_symbolic(d))
    with core.set_current_trace(trace):
        require_size_p.bind(lhs, rhs, relation=relation, message=message, where=where)


def _check_at_point(lhs: Any, rhs: Any, relation: str, message: str, where: str) -> None:
    scope = current_scope()
    if scope is None or not scope.decides_at_point():
        return
    points = set(generic_values(lhs, rhs) or ())
    if len(points) != 1:
        return  # not a function of the call's sizes alone
    ((lhs_value, rhs_value),) = points
    if not _RELATIONS[relation](int(lhs_value), int(rhs_value)):
        sides = [scope.expression(d) if is_symbolic(d) else None for d in (lhs, rhs)]
        inputs = frozenset().union(*(e.inputs() for e in sides if e is not None))
        raise BrokenRequirement(f"{where}: {message.format(lhs=lhs_value, rhs=rhs_value)}.", inputs)


def _key(d: Any) -> Any:
    """What a size is, for comparing shapes: its variable, or its value."""
    return ("var", d.val) if is_symbolic(d) else int(d)


def _shape_key(sizes: Sequence[Any]) -> list:
    return sorted(map(_key, sizes), key=repr)


# frame of a trace -> {quotient variable: (shape divided, the other sizes)}: a reshape to a shape
# with that quotient and those other sizes keeps the element count (required with the quotient).
_quotients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def size_quotient(num: Sequence[Any], den: Sequence[Any]) -> Any:
    """``prod(num) // prod(den)``, what ``-1`` stands for in a reshape of shape ``num`` to other
    sizes ``den``, required to be exact; equal symbolic sizes cancel first (nothing to check)."""
    original = (_shape_key(num), _shape_key(den))
    num, den = list(num), list(den)
    for d in [d for d in den if is_symbolic(d)]:
        match = next((i for i, n in enumerate(num) if n is d), None)
        if match is not None:
            del num[match]
            den.remove(d)
    static_num = math.prod(d for d in num if not is_symbolic(d))
    static_den = math.prod(d for d in den if not is_symbolic(d))
    if not any(map(is_symbolic, den)) and static_den and static_num % static_den == 0:
        quotient = product([d for d in num if is_symbolic(d)] + [static_num // static_den])
    else:
        total, divisor = product(num), product(den)
        require(
            divisor, total, "divides",
            "cannot reshape an array of {rhs} elements with a -1 in the new shape: the product "
            "of the other sizes ({lhs}) does not evenly divide {rhs}",
        )
        quotient = lax.div(total, divisor)  # checked first: the requirement comes before
    if is_symbolic(quotient):
        _quotients.setdefault(quotient._trace.frame, {})[quotient.val] = original
    return quotient


def _is_exact_quotient_shape(shape: Sequence[Any], new_sizes: Sequence[Any]) -> bool:
    """One of ``new_sizes`` is the quotient of ``shape`` by the others (:func:`size_quotient`)."""
    for i, d in enumerate(new_sizes):
        if is_symbolic(d):
            divided = _quotients.get(d._trace.frame, {}).get(d.val)
            others = (*new_sizes[:i], *new_sizes[i + 1 :])
            if divided == (_shape_key(shape), _shape_key(others)):
                return True
    return False


@repair(core, "cancel_divide_tracers",
        "the -1 of a reshape with symbolic sizes is their staged quotient, required to be exact")
def _cancel_divide_tracers(original, num, denom):
    # `jnp.reshape`'s `-1` with a tracer size: JAX's cancels equal tracers, then divides the
    # remaining *static* sizes (`1 // 3` for `(n,) -> (-1, 3)`: size 0) or fails.
    if any(map(is_symbolic, (*num, *denom))):
        return size_quotient(num, denom)
    return original(num, denom)


@repair(pe.DynamicJaxprTrace, "process_primitive",
        "a reshape with symbolic sizes requires the same number of elements (checked at call time)")
def _process_primitive(original, self, primitive, tracers, params):
    # Under dynamic shapes `reshape`'s shape rule no longer checks the element count (XLA then
    # failed at call time about JAX internals): every reshape with a symbolic size requires it.
    if primitive is lax.reshape_p:
        (operand, *_), filled = fill_sizes(primitive, list(tracers), params, lambda size: size)
        _require_same_size(np.shape(operand), tuple(filled["new_sizes"]))
    return original(self, primitive, tracers, params)


def _factors(sizes: Sequence[Any]) -> tuple[int, list]:
    """The product of ``sizes`` as a constant and sorted symbolic factors (``(2, n)`` == ``(2 * n,)``)."""
    constant, symbolic, todo = 1, [], list(sizes)
    while todo:
        d = todo.pop()
        if not is_symbolic(d):
            constant *= int(d)
        elif isinstance(d.val, core.Literal):
            constant *= int(d.val.val)
        elif d.parent is not None and d.parent.primitive is lax.mul_p:
            todo += d.parent.in_tracers
        else:
            symbolic.append(_key(d))
    return constant, sorted(symbolic, key=repr)


def _require_same_size(shape: tuple, new_sizes: tuple) -> None:
    if _factors(shape) == _factors(new_sizes) or _is_exact_quotient_shape(shape, new_sizes):
        return
    described = ", ".join("?" if is_symbolic(d) else str(d) for d in new_sizes)
    require(
        product(shape), product(new_sizes), "==",
        f"cannot reshape an array of {{lhs}} elements into a shape of {{rhs}} elements ({described})",
    )


@repair(lax_numpy, "_split",
        "split/array_split of a symbolic axis into sections: symbolic sizes (equal ones required)")
def _split(original, op, ary, indices_or_sections, axis=0):
    # `jnp.split`/`array_split` into sections branch on `divmod` of the axis size (and build
    # `[part + 1] * r`): with a symbolic size the pieces' sizes are computed symbolically instead,
    # equal ones (required to divide) or, for `array_split`, one more for the first `size % n`.
    size = np.shape(ary)[axis] if isinstance(axis, int) and -np.ndim(ary) <= axis < np.ndim(ary) else None
    if not (is_symbolic(size) and _is_count(indices_or_sections)):
        return original(op, ary, indices_or_sections, axis)
    sections = int(indices_or_sections)
    if op == "array_split":  # piece i has ceil((size - i) / sections) elements
        sizes = [lax.div(size + (sections - 1 - i), sections) for i in range(sections)]
    else:
        require(
            sections, size, "divides",
            f"jnp.{op} into {{lhs}} sections: the axis of {{rhs}} elements is not evenly divided "
            "(jnp.array_split allows unequal sections)",
        )
        sizes = [lax.div(size, sections)] * sections
    return list(lax.split(ary, sizes, axis=axis))


def _is_count(sections: Any) -> bool:
    """A positive number of sections (not a list of split indices)."""
    return isinstance(sections, (int, np.integer)) and not isinstance(sections, bool) and sections > 0
