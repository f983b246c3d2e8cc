"""Capacity buckets: a resizing loop runs as one XLA ``while`` loop, compiled once per capacity.

A loop with ``allow_array_resizing`` changes the sizes of its carried arrays every iteration, so
no static-shape program holds all its iterations. Here every carried array is stored in a buffer
of a fixed *capacity* ``C`` along each resizable axis, with its true size carried alongside (as
the loop's implicit dimensions already are). The body runs on the buffers through
:func:`masked_eval`, an interpreter in which every size computed from a carried size is a traced
integer and every array axis of such a size has length ``C``: elementwise operations run on the
whole buffer (what lies beyond the true size is never read back), and the operations that move
elements along a resizable axis (``concatenate``, slices, ``gather``) index by true sizes. The
values within the true sizes are computed by the same arithmetic as at exact sizes, so results are
identical, bit for bit.

:class:`MaskedLoop` runs the iterations inside one ``lax.while_loop``, which stops early when an
iteration would exceed the capacity (its results are discarded) or breaks an assumption of the
trace. The host then re-enters with a larger capacity (predicted from the growth so far), or hands
the remaining iterations back to exact, per-size execution, which reports the error as before. A
body with an operation :func:`masked_eval` cannot run on buffers (a reduction along a resizable
axis, a nested loop over resizable arrays, ...) raises :class:`Unmaskable`, and the loop runs per
size as before.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit, for_loop
>>> @qjit
... def grow(n: int):
...     @for_loop(0, n, 1, allow_array_resizing=True)
...     def step(i, a):
...         return jnp.concatenate([a, a[-1:] * 0.5 + i])
...     return step(jnp.ones([1]))
>>> grow(3).tolist()   # one compilation for every n whose sizes fit the first capacity
[1.0, 0.5, 1.25, 2.625]
"""

from __future__ import annotations

import math
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ArrayTooLargeError
from ..jax_extras import DropVar, Literal, Tracer, Var
from ..jax_extras.shapes import SHAPE_PARAMS, fill_sizes
from .reverse_mode import reverse_mode_requested
from .specialize import Mode, NeedsHost, check_fits_in_memory, dimension_inputs, eval_equation, eval_jaxpr, to_dim

__all__ = ["Unmaskable", "masked_eval", "LoopShape", "MaskedLoop", "Prediction", "masked_loop", "runs_on_buffers",
           "capacity_for"]

MIN_CAPACITY = 16
# A loop replayed with at most this many iterations is unrolled at its exact sizes.
UNROLL_LIMIT = 32
MAX_CAPACITY = 1 << 40
FIRST_BUFFER_BYTES = 1 << 26
# Statuses of a masked run: every iteration done, a capacity exceeded, an assumption broken.
DONE, OVERFLOW, INVALID = 0, 1, 2


class Unmaskable(NeedsHost):
    """The body has an operation that cannot run on capacity buffers."""


class _TooSmall(Exception):
    """A static index reaches beyond the capacity: retry with a larger one."""


def capacity_for(size: int) -> int:
    """The capacity bucket holding ``size`` elements: a power of two, at least :data:`MIN_CAPACITY`.

    >>> capacity_for(0), capacity_for(16), capacity_for(17)
    (16, 16, 32)
    """
    return max(MIN_CAPACITY, 1 << max(0, int(size) - 1).bit_length())


@dataclass
class _Checks:
    """What a masked evaluation found about its sizes (traced booleans)."""

    capacity: int
    fits: list[Any] = field(default_factory=list)  # every size within the capacity
    valid: list[Any] = field(default_factory=list)  # no negative size, every assumption holds

    def size(self, value: Any) -> None:
        self.fits.append(value <= self.capacity)
        self.valid.append(value >= 0)

    def all(self, flags: list[Any]) -> Any:
        return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)


# --- the masked interpreter ---------------------------------------------------------------------

_ELEMENTWISE = frozenset("""
    abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp complex conj convert_element_type
    copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt imag integer_pow
    is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or population_count pow
    real reduce_precision rem round rsqrt select_n shift_left shift_right_arithmetic
    shift_right_logical sign sin sinh sqrt square sub tan tanh xor
""".split())

