"""Which traced program a call runs: the first of its signature's programs whose size facts hold at
the call's sizes, else one traced now: generic, guided by the call's sizes, or static (the sizes as
constants); see docs/architecture.md."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence

import jax
import numpy as np

from ..errors import CatalystLiteError, IncompatibleSizesError
from ..jax_extras import eval_context
from ..jax_extras.autodiff import is_concrete_value
from ..jax_extras.requirements import BrokenRequirement
from ..jax_extras.size_expressions import Fact, SizeExpr
from ..jax_extras.patches import NeedsCallSizes, ShapeBroadcastError, error_standing_for
from ..jax_extras.size_facts import SizeScope
from ..trace_context import capture_switched, scope as context_scope
from ..signature import LeafSpec
from ..tracing import extended_trace, size_input_names, trace_program
from .executable import Executable
from .options import RunnerOptions

__all__ = ["SizeInputs", "ProgramFamily", "SignatureTrace"]


@dataclass(frozen=True)
class SizeInputs:
    """A family's program inputs (abstracted axes, flat arguments): ``names``, ``sources``, ``sizes``."""

    names: tuple[str, ...]
    sources: tuple[str, ...]
    sizes: frozenset[int]

    @classmethod
    def of(cls, axis_names: Sequence[Hashable], dim_sources: Sequence[Sequence[tuple[int, int]]],
           leaf_names: Sequence[str], integer_leaves: Sequence[bool]) -> SizeInputs:
        axes = [f"axis {axis} of argument {leaf_names[leaf]}" for (leaf, axis), *_ in dim_sources]
        sources = (*axes, *(f"argument {n}" for n in leaf_names))
        integers = {len(axis_names) + j for j, is_int in enumerate(integer_leaves) if is_int}
        sizes = frozenset(range(len(axis_names))) | integers
        return cls(tuple(size_input_names(axis_names, leaf_names)), sources, sizes)

    def point(self, values: Sequence[Any]) -> list[int | None]:
        """The call's value of every size input it knows (``None`` for the others)."""
        return [int(v) if k in self.sizes and is_concrete_value(v) else None for k, v in enumerate(values)]

    def describe(self, positions: Sequence[int], values: Sequence[Any]) -> str:
        """``n = 3 (axis 0 of argument 'x'), k = 7 (argument 'k')``."""
        named = (f"{self.names[k]} = {int(values[k])} ({self.sources[k]})" for k in sorted(set(positions)))
        return ", ".join(named)


@dataclass(frozen=True)
class SignatureTrace:
    """How the programs of one signature are traced, in the scope a :class:`ProgramFamily` chooses."""

    fn: Callable
    dynamic: Any
    tree: Any
    specs: Sequence[LeafSpec]
    axes: Sequence[dict]
    names: Sequence[str]
    name: str
    options: Mapping[str, Any]
    runner_options: RunnerOptions
    capture: Callable[[Callable, str], Callable] | None = None
    donated: frozenset[int] = frozenset()  # the flat argument leaves donated to XLA

    def __call__(self, scope: SizeScope, static: Sequence[int | None] | None) -> Executable:
        """The program traced in ``scope``, with the ``static`` size inputs (if given) as constants."""
        fn, specs, axes = self.fn, self.specs, self.axes
        if static is not None:
            leaves = jax.tree_util.tree_leaves(self.dynamic)
            specs = [LeafSpec(tuple(np.shape(leaf)), spec.dtype, spec.weak_type) for leaf, spec in zip(leaves, specs)]
            axes = [{} for _ in axes]
            first_leaf = len(static) - len(leaves)
            constants = {j: int(v) if spec.weak_type else np.dtype(spec.dtype).type(v)
                         for j, (v, spec) in enumerate(zip(static[first_leaf:], specs)) if v is not None}

            def fn(*args: Any) -> Any:  # self.fn, the static leaves constants
                leaves, tree = jax.tree_util.tree_flatten(args)
                leaves = [constants.get(j, leaf) for j, leaf in enumerate(leaves)]
                return self.fn(*jax.tree_util.tree_unflatten(tree, leaves))

        if self.capture is not None:
            fn = self.capture(fn, self.name)
        # From the eval trace: the program, cached, keeps no caller's tracer. PennyLane's capture off.
        start = time.perf_counter()
        with eval_context(), capture_switched(False, self.name), context_scope(qjit_options=self.options), \
                extended_trace(self.options) as contribution:
            program = trace_program(fn, self.tree, specs, axes, self.name, self.names, scope, contribution)
        report = self.runner_options.report
        if report.enabled:
            report("traced for %s in %.3f s", _signature_text(specs, axes), time.perf_counter() - start)
        first_leaf = len(program.jaxpr.invars) - len(specs)
        return Executable(program, self.runner_options, frozenset(first_leaf + k for k in self.donated))


def _signature_text(specs: Sequence[LeafSpec], axes: Sequence[dict]) -> str:
    """The argument types of a trace, symbolic axes by name: ``(f64[n], i64[])``."""
    types = []
    for spec, spec_axes in zip(specs, axes):
        dims = ",".join(str(spec_axes.get(i, d)) for i, d in enumerate(spec.shape))
        types.append(f"{getattr(spec.dtype, 'name', spec.dtype)}[{dims}]")  # a PRNG key's dtype is not NumPy's
    return f"({', '.join(types)})"


# What JAX's shape logic raises refusing sizes (`x + y` of unequal lengths, `x[0]` of an empty `x`):
# a trace at some sizes failing so says nothing of other sizes.
JAX_REFUSALS = (TypeError, ValueError, IndexError)

