"""A type checker for catalyst_lite's jaxprs, dynamic shapes included: ``core.check_jaxpr``'s
structure, each equation typed by our nested primitives' typing rules, by JAX's own when its types
are static, else by the types JAX's shape rules gave while tracing. ``CATALYST_LITE_TYPECHECK=1``
checks every traced program (the test suite sets it).

>>> import numpy as np, jax.numpy as jnp
>>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
>>> with dynamic_tracing():
...     jaxpr, _, _ = trace_to_jaxpr(lambda n: [jnp.ones((n,)) * 2], make_input_type([np.int64(3)], [{}]), "f")
>>> check_jaxpr(jaxpr)
"""

from __future__ import annotations

import contextlib
import functools
import itertools as it
import os
from typing import Any, Sequence

import numpy as np
from jax._src import core

from .dynshape import size_matches
from .lowering import size_vars
from .rules import nested_primitives
from .shapes import SHAPE_PARAMS, holds_tracer
from .tracing import DShapedArray, Jaxpr, Literal, Var

__all__ = [
    "check_jaxpr", "check_nested", "check_carry", "same_type", "typecheck_enabled", "JaxprTypeError",
    "open_jax_nested_equation",
]

JaxprTypeError = core.JaxprTypeError


def typecheck_enabled() -> bool:
    """Whether every traced program is type-checked (``CATALYST_LITE_TYPECHECK=1``)."""
    return os.environ.get("CATALYST_LITE_TYPECHECK", "") not in ("", "0")


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Raise :class:`JaxprTypeError` (with the offending equation) if ``jaxpr`` is ill-typed."""

    @functools.cache
    def ctx_factory():
        ctx, settings = core.JaxprPpContext(), core.JaxprPpSettings()
        with contextlib.suppress(Exception):  # printing names the variables, only for the message
            core.pp_jaxpr(jaxpr, ctx, settings)
        return ctx, settings

    try:
        _check(ctx_factory, jaxpr)
    except JaxprTypeError as e:
        ctx, settings = ctx_factory()
        msg, *where = e.args
        at = where[0] if where else 0
        text = str(core.pp_jaxpr_eqn_range(jaxpr, at - 10, at + 10, ctx, settings))
        raise JaxprTypeError(f"{msg}\n\nwhile checking jaxpr:\n{text}") from None


def _check(ctx_factory: Any, jaxpr: Jaxpr) -> None:
    env: dict[Var, Var] = {}

    def name(v: Any) -> str:
        return core.pp_var(v, ctx_factory()[0])

    def read(x: Any) -> Any:
        _check_type(ctx_factory, env, x.aval)
        if isinstance(x, Var) and x not in env:
            raise JaxprTypeError(f"Variable '{name(x)}' not defined")
        if isinstance(x, Literal) and not core.typecheck(x.aval, x.val):
            raise JaxprTypeError(f"Literal {x.val} does not match its type {x.aval}")
        return x

    def write(v: Var, aval: Any) -> None:
        _check_type(ctx_factory, env, v.aval)
        if v in env:
            raise JaxprTypeError(f"Variable '{name(v)}' already bound")
        if not same_type(v.aval, aval):
            raise JaxprTypeError(
                f"Value for variable '{name(v)}' inconsistently typed as {aval} for let-binder of "
                f"type {v.aval}"
            )
        if not isinstance(v, core.DropVar):
            env[v] = v

    for v in it.chain(jaxpr.constvars, jaxpr.invars):
        write(v, v.aval)
    for index, eqn in enumerate(jaxpr.eqns):
        try:
            in_atoms = [read(x) for x in eqn.invars]
            out_type = _equation_type(ctx_factory, eqn, in_atoms)
            out_type = core.substitute_vars_in_output_ty(out_type, eqn.invars, eqn.outvars)
            for v, aval in zip(eqn.outvars, out_type, strict=True):
                write(v, aval)
        except JaxprTypeError as e:
            ctx, settings = ctx_factory()
            where = core.pp_eqn(eqn, ctx, settings)
            raise JaxprTypeError(f"{e.args[0]}\n\nin equation:\n\n  {where}", index) from None
    for x in jaxpr.outvars:
        read(x)


def _check_type(ctx_factory: Any, env: dict, aval: Any) -> None:
    """JAX's check that every size is a bound ``i64[]`` variable or a number (NumPy integers included)."""
    if type(aval) is DShapedArray and any(isinstance(d, np.integer) for d in aval.shape):
        aval = aval.update(shape=tuple(int(d) if isinstance(d, np.integer) else d for d in aval.shape))
    core.check_type(ctx_factory, env, aval)


