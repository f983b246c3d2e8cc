"""Which traced program a call runs: the size facts of each program, checked at the call's sizes.

A program traced with symbolic sizes is valid for the sizes at which JAX's shape logic decides
every comparison as it did while tracing: its *facts* (``n - 1 >= 0``, ``n == m``; see
:mod:`catalyst_lite.jax_extras.size_facts`). A :class:`ProgramFamily` holds the programs traced for
one signature of a function (argument structure, dtypes, static values), each with its facts, and
gives a call the first program whose facts hold for the call's sizes. When none does, it traces
one for the call:

1. the **generic** program, traced at generic sizes (large, distinct), first: most calls run it;
2. a program **guided** by the call: the same symbolic sizes, but every comparison decided at the
   call's sizes, so it holds wherever its own facts do: ``jnp.arange(n)`` traced at ``n = -3``
   serves every negative ``n``, ``x + y`` of two abstracted axes traced at ``n == m`` every call
   with equal lengths. Also when the generic trace fails after such a comparison (``x + y``
   needs the two lengths equal: at generic sizes they are not);
3. a **static** program, when even the guided trace fails (JAX takes another path for static
   shapes: ``x[::2]`` of an empty array is a slice, not a gather): the call's sizes are constants
   of the trace, as with ``jax.jit``, and the program serves calls with the same sizes.

A trace falls back on :class:`~catalyst_lite.jax_extras.patches.NeedsCallSizes` alone, the signal
raised where JAX meets a symbolic size it cannot handle (``len(x)``, ``lax.scan``, ``fft``...), and
on shapes that do not broadcast; any other exception (the user's own first) propagates. If the
static trace fails too, ``jax.jit`` fails at these sizes: the error names the sizes
(:class:`~catalyst_lite.errors.IncompatibleSizesError` when JAX needed two sizes equal that are not).

Checking the facts is one call of a small Python function compiled from them (integer arithmetic
on the sizes, :func:`~catalyst_lite.jax_extras.size_facts.compile_facts`); a program without facts
costs nothing.

>>> import numpy as np, jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes={0: "n"})
... def f(x):
...     return jnp.diff(x)       # traced assuming n - 1 >= 0
>>> f(np.arange(4.0)).tolist(), f(np.arange(0.0)).tolist()   # n = 0: a program traced for it
([1.0, 1.0, 1.0], [])
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence

import jax
import numpy as np

from ..errors import IncompatibleSizesError
from ..jax_extras import eval_context
from ..jax_extras.autodiff import is_concrete_value
from ..jax_extras.requirements import BrokenRequirement
from ..jax_extras.size_expressions import Fact, SizeExpr
from ..jax_extras.patches import NeedsCallSizes, ShapeBroadcastError
from ..jax_extras.size_facts import SizeScope
from ..trace_context import capture_switched, scope as context_scope
from ..reporting import Reporter
from ..signature import LeafSpec
from ..tracing import extended_trace, size_input_names, trace_program
from .executable import Executable
from .options import RunnerOptions

__all__ = ["SizeInputs", "ProgramFamily", "SignatureTrace"]


@dataclass(frozen=True)
class SizeInputs:
    """The inputs of a family's programs, in the order of a program's inputs (one per abstracted
    axis, then one per flat argument): their names in expressions (``n``, ``k``), where each comes
    from (``axis 0 of argument 'x'``), and which can be sizes (axes and integer scalars)."""

    names: tuple[str, ...]
    sources: tuple[str, ...]
    sizes: frozenset[int]

    @classmethod
    def of(
        cls,
        axis_names: Sequence[Hashable],
        dim_sources: Sequence[Sequence[tuple[int, int]]],
        leaf_names: Sequence[str],
        integer_leaves: Sequence[bool],
    ) -> SizeInputs:
        """The inputs of a program with these abstracted axes (each read from ``(leaf, axis)``
        pairs) and flat arguments (``integer_leaves``: which are integer scalars).

        >>> SizeInputs.of(["n"], [[(0, 0)]], ["'x'", "'k'"], [False, True]).sources
        ("axis 0 of argument 'x'", "argument 'x'", "argument 'k'")
        """
        axes = [f"axis {axis} of argument {leaf_names[leaf]}" for (leaf, axis), *_ in dim_sources]
        return cls(
            tuple(size_input_names(axis_names, leaf_names)),
            (*axes, *(f"argument {n}" for n in leaf_names)),
            frozenset(range(len(axis_names)))
            | {len(axis_names) + j for j, is_int in enumerate(integer_leaves) if is_int},
        )

    def point(self, values: Sequence[Any]) -> list[int | None]:
        """The call's value of every size input it knows (``None`` for the others)."""
        return [
            int(v) if k in self.sizes and is_concrete_value(v) else None for k, v in enumerate(values)
        ]

    def describe(self, positions: Sequence[int], values: Sequence[Any]) -> str:
        """``n = 3 (axis 0 of argument 'x'), k = 7 (argument 'k')``."""
        return ", ".join(
            f"{self.names[k]} = {int(values[k])} ({self.sources[k]})" for k in sorted(set(positions))
        )


