"""Specialization: evaluate a dynamically-shaped jaxpr at concrete sizes (see docs/architecture.md,
"2. Specialize").

One interpreter, :func:`eval_jaxpr`, in two modes: ``STAGED`` inside a ``jax.jit`` trace, sizes
as Python ints (one static XLA program per size signature; a size that depends on data raises
:class:`NeedsHost`), and ``HOST``, eager, where nested bodies run through a :class:`JaxprRunner`
compiled once per size signature. Primitives with nested jaxprs register a rule per mode in
:data:`staged_rules`/:data:`host_rules` and, in :data:`dimension_operand_rules`, the operands
that must be known to specialize them.
"""

from __future__ import annotations

import enum
import functools
import math
import os
import sys
import threading
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from ..trace_context import current as current_context, scope as context_scope
from ..diagnostics import unsupported_equation_error
from ..errors import ArgumentTypeError, ArrayTooLargeError, CatalystLiteError, CompileError
from ..jax_extras import (
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    Literal,
    Primitive,
    Tracer,
    Var,
    eval_context,
    is_tracing,
    x64_scope,
)
from ..jax_extras.dynshape import has_symbolic_shape
from ..jax_extras.tracing import dimension_value, get_aval
from ..jax_extras.autodiff import is_concrete_value
from ..jax_extras.literals import literals_by_value
from ..jax_extras.rules import specializations
from ..jax_extras.shapes import SHAPE_PARAMS, fill_sizes
from .options import RunnerOptions
from .reverse_mode import needs_reverse_mode, reverse_mode, reverse_mode_requested
from .segments import MAX_MISSES, MAX_SPECULATIONS, SegmentedProgram, Speculation, SpeculationFails, recording, split_at
from .compilation import Specialization

__all__ = [
    "Mode",
    "NeedsHost",
    "eval_jaxpr",
    "eval_equation",
    "JaxprRunner",
    "dimension_inputs",
    "sizes_follow_from_inputs",
    "staged_rules",
    "host_rules",
    "dimension_operand_rules",
    "to_dim",
    "trip_count",
    "runner_for",
    "register_specialization",
    "specialize_if_static",
    "check_sizes",
]


class Mode(enum.Enum):
    STAGED = "staged"
    HOST = "host"


class NeedsHost(Exception):
    """Raised while staging when a size is only known at run time. ``equation``: ``(jaxpr,
    index)`` of the outermost equation it was raised from (set by :func:`eval_jaxpr`)."""

    equation: tuple[Jaxpr, int] | None = None


# prim -> rule(invals, params) -> outvals
Rule = Callable[[list[Any], dict[str, Any]], Sequence[Any]]
staged_rules: dict[Primitive, Rule] = {}
host_rules: dict[Primitive, Rule] = {}
# prim -> rule(params) -> indices of operands whose values a specialization needs
dimension_operand_rules: dict[Primitive, Callable[[dict[str, Any]], set[int]]] = {}


def register_specialization(
    primitive: Primitive,
    *,
    staged: Rule,
    host: Rule,
    dimension_operands: Callable[[dict[str, Any]], set[int]],
) -> None:
    """Register how a primitive with nested jaxprs runs at concrete sizes: ``staged`` inside one
    XLA program, ``host`` driven from Python (also its ``impl``, for eager evaluation), and which
    of its operands a specialization must know (``dimension_operands``). The staged rule is also
    the primitive's specialization for its JAX rules at known sizes
    (:data:`~catalyst_lite.jax_extras.rules.specializations`)."""
    staged_rules[primitive] = staged
    host_rules[primitive] = host
    dimension_operand_rules[primitive] = dimension_operands
    specializations[primitive] = functools.partial(specialize_if_static, primitive)
    primitive.def_impl(lambda *invals, **params: host(list(invals), params))


def specialize_if_static(primitive: Primitive, invals: list[Any], params: dict[str, Any]) -> list[Any] | None:
    """``primitive``'s staged rule in the current trace, when every operand has a static shape
    and the values of the operands that size it are known (numbers, concrete, or known in the
    trace); ``None`` otherwise (symbolic sizes: the equation stays one equation)."""
    if any(has_symbolic_shape(get_aval(x)) for x in invals):
        return None
    needed = dimension_operand_rules[primitive](params)
    sizes = {k: dimension_value(invals[k]) for k in needed}
    if any(v is None or isinstance(v, Tracer) for v in sizes.values()):
        return None
    try:
        return list(staged_rules[primitive]([sizes.get(k, v) for k, v in enumerate(invals)], params))
    except NeedsHost:
        return None


