"""Specialization: evaluate a dynamically-shaped jaxpr at concrete sizes (docs/architecture.md,
"2. Specialize"), with one interpreter, :func:`eval_jaxpr`, in a :class:`Mode`: ``STAGED`` in a
``jax.jit`` trace, sizes as Python ints (a size depending on data raises :class:`NeedsHost`);
``HOST``, eager; ``SIZES``, the size arithmetic alone (:func:`check_sizes`); and :mod:`.capacity`'s
mode on capacity buffers. A primitive's rules are its :class:`~..jax_extras.rules.PrimitiveSpec`.
Runners key executables on :func:`reverse_mode_requested`: loops JAX cannot transpose run on the host.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from ..diagnostics import unsupported_equation_error
from ..errors import ArrayTooLargeError, CatalystLiteError, CompileError
from ..trace_context import current as current_context, scope as context_scope
from ..jax_extras import ClosedJaxpr, DropVar, Jaxpr, Literal, Primitive, Tracer, Var, eval_context
from ..jax_extras import jax_scan_p, jax_while_p
from ..jax_extras.autodiff import is_reverse_mode_value
from ..jax_extras.dynshape import has_symbolic_shape
from ..jax_extras.tracing import get_aval
from ..jax_extras.rules import NeedsHost, spec_of
from ..jax_extras.shapes import SHAPE_PARAMS, fill_sizes

__all__ = ["Mode", "NeedsHost", "eval_jaxpr", "dimension_inputs", "to_dim", "trip_count", "check_sizes",
           "reverse_mode", "reverse_mode_requested", "needs_reverse_mode"]


class Mode:
    """How :func:`eval_jaxpr` evaluates an equation (``reads_unknown``: a missing value reads as unknown)."""

    reads_unknown = False
    STAGED: "Mode"
    HOST: "Mode"
    SIZES: "Mode"

    def equation(self, eqn: Any, invals: list[Any], env: dict) -> list[Any] | None:
        """The results of ``eqn`` on ``invals`` (``env``: the values so far), ``None``: unknown."""
        spec = spec_of(eqn.primitive)
        rule = None if spec is None else spec.staged if self is Mode.STAGED else spec.host
        if rule is not None:
            return list(rule(invals, eqn.params))
        if _has_rule(eqn, "size_check") and any_traced(invals):
            # A size check has no lowering: staged, it would be dropped. The host runs it.
            raise NeedsHost(f"{eqn.primitive} on sizes known only at run time")
        if eqn.primitive is jax_while_p and _has_symbolic_types(eqn.params["body_jaxpr"]):
            return _jax_while_at_sizes(eqn.params, invals, self)
        if eqn.primitive is jax_scan_p and _has_symbolic_types(eqn.params["jaxpr"]):
            return _jax_scan_at_sizes(eqn.params, invals, self)
        return _eval_equation(eqn, invals)


def _has_symbolic_types(closed: ClosedJaxpr) -> bool:
    return any(has_symbolic_shape(a) for a in closed.in_avals)


def _run(closed: ClosedJaxpr, mode: Mode, *args: Sequence[Any]) -> list[Any]:
    return eval_jaxpr(closed.jaxpr, [*closed.consts, *(x for group in args for x in group)], mode)


# A `lax.while_loop` or `lax.scan` whose body has symbolic sizes (it reads an array of an abstracted
# axis) is traced again at the operands' sizes, as `jax.jit` traces it: bound whole, JAX's rules for
# it under `jax.jvp`/`jax.vmap`/`jax.grad` compared symbolic sizes (a TypeError).


def _jax_while_at_sizes(params: dict[str, Any], invals: list[Any], mode: Mode) -> list[Any]:
    ncond, nbody = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts, init = invals[:ncond], invals[ncond : ncond + nbody], invals[ncond + nbody :]
    return list(jax.lax.while_loop(lambda carry: _run(params["cond_jaxpr"], mode, cond_consts, carry)[0],
                                   lambda carry: tuple(_run(params["body_jaxpr"], mode, body_consts, carry)),
                                   tuple(init)))


def _jax_scan_at_sizes(params: dict[str, Any], invals: list[Any], mode: Mode) -> list[Any]:
    nconsts, ncarry = params["num_consts"], params["num_carry"]
    consts, init, xs = invals[:nconsts], invals[nconsts : nconsts + ncarry], invals[nconsts + ncarry :]

    def body(carry: tuple, x: tuple) -> tuple:
        out = _run(params["jaxpr"], mode, consts, carry, x)
        return tuple(out[:ncarry]), tuple(out[ncarry:])

    carry, ys = jax.lax.scan(body, tuple(init), tuple(xs), length=params["length"], reverse=params["reverse"],
                             unroll=params["unroll"])
    return [*carry, *ys]


class _SizeArithmetic(Mode):
    """The program's size arithmetic alone (see :func:`check_sizes`)."""

    reads_unknown = True

    def equation(self, eqn: Any, invals: list[Any], env: dict) -> list[Any] | None:
        prim = eqn.primitive
        if prim in SHAPE_PARAMS:
            ndyn = sum(d is None for d in eqn.params[SHAPE_PARAMS[prim]])
            if _UNKNOWN not in invals[len(invals) - ndyn :]:
                _fill_dynamic_shape(eqn, invals)
        elif _UNKNOWN not in invals and (_has_rule(eqn, "size_check") or _is_size_arithmetic(eqn)):
            return _eval_equation(eqn, invals)
        return None