@dataclass(frozen=True)
class SignatureTrace:
    """How the programs of one signature are traced, in the scope a :class:`ProgramFamily`
    chooses: ``fn`` (the function on a call's dynamic arguments, ``dynamic``), the layout of its
    flat arguments, the qjit's ``options`` and what its executables are compiled with.
    ``capture`` (``capture.program.captured_program``, or ``None``) traces ``fn`` through
    PennyLane's program capture."""

    fn: Callable
    dynamic: Any
    tree: Any
    specs: Sequence[LeafSpec]
    axes: Sequence[dict]
    names: Sequence[str]
    name: str
    options: Mapping[str, Any]
    runner_options: RunnerOptions
    report: Reporter
    capture: Callable[[Callable, str], Callable] | None = None
    donated: frozenset[int] = frozenset()  # the flat argument leaves donated to XLA

    def __call__(self, scope: SizeScope, static: Sequence[int | None] | None) -> Executable:
        """The program traced in ``scope``; with ``static`` (values of the size inputs, ``None``
        for the others), with those sizes as constants: the abstracted axes static and the
        integer arguments Python numbers, as ``jax.jit`` sees them."""
        fn, specs, axes = self.fn, self.specs, self.axes
        if static is not None:
            leaves = jax.tree_util.tree_leaves(self.dynamic)
            specs = [LeafSpec(tuple(np.shape(leaf)), spec.dtype, spec.weak_type) for leaf, spec in zip(leaves, specs)]
            axes = [{} for _ in axes]
            first_leaf = len(static) - len(leaves)
            constants = {
                j: (int(v) if spec.weak_type else np.dtype(spec.dtype).type(v))
                for j, (v, spec) in enumerate(zip(static[first_leaf:], specs))
                if v is not None
            }
            fn = _with_constant_leaves(fn, constants)
        if self.capture is not None:
            fn = self.capture(fn, self.name)
        # PennyLane's capture is off while catalyst_lite traces (captured_program switches it on
        # while PennyLane captures); extensions (QNodes compile into the program) contribute to
        # it; debug_assert reads disable_assertions. The program is cached and outlives any
        # transformation this call runs under (`jax.jit`, `jax.grad`): traced from the eval
        # trace, so that no value it keeps (constants on the device, keys) is a caller's tracer.
        start = time.perf_counter()
        with eval_context(), capture_switched(False, self.name), context_scope(qjit_options=self.options), \
                extended_trace(self.options) as contribution:
            program = trace_program(fn, self.tree, specs, axes, self.name, self.names, scope, contribution)
        if self.report.enabled:
            self.report("traced for %s in %.3f s", _signature_text(specs, axes), time.perf_counter() - start)
        # The donated leaves as inputs of the jaxpr (whose last inputs are the leaves).
        first_leaf = len(program.jaxpr.invars) - len(specs)
        return Executable(program, self.runner_options, frozenset(first_leaf + k for k in self.donated))


def _signature_text(specs: Sequence[LeafSpec], axes: Sequence[dict]) -> str:
    """The argument types of a trace, symbolic axes by name: ``(f64[n], i64[])``."""
    types = []
    for spec, spec_axes in zip(specs, axes):
        dims = ",".join(str(spec_axes.get(i, d)) for i, d in enumerate(spec.shape))
        types.append(f"{getattr(spec.dtype, 'name', spec.dtype)}[{dims}]")  # a PRNG key's dtype is not NumPy's
    return f"({', '.join(types)})"


def _with_constant_leaves(fn: Callable, constants: dict[int, Any]) -> Callable:
    """``fn`` with some of its flat argument leaves replaced by constants."""

    def with_constants(*args: Any) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(args)
        leaves = [constants.get(j, leaf) for j, leaf in enumerate(leaves)]
        return fn(*jax.tree_util.tree_unflatten(tree, leaves))

    return with_constants


# (scope, static values or None) -> the program traced in that scope (a SignatureTrace)
Tracer = Callable[[SizeScope, "Sequence[int | None] | None"], Any]


