"""Capacity buffers: a resizing loop runs as one XLA ``while`` loop, compiled once per capacity, each
carried array in a buffer of fixed capacity, its true size carried alongside (docs/architecture.md)."""

from __future__ import annotations

import collections
import functools
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ArrayTooLargeError
from ..jax_extras import DropVar, Literal, Primitive, Tracer, Var, jit_p
from ..jax_extras.rules import PrimitiveSpec, register_primitive, spec_of
from ..jax_extras.shapes import SHAPE_PARAMS, fill_sizes
from .inspection import LoopInfo
from .loop_body import LoopBody
from .options import DEFAULT_CACHE_SIZE
from .runner import kept_by_program
from .specialize import (Mode, NeedsHost, any_traced, bind_primitive, check_fits_in_memory, dimension_inputs,
                         eval_jaxpr, reverse_mode_requested, sizes_follow_from_inputs)

__all__ = ["Unmaskable", "masked_eval", "Checks", "conformed", "buffer_shape", "Prediction", "run_compiled",
           "compiled_loops", "capacity_for"]

MIN_CAPACITY = 16
MAX_CAPACITY = 1 << 40
FIRST_BUFFER_BYTES = 1 << 26
# A masked run's status: done, capacity exceeded, assumption broken, a learned capacity exceeded.
DONE, OVERFLOW, INVALID, RELEARN = 0, 1, 2, 3


class Unmaskable(NeedsHost):
    """The body has an operation that cannot run on capacity buffers."""


class _TooSmall(Exception):
    """A static index reaches beyond the capacity: retry with a larger one."""


def bucket(size: int) -> int:
    """The power of two holding ``size`` elements (a learned capacity)."""
    return 1 << max(0, int(size) - 1).bit_length()


def capacity_for(size: int) -> int:
    """The capacity bucket holding ``size`` elements: a power of two, at least :data:`MIN_CAPACITY`."""
    return max(MIN_CAPACITY, bucket(size))


@dataclass
class Checks:
    """What a masked evaluation found about its traced sizes, each stored at ``caps[d]`` or ``capacity``."""

    capacity: int
    caps: dict[Any, int] = field(default_factory=dict)
    fits: list[Any] = field(default_factory=list)  # every size within the loop's capacity
    fits_learned: list[Any] = field(default_factory=list)  # every size within its learned capacity
    valid: list[Any] = field(default_factory=list)  # no negative size, every assumption holds
    seen: dict[Any, Any] = field(default_factory=dict)  # size variable -> its value

    def cap_of(self, var: Any) -> int:
        return self.caps.get(var, self.capacity)

    def size(self, var: Any, value: Any) -> None:
        (self.fits_learned if var in self.caps else self.fits).append(value <= self.cap_of(var))
        self.valid.append(value >= 0)
        self.seen[var] = value

    def all(self, flags: list[Any]) -> Any:
        return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)


_ELEMENTWISE = frozenset(getattr(lax, f"{name}_p") for name in (
    "abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp complex conj "
    "convert_element_type copy cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt "
    "imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or "
    "population_count pow real reduce_precision rem round rsqrt select_n shift_left "
    "shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh xor"
).split())


def _size(d: Any, env: dict) -> Any:
    return env[d] if isinstance(d, Var) else d


def _padded(atom: Any, env: dict) -> tuple[bool, ...]:
    """Which axes of ``atom`` are stored at a capacity (their size is traced)."""
    shape = getattr(atom.aval, "shape", ())
    return tuple(isinstance(d, Var) and isinstance(env.get(d), Tracer) for d in shape)


def buffer_shape(aval: Any, env: dict, checks: Checks) -> tuple[int, ...]:
    """The shape in which a value of type ``aval`` is stored: each traced size at its capacity."""
    values = [(d, env.get(d) if isinstance(d, Var) else d) for d in getattr(aval, "shape", ())]
    return tuple(checks.cap_of(d) if isinstance(value, Tracer) else int(value) for d, value in values)


