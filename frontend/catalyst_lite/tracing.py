"""Tracing a user function once into a dynamically-shaped program: :func:`trace_program` makes
an immutable :class:`Program` (its ``ClosedJaxpr``, input and output types, and where each implicit
dimension comes from at call time) from a function and its flat arguments' specs."""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Hashable, Iterator, Mapping, Sequence

import jax
import numpy as np
from jax.tree_util import PyTreeDef, keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

from .diagnostics import escaped_size_error, user_facing_trace_errors
from .errors import IncompatibleSizesError, ResultTypeError
from .jax_extras import (
    ClosedJaxpr, InputType, Jaxpr, ShapedArray, Tracer, collapse, core, dynamic_tracing, make_input_type, pe,
    trace_to_jaxpr, x64_scope,
)
from .jax_extras.size_expressions import Fact, compile_facts
from .jax_extras.size_facts import SizeScope, size_scope
from .jax_extras.typecheck import check_jaxpr, open_jax_nested_equation, typecheck_enabled
from .signature import AxesSpec, LeafSpec

__all__ = [
    "Program", "SizeFacts", "size_input_names", "Contribution", "register_trace_extension",
    "extended_trace", "trace_program", "dimension_sources", "implicit_values", "full_collections_deferred",
]


def size_input_names(axis_names: Sequence[Hashable], leaf_names: Sequence[str]) -> list[str]:
    """How sizes name a program's inputs: an abstracted axis by its name, an argument by its
    parameter's (``x``, ``args[1]``; ``p[0]``, ``p[1]`` for the leaves of a pytree ``p``).

    >>> size_input_names(["n"], ["'x'", "'k'", "'p'", "'p'"])
    ['n', 'x', 'k', 'p[0]', 'p[1]']
    """
    # A binding's leaf name as code spells it: 'args'[1] -> args[1].
    plain = [re.sub(r"^'([^']*)'", r"\1", n) for n in leaf_names]
    counts, seen = collections.Counter(plain), collections.Counter()
    leaves = []
    for n in plain:
        leaves.append(f"{n}[{seen[n]}]" if counts[n] > 1 else n)
        seen[n] += 1
    return [str(a) for a in axis_names] + leaves


class SizeFacts:
    """The facts a program was traced under; ``first_broken(inputs)``: -1 when all hold."""

    def __init__(self, facts: Sequence[Fact] = ()):
        self.facts = tuple(facts)
        self.first_broken = compile_facts(self.facts)
        self.inputs = frozenset().union(*(fact.inputs() for fact in self.facts))

    def hold(self, values: Sequence[Any]) -> bool:
        return self.first_broken(values) < 0

    def __len__(self) -> int:
        return len(self.facts)