def _equation_type(ctx_factory: Any, eqn: Any, in_atoms: list[Any]) -> list[Any]:
    prim = eqn.primitive
    if prim in nested_primitives or (prim in core.custom_typechecks and _static(eqn)):
        out_type, effects = core.custom_typechecks[prim](ctx_factory, *in_atoms, **eqn.params)
        if eqn.effects != effects:
            raise JaxprTypeError(f"effects {eqn.effects} of the equation, {effects} of its type")
        return list(out_type)
    if _static(eqn):
        out_avals, _ = core.check_eqn(prim, [x.aval for x in in_atoms], eqn.params)
        return list(out_avals)
    return [v.aval for v in eqn.outvars]


def _static(eqn: Any) -> bool:
    """An equation whose types JAX's own abstract evaluation can compute: no size variables."""
    if eqn.primitive in SHAPE_PARAMS and None in (eqn.params[SHAPE_PARAMS[eqn.primitive]] or ()):
        return False
    return not any(type(v.aval) is DShapedArray for v in (*eqn.invars, *eqn.outvars))


# --- helpers for the typing rules of nested primitives -------------------------------------------


def same_type(t1: Any, t2: Any) -> bool:
    """Equal types but weak types: same dtype, sizes the same variable or number (DShapedArray or not)."""
    arrays = (core.ShapedArray, DShapedArray)
    if not (isinstance(t1, arrays) and isinstance(t2, arrays)):
        return core.typematch(t1, t2)
    return (
        t1.dtype == t2.dtype
        and len(t1.shape) == len(t2.shape)
        and all(map(size_matches, t1.shape, t2.shape))
    )


def _substitute(aval: Any, env: dict[Var, Any]) -> Any:
    """``aval`` with its size variables replaced by ``env``'s atoms (literals by their values)."""
    if type(aval) is not DShapedArray:
        return aval
    shape = []
    for d in aval.shape:
        d = env.get(d, d) if isinstance(d, Var) else d
        shape.append(int(d.val) if isinstance(d, Literal) else d)
    return aval.update(shape=tuple(shape))


def check_nested(jaxpr: Jaxpr, operands: Sequence[Any], what: str) -> None:
    """``jaxpr`` is well typed and takes ``operands`` (its binders' sizes being the operands feeding them)."""
    if len(jaxpr.invars) != len(operands):
        raise JaxprTypeError(f"{what} takes {len(jaxpr.invars)} arguments but is given {len(operands)}")
    env: dict[Var, Any] = {}
    for k, (v, x) in enumerate(zip(jaxpr.invars, operands)):
        expected = _substitute(v.aval, env)
        if not same_type(expected, x.aval):
            raise JaxprTypeError(f"{what}: argument {k} has type {x.aval}, the body expects {expected}")
        env[v] = x
    check_jaxpr(jaxpr)


def check_carry(binders: Sequence[Var], results: Sequence[Any], nimplicit: int, what: str) -> None:
    """A loop body returns each carried binder's type (its sizes: the first ``nimplicit`` results)."""
    if len(binders) != len(results):
        raise JaxprTypeError(f"{what} carries {len(binders)} values but returns {len(results)}")
    env = dict(zip(binders[:nimplicit], results[:nimplicit]))
    for k, (b, r) in enumerate(zip(binders, results)):
        expected = _substitute(b.aval, env)
        if not same_type(expected, r.aval):
            raise JaxprTypeError(f"{what}: carried value {k} has type {b.aval} but the body returns {r.aval}")


def _free_sizes(jaxpr: Jaxpr) -> set[Var]:
    """The size variables that ``jaxpr``'s types (nested jaxprs' too) name but nothing in it binds."""
    bound = {*jaxpr.constvars, *jaxpr.invars}
    atoms = [*jaxpr.constvars, *jaxpr.invars, *jaxpr.outvars]
    named = {v for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in jaxpr.eqns:
        atoms += [*eqn.invars, *eqn.outvars]
        named.update(v for v in eqn.invars if isinstance(v, Var))
        bound.update(v for v in eqn.outvars if isinstance(v, Var))
        for sub in core.jaxprs_in_params(eqn.params):
            named.update(_free_sizes(sub))
    return named.union(*map(size_vars, atoms)) - bound


def open_jax_nested_equation(jaxpr: Jaxpr) -> Any | None:
    """The first equation of a JAX primitive (nested jaxprs searched) naming a size nothing binds (JAX
    traces its bodies in a trace of their own) or holding a size tracer in a parameter; or ``None``."""
    for eqn in jaxpr.eqns:
        if eqn.primitive not in nested_primitives and holds_tracer(list(eqn.params.values()), in_avals=True):
            return eqn
        for sub in core.jaxprs_in_params(eqn.params):
            if eqn.primitive not in nested_primitives and _free_sizes(sub):
                return eqn
            found = open_jax_nested_equation(sub)
            if found is not None:
                return found
    return None