def conformed(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` padded or cut to ``shape`` (equal sizes stored at different capacities)."""
    if np.shape(x) == shape or np.ndim(x) != len(shape):
        return x
    x = lax.slice(x, (0,) * len(shape), tuple(min(n, m) for n, m in zip(x.shape, shape)))
    return jnp.pad(x, [(0, m - n) for n, m in zip(x.shape, shape)])


def _concatenate(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """Each operand written at the sum of the true sizes before it, as a window of its buffer's
    width (shifted back where it reaches beyond the buffer, which it keeps beyond the true size)."""
    axis = eqn.params["dimension"]
    if not any(_padded(v, env)[axis] for v in (*eqn.invars, *eqn.outvars)):
        return [lax.concatenate(invals, axis)]
    out_shape = buffer_shape(eqn.outvars[0].aval, env, checks)
    out_len = out_shape[axis]
    first = invals[0]
    if first.shape[axis] > out_len and not _padded(eqn.invars[0], env)[axis]:
        raise _TooSmall()
    result = conformed(first, out_shape)
    offset = _size(eqn.invars[0].aval.shape[axis], env)
    for atom, x in zip(eqn.invars[1:], invals[1:]):
        length = _size(atom.aval.shape[axis], env)
        width = x.shape[axis]
        if width > out_len:
            if not _padded(atom, env)[axis]:
                raise _TooSmall()
            x, width = lax.slice_in_dim(x, 0, out_len, axis=axis), out_len
        start = jnp.clip(offset, 0, out_len - width)
        if not _padded(atom, env)[axis]:
            result = lax.dynamic_update_slice_in_dim(result, x, start, axis)
        else:
            shift = offset - start  # > 0 only where the window was shifted back
            position = jnp.expand_dims(jnp.arange(width), [a for a in range(result.ndim) if a != axis])
            part = jnp.take(x, jnp.clip(jnp.arange(width) - shift, 0, width - 1), axis=axis, mode="clip")
            old = lax.dynamic_slice_in_dim(result, start, width, axis)
            keep = (position >= shift) & (position < shift + length)
            result = lax.dynamic_update_slice_in_dim(result, jnp.where(keep, part, old), start, axis)
        offset = offset + length
    return [result]


def _slice_window(eqn: Any, operand: Any, starts: Sequence[Any], traced_lengths: Sequence[Any], env: dict,
                  checks: Checks) -> list[Any]:
    """``dynamic_slice`` on a buffer: each start clamped to ``[0, size - length]`` by true sizes."""
    traced_lengths = iter(traced_lengths)
    lengths = [next(traced_lengths) if d is None else d for d in eqn.params["slice_sizes"]]
    out = operand
    padded_in, padded_out = _padded(eqn.invars[0], env), _padded(eqn.outvars[0], env)
    for axis, (start, length) in enumerate(zip(starts, lengths)):
        if not (padded_in[axis] or padded_out[axis]):
            out = lax.dynamic_slice_in_dim(out, start, int(length), axis)
            continue
        size = _size(eqn.invars[0].aval.shape[axis], env)
        clamped = jnp.clip(start, 0, jnp.maximum(size - length, 0))
        out_len = checks.cap_of(eqn.outvars[0].aval.shape[axis]) if padded_out[axis] else int(length)
        index = jnp.clip(clamped + jnp.arange(out_len), 0, out.shape[axis] - 1)
        out = jnp.take(out, index, axis=axis, mode="clip")
    return [out]


def _gather(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """The gathers ``jax.numpy`` makes of slices with traced bounds as windows; in others (``a[idx]``)
    start indices along resizable axes clamped by true sizes."""
    params = eqn.params
    dn, operand, indices = params["dimension_numbers"], invals[0], invals[1]
    ndim, mode = operand.ndim, str(params["mode"])
    if (tuple(dn.offset_dims) == tuple(range(ndim)) and not dn.collapsed_slice_dims
            and tuple(dn.start_index_map) == tuple(range(ndim)) and not dn.operand_batching_dims
            and indices.shape == (ndim,) and ("CLIP" in mode or "PROMISE" in mode)):
        return _slice_window(eqn, operand, [indices[k] for k in range(ndim)], invals[2:], env, checks)
    if any(_padded(eqn.invars[1], env)) or dn.operand_batching_dims:
        raise Unmaskable("a gather with resized indices along a resizable axis")
    filling = "FILL" in mode
    padded = _padded(eqn.invars[0], env)
    dyn, sizes = iter(invals[2:]), []
    for axis, size in enumerate(params["slice_sizes"]):
        if size is None:
            next(dyn)  # the traced slice size: the whole (capacity-long) axis is taken
            if not padded[axis] or axis in dn.start_index_map:
                raise Unmaskable("a gather of a traced slice size")
            size = operand.shape[axis]
        sizes.append(int(size))
    for k, axis in enumerate(dn.start_index_map):
        if padded[axis]:
            bound, start = _size(eqn.invars[0].aval.shape[axis], env) - sizes[axis], indices[..., k]
            if filling:
                start = jnp.where((start < 0) | (start > bound), -1, start)
            else:
                start = jnp.clip(start, 0, jnp.maximum(bound, 0))
            indices = indices.at[..., k].set(start.astype(indices.dtype))
    return bind_primitive(eqn.primitive, [operand, indices], {**params, "slice_sizes": tuple(sizes)})


def _static_slice(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    limits = eqn.params["limit_indices"]
    if any(limit > n for limit, n in zip(limits, invals[0].shape)):
        raise _TooSmall()
    return [lax.slice(invals[0], eqn.params["start_indices"], limits, eqn.params["strides"])]


def _shaped(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """``broadcast_in_dim``/``iota``: traced sizes become the capacity."""
    if eqn.primitive not in (lax.broadcast_in_dim_p, lax.iota_p):
        raise Unmaskable(f"{eqn.primitive} along a resizable axis")
    out_shape = buffer_shape(eqn.outvars[0].aval, env, checks)
    lengths = iter(n for n, p in zip(out_shape, eqn.params[SHAPE_PARAMS[eqn.primitive]]) if p is None)
    operands, params = fill_sizes(eqn.primitive, invals, eqn.params, lambda v: next(lengths))
    return bind_primitive(eqn.primitive, operands, params)


def _true_part(x: Any, atom: Any, axes: Sequence[int], fill: Any, env: dict) -> Any:
    """``x`` with ``fill`` beyond the true size along each resizable axis in ``axes``."""
    padded = _padded(atom, env)
    for axis in axes:
        if padded[axis]:
            inside = lax.broadcasted_iota(jnp.int64, x.shape, axis) < _size(atom.aval.shape[axis], env)
            x = jnp.where(inside, x, jnp.asarray(fill, x.dtype))
    return x


def _identity(primitive: Primitive, dtype: Any) -> Any:
    """The element a reduction ignores (what padding is filled with), for ``dtype``."""
    dtype = np.dtype(dtype)
    if primitive in (lax.reduce_sum_p, lax.reduce_or_p, lax.reduce_xor_p):
        return 0
    if primitive in (lax.reduce_prod_p, lax.reduce_and_p):
        return 1
    if dtype == np.bool_:
        return primitive in (lax.reduce_min_p, lax.argmin_p)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.min if primitive in (lax.reduce_max_p, lax.argmax_p) else info.max
    if np.issubdtype(dtype, np.floating) or dtype.kind == "V":  # float8/bfloat16 are kind "V"
        return -np.inf if primitive in (lax.reduce_max_p, lax.argmax_p) else np.inf
    raise Unmaskable(f"{primitive} of {dtype} along a resizable axis")


def _reduction(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """A reduction along resizable axes, the padding filled with its identity (a sum may round otherwise)."""
    fill = _identity(eqn.primitive, eqn.invars[0].aval.dtype)
    x = _true_part(invals[0], eqn.invars[0], eqn.params["axes"], fill, env)
    return bind_primitive(eqn.primitive, [x, *invals[1:]], eqn.params)


def _dot_general(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """A contraction along resizable axes, both operands' padding zeroed (else ``0 * inf`` leaks)."""
    (lhs_c, rhs_c), _ = eqn.params["dimension_numbers"]
    lhs = _true_part(invals[0], eqn.invars[0], lhs_c, 0, env)
    rhs = _true_part(invals[1], eqn.invars[1], rhs_c, 0, env)
    return bind_primitive(eqn.primitive, [lhs, rhs], eqn.params)


def _cumulative(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    if eqn.params.get("reverse") and _padded(eqn.invars[0], env)[eqn.params["axis"]]:
        raise Unmaskable(f"a reversed {eqn.primitive} along a resizable axis")
    return bind_primitive(eqn.primitive, invals, eqn.params)


def _elementwise(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """On whole buffers, operands stored at different capacities conformed to the result's."""
    shape = buffer_shape(eqn.outvars[0].aval, env, checks)
    return bind_primitive(eqn.primitive, [conformed(x, shape) for x in invals], eqn.params)


_REDUCTIONS = (lax.reduce_sum_p, lax.reduce_max_p, lax.reduce_min_p, lax.reduce_prod_p, lax.reduce_and_p,
               lax.reduce_or_p, lax.reduce_xor_p, lax.argmax_p, lax.argmin_p)

# JAX's operations along a resizable axis (their specs hold only this rule).
for _primitive, _rule in {
    lax.concatenate_p: _concatenate,
    lax.dynamic_slice_p: lambda eqn, invals, env, checks: _slice_window(
        eqn, invals[0], invals[1 : invals[0].ndim + 1], invals[invals[0].ndim + 1 :], env, checks),
    lax.gather_p: _gather,
    lax.slice_p: _static_slice,
    lax.dot_general_p: _dot_general,
    jit_p: lambda eqn, invals, env, checks: masked_eval(
        eqn.params["jaxpr"].jaxpr, [*eqn.params["jaxpr"].consts, *invals], checks),
    **dict.fromkeys((lax.transpose_p, lax.squeeze_p), lambda eqn, invals, *_: bind_primitive(
        eqn.primitive, invals, eqn.params)),
    **dict.fromkeys((lax.cumsum_p, lax.cumprod_p, lax.cummax_p, lax.cummin_p), _cumulative),
    **dict.fromkeys(_REDUCTIONS, _reduction),
    **dict.fromkeys(_ELEMENTWISE, _elementwise),
}.items():
    register_primitive(_primitive, PrimitiveSpec(masked=_rule))


class Masked(Mode):
    """:func:`~.specialize.eval_jaxpr` in a ``jax.jit`` trace, each axis of traced size at its capacity."""

    def __init__(self, checks: Checks):
        self.checks = checks

    def equation(self, eqn: Any, invals: list[Any], env: dict) -> list[Any]:
        checks, spec = self.checks, spec_of(eqn.primitive)
        if spec is not None and spec.size_check is not None and any(
                isinstance(x, Tracer) and not np.shape(x) for x in invals):
            # A broken one hands the iteration to exact execution, which reports it.
            checks.valid.append(spec.size_check(*invals, **eqn.params))
            return []
        try:
            outs = self._on_buffers(eqn, spec, invals, env)
        except NeedsHost as err:
            raise Unmaskable(str(err)) from None
        except (TypeError, ValueError) as err:  # shapes that do not fit on buffers
            raise Unmaskable(f"{eqn.primitive}: {err}") from None
        env.update((var, value) for var, value in zip(eqn.outvars, outs) if not isinstance(var, DropVar))
        for var in eqn.outvars:
            for d in getattr(var.aval, "shape", ()):
                if isinstance(d, Var) and isinstance(env.get(d), Tracer):
                    checks.size(d, env[d])
        return outs

    def _on_buffers(self, eqn: Any, spec: Any, invals: list[Any], env: dict) -> list[Any]:
        touches_buffers = any(any(_padded(v, env)) for v in eqn.invars if not isinstance(v, Literal))
        prim = eqn.primitive
        if prim in SHAPE_PARAMS and prim not in (lax.gather_p, lax.dynamic_slice_p):
            ndyn = sum(d is None for d in eqn.params[SHAPE_PARAMS[prim]])
            if touches_buffers or any_traced(invals[len(invals) - ndyn :]):
                return _shaped(eqn, invals, env, self.checks)
            return Mode.STAGED.equation(eqn, invals, {})
        if not touches_buffers:
            try:
                return Mode.STAGED.equation(eqn, invals, {})
            except NeedsHost:
                if spec is None or spec.bodies is None:  # (a nested primitive's masked rule may run it)
                    raise
        if spec is not None and spec.masked is not None:
            return spec.masked(eqn, invals, env, self.checks)
        raise Unmaskable(f"{eqn.primitive} on arrays a loop resizes")


def masked_eval(jaxpr: Any, args: Sequence[Any], checks: Checks) -> list[Any]:
    """Evaluate ``jaxpr`` inside a ``jax.jit`` trace on capacity buffers."""
    return eval_jaxpr(jaxpr, args, Masked(checks))


def sized_in_body(body: Any, nimplicit: int) -> bool:
    """Whether a loop body needs capacity buffers: it resizes arrays or sizes them by computed sizes."""
    return bool(nimplicit) or bool(_size_variables(body)) or any(
        sized_in_body(inner, 0) for eqn in body.eqns if (spec := spec_of(eqn.primitive)) is not None
        and spec.bodies is not None for inner in spec.bodies(eqn.params)
    )


def _size_variables(jaxpr: Any) -> list[Any]:
    """The size variables of the values ``jaxpr``'s equations compute, nested calls included."""
    found: dict[Any, None] = {}
    for eqn in jaxpr.eqns:
        shapes = [getattr(v.aval, "shape", ()) for v in eqn.outvars]
        found.update((d, None) for shape in shapes for d in shape if isinstance(d, Var))
        if eqn.primitive is jit_p:
            found.update(dict.fromkeys(_size_variables(eqn.params["jaxpr"].jaxpr)))
    return list(found)


def _fitted(x: Any, buffer: Any) -> Any:
    """A body result (maybe a Python number, or of static size) as the carried buffer."""
    x = jnp.asarray(x, buffer.dtype)
    if any(n > m for n, m in zip(x.shape, buffer.shape)):
        raise _TooSmall()
    return conformed(x, buffer.shape)


@dataclass(frozen=True)
class Prediction:
    """How a :class:`MaskedLoop` ran (capacity, sizing constants, final sizes), replayed by :meth:`stage`."""

    loop: "MaskedLoop"
    capacity: int
    static: tuple
    dims: tuple[int, ...]
    caps: tuple = ()  # learned capacities, as (size variable, capacity)
    fits: bool = False  # the sizes of the run fit ``caps`` (then sizes that follow from known values do)

    def stage(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[Any],
              carried: Sequence[Any], count: Any = 0, lower: Any = 0, step: Any = 1) -> tuple[list[Any], list[Any]]:
        """The loop's results in the trace, and flags that hold when the prediction does."""
        loop, static = self.loop, dict(self.static)
        values = [(consts if tag == "body" else pred_consts)[k] for tag, k in static]
        holds = [x == v if isinstance(x, Tracer) else bool(np.asarray(x) == v)
                 for x, v in zip(values, static.values())]
        # Sizes that follow from known values fit, as they did in the run: no check needed.
        known = loop.sizes_follow and self.fits and not any_traced((*implicit, count, lower, step, *holds))
        dims = [jnp.asarray(d, jnp.int64) for d in implicit]
        run = loop._loop(self.capacity, static, dict(self.caps), learn=False, checked=not known)
        _, new_dims, buffers, status, _ = run(list(pred_consts), list(consts), dims,
                                              loop._pad(carried, self.capacity), count, lower, step)
        if not known:
            holds += [status == DONE, *(d == p for d, p in zip(new_dims, self.dims))]
        return [*self.dims, *loop._cut(buffers, self.dims)], holds


def _with_static(values: Sequence[Any], static: dict, tag: str) -> list[Any]:
    """``values`` (the predicate's or the body's inputs, ``tag``) with the ``static`` ones as ints."""
    return [static.get((tag, k), v) for k, v in enumerate(values)]


class _CompiledLoop:
    """A loop compiled whole, once per capacity and per value of the constants that size it; the
    most recently used executables of ``program`` (its runner, or ``None``) kept, its function's
    ``cache_size``, as sizes are many."""

    def __init__(self, primitive: Primitive, body: LoopBody, predicate: LoopBody | None, program: Any):
        self.primitive, self.body, self.predicate = primitive, body, predicate
        self.maxsize = DEFAULT_CACHE_SIZE if program is None else program.options.cache.maxsize
        self.static_consts = tuple(sorted(k for k in dimension_inputs(body.jaxpr) if k < body.nconsts))
        self.static_pred = () if predicate is None else tuple(
            sorted(k for k in dimension_inputs(predicate.jaxpr) if k < predicate.nconsts))
        self._compiled: collections.OrderedDict[tuple, Callable] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _static(self, pred_consts: Sequence[Any], consts: Sequence[Any], body_positions: Sequence[int]) -> tuple:
        """The values of the inputs sizing the predicate and the body, as ``((tag, position), value)``."""
        return tuple((("predicate", k), int(pred_consts[k])) for k in self.static_pred) + tuple(
            (("body", k), int(consts[k])) for k in body_positions)

    def _jitted(self, key: tuple, make: Callable[[], Callable]) -> Callable:
        with self._lock:
            fn = self._compiled.get(key)
            if fn is not None:
                self._compiled.move_to_end(key)
                return fn
            fn = self._compiled[key] = jax.jit(make())
            while self.maxsize is not None and len(self._compiled) > self.maxsize:
                self._compiled.popitem(last=False)  # (its executables go with the jax.jit function)
        return fn


class MaskedLoop(_CompiledLoop):
    """A resizing loop run inside ``lax.while_loop`` on capacity buffers."""

    def __init__(self, primitive: Primitive, body: LoopBody, predicate: LoopBody | None, program: Any):
        super().__init__(primitive, body, predicate, program)
        _, self._implicit, _, self._carried = body.groups
        first_carried = len(body.jaxpr.invars) - body.ncarried
        body = body.jaxpr
        # Sizes computed in the body whose peaks each run reports: small ones get their own capacity.
        ends = {v for v in body.outvars[: len(self._implicit)] if isinstance(v, Var)}
        self._tracked = [d for d in _size_variables(body) if d not in ends and d not in self._implicit]
        self._caps: dict[Any, int] = {}
        # A for_loop whose sizes follow from its index, carried sizes and sizing constants.
        self.sizes_follow = predicate is None and sizes_follow_from_inputs(body, range(first_carried))
        # Effects (callbacks, prints) would run again for discarded iterations: exact sizes only.
        self.unmaskable = bool(body.effects) or (predicate is not None and bool(predicate.jaxpr.effects))

    def describe(self) -> LoopInfo:
        compiled = list(self._compiled)
        return LoopInfo("capacity buffers", str(self.primitive), not self.unmaskable, len(compiled),
                        frozenset(key[0] for key in compiled), tuple(self._caps.values()))

    def _padded_axes(self, var: Any) -> list[bool]:
        return [isinstance(d, Var) and d in self._implicit for d in var.aval.shape]

    def _pad(self, values: Sequence[Any], capacity: int) -> list[Any]:
        """The carried values in buffers of ``capacity`` (NumPy arrays, or padded in a trace)."""
        out = []
        for var, x in zip(self._carried, values):
            axes = self._padded_axes(var)
            if any(p and n > capacity for p, n in zip(axes, np.shape(x))):
                raise NeedsHost("a resizing loop's operands exceed the predicted capacity")
            widths = [(0, capacity - n if p else 0) for p, n in zip(axes, np.shape(x))]
            if isinstance(x, Tracer):
                out.append(jnp.pad(x, widths) if any(axes) else x)
                continue
            x = np.asarray(x)
            shape = tuple(n + w for n, (_, w) in zip(x.shape, widths))
            check_fits_in_memory("a resizing loop's capacity buffer", shape, x.dtype)
            buffer = np.zeros(shape, x.dtype)  # (np.pad takes ten times as long)
            buffer[tuple(slice(0, n) for n in x.shape)] = x
            out.append(buffer)
        return out

    def _cut(self, buffers: Sequence[Any], dims: Sequence[int]) -> list[Any]:
        """The carried values cut from their buffers to the carried sizes ``dims`` (in a trace or not)."""
        sizes = dict(zip(self._implicit, dims))
        out = []
        for var, b in zip(self._carried, buffers):
            limits = tuple(sizes.get(d, n) if isinstance(d, Var) else n for d, n in zip(var.aval.shape, np.shape(b)))
            if isinstance(b, Tracer):
                out.append(lax.slice(b, (0,) * len(limits), limits))
            else:
                out.append(jnp.asarray(np.asarray(b)[tuple(slice(0, n) for n in limits)]))
        return out

    def _loop(self, capacity: int, static: dict, caps: dict, learn: bool = True, checked: bool = True) -> Callable:
        """The loop at ``capacity`` (``learn``: the peaks of tracked sizes; ``checked``: check sizes)."""
        body_jaxpr, predicate, nimplicit = self.body.jaxpr, self.predicate, self.body.nimplicit

        def run(pred_consts, consts, dims, buffers, count, lower, step):
            pred_consts = _with_static(pred_consts, static, "predicate")
            consts = _with_static(consts, static, "body")

            def advance(k, dims, buffers):
                checks = Checks(capacity, caps)
                prefix = [] if predicate is not None else [lower + k * step]
                outs = masked_eval(body_jaxpr, [*consts, *dims, *prefix, *buffers], checks)
                new_dims, new_buffers = outs[:nimplicit], outs[nimplicit:]
                checks.fits += [d <= capacity for d in new_dims]
                checks.valid += [d >= 0 for d in new_dims]
                return (checks, [jnp.asarray(d, jnp.int64) for d in new_dims],
                        [_fitted(n, o) for n, o in zip(new_buffers, buffers)])

            peaks = jnp.zeros(len(self._tracked) if learn else 0, jnp.int64)
            if not checked:
                dims, buffers = lax.fori_loop(0, count, lambda k, c: advance(k, *c)[1:], (list(dims), list(buffers)))
                return count, dims, buffers, DONE, peaks

            def cond(state):
                k, dims, buffers, status, _ = state
                if predicate is None:
                    return (status == DONE) & (k < count)
                checks = Checks(capacity, caps)
                (pred,) = masked_eval(predicate.jaxpr, [*pred_consts, *dims, *buffers], checks)
                if checks.fits or checks.valid:
                    raise Unmaskable("a while_loop predicate that creates resizable arrays")
                return (status == DONE) & pred

            def body(state):
                k, dims, buffers, _, peaks = state
                checks, dims, buffers = advance(k, dims, buffers)
                fits, valid, learned = map(checks.all, (checks.fits, checks.valid, checks.fits_learned))
                status = jnp.where(fits & valid & learned, DONE,
                                   jnp.where(valid, jnp.where(fits, RELEARN, OVERFLOW), INVALID)).astype(jnp.int32)
                if learn and self._tracked:
                    seen = [jnp.asarray(checks.seen.get(v, 0), jnp.int64) for v in self._tracked]
                    peaks = jnp.maximum(peaks, jnp.stack(seen))
                return k + (status == DONE).astype(k.dtype), dims, buffers, status, peaks

            return lax.while_loop(cond, body, (jnp.int64(0), list(dims), list(buffers), jnp.int32(DONE), peaks))

        return run

    def run(self, pred_consts: Sequence[Any], consts: Sequence[Any], implicit: Sequence[int],
            carried: Sequence[Any], count: int = 0, lower: int = 0, step: int = 1
            ) -> tuple[Prediction | None, list[int], list[Any]]:
        """A :class:`Prediction` of how the loop ran (``None``: run it at exact sizes), the carried sizes
        and values after it. Exceeding the capacity overwrote the carry: the loop runs again, larger."""
        static = self._static(pred_consts, consts, self.static_consts)
        dims = [int(d) for d in implicit]
        capacity = self._first_capacity(carried, max(dims, default=1), count)
        while not self.unmaskable and capacity <= MAX_CAPACITY:
            caps = tuple(self._caps.items())
            try:
                result = self._jitted((capacity, static, caps),
                                      lambda: self._loop(capacity, dict(static), dict(caps)))(
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
            k, new_dims, buffers, status, peaks = result
            status, new_dims = int(status), [int(d) for d in new_dims]
            if status == DONE:
                peaks = np.asarray(peaks).tolist()
                self._learn(capacity, peaks)
                fits = all(p <= self._caps.get(v, capacity) for v, p in zip(self._tracked, peaks))
                return (Prediction(self, capacity, static, tuple(new_dims), tuple(self._caps.items()), fits),
                        new_dims, self._cut(buffers, new_dims))
            if status == INVALID:
                break
            if status == RELEARN:
                self._caps = {}
                continue
            capacity = self._grown(capacity, max(dims, default=0), max(new_dims, default=0), int(k) + 1, count)
        return None, dims, list(carried)

    def _learn(self, capacity: int, peaks: list[int]) -> None:
        """Capacities of their own (never shrinking) for body sizes that stayed well below the loop's."""
        caps = {var: max(bucket(peak), self._caps.get(var, 0)) for var, peak in zip(self._tracked, peaks)}
        self._caps = {var: cap for var, cap in caps.items() if 4 * cap <= capacity}

    def _first_capacity(self, values: Sequence[Any], largest: int, count: int) -> int:
        """Room for a ``for_loop`` to append at each iteration unless too large; at least twice the size."""
        small = capacity_for(2 * largest)
        if self.predicate is not None:
            return small
        large = capacity_for(largest + count)
        nbytes = sum(
            np.dtype(var.aval.dtype).itemsize * math.prod(large if p else 1 for p in self._padded_axes(var))
            * math.prod(np.shape(x)[a] for a, p in enumerate(self._padded_axes(var)) if not p)
            for var, x in zip(self._carried, values)
        )
        return max(small, large) if nbytes <= FIRST_BUFFER_BYTES else small

    def _grown(self, capacity: int, before: int, after: int, ran: int, count: int) -> int:
        """The next capacity: the growth of ``ran`` iterations extrapolated to ``count``, or four times."""
        if self.predicate is None:
            predicted = before + math.ceil(max(after - before, 0) / ran * count)
            return max(2 * capacity, capacity_for(predicted + predicted // 8))
        return 4 * capacity


class BoundedScan(_CompiledLoop):
    """A loop of fixed sizes in reverse mode: a ``lax.scan`` over the trip count's bucket, steps beyond
    the count skipped (a ``while_loop`` first runs forward to count)."""

    def __init__(self, primitive: Primitive, body: LoopBody, predicate: LoopBody | None, program: Any):
        super().__init__(primitive, body, predicate, program)
        self.static = tuple(sorted({*self.static_consts, *range(body.nconsts, body.nconsts + body.nimplicit)}))
        self.unsupported = False

    def _scan(self, capacity: int, static: dict[tuple, int]) -> Callable:
        body, nimplicit = self.body.jaxpr, self.body.nimplicit
        prefix = self.predicate is None

        def run(fixed, carried, lower, step, count):
            fixed = _with_static(fixed, static, "body")

            def one_step(carry, k):
                def taken(c):
                    index = [lower + k * step] if prefix else []
                    return tuple(eval_jaxpr(body, [*fixed, *index, *c], Mode.STAGED)[nimplicit:])

                return lax.cond(k < count, taken, lambda c: tuple(c), carry), None

            return lax.scan(one_step, tuple(carried), jnp.arange(capacity, dtype=jnp.int64))[0]

        return run

    def _counter(self, static: dict[tuple, int]) -> Callable:
        body, predicate, nimplicit = self.body.jaxpr, self.predicate.jaxpr, self.body.nimplicit

        def count(pred_consts, fixed, carried):
            pred_consts = _with_static(pred_consts, static, "predicate")
            fixed = _with_static(fixed, static, "body")
            implicit = fixed[self.body.nconsts :]
            pred_consts, fixed, carried = jax.lax.stop_gradient((pred_consts, fixed, carried))

            def more(state):
                return eval_jaxpr(predicate, [*pred_consts, *implicit, *state[1]], Mode.STAGED)[0]

            def step(state):
                n, c = state
                return n + 1, tuple(eval_jaxpr(body, [*fixed, *c], Mode.STAGED)[nimplicit:])

            return lax.while_loop(more, step, (jnp.int64(0), tuple(carried)))[0]

        return count

    def describe(self) -> LoopInfo:
        buckets = [key[0] for key in list(self._compiled) if key[0] != "count"]
        return LoopInfo("bounded scan", str(self.primitive), not self.unsupported, len(buckets), frozenset(buckets))

    def run(self, fixed: Sequence[Any], carried: Sequence[Any], lower: int = 0, step: int = 1,
            count: int | None = None, pred_consts: Sequence[Any] = ()) -> list[Any] | None:
        """The carried values after ``count`` iterations (``None`` when the body needs the host)."""
        if self.unsupported:
            return None
        static = dict(self._static(pred_consts, fixed, self.static))
        try:
            if count is None:
                counter = self._jitted(("count", *sorted(static.items())), lambda: self._counter(static))
                count = int(counter(list(pred_consts), list(fixed), list(carried)))
            static = {key: v for key, v in static.items() if key[0] == "body"}  # what the scan needs
            capacity = capacity_for(count)
            scan = self._jitted((capacity, *sorted(static.items())), lambda: self._scan(capacity, static))
            return list(scan(list(fixed), list(carried), jnp.int64(lower), jnp.int64(step), jnp.int64(count)))
        except NeedsHost:
            self.unsupported = True
            return None


def run_compiled(primitive: Primitive, body: LoopBody, predicate: LoopBody | None, operands: Sequence[Any],
                 replay: Callable[[Prediction], None], pred_consts: Sequence[Any], consts: Sequence[Any],
                 implicit: Sequence[Any], carried: Sequence[Any], count: int | None = None, lower: int = 0,
                 step: int = 1) -> list[Any] | None:
    """A loop's host rule compiled whole, as a :class:`MaskedLoop` or :class:`BoundedScan`: its
    ``*implicit *carried`` results, or ``None`` (run it iteration by iteration)."""
    if count == 0:
        return None
    reverse, loop_args = reverse_mode_requested(), (primitive, body, predicate)
    # On capacity buffers: a resizing loop on concrete values, not in reverse mode.
    if not reverse and sized_in_body(body.jaxpr, body.nimplicit) and not any_traced(operands):
        loop = kept_by_program(body.jaxpr, "capacity buffers", functools.partial(MaskedLoop, *loop_args))
        ran, implicit, carried = loop.run(pred_consts, consts, implicit, carried, count or 0, lower, step)
        if ran is None:
            return None
        replay(ran)
        return [*implicit, *carried]
    if not reverse or body.resizes_arrays:
        return None
    scan = kept_by_program(body.jaxpr, "bounded scan", functools.partial(BoundedScan, *loop_args))
    outs = scan.run([*consts, *implicit], carried, lower, step, count, pred_consts)
    return None if outs is None else [*implicit, *outs]


def compiled_loops(kept: Sequence[Any]) -> list[LoopInfo]:
    """The compiled loops among what a program keeps, as :mod:`.inspection` shows them."""
    return [obj.describe() for obj in kept if isinstance(obj, (MaskedLoop, BoundedScan))]