class ProgramFamily:
    """The programs traced for one signature of a function, each valid where its facts hold."""

    def __init__(self, inputs: SizeInputs, name: str):
        self.inputs = inputs
        self.name = name
        self.programs: list[Any] = []  # executables of programs with symbolic sizes, generic first
        # Programs traced with the sizes as constants, by the call's size inputs.
        self.static_programs: dict[tuple, Any] = {}
        self.generic_failed = False
        # JAX's code needs concrete sizes (`len(x)`): every call gets a static program.
        self.sizes_must_be_static = False
        self._lock = threading.Lock()

    def select(self, values: Sequence[Any]) -> Any | None:
        """The first program whose facts hold for these size inputs (``None`` if none does)."""
        for program in self.programs:
            if program.facts.hold(values):
                return program
        if self.static_programs:
            return self.static_programs.get(tuple(self._static_point(values)))
        return None

    def program_for(self, values: Sequence[Any], trace: Tracer, lock: bool = True) -> Any:
        """The program for a call with these size inputs, traced by ``trace`` if none holds.

        ``lock``: hold the family's lock while tracing, so that two threads calling with the same
        new sizes trace once. A call made while another program is traced passes ``False``: a
        trace never waits for another thread, so no two threads can wait for each other.
        """
        program = self.select(values)
        if program is not None:
            return program
        with self._lock if lock else contextlib.nullcontext():
            return self.select(values) or self._trace_for(values, trace)

    def generic(self, trace: Tracer, lock: bool = True) -> Any | None:
        """The generic program (traced now if it is not yet): what ``.jaxpr`` shows before any
        call, e.g. for a function traced ahead of time from its annotations; ``None`` when JAX
        cannot trace the function with symbolic sizes (calls then trace it with their own)."""
        with self._lock if lock else contextlib.nullcontext():
            self._new_generic(trace)
            return self.programs[0] if self.programs else None

    def _new_generic(self, trace: Tracer) -> Any | None:
        """The generic program, traced now when there is none yet and JAX has not refused one
        (``None`` otherwise)."""
        if self.programs or self.sizes_must_be_static or self.generic_failed:
            return None
        scope = self._scope()
        try:
            program = trace(scope, None)
        except (NeedsCallSizes, ShapeBroadcastError) as err:
            self._generic_failed(scope, err)
            return None
        self.programs.append(program)
        return program

    def _scope(self, values: Sequence[Any] | None = None) -> SizeScope:
        """The scope of a trace with symbolic sizes, guided by a call's ``values`` if given."""
        point = None if values is None else self.inputs.point(values)
        return SizeScope(self.inputs.names, point, symbolic=bool(self.inputs.sizes))

    def _generic_failed(self, scope: SizeScope, err: BaseException) -> None:
        """After the generic trace raised the signal (or shapes that do not broadcast): a trace
        guided by the call when comparisons of sizes the call decides led there (sizes JAX
        needed equal that are not at generic sizes, a comparison of unrelated sizes); the call's
        sizes as constants for the signal otherwise. Shapes that do not broadcast at any sizes
        are the user's error."""
        if scope.undecided or scope.last_disagreement is not None:
            self.generic_failed = True
        elif isinstance(err, NeedsCallSizes):
            self.sizes_must_be_static = True
        else:
            raise err

    def _trace_for(self, values: Sequence[Any], trace: Tracer) -> Any:
        program = self._new_generic(trace)
        if program is not None and program.facts.hold(values):
            return program
        if self.sizes_must_be_static:
            # What JAX cannot trace with symbolic sizes, it traces with the call's: as jax.jit
            # does, every size then gets a trace of its own.
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
        if not program.facts.hold(values):  # a fact its own sizes break: no use to anyone
            return self._trace_static(values, trace)
        self.programs.append(program)
        return program

    def _static_point(self, values: Sequence[Any]) -> list[int | None]:
        return [v if k in self.inputs.sizes else None for k, v in enumerate(self.inputs.point(values))]

    def _trace_static(self, values: Sequence[Any], trace: Tracer, error: IncompatibleSizesError | None = None) -> Any:
        """A program traced with the call's sizes as constants; if ``jax.jit`` refuses these sizes
        too (a ``TypeError``/``ValueError`` of JAX's shape logic), ``error`` (naming the sizes)
        when given."""
        static = self._static_point(values)
        scope = SizeScope(self.inputs.names, symbolic=False)
        # Its facts say which sizes it is traced for: a repeated call checks the integer
        # arguments' values (see compiled._RepeatedCall), which its executable no longer reads.
        scope.facts.extend(
            Fact(SizeExpr.input(k), SizeExpr.literal(v), "==", "a static trace") for k, v in enumerate(static) if v is not None
        )
        try:
            program = trace(scope, static)
        except (TypeError, ValueError):
            if error is None:
                raise
            raise error from None
        self.static_programs[tuple(static)] = program
        return program

    def _named(self, err: BaseException, scope: SizeScope, values: Sequence[Any]) -> IncompatibleSizesError | None:
        """The guided trace's failure as :class:`IncompatibleSizesError` naming the sizes, when
        the last thing JAX asked before it was whether two sizes are equal (and at this call they
        are not)."""
        if scope.last_disagreement is None or not isinstance(err, (TypeError, ValueError)):
            return None
        lhs, rhs = scope.last_disagreement
        names = self.inputs.names
        positions = lhs.inputs() | rhs.inputs()
        message = (
            f"{self.name}: the sizes {lhs.render(names)} and {rhs.render(names)} must agree here "
            f"but do not at this call, where {self.inputs.describe(positions, values)}. "
            f"JAX reported: {err}"
        )
        return IncompatibleSizesError(message)