Mode.STAGED, Mode.HOST, Mode.SIZES = Mode(), Mode(), _SizeArithmetic()


def _has_rule(eqn: Any, rule: str) -> bool:
    """Whether ``eqn``'s primitive has the rule named ``rule`` (``dimension_operands``: specializations
    need the values of some operands; ``size_check``: the equation only checks sizes)."""
    return getattr(spec_of(eqn.primitive), rule, None) is not None


def to_dim(value: Any) -> int:
    """The concrete size held by ``value``; :class:`NeedsHost` if it is only known at run time."""
    if isinstance(value, Tracer):
        raise NeedsHost(value)
    return int(value)


def trip_count(lower: Any, upper: Any, step: Any) -> Any:
    """Number of iterations of ``range(lower, upper, step)`` (a Python int for known bounds)."""
    if any_traced((lower, upper, step)):
        return jax.numpy.maximum(0, -((lower - upper) // step))
    return len(range(int(lower), int(upper), int(step)))


def reverse_mode_requested() -> bool:
    """True inside :func:`reverse_mode` (in this thread)."""
    return current_context().reverse_mode


def reverse_mode(active: bool = True) -> context_scope:
    """Specialize for reverse-mode differentiation during a ``with`` block (``active=False``: do not)."""
    return context_scope(reverse_mode=active)


def needs_reverse_mode(args: Sequence[Any]) -> bool:
    """Whether a program run on ``args`` needs reverse mode: requested, or an argument is linearized."""
    return reverse_mode_requested() or any(is_reverse_mode_value(a) for a in args)


def any_traced(values: Sequence[Any]) -> bool:
    return any(isinstance(x, Tracer) for x in values)


def is_size_type(shape: Sequence[Any], dtype: Any) -> bool:
    """A signed integer scalar: what sizes are (unsigned ones are bits, such as a PRNG key's)."""
    # `jax.dtypes.issubdtype`: a PRNG key's extended dtype is not a NumPy one.
    return not shape and jax.dtypes.issubdtype(dtype, np.signedinteger)


def is_int_scalar(v: Any) -> bool:
    """A variable of :func:`is_size_type`."""
    return is_size_type(v.aval.shape, v.aval.dtype)


def _is_index_scalar(v: Any) -> bool:
    """An integer or boolean scalar: what size arithmetic is made of (``min``, comparisons, ``select_n``)."""
    return is_int_scalar(v) or (not v.aval.shape and v.aval.dtype == np.bool_)


def _fill_dynamic_shape(eqn: Any, invals: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Replace the ``None`` sizes of a shape-carrying primitive by the concrete trailing operands."""
    operands, params = fill_sizes(eqn.primitive, invals, eqn.params, to_dim)
    filled = params[SHAPE_PARAMS[eqn.primitive]]
    if filled is not eqn.params[SHAPE_PARAMS[eqn.primitive]]:
        if any(d < 0 for d in filled):
            raise CompileError(f"{eqn.primitive} would create an array of negative size {filled}.")
        check_fits_in_memory(str(eqn.primitive), filled, eqn.outvars[0].aval.dtype)
    return operands, params


# Arrays below this size are not worth a look at the system's free memory.
_ALWAYS_FITS_BYTES = 1 << 26


def check_fits_in_memory(what: str, shape: Sequence[int], dtype: Any) -> None:
    """Raise :class:`ArrayTooLargeError` for an array that would not fit in memory (before XLA fails)."""
    nbytes = math.prod(shape) * getattr(dtype, "itemsize", 8)  # a PRNG key's dtype is not NumPy's
    if nbytes <= _ALWAYS_FITS_BYTES:
        return
    available = sys.maxsize  # what the process can still allocate: Linux's MemAvailable, else the memory size
    with contextlib.suppress(AttributeError, OSError, ValueError):
        available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError, IndexError, StopIteration), open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    if nbytes > available:
        raise ArrayTooLargeError(
            f"{what} would create an array of shape {tuple(shape)} and dtype {np.dtype(dtype)} "
            f"({nbytes / 2**30:.3g} GiB), more than the {available / 2**30:.3g} GiB of memory "
            "available. Pass smaller sizes."
        )


def eval_jaxpr(jaxpr: Jaxpr, args: Sequence[Any], mode: Mode,
               overrides: Mapping[Any, Callable[[list[Any]], list[Any]]] | None = None) -> list[Any]:
    """Evaluate ``jaxpr`` (constants as leading arguments) on ``args`` in ``mode`` (``overrides``:
    rules of some equations); integer scalars from known numbers stay Python ints (static sizes)."""
    env: dict[Var, Any] = dict(zip(jaxpr.invars, args))
    unknown = mode.reads_unknown

    def read(atom: Any) -> Any:
        if isinstance(atom, Literal):
            return atom.val
        return env.get(atom, _UNKNOWN) if unknown else env[atom]

    for index, eqn in enumerate(jaxpr.eqns):
        try:
            invals = [read(v) for v in eqn.invars]
            rule = overrides.get(eqn) if overrides else None
            outvals = rule(invals) if rule is not None else mode.equation(eqn, invals, env)
        except NeedsHost as err:
            err.equation = (jaxpr, index)  # the outermost jaxpr's, where segmentation splits
            raise
        env.update((v, x) for v, x in zip(eqn.outvars, outvals or ()) if not isinstance(v, DropVar))
    return [read(v) for v in jaxpr.outvars]


_UNKNOWN = object()  # a value Mode.SIZES does not compute (array data, a loop's results)


def check_sizes(jaxpr: Jaxpr, sizes: dict[int, int]) -> None:
    """Check at ``sizes`` what staging the top level of ``jaxpr`` would (size checks, array sizes)."""
    eval_jaxpr(jaxpr, [sizes.get(i, _UNKNOWN) for i in range(len(jaxpr.invars))], Mode.SIZES)


def _is_size_arithmetic(eqn: Any) -> bool:
    """Integer scalars from integer scalars, with no nested program (a loop is not arithmetic)."""
    outs = eqn.outvars
    return not _has_rule(eqn, "dimension_operands") and bool(outs) and all(map(_is_index_scalar, outs))


# Errors that are already clear, or that drive the specialization itself.
_UNTRANSLATED = (CatalystLiteError, NeedsHost, MemoryError, jax.errors.JaxRuntimeError)


def _eval_equation(eqn: Any, invals: list[Any]) -> list[Any]:
    """Bind a JAX primitive without a rule at concrete sizes (``UnsupportedOperationError``: JAX refuses)."""
    prim = eqn.primitive
    operands, params = _fill_dynamic_shape(eqn, invals) if prim in SHAPE_PARAMS else (invals, eqn.params)
    try:
        if prim not in SHAPE_PARAMS and all(_is_index_scalar(v) for v in eqn.outvars) and not any_traced(invals):
            with eval_context():
                outs = bind_primitive(prim, operands, params)
            # Python ints/bools (NumPy's when 32 bits) that bind back as their type: later sizes static.
            hosts = [(np.asarray(x).item(), np.dtype(v.aval.dtype)) for x, v in zip(outs, eqn.outvars)]
            return [h if np.dtype(type(h)) == dtype else dtype.type(h) for h, dtype in hosts]
        return bind_primitive(prim, operands, params)
    except _UNTRANSLATED:
        raise
    except Exception as err:
        refusal = _abstract_evaluation_refusal(prim, operands, params)
        if refusal is None:
            raise
        raise unsupported_equation_error(eqn, refusal) from err


def _abstract_evaluation_refusal(prim: Primitive, operands: Sequence[Any], params: dict[str, Any]) -> Exception | None:
    """What ``prim``'s abstract evaluation (JAX's rules, not the user's) raises on these types."""
    if "abstract_eval" not in vars(prim) and type(prim).abstract_eval is Primitive.abstract_eval:
        return None
    try:
        prim.abstract_eval(*(get_aval(x) for x in operands), **params)
    except _UNTRANSLATED:
        return None
    except Exception as refusal:  # our own probe: a rule of JAX refusing concrete sizes
        return refusal
    return None


def bind_primitive(prim: Primitive, invals: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    """Bind ``prim`` as JAX's own interpreter binds an equation; a list of results."""
    subfuns, params = prim.get_bind_params(params)
    out = prim.bind(*subfuns, *invals, **params)
    return list(out) if prim.multiple_results else [out]


def dimension_inputs(jaxpr: Jaxpr) -> frozenset[int]:
    """Positions of ``jaxpr``'s integer inputs some size depends on: specializations key on them."""
    needed = _size_values(jaxpr)
    return frozenset(i for i, v in enumerate(jaxpr.invars) if v in needed and is_int_scalar(v))


def sizes_follow_from_inputs(jaxpr: Jaxpr, inputs: Sequence[int]) -> bool:
    """Whether every size ``jaxpr`` computes follows by integer arithmetic from its ``inputs``."""
    if any(isinstance(p, (ClosedJaxpr, Jaxpr)) for eqn in jaxpr.eqns for p in eqn.params.values()):
        return False
    needed = _size_values(jaxpr)
    allowed = {jaxpr.invars[i] for i in inputs}
    if any(v in needed and (v not in allowed or not is_int_scalar(v)) for v in jaxpr.invars):
        return False
    return all(
        _is_size_arithmetic(eqn) and all(isinstance(v, Literal) or _is_index_scalar(v) for v in eqn.invars)
        for eqn in jaxpr.eqns if any(v in needed for v in eqn.outvars)
    )


def _size_values(jaxpr: Jaxpr) -> set[Var]:
    """The variables some size of ``jaxpr`` depends on, directly or through integer arithmetic."""
    needed: set[Var] = set()
    atoms = [*jaxpr.invars, *(v for eqn in jaxpr.eqns for v in (*eqn.invars, *eqn.outvars)), *jaxpr.outvars]
    for v in atoms:
        if not isinstance(v, Literal) and has_symbolic_shape(v.aval):
            needed.update(d for d in v.aval.shape if isinstance(d, Var))
    for eqn in jaxpr.eqns:
        if eqn.primitive in SHAPE_PARAMS:
            ndyn = sum(d is None for d in eqn.params[SHAPE_PARAMS[eqn.primitive]])
            needed.update(v for v in eqn.invars[len(eqn.invars) - ndyn :] if isinstance(v, Var))
        if _has_rule(eqn, "dimension_operands"):
            operands = [eqn.invars[i] for i in spec_of(eqn.primitive).dimension_operands(eqn.params)]
            needed.update(v for v in operands if isinstance(v, Var))
    # Scalar arithmetic producing a needed value needs its scalar inputs (not a nested primitive's).
    for eqn in reversed(jaxpr.eqns):
        if _has_rule(eqn, "dimension_operands"):
            continue
        if any(v in needed for v in eqn.outvars if not isinstance(v, DropVar)):
            needed.update(v for v in eqn.invars if isinstance(v, Var) and _is_index_scalar(v))
    return needed