@dataclass(frozen=True)
class Contribution:
    """What an extension adds to a traced program: XLA options, constants drawn anew at each call."""

    compile_options: Mapping[str, Any] = field(default_factory=dict)
    fresh_consts: Mapping[int, Callable[[], Any]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Program:
    """A traced function: its jaxpr, its types, and where each size comes from at call time
    (compiled and called by :class:`~.compiler.executable.Executable`)."""

    closed_jaxpr: ClosedJaxpr
    in_type: InputType
    out_type: tuple
    out_tree: PyTreeDef
    # For each implicit input: every (leaf index, axis) that has that dimension.
    dim_sources: tuple[tuple[tuple[int, int], ...], ...]
    axis_names: tuple[Hashable, ...]
    # What the trace decided about the sizes: the calls it is valid for (compiler.assumptions).
    facts: SizeFacts = field(repr=False)
    contribution: Contribution = field(repr=False)

    @functools.cached_property
    def jaxpr(self) -> Jaxpr:
        """The jaxpr with its constants as leading inputs: ``[consts, implicit, leaves]``."""
        return pe.convert_constvars_jaxpr(self.closed_jaxpr.jaxpr)

    def results(self, outs: Sequence[Any]) -> Any:
        """The function's result (a pytree) from the jaxpr's outputs (implicit sizes dropped)."""
        return tree_unflatten(self.out_tree, collapse(self.out_type, outs))


# options -> a context manager around the trace, yielding consts -> its Contribution
TraceExtension = Callable[[Mapping[str, Any]], ContextManager[Callable[[Sequence[Any]], Contribution]]]
_extensions: list[TraceExtension] = []


def register_trace_extension(extension: TraceExtension) -> TraceExtension:
    """Make ``extension(options)`` a scope of every trace (how :mod:`.quantum` compiles QNodes)."""
    _extensions.append(extension)
    return extension


@contextlib.contextmanager
def extended_trace(options: Mapping[str, Any]) -> Iterator[Callable[[Sequence[Any]], Contribution]]:
    """Within every extension's scope; yields the function of the constants merging their contributions."""
    with contextlib.ExitStack() as scope:
        finishers = [scope.enter_context(extension(options)) for extension in _extensions]

        def contribution(consts: Sequence[Any]) -> Contribution:
            parts = [finish(consts) for finish in finishers]
            return Contribution(
                {k: v for part in parts for k, v in part.compile_options.items()},
                {k: v for part in parts for k, v in part.fresh_consts.items()},
            )

        yield contribution


def dimension_sources(axes_specs: Sequence[AxesSpec]) -> tuple[list[Hashable], list[list[tuple[int, int]]]]:
    """The distinct abstracted axis names, in order of first use, and each one's ``(leaf, axis)``s."""
    sources: dict[Hashable, list[tuple[int, int]]] = {}
    for leaf, spec in enumerate(axes_specs):
        for axis, axis_name in sorted(spec.items()):
            sources.setdefault(axis_name, []).append((leaf, axis))
    return list(sources), list(sources.values())


def implicit_values(axis_names: Sequence[Hashable], dim_sources: Sequence[Sequence[tuple[int, int]]],
                    leaves: Sequence[Any], leaf_names: Sequence[str], fn_name: str) -> list[int]:
    """The length of each abstracted axis in ``leaves`` (a shared one must not differ)."""
    values = []
    for name, sources in zip(axis_names, dim_sources):
        (leaf0, axis0), *others = sources
        n = np.shape(leaves[leaf0])[axis0]
        for leaf, axis in others:
            m = np.shape(leaves[leaf])[axis]
            if m != n:
                raise IncompatibleSizesError(
                    f"{fn_name}: abstracted axis {name!r} is shared by argument "
                    f"{leaf_names[leaf0]} (axis {axis0}, length {n}) and argument "
                    f"{leaf_names[leaf]} (axis {axis}, length {m}), but the lengths differ."
                )
        values.append(n)
    return values


# A generation-2 threshold never reached while a trace defers full collections.
_NEVER = 2**30
_gc_lock = threading.Lock()
_gc_deferrals = 0
_gc_thresholds: tuple[int, ...] = ()


@contextlib.contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Python's full garbage collections deferred while any thread traces (one in a trace walks
    the whole heap: about 0.1 s). Reference-counted; thresholds the user sets meanwhile are kept.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> with full_collections_deferred():
    ...     deferred = gc.get_threshold()[2] > before[2]
    ...     enabled = gc.isenabled()
    >>> deferred, enabled, gc.get_threshold() == before
    (True, True, True)
    """
    global _gc_deferrals, _gc_thresholds
    with _gc_lock:
        if _gc_deferrals == 0:
            _gc_thresholds = gc.get_threshold()
            gc.set_threshold(*_gc_thresholds[:2], _NEVER)
        _gc_deferrals += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_deferrals -= 1
            if _gc_deferrals == 0 and gc.get_threshold() == (*_gc_thresholds[:2], _NEVER):
                gc.set_threshold(*_gc_thresholds)


def _is_result(x: Any) -> bool:
    return isinstance(x, Tracer) or core.valid_jaxtype(x)


def trace_program(fn: Callable[..., Any], tree: PyTreeDef, leaf_specs: Sequence[LeafSpec],
                  axes_specs: Sequence[AxesSpec], name: str, leaf_names: Sequence[str], scope: SizeScope,
                  contribution: Callable[[Sequence[Any]], Contribution]) -> Program:
    """Trace ``fn(*tree_unflatten(tree, leaves))`` with symbolic abstracted axes in ``scope``."""
    avals = [
        ShapedArray(tuple(0 if d is None else d for d in s.shape), s.dtype, s.weak_type) for s in leaf_specs
    ]
    out_tree_box: list[PyTreeDef] = []

    def flat_fn(*leaves: Any) -> list[Any]:
        out = fn(*tree_unflatten(tree, list(leaves)))
        flat, out_tree = tree_flatten(out)
        if not all(map(_is_result, flat)):
            path, leaf = next((p, x) for p, x in tree_flatten_with_path(out)[0] if not _is_result(x))
            getattr(leaf, "dtype", None)  # an object raising its own error when used (autograph's unassigned)
            raise ResultTypeError(
                f"{name} returns {leaf!r:.80} of type {type(leaf).__name__} (result{keystr(path)}): a "
                "compiled function returns arrays, numbers and pytrees of them. "
                + ("Call the function to return its result, " if callable(leaf) else "Convert it with "
                   "jnp.asarray, ")
                + "or return it from a Python function that calls the compiled one."
            )
        out_tree_box.append(out_tree)
        return flat

    scalar_dtypes = [s.dtype if s.shape == () else None for s in leaf_specs]
    # Translated outside `dynamic_tracing`: the messages are built with the user's JAX settings.
    with full_collections_deferred(), user_facing_trace_errors(name, leaf_names, scalar_dtypes, scope), dynamic_tracing(), size_scope(scope):
        in_type = make_input_type(avals, axes_specs)
        jaxpr, out_type, consts = trace_to_jaxpr(flat_fn, in_type, name, scope.bind_inputs)
    # A constant, or a result's size, still a tracer escaped a trace JAX ran inside ours.
    escaped = [var for var, const in zip(jaxpr.constvars, consts) if isinstance(const, Tracer)]
    open_eqn = next((e for e in jaxpr.eqns if any(var in e.invars for var in escaped)), None) or \
        open_jax_nested_equation(jaxpr) or next((e for e in jaxpr.eqns if any(
            isinstance(d, Tracer) for v in e.outvars for d in getattr(v.aval, "shape", ()))), None)
    if open_eqn is not None:
        raise escaped_size_error(name, open_eqn)
    if typecheck_enabled():  # CATALYST_LITE_TYPECHECK=1 (the test suite): a wrong type is our bug
        check_jaxpr(jaxpr)
    axis_names, dim_sources = dimension_sources(axes_specs)
    with x64_scope():  # NumPy constants moved to the device once, not by every call
        consts = [jax.device_put(c) if isinstance(c, np.ndarray) else c for c in consts]
    closed = ClosedJaxpr(jaxpr, consts)
    return Program(
        closed, in_type, tuple(out_type), out_tree_box[-1], tuple(map(tuple, dim_sources)), tuple(axis_names),
        facts=SizeFacts(scope.facts), contribution=contribution(closed.consts),
    )
