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
   with equal lengths. Also when the generic trace fails with a JAX error (``x + y`` needs the
   two lengths equal: at generic sizes they are not);
3. a **static** program, when even the guided trace fails (JAX takes another path for static
   shapes: ``x[::2]`` of an empty array is a slice, not a gather), or when JAX's own code needs a
   size as a Python int (``len(x)`` in a function without symbolic-size support): the call's sizes
   are constants of the trace, as with ``jax.jit``, and the program serves calls with the same
   sizes.

If the static trace fails too, ``jax.jit`` fails at these sizes: the guided trace's error is
raised, naming the sizes (:class:`~catalyst_lite.errors.IncompatibleSizesError` when JAX needed two
sizes equal that are not).

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
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from ..errors import (
    CatalystLiteError,
    IncompatibleSizesError,
    UnsupportedOperationError,
)
from ..diagnostics import needs_static_sizes, raised_inside_jax
from ..jax_extras.autodiff import is_concrete_value
from ..jax_extras.dimensions import assume_size_p
from ..jax_extras.requirements import BrokenRequirement, require_size_p
from ..jax_extras.size_expressions import Fact, SizeExpr, compile_facts
from ..jax_extras.size_facts import SizeScope
from .specialize import dimension_operand_rules

__all__ = ["SizeFacts", "SizeInputs", "ProgramFamily", "size_input_names"]

# Both sides of an assumption or requirement are sizes: a specialization is keyed on them and
# they are Python ints when the equation is checked.
dimension_operand_rules[assume_size_p] = lambda params: {0, 1}
dimension_operand_rules[require_size_p] = lambda params: {0, 1}


def size_input_names(axis_names: Sequence[Hashable], leaf_names: Sequence[str]) -> list[str]:
    """How sizes name a program's inputs: an abstracted axis by its name, an argument by its
    parameter's (``x``, ``args[1]``; ``p[0]``, ``p[1]`` for the leaves of a pytree ``p``).

    >>> size_input_names(["n"], ["'x'", "'k'", "'p'", "'p'"])
    ['n', 'x', 'k', 'p[0]', 'p[1]']
    """
    plain = [_plain_name(n) for n in leaf_names]
    counts = {n: plain.count(n) for n in plain}
    seen: dict[str, int] = {}
    leaves = []
    for n in plain:
        if counts[n] > 1:
            leaves.append(f"{n}[{seen.setdefault(n, 0)}]")
            seen[n] += 1
        else:
            leaves.append(n)
    return [str(a) for a in axis_names] + leaves


def _plain_name(name: str) -> str:
    """``'args'[1]`` -> ``args[1]``: a leaf name of the binding, as code would spell it."""
    if name.startswith("'") and "'" in name[1:]:
        end = name.index("'", 1)
        return name[1:end] + name[end + 1 :]
    return name


class SizeFacts:
    """The facts a program was traced under, and :meth:`first_broken`, the function checking
    them at a call's size inputs (indexable by position; ``-1`` when all hold)."""

    def __init__(self, facts: Sequence[Fact] = ()):
        self.facts = tuple(facts)
        self.first_broken = compile_facts(self.facts)
        self.inputs = frozenset().union(*(fact.inputs() for fact in self.facts))

    def hold(self, values: Sequence[Any]) -> bool:
        return self.first_broken(values) < 0

    def __len__(self) -> int:
        return len(self.facts)


NO_FACTS = SizeFacts()


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


def _may_depend_on_sizes(err: BaseException) -> bool:
    """Whether a failed trace may succeed with other decisions about sizes, or static ones: JAX's
    own errors (shapes that do not broadcast, a slice out of range); never catalyst_lite's
    (Python control flow on a traced value, bad arguments, an unsupported operation)."""
    return isinstance(err, (TypeError, ValueError, IndexError)) and not isinstance(err, CatalystLiteError)


def _symbolic_sizes_failed(err: BaseException) -> bool:
    """Whether a trace with symbolic sizes failed where one with the call's sizes may not: JAX's
    dynamic-shape path does not support an operation (a primitive with a size parameter, a
    function JAX traces itself: ``lax.cond``, ``lax.scan``, ``jax.grad``...), or JAX raised an error
    of its own (a carry type that only differs in a size, a shape that does not broadcast at these
    sizes); not catalyst_lite's other errors (Python control flow on a traced value, bad
    arguments), which a static trace would raise again."""
    return isinstance(err, UnsupportedOperationError) or (
        isinstance(err, Exception) and not isinstance(err, CatalystLiteError)
    )


