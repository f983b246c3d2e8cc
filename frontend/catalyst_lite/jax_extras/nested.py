"""The nested-binding driver: one :func:`bind_nested` for every primitive with nested programs (the
design documents' ``bindNested(Function, Inputs, S)``). It deduces the bodies' input type
(:func:`~.dynshape.expand_args`), traces each body (:func:`trace_nested`), builds the equation and
binds the primitive. *Threaded values* (a circuit's state vector, its PRNG key) are carried through
every body without the user writing them. Transformations trace bodies again with :func:`retrace`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Literal as KindLiteral, Protocol, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core

from .dynshape import DimensionMismatch, ExpansionStrategy, conform_carried_sizes, expand_args, expand_results
from .dynshape import input_type_of, is_dynamic
from .tracing import InnerTrace, InputType, Jaxpr, Tracer, collapse, debug_info_for, dynamic_tracing

__all__ = [
    "NestedBody", "trace_nested", "retrace", "promote_results", "Threaded", "Body", "Equation", "NestedSpec",
    "bind_nested", "DynshapePrimitive", "interleave",
]


class DynshapePrimitive(core.Primitive):
    """A primitive of nested jaxprs whose results may have dynamic shapes (typed by :mod:`.rules`)."""

    multiple_results = True


@dataclass
class NestedBody:
    """A traced body: ``jaxpr`` takes ``consts + expanded args`` and returns expanded results."""

    jaxpr: Jaxpr
    consts: list[Any]  # values of enclosing traces (or concrete) for the leading binders
    in_type: InputType
    nimplicit_out: int
    out_avals: list[Any]  # avals of the explicit results inside the body (for error messages)

    @property
    def nconsts(self) -> int:
        return len(self.consts)


def trace_nested(
    fn: Callable[..., Sequence[Any]],
    in_type: InputType,
    name: str,
    expand: Callable[[list[Tracer], list[Any]], tuple[list[Any], int]],
) -> NestedBody:
    """Abstract evaluation of a flat body (``abstractEval``): ``fn`` takes ``in_type``'s explicit
    arguments; ``expand(args, results)`` gives the expanded results and how many are implicit."""
    with dynamic_tracing():
        inner = InnerTrace(debug_info_for(fn, name))
        try:
            expanded_args = inner.arguments(in_type)
            explicit = collapse(in_type, expanded_args)
            results = [inner.lift(_as_jax_value(r, name)) for r in inner.call(fn, *explicit)]
            expanded_results, nimplicit = expand(explicit, results)
            arg_dims = [d for t in expanded_args for d in getattr(t.aval, "shape", ()) if is_dynamic(d)]
            jaxpr, consts = inner.to_jaxpr(expanded_results, keep_alive=arg_dims)
            out_avals = [r.aval for r in results]
        finally:
            inner.close()
    return NestedBody(jaxpr, consts, in_type, nimplicit, out_avals)


def _as_jax_value(x: Any, name: str) -> Any:
    if isinstance(x, (Tracer, np.ndarray, np.generic, int, float, bool, complex)) or hasattr(
        x, "__jax_array__"
    ) or hasattr(x, "aval") or core.valid_jaxtype(x):
        # (valid_jaxtype: JAX 0.7.2's literals, what eval_jaxpr gives for a constant result)
        return x
    raise TypeError(
        f"{name} returned a value of type {type(x).__name__}, which is not a JAX array or number."
    )


def retrace(fn: Callable[..., Sequence[Any]], in_type: InputType, name: str, nimplicit_out: int,
            like: Jaxpr | None = None) -> NestedBody:
    """Trace a transformed body in ``in_type``; ``fn`` returns the results, ``nimplicit_out`` implicit;
    its debug info names the user's function of ``like``, the body transformed (for errors at run time)."""
    body = trace_nested(fn, in_type, name, lambda args, results: (results, nimplicit_out))
    if like is not None and like.debug_info is not None:
        body.jaxpr = body.jaxpr.replace(
            debug_info=body.jaxpr.debug_info._replace(func_src_info=like.debug_info.func_src_info))
    return body


def promote_results(bodies: Sequence[NestedBody], name: str) -> list[NestedBody]:
    """Alternative bodies (``cond``'s branches) returning one type: each result converted to the dtype
    the alternatives promote to (weak types ignored, as Catalyst), bodies traced again as needed."""
    columns = list(zip(*(b.out_avals for b in bodies)))
    promoted = [
        functools.reduce(jnp.promote_types, [a.dtype for a in avals])
        if all(hasattr(a, "dtype") for a in avals) else None
        for avals in columns
    ]
    return [_cast_results(b, promoted, name) for b in bodies]


def _cast_results(body: NestedBody, dtypes: Sequence[Any], name: str) -> NestedBody:
    wanted = [d if d is not None and a.dtype != d else None for a, d in zip(body.out_avals, dtypes)]
    if not any(d is not None for d in wanted):
        return body
    jaxpr, n = body.jaxpr, body.nimplicit_out

    def cast(*args: Any) -> list[Any]:
        outs = core.eval_jaxpr(jaxpr, (), *args)
        return [*outs[:n], *(x if d is None else lax.convert_element_type(x, d) for x, d in zip(outs[n:], wanted))]

    new = retrace(cast, input_type_of(jaxpr.invars), name, n)
    out_avals = [a if d is None else a.update(dtype=d, weak_type=False) for a, d in zip(body.out_avals, wanted)]
    return NestedBody(new.jaxpr, [*new.consts, *body.consts], body.in_type, n, out_avals)