# (scope, static values or None) -> the program traced in that scope (a SignatureTrace)
Tracer = Callable[[SizeScope, "Sequence[int | None] | None"], Any]


class ProgramFamily:
    """The programs traced for one signature of a function, each valid where its facts hold."""

    def __init__(self, inputs: SizeInputs, name: str):
        self.inputs = inputs
        self.name = name
        self.programs: list[Any] = []  # executables of programs with symbolic sizes, generic first
        self.static_programs: dict[tuple, Any] = {}  # by the call's size inputs
        self.generic_failed = False
        self.sizes_must_be_static = False  # JAX's code needs concrete sizes (`len(x)`)
        self._lock = threading.Lock()

    def select(self, values: Sequence[Any]) -> Any | None:
        """The first program whose facts hold for these size inputs (``None`` if none does)."""
        for program in self.programs:
            if program.program.facts.hold(values):
                return program
        if self.static_programs:
            return self.static_programs.get(tuple(self.inputs.point(values)))
        return None

    def program_for(self, values: Sequence[Any], trace: Tracer, lock: bool = True) -> Any:
        """The program for these size inputs, traced if none holds (``lock``: not inside another trace)."""
        program = self.select(values)
        if program is not None:
            return program
        with self._lock if lock else contextlib.nullcontext():
            return self.select(values) or self._trace_for(values, trace)

    def generic(self, trace: Tracer) -> Any | None:
        """The generic program, traced now if not yet (``None``: JAX cannot trace it with symbolic sizes)."""
        with self._lock:
            self._new_generic(trace)
            return self.programs[0] if self.programs else None

    def _new_generic(self, trace: Tracer, for_call: bool = False) -> Any | None:
        """The generic program when traced now (not before, and JAX does not refuse it), else ``None``.
        ``for_call``: a call's sizes can guide a trace instead, should JAX refuse generic ones."""
        if self.programs or self.sizes_must_be_static or self.generic_failed:
            return None
        scope = self._scope()
        try:
            program = trace(scope, None)
        except (NeedsCallSizes, ShapeBroadcastError) as err:  # guided traces, or static ones, from now on
            if scope.undecided or scope.last_disagreement is not None:
                self.generic_failed = True
            elif isinstance(err, NeedsCallSizes):
                self.sizes_must_be_static = True
            else:
                raise
            return None
        except JAX_REFUSALS as err:
            if isinstance(err, CatalystLiteError) or not (for_call and scope.decided_generically):
                raise
            # Raised after a branch taken at generic (large) sizes, which a call's may not take
            # (`n > 10` in `jax.random.choice(key, 10, (n,), replace=False)`): calls guide traces.
            self.generic_failed = True
            return None
        self.programs.append(program)
        return program

    def _scope(self, values: Sequence[Any] | None = None) -> SizeScope:
        """The scope of a trace with symbolic sizes, guided by a call's ``values`` if given."""
        point = None if values is None else self.inputs.point(values)
        return SizeScope(self.inputs.names, point, symbolic=bool(self.inputs.sizes))

    def _trace_for(self, values: Sequence[Any], trace: Tracer) -> Any:
        program = self._new_generic(trace, for_call=True)
        if program is not None and program.program.facts.hold(values):
            return program
        if self.sizes_must_be_static:
            return self._trace_static(values, trace)
        scope = self._scope(values)
        try:
            program = trace(scope, None)
        except BrokenRequirement as err:  # jax.jit refuses these sizes (a reshape that does not fit)
            raise IncompatibleSizesError(
                f"{self.name}: {err} The sizes come from {self.inputs.describe(err.inputs, values)}."
            ) from None
        except (NeedsCallSizes, ShapeBroadcastError) as err:
            return self._trace_static(values, trace, self._named(err, scope, values))
        if not program.program.facts.hold(values):  # a fact its own sizes break: no use to anyone
            return self._trace_static(values, trace)
        self.programs.append(program)
        return program

    def _trace_static(self, values: Sequence[Any], trace: Tracer, error: IncompatibleSizesError | None = None) -> Any:
        """A program traced with the call's sizes as constants (``error`` if JAX refuses them too)."""
        static = self.inputs.point(values)
        scope = SizeScope(self.inputs.names, symbolic=False)
        # Facts of its sizes: a repeated call checks integer arguments its executable no longer reads.
        scope.facts.extend(Fact(SizeExpr.input(k), SizeExpr.literal(v), "==", "a static trace")
                           for k, v in enumerate(static) if v is not None)
        try:
            program = trace(scope, static)
        except JAX_REFUSALS as err:
            if error is None:
                raise
            if not isinstance(error, type(err)):  # JAX's class too (IndexError): code catching it still does
                error = error_standing_for(type(error), type(err))(*error.args)
            raise error from None
        self.static_programs[tuple(static)] = program
        return program

    def _named(self, err: BaseException, scope: SizeScope, values: Sequence[Any]) -> IncompatibleSizesError | None:
        """The guided trace's failure naming the sizes, when JAX last asked if two unequal sizes are equal."""
        if scope.last_disagreement is None or not isinstance(err, JAX_REFUSALS):
            return None
        lhs, rhs = scope.last_disagreement
        names = self.inputs.names
        positions = lhs.inputs() | rhs.inputs()
        return IncompatibleSizesError(
            f"{self.name}: the sizes {lhs.render(names)} and {rhs.render(names)} must agree here "
            f"but do not at this call, where {self.inputs.describe(positions, values)}. JAX reported: {err}"
        )