_COMPARISONS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
                ">": operator.gt, ">=": operator.ge}


def _size(d: Any, env: dict) -> Any:
    return env[d] if isinstance(d, Var) else d


def _padded(atom: Any, env: dict) -> tuple[bool, ...]:
    """Which axes of ``atom`` are stored at the capacity (their size is traced)."""
    shape = getattr(atom.aval, "shape", ())
    return tuple(isinstance(d, Var) and isinstance(env.get(d), Tracer) for d in shape)


def _along(x: Any, axis: int, index: Any) -> Any:
    """``x`` indexed by the vector ``index`` along ``axis`` (indices already in range)."""
    return jnp.take(x, index, axis=axis, mode="clip")


def _window(x: Any, axis: int, start: Any, length: Any, out_len: int) -> Any:
    """``out_len`` elements of ``x`` from ``start`` along ``axis`` (beyond ``length``: whatever)."""
    del length
    index = jnp.clip(start + jnp.arange(out_len), 0, x.shape[axis] - 1)
    return _along(x, axis, index)


def _concatenate(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    """Each operand written at the sum of the true sizes before it. An operand of a static size
    is one ``dynamic_update_slice`` (O(its size): appending stays cheap); one stored at the
    capacity is selected element by element. Writes that would start beyond the capacity are
    clamped by XLA, but then the result's size exceeds the capacity and the iteration is
    discarded."""
    axis = eqn.params["dimension"]
    if not any(_padded(v, env)[axis] for v in (*eqn.invars, *eqn.outvars)):
        return [lax.concatenate(invals, axis)]
    out_len = checks.capacity if _padded(eqn.outvars[0], env)[axis] else eqn.outvars[0].aval.shape[axis]
    first = invals[0]
    if first.shape[axis] > out_len:
        raise _TooSmall()
    result = _fitted(first, (*first.shape[:axis], out_len, *first.shape[axis + 1 :]))
    offset = _size(eqn.invars[0].aval.shape[axis], env)
    position = None
    for atom, x in zip(eqn.invars[1:], invals[1:]):
        length = _size(atom.aval.shape[axis], env)
        if not _padded(atom, env)[axis]:
            if x.shape[axis] > out_len:
                raise _TooSmall()
            result = lax.dynamic_update_slice_in_dim(result, x, offset, axis)
        else:
            if position is None:
                shape = [1] * result.ndim
                shape[axis] = out_len
                position = jnp.arange(out_len).reshape(shape)
            part = _along(x, axis, jnp.clip(jnp.arange(out_len) - offset, 0, x.shape[axis] - 1))
            result = jnp.where((position >= offset) & (position < offset + length), part, result)
        offset = offset + length
    return [result]


def _slice_window(eqn: Any, operand: Any, starts: Sequence[Any], lengths: Sequence[Any], env: dict,
                  checks: _Checks) -> Any:
    """``dynamic_slice``'s semantics on a buffer: each start clamped to ``[0, size - length]``
    with the operand's true size, then ``length`` elements from there."""
    out = operand
    padded_in, padded_out = _padded(eqn.invars[0], env), _padded(eqn.outvars[0], env)
    for axis, (start, length) in enumerate(zip(starts, lengths)):
        if not (padded_in[axis] or padded_out[axis]):
            out = lax.dynamic_slice_in_dim(out, start, int(length), axis)
            continue
        size = _size(eqn.invars[0].aval.shape[axis], env)
        clamped = jnp.clip(start, 0, jnp.maximum(size - length, 0))
        out_len = checks.capacity if padded_out[axis] else int(length)
        out = _window(out, axis, clamped, length, out_len)
    return out


def _dynamic_slice(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    operand, rest = invals[0], invals[1:]
    ndim = operand.ndim
    starts, dyn = rest[:ndim], iter(rest[ndim:])
    lengths = [next(dyn) if d is None else d for d in eqn.params["slice_sizes"]]
    return [_slice_window(eqn, operand, starts, lengths, env, checks)]


def _gather(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    """The gathers ``jax.numpy`` makes of slices with traced bounds (one window, every axis an
    offset axis); others are :class:`Unmaskable`."""
    params = eqn.params
    dn, operand, indices = params["dimension_numbers"], invals[0], invals[1]
    ndim = operand.ndim
    mode = str(params["mode"])
    slice_like = (
        tuple(dn.offset_dims) == tuple(range(ndim)) and not dn.collapsed_slice_dims
        and tuple(dn.start_index_map) == tuple(range(ndim)) and not dn.operand_batching_dims
        and indices.shape == (ndim,) and ("CLIP" in mode or "PROMISE" in mode)
    )
    if not slice_like:
        raise Unmaskable("a gather along a resizable axis")
    dyn = iter(invals[2:])
    lengths = [next(dyn) if d is None else d for d in params["slice_sizes"]]
    starts = [indices[k] for k in range(ndim)]
    return [_slice_window(eqn, operand, starts, lengths, env, checks)]


def _static_slice(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    limits = eqn.params["limit_indices"]
    if any(p and limit > checks.capacity for p, limit in zip(_padded(eqn.invars[0], env), limits)):
        raise _TooSmall()
    return [lax.slice(invals[0], eqn.params["start_indices"], limits, eqn.params["strides"])]


def _shaped(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    """``broadcast_in_dim``/``iota``: traced sizes become the capacity."""
    if eqn.primitive.name == "reshape" or eqn.primitive.name not in ("broadcast_in_dim", "iota"):
        raise Unmaskable(f"{eqn.primitive} along a resizable axis")
    operands, params = fill_sizes(
        eqn.primitive, invals, eqn.params, lambda v: checks.capacity if isinstance(v, Tracer) else int(v)
    )
    return _bind(eqn.primitive, operands, params)


def _unreduced(axes_of: Callable[[dict], Sequence[int]]) -> Callable:
    """A rule binding as usual when no axis ``axes_of(params)`` names is resizable."""

    def rule(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
        padded = _padded(eqn.invars[0], env)
        if any(padded[a] for a in axes_of(eqn.params)):
            raise Unmaskable(f"{eqn.primitive} along a resizable axis")
        return _bind(eqn.primitive, invals, eqn.params)

    return rule


def _dot_general(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    (lhs_c, rhs_c), _ = eqn.params["dimension_numbers"]
    if any(_padded(eqn.invars[0], env)[a] for a in lhs_c) or any(_padded(eqn.invars[1], env)[a] for a in rhs_c):
        raise Unmaskable("a contraction along a resizable axis")
    return _bind(eqn.primitive, invals, eqn.params)


def _cumulative(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    if eqn.params.get("reverse") and _padded(eqn.invars[0], env)[eqn.params["axis"]]:
        raise Unmaskable(f"a reversed {eqn.primitive} along a resizable axis")
    return _bind(eqn.primitive, invals, eqn.params)


def _nested_call(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    closed = eqn.params["jaxpr"]
    return masked_eval(closed.jaxpr, [*closed.consts, *invals], checks)


def _plain(eqn: Any, invals: list[Any], env: dict, checks: _Checks) -> list[Any]:
    return _bind(eqn.primitive, invals, eqn.params)


_REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
               "reduce_xor", "argmax", "argmin")

MASKED_RULES: dict[str, Callable[[Any, list[Any], dict, _Checks], list[Any]]] = {
    "concatenate": _concatenate,
    "dynamic_slice": _dynamic_slice,
    "gather": _gather,
    "slice": _static_slice,
    "dot_general": _dot_general,
    "transpose": _plain,
    "squeeze": _plain,
    "cumsum": _cumulative,
    "cumprod": _cumulative,
    "cummax": _cumulative,
    "cummin": _cumulative,
    "pjit": _nested_call,
    "jit": _nested_call,
    **{name: _unreduced(lambda params: params["axes"]) for name in _REDUCTIONS},
}


def _bind(prim: Any, invals: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    out = prim.bind(*invals, **params)
    return list(out) if prim.multiple_results else [out]


def _size_check(eqn: Any, invals: list[Any], checks: _Checks) -> bool:
    """``assume_size``/``require_size`` on traced sizes: their condition joins the validity
    checks (a broken one hands the iteration to exact execution, which reports it)."""
    name = eqn.primitive.name
    if name == "assume_size":
        lhs, rhs = invals
        holds = _COMPARISONS[eqn.params["comparison"]](lhs, rhs)
        checks.valid.append(holds if eqn.params["holds"] else jnp.logical_not(holds))
        return True
    if name == "require_size":
        lhs, rhs = invals
        if eqn.params["relation"] == "==":
            checks.valid.append(lhs == rhs)
        else:  # divides
            checks.valid.append((lhs != 0) & (rhs % jnp.where(lhs == 0, 1, lhs) == 0))
        return True
    return False


def masked_eval(jaxpr: Any, args: Sequence[Any], checks: _Checks) -> list[Any]:
    """Evaluate ``jaxpr`` (inside a ``jax.jit`` trace) where sizes may be traced integers: an
    axis whose size is traced has length ``checks.capacity``. Raises :class:`Unmaskable` for an
    operation that cannot run so."""
    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, Literal) else env[atom]

    for var, value in zip(jaxpr.invars, args):
        env[var] = value
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if any(isinstance(x, Tracer) and not np.shape(x) for x in invals) and _size_check(eqn, invals, checks):
            continue
        touches_buffers = any(any(_padded(v, env)) for v in eqn.invars if not isinstance(v, Literal))
        try:
            outs = _masked_equation(eqn, invals, env, checks, touches_buffers)
        except NeedsHost as err:
            raise Unmaskable(str(err)) from None
        except (TypeError, ValueError) as err:  # shapes that do not fit on buffers
            raise Unmaskable(f"{eqn.primitive}: {err}") from None
        for var, value in zip(eqn.outvars, outs):
            if not isinstance(var, DropVar):
                env[var] = value
        for var in eqn.outvars:
            for d in getattr(var.aval, "shape", ()):
                if isinstance(d, Var) and isinstance(env.get(d), Tracer):
                    checks.size(env[d])
    return [read(v) for v in jaxpr.outvars]


def _masked_equation(eqn: Any, invals: list[Any], env: dict, checks: _Checks, touches_buffers: bool) -> list[Any]:
    name = eqn.primitive.name
    if eqn.primitive in SHAPE_PARAMS and name not in ("gather", "dynamic_slice"):
        if touches_buffers or any(isinstance(x, Tracer) and not np.shape(x) for x in invals):
            return _shaped(eqn, invals, env, checks)
        return eval_equation(eqn, invals, Mode.STAGED)
    if not touches_buffers:
        return eval_equation(eqn, invals, Mode.STAGED)
    if name in _ELEMENTWISE:
        return _bind(eqn.primitive, invals, eqn.params)
    if name in MASKED_RULES:
        return MASKED_RULES[name](eqn, invals, env, checks)
    raise Unmaskable(f"{eqn.primitive} on arrays a loop resizes")


def runs_on_buffers(operands: Sequence[Any]) -> bool:
    """Whether a resizing loop on these operands may run on capacity buffers: not in reverse
    mode (its ``while`` loop cannot be transposed), on concrete values."""
    return not reverse_mode_requested() and not any(isinstance(x, Tracer) for x in operands)


def _fitted(x: Any, shape: tuple[int, ...]) -> Any:
    """A body result in the carried buffer's shape (a result of a static size is padded)."""
    if x.shape == shape:
        return x
    if any(n > m for n, m in zip(x.shape, shape)):
        raise _TooSmall()
    return jnp.pad(x, [(0, m - n) for n, m in zip(x.shape, shape)])


_loops: dict[int, tuple[Any, MaskedLoop]] = {}


def masked_loop(shape: LoopShape) -> "MaskedLoop":
    """The (shared) :class:`MaskedLoop` of a loop body, compiled for the life of the program."""
    entry = _loops.get(id(shape.body))
    if entry is None or entry[0] is not shape.body:
        entry = _loops[id(shape.body)] = (shape.body, MaskedLoop(shape))
    return entry[1]


@dataclass(frozen=True)
class Prediction:
    """How a :class:`MaskedLoop` ran: at ``capacity``, with these values of the constants that
    size its body, to the carried sizes ``dims``. :meth:`stage` runs it again inside a trace,
    its results cut to ``dims``, with a flag that says whether ``dims`` are the true sizes."""

    loop: "MaskedLoop"
    capacity: int
    static: tuple
    dims: tuple[int, ...]
    trips: int  # iterations run

    def stage(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[Any],
              carried: Sequence[Any], count: Any = 0, lower: Any = 0, step: Any = 1) -> tuple[list[Any], list[Any]]:
        """The loop's results, and flags (traced, or known booleans) that hold when the
        prediction does. A short loop is unrolled at its exact sizes (what ``jax.jit`` makes of a loop at
        static sizes: no buffers, every iteration fused), a long one runs on buffers."""
        if self.trips <= UNROLL_LIMIT:
            try:
                return self._unrolled(pred_consts, consts, implicit, carried, count, lower, step)
            except NeedsHost:  # a size computed from data
                pass
        return self._on_buffers(pred_consts, consts, implicit, carried, count, lower, step)

    def _unrolled(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[Any],
                  carried: Sequence[Any], count: Any, lower: Any, step: Any) -> tuple[list[Any], list[Any]]:
        shape, nimplicit = self.loop.shape, self.loop.shape.nimplicit
        holds = [] if shape.predicate is not None else [count == self.trips]
        dims, carried = [to_dim(d) for d in implicit], list(carried)
        for k in range(self.trips + 1):
            if shape.predicate is not None:
                (more,) = eval_jaxpr(shape.predicate, [*pred_consts, *dims, *carried], Mode.STAGED)
                holds.append(more if k < self.trips else _negated(more))
            if k == self.trips:
                break
            index = [] if shape.predicate is not None else [_index(lower, k, step)]
            outs = eval_jaxpr(shape.body, [*consts, *dims, *index, *carried], Mode.STAGED)
            dims, carried = [to_dim(d) for d in outs[:nimplicit]], outs[nimplicit:]
        holds.append(tuple(dims) == self.dims)
        return [*dims, *carried], holds

    def _on_buffers(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[Any],
                    carried: Sequence[Any], count: Any, lower: Any, step: Any) -> tuple[list[Any], list[Any]]:
        loop, static = self.loop, dict(self.static)
        holds = [jnp.asarray((consts if tag == "body" else pred_consts)[k]) == v for (tag, k), v in static.items()]
        dims = [jnp.asarray(d, jnp.int64) for d in implicit]
        run = loop._loop(self.capacity, static)
        _, new_dims, buffers, status = run(list(pred_consts), list(consts), dims,
                                           loop._pad_traced(carried, self.capacity), count, lower, step)
        holds += [status == DONE, *(d == p for d, p in zip(new_dims, self.dims))]
        return [*self.dims, *loop._cut(buffers, self.dims)], holds


def _negated(flag: Any) -> Any:
    return jnp.logical_not(flag) if isinstance(flag, Tracer) else not flag


def _index(lower: Any, k: int, step: Any) -> Any:
    """The ``k``-th index of a ``for_loop``, of the type host-driven execution passes."""
    index = lower + k * step
    return index if isinstance(index, Tracer) else np.int64(index)


# --- the loop -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoopShape:
    """A resizing loop's body as :class:`MaskedLoop` runs it: ``body`` takes ``*consts
    *implicit *prefix *carried`` (``prefix``: the index of a ``for_loop``) and returns
    ``*implicit *carried``; ``predicate`` (a ``while_loop``'s) takes ``*pred_consts *implicit
    *carried``."""

    body: Any
    nconsts: int
    nimplicit: int
    predicate: Any = None
    pred_nconsts: int = 0


class MaskedLoop:
    """A resizing loop run inside ``lax.while_loop`` on capacity buffers, compiled once per
    capacity (and per value of the constants that size the body)."""

    def __init__(self, shape: LoopShape):
        self.shape = shape
        body = shape.body
        self._static_consts = tuple(k for k in dimension_inputs(body) if k < shape.nconsts)
        self._static_pred = tuple(k for k in dimension_inputs(shape.predicate) if k < shape.pred_nconsts) \
            if shape.predicate is not None else ()
        first_carried = shape.nconsts + shape.nimplicit + (0 if shape.predicate is not None else 1)
        self._carried = body.invars[first_carried:]
        self._implicit = body.invars[shape.nconsts : shape.nconsts + shape.nimplicit]
        self._compiled: dict[tuple, Callable] = {}
        self._lock = threading.Lock()
        # Effects (callbacks, prints) would run again for discarded iterations: exact sizes only.
        self.unmaskable = bool(body.effects) or (shape.predicate is not None and bool(shape.predicate.effects))

    # --- buffers ----------------------------------------------------------------------------------

    def _padded_axes(self, var: Any) -> list[bool]:
        return [isinstance(d, Var) and d in self._implicit for d in var.aval.shape]

    def _pad(self, values: Sequence[Any], capacity: int) -> list[Any]:
        out = []
        for var, x in zip(self._carried, values):
            x = np.asarray(x)
            axes = self._padded_axes(var)
            shape = tuple(capacity if p else n for p, n in zip(axes, x.shape))
            check_fits_in_memory("a resizing loop's capacity buffer", shape, x.dtype)
            buffer = np.zeros(shape, x.dtype)
            buffer[tuple(slice(0, n) for n in x.shape)] = x
            out.append(buffer)
        return out

    def _pad_traced(self, values: Sequence[Any], capacity: int) -> list[Any]:
        """:meth:`_pad` inside a trace (values of static shapes)."""
        out = []
        for var, x in zip(self._carried, values):
            axes = self._padded_axes(var)
            if any(p and n > capacity for p, n in zip(axes, np.shape(x))):
                raise NeedsHost("a resizing loop's operands exceed the predicted capacity")
            out.append(jnp.pad(x, [(0, capacity - n if p else 0) for p, n in zip(axes, np.shape(x))]) if any(axes) else x)
        return out

    def _cut(self, buffers: Sequence[Any], dims: Sequence[int]) -> list[Any]:
        """:meth:`_unpad` inside a trace, to known sizes."""
        sizes = dict(zip(self._implicit, dims))
        return [lax.slice(b, (0,) * b.ndim, tuple(sizes.get(d, n) if isinstance(d, Var) else n
                                                   for d, n in zip(var.aval.shape, b.shape)))
                for var, b in zip(self._carried, buffers)]

    def _unpad(self, buffers: Sequence[Any], dims: Sequence[int]) -> list[Any]:
        sizes = dict(zip(self._implicit, dims))
        out = []
        for var, b in zip(self._carried, buffers):
            index = tuple(slice(0, sizes[d]) if isinstance(d, Var) and d in sizes else slice(None)
                          for d in var.aval.shape)
            out.append(jnp.asarray(np.asarray(b)[index]))
        return out

    # --- the compiled loop ------------------------------------------------------------------------

    def _function(self, capacity: int, static: tuple) -> Callable:
        key = (capacity, static)
        fn = self._compiled.get(key)
        if fn is None:
            with self._lock:
                fn = self._compiled.setdefault(key, jax.jit(self._loop(capacity, dict(static))))
        return fn

    def _loop(self, capacity: int, static: dict) -> Callable:
        s = self.shape
        nimplicit = s.nimplicit

        def with_static(values: Sequence[Any], positions: Sequence[int], tag: str) -> list[Any]:
            values = list(values)
            for k in positions:
                values[k] = static[tag, k]
            return values

        def more(k, count, pred_consts, consts, dims, buffers) -> Any:
            if s.predicate is None:
                return k < count
            checks = _Checks(capacity)
            (pred,) = masked_eval(s.predicate, [*pred_consts, *dims, *buffers], checks)
            if checks.fits or checks.valid:
                raise Unmaskable("a while_loop predicate that creates resizable arrays")
            return pred

        def run(pred_consts, consts, dims, buffers, count, lower, step):
            pred_consts = with_static(pred_consts, self._static_pred, "predicate")
            consts = with_static(consts, self._static_consts, "body")

            def cond(state):
                k, dims, buffers, status = state
                return (status == DONE) & more(k, count, pred_consts, consts, dims, buffers)

            def body(state):
                k, dims, buffers, _ = state
                checks = _Checks(capacity)
                prefix = [] if s.predicate is not None else [lower + k * step]
                outs = masked_eval(s.body, [*consts, *dims, *prefix, *buffers], checks)
                new_dims, new_buffers = outs[:nimplicit], outs[nimplicit:]
                for d in new_dims:
                    checks.size(d)
                fits, valid = checks.all(checks.fits), checks.all(checks.valid)
                status = jnp.where(fits & valid, DONE, jnp.where(valid, OVERFLOW, INVALID)).astype(jnp.int32)
                dims = [jnp.asarray(d, jnp.int64) for d in new_dims]
                buffers = [_fitted(n, o.shape) for n, o in zip(new_buffers, buffers)]
                return k + (status == DONE).astype(k.dtype), dims, buffers, status

            return lax.while_loop(cond, body, (jnp.int64(0), list(dims), list(buffers), jnp.int32(DONE)))

        return run

    # --- driving it -------------------------------------------------------------------------------

    def run(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[int],
            carried: Sequence[Any], count: int = 0, lower: int = 0, step: int = 1
            ) -> tuple[Prediction | None, list[int], list[Any]]:
        """Run the loop; return how it ran, as a :class:`Prediction` of its next runs (``None``
        if it did not: it must run at exact sizes, as an assumption broke, the capacity would
        not fit in memory, or the body is :class:`Unmaskable`), and the carried sizes and
        values after it.

        An iteration that exceeds the capacity stops the loop with its carry overwritten (no
        copy of the old one is kept, which would cost a pass over every buffer per iteration):
        the loop runs again from the start, at the capacity the growth so far predicts."""
        static = tuple((("body", k), int(consts[k])) for k in self._static_consts) + tuple(
            (("predicate", k), int(pred_consts[k])) for k in self._static_pred)
        dims = [int(d) for d in implicit]
        capacity = self._first_capacity(carried, max(dims, default=1), count)
        while not self.unmaskable and capacity <= MAX_CAPACITY:
            try:
                result = self._function(capacity, static)(
                    list(pred_consts), list(consts), [np.int64(d) for d in dims], self._pad(carried, capacity),
                    np.int64(count), np.int64(lower), np.int64(step))
            except Unmaskable:
                self.unmaskable = True
                break
            except ArrayTooLargeError:
                break
            except _TooSmall:
                capacity *= 2
                continue
            k, new_dims, buffers, status = result
            status, new_dims = int(status), [int(d) for d in new_dims]
            if status == DONE:
                return Prediction(self, capacity, static, tuple(new_dims), int(k)), new_dims, self._unpad(buffers, new_dims)
            if status == INVALID:
                break
            capacity = self._grown(capacity, max(dims, default=0), max(new_dims, default=0), int(k) + 1, count)
        return None, dims, list(carried)

    def _first_capacity(self, values: Sequence[Any], largest: int, count: int) -> int:
        """Room for a ``for_loop`` to grow by one element per iteration (appending, the common
        case: one compilation), unless its buffers would then exceed :data:`FIRST_BUFFER_BYTES`;
        at least twice the largest carried size."""
        small = capacity_for(2 * largest)
        if self.shape.predicate is not None:
            return small
        large = capacity_for(largest + count)
        nbytes = sum(
            np.dtype(var.aval.dtype).itemsize * math.prod(large if p else 1 for p in self._padded_axes(var))
            * math.prod(np.shape(x)[a] for a, p in enumerate(self._padded_axes(var)) if not p)
            for var, x in zip(self._carried, values)
        )
        return max(small, large) if nbytes <= FIRST_BUFFER_BYTES else small

    def _grown(self, capacity: int, before: int, after: int, ran: int, count: int) -> int:
        """The next capacity: room for the growth seen in the first ``ran`` iterations to go on
        for all ``count`` of a ``for_loop`` (one re-entry for steady growth), at least twice the
        last; four times the last for a ``while_loop``."""
        if self.shape.predicate is None:
            predicted = before + math.ceil(max(after - before, 0) / ran * count)
            return max(2 * capacity, capacity_for(predicted + predicted // 8))
        return 4 * capacity