def _jax_needs_call_sizes(err: BaseException, inputs: SizeInputs) -> bool:
    """Whether the generic trace failed in JAX's code for want of the call's sizes (see
    :func:`_symbolic_sizes_failed`), for a signature that has sizes to give it."""
    return bool(inputs.sizes) and _symbolic_sizes_failed(err) and raised_inside_jax(err)


# (scope, static values or None) -> the program traced in that scope
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
        cannot trace the function with symbolic sizes (every call then traces it with its own)."""
        with self._lock if lock else contextlib.nullcontext():
            if not self.programs and not self.sizes_must_be_static:
                try:
                    self.programs.append(trace(SizeScope(self.inputs.names), None))
                except Exception as err:
                    # JAX cannot trace it with symbolic sizes: calls trace it with theirs (see
                    # _trace_for). The user's own errors and catalyst_lite's are raised now.
                    if not _jax_needs_call_sizes(err, self.inputs):
                        raise
                    self.sizes_must_be_static = True
            return self.programs[0] if self.programs else None

    def _trace_for(self, values: Sequence[Any], trace: Tracer) -> Any:
        if self.sizes_must_be_static:
            return self._trace_static(values, trace)
        if not self.programs and not self.generic_failed:
            scope = SizeScope(self.inputs.names)
            try:
                program = trace(scope, None)
            except Exception as err:
                # Sizes JAX needed equal and that are not at generic sizes (two abstracted axes),
                # or a comparison of unrelated sizes: a call's sizes may settle them.
                if scope.undecided and needs_static_sizes(err):
                    self.generic_failed = True
                elif needs_static_sizes(err):
                    self.sizes_must_be_static = True
                    return self._trace_static(values, trace, err)
                elif scope.disagreements and _may_depend_on_sizes(err):
                    self.generic_failed = True
                elif _jax_needs_call_sizes(err, self.inputs):
                    # What JAX cannot trace with symbolic sizes, it traces with the call's: as
                    # jax.jit does, every size then gets a trace of its own. If that fails too,
                    # its error is the one jax.jit gives. (The user's own exceptions propagate at
                    # once: the function is not run a second time.)
                    self.sizes_must_be_static = True
                    return self._trace_static(values, trace)
                else:
                    raise
            else:
                self.programs.append(program)
                if program.facts.hold(values):
                    return program
        scope = SizeScope(self.inputs.names, self.inputs.point(values))
        try:
            program = trace(scope, None)
        except BrokenRequirement as err:  # jax.jit refuses these sizes (a reshape that does not fit)
            raise IncompatibleSizesError(
                f"{self.name}: {err} The sizes come from {self.inputs.describe(err.inputs, values)}."
            ) from None
        except Exception as err:
            if not (_symbolic_sizes_failed(err) or needs_static_sizes(err)):
                raise
            return self._trace_static(values, trace, self._named(err, scope, values))
        if not program.facts.hold(values):  # a fact its own sizes break: no use to anyone
            return self._trace_static(values, trace)
        self.programs.append(program)
        return program

    def _static_point(self, values: Sequence[Any]) -> list[int | None]:
        return [v if k in self.inputs.sizes else None for k, v in enumerate(self.inputs.point(values))]

    def _trace_static(self, values: Sequence[Any], trace: Tracer, error: BaseException | None = None) -> Any:
        """A program traced with the call's sizes as constants; if ``jax.jit`` fails at them too,
        ``error`` (the symbolic trace's, which names the sizes) when given."""
        static = self._static_point(values)
        scope = SizeScope(self.inputs.names)
        # Its facts say which sizes it is traced for: a repeated call checks the integer
        # arguments' values (see compiled._RepeatedCall), which its executable no longer reads.
        scope.facts.extend(
            Fact(SizeExpr.input(k), SizeExpr.literal(v), "==", "a static trace") for k, v in enumerate(static) if v is not None
        )
        try:
            program = trace(scope, static)
        except Exception:
            if error is not None:
                raise error from None
            raise
        self.static_programs[tuple(static)] = program
        return program

    def _named(self, err: BaseException, scope: SizeScope, values: Sequence[Any]) -> BaseException:
        """The guided trace's error, as :class:`IncompatibleSizesError` naming the sizes when the
        last thing JAX asked before raising it was whether two sizes are equal (and at this
        call they are not)."""
        if scope.last_disagreement is None or not isinstance(err, (TypeError, ValueError)):
            return err
        if isinstance(err, CatalystLiteError):
            return err
        lhs, rhs = scope.last_disagreement
        names = self.inputs.names
        positions = lhs.inputs() | rhs.inputs()
        message = (
            f"{self.name}: the sizes {lhs.render(names)} and {rhs.render(names)} must agree here "
            f"but do not at this call, where {self.inputs.describe(positions, values)}. "
            f"JAX reported: {err}"
        )
        return IncompatibleSizesError(message)