def to_dim(value: Any) -> int:
    """The concrete size held by ``value``; :class:`NeedsHost` if it is only known at run time."""
    if isinstance(value, Tracer):
        raise NeedsHost(value)
    return int(value)


def trip_count(lower: Any, upper: Any, step: Any) -> Any:
    """Number of iterations of ``range(lower, upper, step)``, for traced or concrete bounds.

    Known bounds (Python or NumPy numbers, or the 0-d arrays of jaxpr literals) give a Python int:
    ``lax.fori_loop`` then becomes a ``scan`` of known length, which XLA may unroll or fold, as it
    does for a hand-written ``jax.jit`` program."""
    if not any(isinstance(x, Tracer) for x in (lower, upper, step)):
        return len(range(int(lower), int(upper), int(step)))
    return jax.numpy.maximum(0, -((lower - upper) // step))



def _any_traced(values: Sequence[Any]) -> bool:
    return any(isinstance(x, Tracer) for x in values)


def _is_int_scalar(v: Any) -> bool:
    """A signed integer scalar: what sizes are. (Unsigned ones are bits, such as the halves of a
    PRNG key: folding them into Python ints would lose their type.)"""
    aval = v.aval
    # `jax.dtypes.issubdtype`: a PRNG key's extended dtype is not a NumPy one.
    return not aval.shape and jax.dtypes.issubdtype(aval.dtype, np.signedinteger)


def _is_index_scalar(v: Any) -> bool:
    """An integer or boolean scalar: size arithmetic is made of these (``a[:1]`` computes its
    length with ``min``, comparisons and ``select_n``), so they are folded together."""
    return _is_int_scalar(v) or (not v.aval.shape and v.aval.dtype == np.bool_)


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


def available_memory() -> int:
    """Bytes of memory the process can still allocate: Linux's ``MemAvailable`` (free memory plus
    reclaimable caches), else the physical memory size, else unlimited."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return sys.maxsize


def check_fits_in_memory(what: str, shape: Sequence[int], dtype: Any) -> None:
    """Raise :class:`ArrayTooLargeError` before an array of this shape is allocated when it would
    not fit in memory (XLA would fail with an opaque ``RESOURCE_EXHAUSTED``, or the machine swap)."""
    nbytes = math.prod(shape) * getattr(dtype, "itemsize", 8)  # a PRNG key's dtype is not NumPy's
    if nbytes <= _ALWAYS_FITS_BYTES:
        return
    available = available_memory()
    if nbytes > available:
        raise ArrayTooLargeError(
            f"{what} would create an array of shape {tuple(shape)} and dtype {np.dtype(dtype)} "
            f"({nbytes / 2**30:.3g} GiB), more than the {available / 2**30:.3g} GiB of memory "
            "available. Pass smaller sizes."
        )


def eval_jaxpr(jaxpr: Jaxpr, args: Sequence[Any], mode: Mode,
               overrides: Mapping[Any, Callable[[list[Any]], list[Any]]] | None = None) -> list[Any]:
    """Evaluate ``jaxpr`` (constants already turned into leading arguments) on ``args``; the
    equations in ``overrides`` (of this jaxpr, not of nested ones) by the rule given there.

    Integer scalars computed only from known numbers stay Python ints, so that sizes derived from
    them (``n + 1``) are static when staging.
    """
    env: dict[Var, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, Literal) else env[atom]

    for var, value in zip(jaxpr.invars, args):
        env[var] = value
    for index, eqn in enumerate(jaxpr.eqns):
        try:
            invals = [read(v) for v in eqn.invars]
            rule = overrides.get(eqn) if overrides else None
            outvals = rule(invals) if rule is not None else eval_equation(eqn, invals, mode)
        except NeedsHost as err:
            err.equation = (jaxpr, index)  # the outermost jaxpr's, where segmentation splits
            raise
        for var, value in zip(eqn.outvars, outvals):
            if not isinstance(var, DropVar):
                env[var] = value
    return [read(v) for v in jaxpr.outvars]


_UNKNOWN = object()  # a value check_sizes does not compute (array data, a loop's results)


def check_sizes(jaxpr: Jaxpr, sizes: dict[int, int]) -> None:
    """Check at these sizes what staging would check, without staging: evaluate the program's size
    arithmetic from ``sizes`` (its dimension inputs, by position), check its size assumptions and
    requirements and refuse negative or too large arrays, at the top level of ``jaxpr``. Sizes
    computed inside loops are checked by whoever runs them."""
    env: dict[Var, Any] = {v: sizes[i] for i, v in enumerate(jaxpr.invars) if i in sizes}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, Literal) else env.get(atom, _UNKNOWN)

    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        prim = eqn.primitive
        if prim in SHAPE_PARAMS:
            ndyn = sum(d is None for d in eqn.params[SHAPE_PARAMS[prim]])
            if _UNKNOWN not in invals[len(invals) - ndyn :]:
                _fill_dynamic_shape(eqn, invals)
        elif _UNKNOWN not in invals and (_is_size_check(eqn) or _is_size_arithmetic(eqn)):
            for var, value in zip(eqn.outvars, _eval_equation(eqn, invals)):
                env[var] = value


def _is_size_check(eqn: Any) -> bool:
    """An equation that only checks sizes (an assumption or a requirement): no results, no nested
    program, and specializations key on its operands."""
    return (
        not eqn.outvars
        and eqn.primitive in dimension_operand_rules
        and not any(isinstance(p, (ClosedJaxpr, Jaxpr)) for p in eqn.params.values())
    )


def _is_size_arithmetic(eqn: Any) -> bool:
    """Integer scalars from integer scalars, with no nested program (a loop is not arithmetic)."""
    return (
        eqn.primitive not in dimension_operand_rules
        and bool(eqn.outvars)
        and all(_is_index_scalar(v) for v in eqn.outvars)
    )


def eval_equation(eqn: Any, invals: list[Any], mode: Mode) -> list[Any]:
    """Evaluate one equation on ``invals`` in ``mode``."""
    rules = staged_rules if mode is Mode.STAGED else host_rules
    if eqn.primitive in rules:
        return list(rules[eqn.primitive](invals, eqn.params))
    if _is_size_check(eqn) and _any_traced(invals):
        # A size assumption or requirement on values known only at run time (a loop's index in
        # a staged loop): it has no lowering, so staging it would drop the check. The host runs
        # it with those values known.
        raise NeedsHost(f"{eqn.primitive} on sizes known only at run time")
    return _eval_equation(eqn, invals)


# Errors that are already clear, or that drive the specialization itself.
_UNTRANSLATED = (CatalystLiteError, NeedsHost, MemoryError, jax.errors.JaxRuntimeError)


def _eval_equation(eqn: Any, invals: list[Any]) -> list[Any]:
    """Bind a JAX primitive (not one with a rule) at concrete sizes. When the primitive's own
    abstract evaluation refuses these concrete types, the traced program uses an operation the
    specialization cannot handle (:class:`UnsupportedOperationError`); any other failure (the
    user's code: a ``custom_jvp`` rule, a ``custom_vjp`` backward pass) propagates as it is."""
    prim = eqn.primitive
    operands, params = _fill_dynamic_shape(eqn, invals) if prim in SHAPE_PARAMS else (invals, eqn.params)
    try:
        if prim not in SHAPE_PARAMS and all(_is_index_scalar(v) for v in eqn.outvars) and not _any_traced(invals):
            with eval_context():
                outs = bind_primitive(prim, operands, params)
            return [_folded(x, v.aval.dtype) for x, v in zip(outs, eqn.outvars)]
        return bind_primitive(prim, operands, params)
    except _UNTRANSLATED:
        raise
    except Exception as err:
        refusal = _abstract_evaluation_refusal(prim, operands, params)
        if refusal is None:
            raise
        raise unsupported_equation_error(eqn, refusal) from err


def _abstract_evaluation_refusal(prim: Primitive, operands: Sequence[Any], params: dict[str, Any]) -> Exception | None:
    """What ``prim``'s abstract evaluation raises on the types of ``operands`` (``None`` if it
    accepts them). It runs only JAX's rules, never the user's functions a primitive holds: its
    failure, unlike a failure of the bind, is the primitive's refusal of these sizes. A call
    primitive (``custom_jvp_call``) has no abstract evaluation of its own: what fails there is
    its body or the user's rules, never a refusal."""
    if "abstract_eval" not in vars(prim) and type(prim).abstract_eval is Primitive.abstract_eval:
        return None
    try:
        prim.abstract_eval(*(get_aval(x) for x in operands), **params)
    except _UNTRANSLATED:
        return None
    except Exception as refusal:  # our own probe: a rule of JAX refusing concrete sizes
        return refusal
    return None


def _folded(value: Any, dtype: Any) -> Any:
    """A known index scalar as a host value that binds back as its own type.

    A Python ``int`` or ``bool`` keeps later sizes static, but binds as JAX's default integer
    type (64 bits here); a 32-bit one (``platform_index``, the indices ``jnp.diagonal`` computes)
    stays a NumPy scalar of its type, since StableHLO requires 32 bits where JAX asked for them.

    >>> import numpy as np
    >>> type(_folded(np.int64(3), np.int64)).__name__, type(_folded(np.int32(3), np.int32)).__name__
    ('int', 'int32')
    """
    host = np.asarray(value).item()
    if np.dtype(type(host)) == np.dtype(dtype):
        return host
    return np.dtype(dtype).type(host)


def bind_primitive(prim: Primitive, invals: Sequence[Any], params: dict[str, Any]) -> list[Any]:
    """Bind ``prim`` as JAX's own interpreter binds an equation; a list of results."""
    # As JAX's own interpreter binds an equation: primitives holding functions (custom_jvp_call's
    # jvp, custom_vjp_call's fwd and bwd) take them back as leading arguments.
    subfuns, params = prim.get_bind_params(params)
    out = prim.bind(*subfuns, *invals, **params)
    return list(out) if prim.multiple_results else [out]


def dimension_inputs(jaxpr: Jaxpr) -> frozenset[int]:
    """Positions of ``jaxpr``'s inputs whose values determine some size in it (directly, or through
    integer arithmetic). A specialization is keyed on exactly these values."""
    needed = _size_values(jaxpr)
    # Only integer inputs are keyed on (a boolean input that decides a size stays host-driven).
    return frozenset(i for i, v in enumerate(jaxpr.invars) if v in needed and _is_int_scalar(v))


def sizes_follow_from_inputs(jaxpr: Jaxpr, inputs: Sequence[int]) -> bool:
    """Whether every size ``jaxpr`` computes follows by integer arithmetic from its inputs at
    positions ``inputs`` (none from array data, other inputs or nested programs): its sizes are
    then fixed by those inputs' values.

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit
    >>> @qjit
    ... def f(n: int, x: float):
    ...     return jnp.ones(n + 1) * x
    >>> _ = f(3, 1.0)
    >>> jaxpr = f.inspect().last.jaxpr.jaxpr
    >>> sizes_follow_from_inputs(jaxpr, [0]), sizes_follow_from_inputs(jaxpr, [])
    (True, False)
    """
    if any(isinstance(p, (ClosedJaxpr, Jaxpr)) for eqn in jaxpr.eqns for p in eqn.params.values()):
        return False
    needed = _size_values(jaxpr)
    allowed = {jaxpr.invars[i] for i in inputs}
    if any(v in needed and (v not in allowed or not _is_int_scalar(v)) for v in jaxpr.invars):
        return False
    return all(
        _is_size_arithmetic(eqn) and all(isinstance(v, Literal) or _is_index_scalar(v) for v in eqn.invars)
        for eqn in jaxpr.eqns if any(v in needed for v in eqn.outvars)
    )


def _size_values(jaxpr: Jaxpr) -> set[Var]:
    """The variables of ``jaxpr`` whose values some size in it depends on (directly, or through
    integer arithmetic; a size computed from array data, or returned by a nested primitive, is
    there but not what it is computed from)."""
    needed: set[Var] = set()

    def add_shape_vars(aval: Any) -> None:
        if has_symbolic_shape(aval):
            needed.update(d for d in aval.shape if isinstance(d, Var))

    for v in jaxpr.invars:
        add_shape_vars(v.aval)
    for eqn in jaxpr.eqns:
        for v in (*eqn.invars, *eqn.outvars):
            if not isinstance(v, Literal):
                add_shape_vars(v.aval)
        if eqn.primitive in SHAPE_PARAMS:
            ndyn = sum(d is None for d in eqn.params[SHAPE_PARAMS[eqn.primitive]])
            needed.update(v for v in eqn.invars[len(eqn.invars) - ndyn :] if isinstance(v, Var))
        if eqn.primitive in dimension_operand_rules:
            for i in dimension_operand_rules[eqn.primitive](eqn.params):
                if isinstance(eqn.invars[i], Var):
                    needed.add(eqn.invars[i])
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            add_shape_vars(v.aval)
    # Scalar integer arithmetic that produces a needed value needs its own scalar inputs. (A size
    # computed from array data, or returned by a nested primitive, is only known at run time.)
    for eqn in reversed(jaxpr.eqns):
        if eqn.primitive in dimension_operand_rules:
            continue
        if any(v in needed for v in eqn.outvars if not isinstance(v, DropVar)):
            needed.update(v for v in eqn.invars if isinstance(v, Var) and _is_index_scalar(v))
    return needed


def _size_outputs(jaxpr: Jaxpr) -> frozenset[int]:
    """Positions of ``jaxpr``'s outputs that are sizes of others (each variable's first)."""
    sizes = {d for v in jaxpr.outvars for d in getattr(v.aval, "shape", ()) if isinstance(d, Var)}
    first = {}
    for k, v in enumerate(jaxpr.outvars):
        if isinstance(v, Var) and v in sizes:
            first.setdefault(v, k)
    return frozenset(first.values())


_NOT_COMPILED = object()  # a missing entry of JaxprRunner._executables (None: host-driven)


class JaxprRunner:
    """Runs one jaxpr at concrete sizes, compiling it once per size signature.

    The signature is the tuple of values of the :func:`dimension_inputs`; for each one the runner
    keeps either a compiled :class:`~.compilation.Specialization` (all sizes static) or notes that the
    program needs host-driven execution. ``options`` (:class:`~.options.RunnerOptions`): XLA
    options, reports, and the bounded cache its executables are kept in. The
    runners of nested bodies that its host-driven execution needs are its own (see
    :func:`runner_for`), and share its options: they live as long as it does.
    """

    def __init__(self, jaxpr: Jaxpr, name: str = "jaxpr", options: RunnerOptions | None = None,
                 nested: dict[int, tuple[Jaxpr, "JaxprRunner"]] | None = None):
        self.jaxpr = jaxpr
        self.name = name
        self.options = RunnerOptions() if options is None else options
        self.compile_options: dict[str, Any] = dict(self.options.xla)
        self.static_positions = tuple(sorted(dimension_inputs(jaxpr)))
        self.dynamic_positions = tuple(
            i for i in range(len(jaxpr.invars)) if i not in set(self.static_positions)
        )
        # Keyed on the size signature and on whether reverse mode is requested (see .reverse_mode).
        self._executables: dict[tuple[tuple[int, ...], bool], Specialization | None] = {}
        # Where an executable is None: the program split around its host steps (see .segments).
        self._segmented: dict[tuple[tuple[int, ...], bool], Callable[[Sequence[Any]], list[Any]]] = {}
        # Programs that need the host: compiled whole at the sizes their host steps found (keyed
        # on the size signature and the integer arguments), and how often a prediction failed.
        self._speculations: dict[tuple, Speculation | dict | None] = {}
        self._misses: dict[tuple, int] = {}
        self._staged_ints: set[tuple] = set()  # speculation keys staged whole first (see _run_host)
        self._int_positions = tuple(i for i in self.dynamic_positions if _is_int_scalar(jaxpr.invars[i]))
        self._size_outputs = _size_outputs(jaxpr)
        self._lock = threading.Lock()
        # One executable for every size, when the program has one: it runs the sizes that have no
        # XLA executable yet (set by its executable, see .size_generic).
        self.size_generic: Any = None  # a .size_generic.SizeGenericTier (that module builds on this one)
        # What the program keeps for its nested bodies (their runners, compiled loops; see
        # :meth:`nested`), shared with those runners.
        self._nested = {} if nested is None else nested
        self._reports_hits = nested is None  # a program's runner, not a body's (run per iteration)
        self.donated: frozenset[int] = frozenset()  # inputs donated to XLA (a program's, by qjit)

    def signature(self, args: Sequence[Any]) -> tuple[int, ...]:
        return tuple(int(args[i]) for i in self.static_positions)

    def _staged_function(self, key: tuple[int, ...], reverse: bool = False,
                         overrides: Mapping[Any, Callable] | None = None,
                         finish: Callable[[list[Any]], list[Any]] = list,
                         known: Mapping[int, int] | None = None) -> Callable:
        """The ``jax.jit`` function of the program at ``key``'s sizes, of its dynamic inputs
        (but those whose values are ``known``)."""
        static = {**dict(zip(self.static_positions, key)), **(known or {})}
        positions = tuple(i for i in self.dynamic_positions if i not in static)
        jaxpr = self.jaxpr

        def specialized(*dynamic_args):
            args: list[Any] = [None] * len(jaxpr.invars)
            for i, v in static.items():
                args[i] = v
            for i, v in zip(positions, dynamic_args):
                args[i] = v
            with reverse_mode(reverse):
                return finish(eval_jaxpr(jaxpr, args, Mode.STAGED, overrides))

        specialized.__name__ = self.name
        donate = tuple(j for j, i in enumerate(positions) if i in self.donated)
        return jax.jit(specialized, donate_argnums=donate, **self.options.jit)

    def executable(
        self, key: tuple[int, ...], dynamic_args: Sequence[Any], reverse: bool = False
    ) -> Specialization | None:
        """The compiled specialization for ``key``, or ``None`` when it needs host-driven
        execution. ``reverse``: specialized for reverse-mode differentiation (see
        :mod:`.reverse_mode`)."""
        try:
            return self._executables[key, reverse]
        except KeyError:
            pass
        with self._lock:
            spec = self._executables.get((key, reverse), _NOT_COMPILED)
            if spec is _NOT_COMPILED:
                spec = self._executables[key, reverse] = self._specialize(key, dynamic_args, reverse)
                new = True
            else:
                new = False
        if new:
            self.options.report(
                "new specialization of %s for sizes %s%s: %s", self.name, key, " (reverse mode)" if reverse else "",
                "host-driven (a size is known only at run time)" if spec is None else "one XLA program",
            )
            if spec is not None:  # outside the lock: the cache may evict one of this runner's
                self.options.cache.added(self, (key, reverse))
        return spec

    def forget(self, key: tuple[tuple[int, ...], bool]) -> None:
        """Drop the executable of ``(sizes, reverse)`` (evicted from the function's cache)."""
        with self._lock:
            self._executables.pop(key, None)

    def _specialize(
        self, key: tuple[int, ...], dynamic_args: Sequence[Any], reverse: bool
    ) -> Specialization | None:
        """Stage and lower the program at ``key``'s sizes (compiled on its first concrete run);
        ``None`` when a size is only known at run time."""
        fn = self._staged_function(key, reverse)
        try:
            with literals_by_value():  # thousands of scalar constants (a circuit's) lower fast
                lowered = fn.lower(*dynamic_args)
        except NeedsHost as err:
            self._segmented[key, reverse] = self._segmentation(err)
            return None
        # Lowered for tracers of an outer transformation, it is of no use to a concrete run.
        lowered = None if _any_traced(dynamic_args) else lowered
        return Specialization(fn, lowered, self.compile_options, self.options.report,
                              f"{self.name} at sizes {key}")

    def prepare(self, key: tuple[int, ...], dynamic_args: Sequence[Any], generation: int | None = None) -> None:
        """Specialize and compile ``key``'s XLA executable (concrete ``dynamic_args``, no reverse
        mode) and only then make it the one calls use: a call meanwhile never waits for it. A size
        that needs host-driven execution is left to the size-generic tier. Nothing is kept when
        the function's cache was cleared since ``generation`` (:class:`~.options.ExecutableCache`),
        when given (a background compilation)."""
        if (key, False) in self._executables or generation not in (None, self.options.cache.generation):
            return
        with x64_scope():  # also on the background thread, which starts in 32-bit mode
            spec = self._specialize(key, dynamic_args, False)
            if spec is None:
                return
            spec.compile(dynamic_args)
        with self._lock:
            added = self._executables.setdefault((key, False), spec) is spec
        if added:
            self.options.report("new specialization of %s for sizes %s: one XLA program (compiled ahead; "
                                "calls at these sizes now run on it)", self.name, key)
            self.options.cache.added(self, (key, False), generation)

    def compiled(self, args: Sequence[Any]) -> Specialization | None:
        """The specialization of concrete ``args``' sizes when there is one and reverse mode is
        not requested and no program is being traced (``None`` otherwise): what a repeated call
        with validated arguments runs."""
        if reverse_mode_requested() or is_tracing():
            return None
        key = (self.signature(args) if self.static_positions else (), False)
        spec = self._executables.get(key)
        if spec is not None:
            self._hit(key)
            return spec
        if self._speculations:
            speculation = self._speculations.get(self._speculation_key(key[0], args))
            return speculation if isinstance(speculation, Speculation) else None
        return None

    def _hit(self, key: tuple[tuple[int, ...], bool]) -> None:
        """A call found the executable of ``(sizes, reverse)``: it becomes the most recently used."""
        self.options.cache.used(self, key)
        if self._reports_hits and self.options.report.enabled:
            self.options.report("cache hit: %s at sizes %s", self.name, key[0])

    def __call__(self, *args: Any) -> list[Any]:
        # The hot path of every call: a dict lookup keyed on the sizes (none for most programs).
        key = self.signature(args) if self.static_positions else ()
        dynamic_args = [args[i] for i in self.dynamic_positions]
        reverse = needs_reverse_mode(dynamic_args)
        spec = self._executables.get((key, reverse), _NOT_COMPILED)
        if (spec is _NOT_COMPILED or spec is None) and self.size_generic is not None and not reverse:
            outs = self.size_generic.run(key, args)
            if outs is not None:
                return outs
        if spec is _NOT_COMPILED:
            spec = self.executable(key, dynamic_args, reverse)
        else:
            self._hit((key, reverse))
        if spec is None:
            self._check_host_drivable(dynamic_args)
            with context_scope(host_driving=self):
                return self._run_host(key, reverse, args, dynamic_args)
        if _any_traced(dynamic_args) or is_tracing():
            # Staged into the caller's program (even without traced arguments: a qjit program
            # called while another is traced), not run.
            return list(spec.jitted(*dynamic_args))
        return list(spec.run(dynamic_args))

    def _run_host(self, key: tuple[int, ...], reverse: bool, args: Sequence[Any],
                  dynamic_args: Sequence[Any]) -> list[Any]:
        """A program that needs the host: its speculation when it has one for these arguments
        (see :mod:`.segments`), else its segments, whose host steps leave replays for the
        next call to speculate on."""
        if reverse:
            with reverse_mode(True):
                return self._segmented[key, True](args)
        skey = self._speculation_key(key, args)
        if skey not in self._speculations and self._stages_with_ints(skey) and not _any_traced(dynamic_args):
            # The int arguments static (trip counts, sizes) may leave no step to the host, as
            # jax.jit's static_argnums does: then one program with no prediction to check.
            self._staged_ints.add(skey)
            speculation = self._speculate(skey, key, {}, dynamic_args, (CatalystLiteError,))
            if speculation is not None:
                self._speculations[skey] = speculation
        speculation = self._speculations.get(skey)
        if isinstance(speculation, dict):  # the replays of the last run: compiled at the second call
            speculation = self._speculations[skey] = self._speculate(skey, key, speculation, dynamic_args)
        if speculation is not None:
            return speculation.run(dynamic_args)
        return self._run_segmented(skey, key, args)

    def _stages_with_ints(self, skey: tuple) -> bool:
        """Whether to stage the whole program with the ``int`` arguments of ``skey`` static
        before running it host-driven (the first call with these values, while there is room)."""
        return (any(v is not None for v in skey[1:]) and skey not in self._staged_ints
                and len(self._staged_ints) < MAX_SPECULATIONS)

    def _speculation_key(self, key: tuple[int, ...], args: Sequence[Any]) -> tuple:
        """The size signature and the Python ``int`` arguments (trip counts, sizes)."""
        return (key, *[a if type(a) is int else None for a in map(args.__getitem__, self._int_positions)])

    def _run_segmented(self, skey: tuple, key: tuple[int, ...], args: Sequence[Any], missed: bool = False) -> list[Any]:
        if missed:
            self._misses[skey] = self._misses.get(skey, 0) + 1
        with recording() as outcomes:
            outs = self._segmented[key, False](args)
        if (missed or skey not in self._speculations) and outcomes:
            # A program with side effects is not speculated on: a miss would repeat them.
            keep = (self._misses.get(skey, 0) < MAX_MISSES and len(self._speculations) < MAX_SPECULATIONS
                    and not self.jaxpr.effects)
            self._speculations[skey] = dict(outcomes) if keep and not _any_traced(args) else None
        return outs

    def _speculate(self, skey: tuple, key: tuple[int, ...], outcomes: dict, dynamic_args: Sequence[Any],
                   refused: tuple[type[Exception], ...] = ()) -> Speculation | None:
        """The whole program at ``key``, its host steps replayed, its ``int`` arguments static
        (they are part of ``skey``); ``None`` if a host step cannot be replayed (or staging
        raises ``refused``: the segments then run it, and report it if they must)."""
        known = {i: v for i, v in zip(self._int_positions, skey[1:]) if v is not None}
        kept = [j for j, i in enumerate(self.dynamic_positions) if i not in known] if known else None

        def stage(overrides: Mapping[Any, Callable], finish: Callable) -> Callable:
            return self._staged_function(key, False, overrides, finish, known)

        def missed(dynamic_args: Sequence[Any]) -> list[Any]:
            args: list[Any] = [None] * len(self.jaxpr.invars)
            for i, v in zip(self.static_positions, key):
                args[i] = v
            for i, v in zip(self.dynamic_positions, dynamic_args):
                args[i] = v
            with x64_scope():  # the fast path of a repeated call may come without one
                return self._run_segmented(skey, key, args, missed=True)

        speculation = Speculation(outcomes, stage, missed, kept, self._size_outputs, self.compile_options)
        try:
            speculation.lower(dynamic_args)
        except (NeedsHost, SpeculationFails, *refused):
            return None
        return speculation

    def _segmentation(self, err: NeedsHost) -> Callable[[Sequence[Any]], list[Any]]:
        """How the program runs when staging it raised ``err``: split around the equation that
        raised it (see :mod:`.segments`), each segment compiled by a runner of its own."""
        if err.equation is None or err.equation[0] is not self.jaxpr:
            return lambda args: eval_jaxpr(self.jaxpr, args, Mode.HOST)
        segmentation = split_at(self.jaxpr, err.equation[1])

        def make_runner(jaxpr: Jaxpr, name: str) -> JaxprRunner:
            # A segment's runner shares the program's options and nested runners (dies with it).
            return JaxprRunner(jaxpr, name, self.options, self._nested)

        def run_step(eqn: Any, invals: list[Any]) -> list[Any]:
            return eval_equation(eqn, invals, Mode.HOST)

        return SegmentedProgram(segmentation, self.name, make_runner, run_step)

    def _check_host_drivable(self, dynamic_args: Sequence[Any]) -> None:
        """Host-driven execution reads sizes and trip counts from values: under an outer
        ``jax.jit`` or ``jax.vmap`` they have none, so say so instead of a JAX tracer error."""
        if not all(is_concrete_value(a) for a in dynamic_args):
            raise ArgumentTypeError(
                f"{self.name} must run host-driven (a size or a loop's trip count is only known "
                "at run time, or a while loop is differentiated in reverse mode), which needs "
                "concrete values, but it is called inside jax.jit or jax.vmap; call it outside."
            )

    def lower(self, *args: Any) -> Any:
        """``jax.stages.Lowered`` of the specialization for these arguments (staged only)."""
        key = self.signature(args)
        dynamic_args = [args[i] for i in self.dynamic_positions]
        spec = self.executable(key, dynamic_args)
        if spec is None:
            raise NeedsHost(f"{self.name} has sizes known only at run time")
        return spec.jitted.lower(*dynamic_args)


    def describe(self) -> dict[str, Any]:
        """How this runner runs its sizes: the fields of :class:`~.inspection.ProgramInfo` it
        knows (``strategies``, ``host_steps``, ``speculations``, ``misses``)."""
        return dict(
            strategies={key: "host" if spec is None else "xla" for key, spec in list(self._executables.items())},
            host_steps=tuple(str(p.segmentation.step.primitive) for p in list(self._segmented.values())
                             if isinstance(p, SegmentedProgram)),
            speculations={key: "compiled" if isinstance(s, Speculation) else "recorded" if isinstance(s, dict)
                          else "refused" for key, s in list(self._speculations.items())},
            misses=dict(self._misses),
            compile_options=dict(self.compile_options),
        )

    def nested(self, jaxpr: Jaxpr, kind: str, make: Callable[[], Any]) -> Any:
        """What this program keeps of ``kind`` for its nested body ``jaxpr`` (its runner, its
        compiled loop), made once by ``make``: it dies with this program's executables."""
        key = (kind, id(jaxpr))
        entry = self._nested.get(key)
        if entry is None or entry[0] is not jaxpr:
            with self._lock:
                entry = self._nested.get(key)
                if entry is None or entry[0] is not jaxpr:
                    entry = self._nested[key] = (jaxpr, make())
        return entry[1]


def kept_by_program(jaxpr: Jaxpr, kind: str, make: Callable[[JaxprRunner | None], Any]) -> Any:
    """What the program run host-driven by this thread keeps of ``kind`` for its nested body
    ``jaxpr`` (see :meth:`JaxprRunner.nested`): ``make(program)`` runs once per program. A
    primitive evaluated outside any program (JAX's own interpreter on a jaxpr) gets a fresh one.

    >>> import jax
    >>> from catalyst_lite.compiler.specialize import kept_by_program
    >>> body = jax.make_jaxpr(lambda x: x + 1.0)(1.0).jaxpr
    >>> kept_by_program(body, "runner", lambda program: program is None)  # no program runs: made afresh
    True
    """
    program = current_context().host_driving
    return make(None) if program is None else program.nested(jaxpr, kind, lambda: make(program))


def runner_for(jaxpr: Jaxpr, name: str) -> JaxprRunner:
    """The :class:`JaxprRunner` of a nested body, so that its executables are compiled once per
    size signature (see :func:`kept_by_program`)."""
    return kept_by_program(jaxpr, "runner", lambda program: JaxprRunner(jaxpr, name) if program is None else
                           JaxprRunner(jaxpr, name, program.options, program._nested))