# --- the driver ----------------------------------------------------------------------------------


class Threaded(Protocol):
    """A value carried through every nested body without the user writing it."""

    def get(self) -> Any: ...

    def set(self, value: Any) -> None: ...


@dataclass(frozen=True)
class Body:
    """One nested program of an equation: flat explicit arguments to flat results, ``"carried"`` (fitting
    the arguments), ``"predicate"``, ``"free"`` or ``"sized"`` (symbolic sizes returned too)."""

    fn: Callable[..., Sequence[Any]]
    name: str
    results: KindLiteral["carried", "predicate", "free", "sized"] = "free"


@dataclass
class Equation:
    """What a primitive's ``NestedSpec.equation`` builds from its traced bodies."""

    operands: list[Any]
    params: dict[str, Any]
    nimplicit_out: int


@dataclass(frozen=True)
class NestedSpec:
    """How to bind one primitive with nested programs (``strategy`` ``None``: bodies take no arguments;
    ``nprefix``: leading arguments not carried); ``equation(bodies, implicit, explicit)``."""

    primitive: core.Primitive
    equation: Callable[[list[NestedBody], list[Any], list[Any]], Equation]
    strategy: ExpansionStrategy | None = None
    nprefix: int = 0
    threaded: Sequence[Threaded] = field(default_factory=tuple)


def bind_nested(spec: NestedSpec, bodies: Sequence[Body], operands: Sequence[Any]) -> list[Any]:
    """Bind ``spec.primitive`` with ``bodies`` on ``operands``; return the explicit results but the
    threaded values, which are set (:class:`~.dynshape.DimensionMismatch` for an ill-fitting loop)."""
    threaded = list(spec.threaded)
    outer = [t.get() for t in threaded]
    args = [*operands, *outer] if spec.strategy is not None else []
    force_dynamic: frozenset[tuple[int, int]] = frozenset()
    while True:
        strategy = spec.strategy
        expanded, in_type = ([], ()) if strategy is None else expand_args(args, strategy, force_dynamic)
        try:
            traced = [_trace_body(spec, body, in_type, outer) for body in bodies]
            break
        except DimensionMismatch as err:  # that size may change: retrace with it dynamic
            if _promoted_weak_type(args, spec.nprefix + err.position, len(operands), err):
                continue
            key = (spec.nprefix + err.position, err.axis)
            if err.axis is None or key in force_dynamic:
                raise
            force_dynamic |= {key}
    nimplicit = len(expanded) - len(args)
    equation = spec.equation(traced, expanded[:nimplicit], expanded[nimplicit:])
    outs = spec.primitive.bind(*equation.operands, **equation.params)
    explicit = list(outs[equation.nimplicit_out :])
    nuser = len(explicit) - len(threaded)
    for carry, value in zip(threaded, explicit[nuser:]):
        carry.set(value)
    return explicit[:nuser]


def _promoted_weak_type(args: list[Any], k: int, nexplicit: int, err: DimensionMismatch) -> bool:
    """As ``lax.fori_loop``/``while_loop``: a weakly typed initial value (``0.0``, ``0``) takes the dtype
    it promotes to with the body's result (``args[k]`` converted); ``False`` if it is none such."""
    aval = core.get_aval(args[k])
    if err.reason != "dtype" or k >= nexplicit or not getattr(aval, "weak_type", False):
        return False
    args[k] = lax.convert_element_type(args[k], jnp.result_type(args[k], err.result_aval.dtype))
    return True


def _trace_body(spec: NestedSpec, body: Body, in_type: InputType, outer: list[Any]) -> NestedBody:
    threaded, nthreaded = spec.threaded, len(outer)
    takes_threaded = spec.strategy is not None

    def flat(*explicit: Any) -> list[Any]:
        if takes_threaded and nthreaded:
            for carry, value in zip(threaded, explicit[len(explicit) - nthreaded :]):
                carry.set(value)
            explicit = explicit[: len(explicit) - nthreaded]
        results = list(body.fn(*explicit))
        if body.results == "carried" and spec.strategy.preserve_dimensions:
            results = conform_carried_sizes(explicit[spec.nprefix :], results)
        if body.results != "predicate":
            results += [carry.get() for carry in threaded]
        return results

    flat.__wrapped__ = body.fn  # (JAX's debug info of the body names the function it unwraps to)

    def expand(args: list[Any], results: list[Any]) -> tuple[list[Any], int]:
        if body.results == "carried":
            return expand_results(args[spec.nprefix :], results, spec.strategy)
        if body.results == "sized":
            return expand_results(None, results, None)
        return results, 0

    try:
        return trace_nested(flat, in_type, body.name, expand)
    finally:
        for carry, value in zip(threaded, outer):
            carry.set(value)


def interleave(flags: Sequence[bool], if_true: Sequence[Any], if_false: Sequence[Any]) -> list[Any]:
    """One value per flag: the next of ``if_true`` where it is set, the next of ``if_false``
    elsewhere (operands split by a transformation, put back in order).

    >>> interleave([True, False, True], [1, 3], [2])
    [1, 2, 3]
    """
    t, f = iter(if_true), iter(if_false)
    return [next(t) if flag else next(f) for flag in flags]
