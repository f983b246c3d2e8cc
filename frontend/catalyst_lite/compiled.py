"""``@qjit``: trace a function once with symbolic sizes, run it anywhere XLA runs.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(sz: int):
...     return jnp.ones((sz + 1,), dtype=float)
>>> f(2).tolist(), f(4).shape
([1.0, 1.0, 1.0], (5,))
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import threading
import types
from typing import Any, Callable, Hashable, Sequence

import jax
import numpy as np

from .errors import (
    ArgumentOverflowError,
    ArgumentTypeError,
    ArgumentValueError,
    CompileError,
    DifferentiableCompileError,
    IncompatibleSizesError,
    SizeAssumptionError,
    UnsupportedOperationError,
    function_name,
)
from .jax_extras import Tracer, inside_program_trace, is_tracing, x64_scope
from .jax_extras.autodiff import is_concrete_value
from .binding import CallArguments, CallBinding
from .signature import ArgumentLayout, LeafSpec
from .annotations import as_annotated, dtype_of, example_of, is_type_annotation, resolved_annotation
from .autograph import run_autograph
from .callbacks import raise_from_callback
from .compiler.size_generic import SizeGenericTier
from .compiler.tiers import wait_for_compilations
from .capture import capture_switched, check_capture_option, uses_capture
from .compiler.assumptions import ProgramFamily, SizeFacts, SizeInputs
from .compiler.segments import Speculation
from .compiler.specialize import NeedsHost
from .jax_extras.requirements import BrokenRequirement
from .jax_extras.size_expressions import UnknownSize
from .jax_extras.size_facts import SizeScope
from .tracing import TracedProgram, dimension_sources, implicit_values, qjit_options, trace_program
from .quantum.qnode import quantum_tracing

__all__ = ["qjit", "QJIT"]

# Catalyst options that change nothing here (we always compile with XLA).
_ACCEPTED_OPTIONS = {
    "target",
    "keep_intermediate",
    "verbose",
    "logfile",
    "pipelines",
    "async_qnodes",
    "disable_assertions",
    "seed",
    "experimental_capture",
    "circuit_transform_pipeline",
    "pass_plugins",
    "dialect_plugins",
    "skip_preprocess",  # device preprocessing of captured programs: catalyst_lite has none
    "use_nameloc",
}


def _check_seed(seed: Any, name: str) -> None:
    """``qjit(seed=...)`` is ``None`` or an unsigned 32-bit integer, as in Catalyst.

    >>> _check_seed(2**32, "f")
    Traceback (most recent call last):
    ...
    catalyst_lite.errors.ArgumentValueError: qjit(seed=4294967296) of f: Seed must be an unsigned 32-bit integer! Use a seed in 0..4294967295.
    """
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ArgumentTypeError(
            f"qjit(seed={seed!r}) of {name}: the seed must be an integer in 0..{2**32 - 1}, "
            f"got {type(seed).__name__}."
        )
    if not 0 <= seed < 2**32:
        raise ArgumentValueError(
            f"qjit(seed={seed}) of {name}: Seed must be an unsigned 32-bit integer! Use a seed in 0..{2**32 - 1}."
        )


class QJIT:
    """A function compiled by :func:`qjit`. Call it like the original function.

    Attributes:
        jaxpr: the traced ``ClosedJaxpr`` of the last signature (``None`` before the first trace).
        mlir: StableHLO of :attr:`jaxpr`, symbolic sizes as ``?`` dimensions.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        abstracted_axes: Any = None,
        static_argnums: Sequence[int] | int | None = None,
        static_argnames: Sequence[str] | str | None = None,
        autograph: bool = False,
        autograph_include: Sequence[str] = (),
        tiered_compilation: bool | None = None,
        capture: bool | str = "global",
        size_generic: bool | None = None,
        **options: Any,
    ):
        unknown = set(options) - _ACCEPTED_OPTIONS
        if unknown:
            raise TypeError(f"qjit got unexpected option(s) {sorted(unknown)}.")
        functools.update_wrapper(self, fn)
        self.original_function = fn
        _check_seed(options.get("seed"), function_name(fn))
        # What is traced: with autograph, fn with its Python control flow converted.
        self._function = run_autograph(fn, *autograph_include) if autograph else fn
        self.name = function_name(fn)
        check_capture_option(capture, self.name)
        if capture != "global" and capture:
            with capture_switched(True, self.name):  # PennyLane may refuse: say so at once
                pass
        self.capture = capture
        self.autograph = autograph
        self.options = dict(options, abstracted_axes=abstracted_axes)
        self.binding = CallBinding(fn, static_argnums, static_argnames)
        # The parameters' annotations as objects (strings evaluated once, here).
        self._annotations = {
            name: resolved_annotation(p.annotation, fn) for name, p in self.binding.parameters.items()
        }
        self.layout = ArgumentLayout(self.name, abstracted_axes)
        # None: as the CATALYST_LITE_TIERED environment variable says (see compiler.tiers).
        self.tiered_compilation = tiered_compilation
        # None: as the CATALYST_LITE_SIZE_GENERIC environment variable says (see compiler.size_generic).
        self.size_generic = size_generic
        # The programs traced for each signature, each valid for the sizes where its facts hold.
        self._programs: dict[Hashable, ProgramFamily] = {}
        # Calls already validated, by _call_key: what their repeats run (see __call__).
        self._validated_calls: dict[tuple, _ValidatedCall] = {}
        self._last: TracedProgram | None = None
        # Guards the creation of program families (each family holds a lock while it traces, so
        # that two threads calling with the same new signature or sizes trace it once).
        self._lock = threading.Lock()
        self._annotated = None if inside_program_trace() else self._annotation_call()
        if self._annotated is not None:
            self._trace_generic(self._annotated)

    @property
    def compile_options(self) -> types.SimpleNamespace:
        """The options as Catalyst's ``QJIT.compile_options`` shows them: ``static_argnums`` (every
        static position, those named by ``static_argnames`` too), ``autograph`` and the others."""
        return types.SimpleNamespace(
            static_argnums=self.binding.static_argnums, autograph=self.autograph, **self.options
        )

    # --- tracing -----------------------------------------------------------------------------

    def _trace_generic(self, call: CallArguments) -> None:
        """Trace the generic program of this call's signature now (ahead of time)."""
        tree, specs, leaves, axes = self.layout.leaf_specs(call)
        names = [n for a, n in zip(call.dynamic, call.dynamic_names) for _ in jax.tree_util.tree_leaves(a)]
        family = self._family_for(call, tree, specs, axes, names)
        trace = functools.partial(self._trace_in_scope, call, tree, specs, axes, names)
        self._last = family.generic(trace)

    def _annotation_call(self) -> CallArguments | None:
        """Arguments standing for the type annotations when every parameter is positional and
        annotated with a type (or there is none): the function is then traced now (ahead of time),
        as Catalyst does. An annotation that is a class but not a JAX type raises here."""
        binding = self.binding
        if binding.signature is None or binding.has_static_arguments or binding.static_argnums_error \
                or self.layout.abstracted_axes is not None:
            return None
        params = list(binding.signature.parameters.values())
        annotations = [self._annotations[p.name] for p in params]
        if not all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.annotation is not p.empty
            and is_type_annotation(a)
            for p, a in zip(params, annotations)
        ):
            return None
        examples = tuple(example_of(a, p.name, self.name) for p, a in zip(params, annotations))
        return binding.bind(examples, {})

    def _program_for(self, call: CallArguments) -> tuple[TracedProgram, list[Any], list[str], list[int]]:
        """The program for this call (traced if no program of its signature holds for its
        sizes, see :mod:`.compiler.assumptions`), its flat arguments, their names, and the
        call's size inputs' leading part: the lengths of its abstracted axes."""
        tree, specs, leaves, axes = self.layout.leaf_specs(call)
        names = [n for a, n in zip(call.dynamic, call.dynamic_names) for _ in jax.tree_util.tree_leaves(a)]
        family = self._family_for(call, tree, specs, axes, names)
        # Unequal lengths of a shared axis would otherwise surface as a JAX error from tracing.
        axis_lengths = implicit_values(*dimension_sources(axes), leaves, names, self.name)
        _check_int64(self.name, names, leaves)
        # A size argument traced by an outer transformation has no value to check facts with.
        values = [*axis_lengths, *(None if isinstance(x, Tracer) and not is_concrete_value(x) else x for x in leaves)]
        trace = functools.partial(self._trace_in_scope, call, tree, specs, axes, names)
        try:
            program = family.program_for(values, trace, lock=not inside_program_trace())
        except UnknownSize as unknown:
            raise _size_argument_not_known(self.name, names[unknown.position - len(axis_lengths)]) from None
        self._last = program
        return program, leaves, names, axis_lengths

    def _family_for(self, call: CallArguments, tree, specs, axes, names) -> ProgramFamily:
        """The programs traced for this call's signature (structure, dtypes, static values)."""
        key = (call.dynamic_keys, tree, tuple(specs), call.static)
        family = self._programs.get(key)
        if family is None:
            inputs = SizeInputs.of(*dimension_sources(axes), names, [_is_int_scalar_spec(s) for s in specs])
            with self._lock:
                family = self._programs.setdefault(key, ProgramFamily(inputs, self.name))
        return family

    def _trace_in_scope(
        self, call: CallArguments, tree, specs, axes, names, scope: SizeScope, static: Sequence[int | None] | None
    ) -> TracedProgram:
        """Trace the function for this call's signature in ``scope``; with ``static`` (values of
        the size inputs, ``None`` for the others), with those sizes as constants: the abstracted
        axes static and the integer arguments Python numbers, as ``jax.jit`` sees them."""
        fn = self.binding.of_dynamic_arguments(self._function, call)
        if static is not None:
            leaves = jax.tree_util.tree_leaves(call.dynamic)
            specs = [
                LeafSpec(tuple(np.shape(leaf)), spec.dtype, spec.weak_type) for leaf, spec in zip(leaves, specs)
            ]
            axes = [{} for _ in axes]
            first_leaf = len(static) - len(leaves)
            constants = {
                j: (int(v) if spec.weak_type else np.dtype(spec.dtype).type(v))
                for j, (v, spec) in enumerate(zip(static[first_leaf:], specs))
                if v is not None
            }
            fn = _with_constant_leaves(fn, constants)
        return self._trace(fn, tree, specs, axes, names, scope)

    def _trace(self, fn: Callable, tree, specs, axes, names, scope: SizeScope | None = None) -> TracedProgram:
        """Trace ``fn`` into a program, configured for how it is to be compiled and called."""
        if uses_capture(self.capture):
            # Imported here: it imports PennyLane, which only programs that use it pay for.
            from .capture.program import captured_program

            fn = captured_program(fn, self.name)
        # PennyLane's capture is off while catalyst_lite traces (captured_program switches it on
        # while PennyLane captures); QNodes called here compile into the program; debug_assert
        # reads disable_assertions.
        with capture_switched(False, self.name), qjit_options(self.options), \
                quantum_tracing(self.options) as circuits:
            program = trace_program(fn, tree, specs, axes, self.name, names, scope)
        program.runner.compile_options = circuits.compile_options
        program.fresh_consts = circuits.fresh_consts(program.closed_jaxpr.consts)
        if self.tiered_compilation is not None:
            program.runner.tiered = self.tiered_compilation
        program.runner.size_generic = SizeGenericTier.attach(program.runner, self.size_generic)
        return program

    def _annotated_values(self, call: CallArguments) -> tuple:
        """The call's values checked against the annotations and converted to them where
        Catalyst converts (see :func:`.annotations.as_annotated`)."""
        out = []
        for (tag, ident), name, a in zip(call.keys, call.names, call.values):
            if tag == "":
                a = as_annotated(self.name, name, self._annotations[ident], a)
            out.append(a)
        return tuple(out)

    # --- calling -----------------------------------------------------------------------------

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """``@qjit`` on a method: ``obj.method(x)`` calls it with ``obj`` first (pass
        ``static_argnums=0`` to make ``self`` a compile-time value, as with ``jax.jit``)."""
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if is_tracing():
            # Called while a program is being traced (recursion, or a qjit function calling
            # another): inlined into that program, as Catalyst does, with its symbolic sizes.
            return self._function(*args, **kwargs)
        # Fast path: arguments of the types, shapes and dtypes of a call already validated need
        # none of the work below (binding, flattening, checks, implicit sizes): the key settles it.
        key = None if kwargs else _call_key(args)
        validated = self._validated_calls.get(key) if key is not None else None
        if validated is not None and (validated.facts is None or validated.facts.hold(args)):
            self._last = validated.program
            try:
                return validated(args)
            except (CompileError, UnsupportedOperationError):
                pass  # rare (a negative size): the checked call raises it naming the arguments
            except jax.errors.JaxRuntimeError as err:
                raise_from_callback(err)  # a callback failed: its own exception
        return self._call_checked(key, args, kwargs)

    def _call_checked(self, key: tuple | None, args: tuple, kwargs: dict) -> Any:
        """A call with every check; remembered for the fast path when ``key`` settles them."""
        call = self.binding.bind(args, kwargs)
        if self._annotated is not None:
            call = dataclasses.replace(call, values=self._annotated_values(call))
        program, leaves, names, axis_lengths = self._program_for(call)
        implicit = program.implicit_args(leaves, names, self.name)
        self._check_size_arguments_known(program, implicit, leaves, names)
        if any(isinstance(x, Tracer) for x in leaves):
            # Inside jax.grad/jvp/vmap/jit: adapt to the caller's types (see transforms.boundary).
            from .transforms.boundary import call_from_transformation

            with self._naming_size_arguments(program, implicit, leaves, names):
                return call_from_transformation(lambda *xs: program.run(implicit, xs), leaves)
        if key is not None and not any(call.is_static) and len(call.values) == len(args) and all(
            v is a for v, a in zip(call.values, args)
        ):
            # Each argument is one leaf, passed unconverted: a call with the same key is the same
            # call.
            self._validated_calls[key] = _ValidatedCall(program, implicit, leaves, axis_lengths)
        with x64_scope(), self._naming_size_arguments(program, implicit, leaves, names):
            return program.run(implicit, leaves)

    def _check_size_arguments_known(self, program, implicit, leaves, names) -> None:
        """Under an outer ``jax.jit``/``jax.vmap``/``jax.grad`` arrays may be tracers (their
        shapes are known), but an integer argument that sets a size must have a known value."""
        first_leaf = len(program.closed_jaxpr.consts) + len(implicit)
        for position in program.runner.static_positions:
            k = position - first_leaf
            if k >= 0 and not is_concrete_value(leaves[k]):
                raise _size_argument_not_known(self.name, names[k])

    @contextlib.contextmanager
    def _naming_size_arguments(self, program, implicit, leaves, names):
        """Re-raise a specialization error (a negative size) naming the arguments sizes come from,
        and an unsupported operation naming this function."""
        try:
            yield
        except DifferentiableCompileError:
            raise  # about the function, not about sizes
        except CompileError as e:
            sizes = [f"{n}={int(x)}" for n, x in zip(names, leaves) if _is_int_scalar(x)]
            sizes += [f"axis {a!r}={v}" for a, v in zip(program.axis_names, implicit)]
            # An array too large for memory stays a MemoryError, a broken assumption inside a loop
            # a SizeAssumptionError, sizes that do not fit together (a reshape) are incompatible;
            # other size errors are bad values.
            if isinstance(e, (MemoryError, SizeAssumptionError)):
                error_type = type(e)
            elif isinstance(e, BrokenRequirement):
                error_type = IncompatibleSizesError
            else:
                error_type = ArgumentValueError
            raise error_type(
                f"{self.name}: {e} The sizes come from {', '.join(sizes) or 'no argument'}."
            ) from None
        except UnsupportedOperationError as e:
            e.args = (f"{self.name}: {e.args[0]}", *e.args[1:])
            raise
        except jax.errors.JaxRuntimeError as err:
            raise_from_callback(err)  # a callback failed: its own exception

    # --- inspection --------------------------------------------------------------------------

    def _traced_programs(self) -> list[TracedProgram]:
        """Every program traced so far (for every signature, each with the facts it holds for)."""
        return [
            program
            for family in list(self._programs.values())
            for program in [*family.programs, *family.static_programs.values()]
        ]

    @property
    def jaxpr(self):
        """The traced ``ClosedJaxpr`` (of the most recent signature)."""
        return None if self._last is None else self._last.closed_jaxpr

    @property
    def mlir(self) -> str | None:
        """StableHLO text of the traced program; symbolic sizes are ``?`` dimensions."""
        if self._last is None:
            return None
        from .compiler.lowering import program_to_mlir

        return program_to_mlir(self._last, self.name)

    def specialized_mlir(self, *args: Any, **kwargs: Any) -> str:
        """StableHLO that XLA compiles for these concrete arguments (all sizes static)."""
        program, leaves, names, _ = self._program_for(self.binding.bind(args, kwargs))
        implicit = program.implicit_args(leaves, names, self.name)
        with x64_scope(), self._naming_size_arguments(program, implicit, leaves, names):
            try:
                return program.runner.lower(*program.full_args(implicit, leaves)).as_text()
            except NeedsHost:
                raise UnsupportedOperationError(
                    f"{self.name}: no single StableHLO program computes these arguments: a size "
                    "is only known while the program runs (a loop resizes an array, or a cond's "
                    "branches return different sizes), so the program runs host-driven, each "
                    "loop body compiled for the sizes it meets. .mlir shows the whole program "
                    "with dynamic sizes."
                ) from None

    @staticmethod
    def wait_for_compilations() -> None:
        """Block until the optimized executables of tiered compilation are all compiled and in
        use (see ``tiered_compilation`` in :func:`qjit`); results are then deterministic."""
        wait_for_compilations()

    def __repr__(self) -> str:
        return f"<catalyst_lite.QJIT {self.name}>"


class _ValidatedCall:
    """What a call with already-validated argument types runs: the compiled executable of its
    sizes, called directly. Only what can change between such calls is checked on each one: the
    sizes that integer arguments set, reverse mode, and the executable (tiered compilation swaps
    it); anything else takes the general path, :meth:`TracedProgram.run`."""

    def __init__(
        self, program: TracedProgram, implicit: list[int], leaves: Sequence[Any], axis_lengths: list[int]
    ):
        self.program = program
        self.implicit = implicit
        # The program's facts that read integer arguments, checked on each call (the lengths of
        # abstracted axes are part of the key: facts about them hold for every call that has it).
        self.facts = _ArgumentFacts(program.facts, axis_lengths) if any(
            k >= len(axis_lengths) for k in program.facts.inputs
        ) else None
        self.runner = program.runner
        self.prefix = (*program.closed_jaxpr.consts, *implicit)
        self.fresh_prefix = bool(program.fresh_consts)  # then built anew on every call
        positions = self.runner.dynamic_positions
        # Without constants or sizes among the jaxpr's inputs, the arguments are the executable's.
        self.positions = None if positions == tuple(range(len(self.prefix) + len(leaves))) else positions
        full = (*self.prefix, *leaves)
        # jax.Array arguments keep their dtype whatever the x64 mode, so these calls need no
        # 64-bit scope; a NumPy array or a Python number would be converted by the mode.
        self.needs_x64 = not all(isinstance(full[i], jax.Array) for i in positions)
        # A speculation (a program that needs the host, compiled whole) takes Python ints as
        # static values: they convert to nothing.
        self.speculation_needs_x64 = not all(isinstance(full[i], jax.Array) or type(full[i]) is int for i in positions)
        self.results = _results_function(program)

    def __call__(self, args: tuple) -> Any:
        if not self.speculation_needs_x64:
            prefix = (*self.program.consts(), *self.implicit) if self.fresh_prefix else self.prefix
            full = (*prefix, *args) if prefix else args
            spec = self.runner.compiled(full)
            if spec is not None and (not self.needs_x64 or isinstance(spec, Speculation)):
                return self.results(spec.run(full if self.positions is None else [full[i] for i in self.positions]))
        with x64_scope():
            return self.program.run(self.implicit, args)


class _ArgumentFacts:
    """A program's facts checked on a call's arguments, the axis lengths being known."""

    def __init__(self, facts: SizeFacts, axis_lengths: list[int]):
        self.first_broken = facts.first_broken
        self.axis_lengths = tuple(axis_lengths)

    def hold(self, args: tuple) -> bool:
        return self.first_broken((*self.axis_lengths, *args) if self.axis_lengths else args) < 0


def _results_function(program: TracedProgram) -> Callable[[Sequence[Any]], Any]:
    """``program.results``, or for the most common result, one array, a cheaper equivalent."""
    explicit = [i for i, (_, is_explicit) in enumerate(program.out_type) if is_explicit]
    if len(explicit) == 1 and jax.tree_util.treedef_is_leaf(program.out_tree):
        return operator.itemgetter(explicit[0])
    return program.results


_SCALAR_TYPES = frozenset({int, float, bool, complex})
# Types seen to be concrete arrays (an exact-type lookup is cheaper than the isinstance checks).
_CONCRETE_ARRAY_TYPES: set[type] = set()


def _is_concrete_array_type(kind: type) -> bool:
    if kind in _CONCRETE_ARRAY_TYPES:
        return True
    if issubclass(kind, (jax.Array, np.ndarray)) and not issubclass(kind, Tracer):
        _CONCRETE_ARRAY_TYPES.add(kind)
        return True
    return False


def _call_key(args: tuple) -> tuple | None:
    """What a call's validation depends on, when every argument is a number or a concrete array
    (``None`` otherwise: pytrees and tracers take the checked path every time). Python numbers are
    keyed on their type only: their values never change which program runs."""
    key = []
    for a in args:
        kind = type(a)
        if kind in _SCALAR_TYPES:
            # An int beyond int64 is an error, raised by the checked path.
            key.append(kind if kind is not int or a in _INT64_RANGE else None)
        elif _is_concrete_array_type(kind):
            key.append((kind, a.shape, a.dtype, getattr(a, "weak_type", False)))
        else:
            return None
    return tuple(key)


_INT64_RANGE = range(-(2**63), 2**63)


def _check_int64(fn_name: str, names: Sequence[str], leaves: Sequence[Any]) -> None:
    """A Python int argument must fit in int64 (the type it is passed as), as ``jax.jit`` says."""
    for name, leaf in zip(names, leaves):
        if type(leaf) is int and leaf not in _INT64_RANGE:
            raise ArgumentOverflowError(
                f"{fn_name}: argument {name} = {leaf} does not fit in a 64-bit integer, the type "
                "of integer arguments (and of sizes). Pass a smaller value."
            )


def _size_argument_not_known(fn_name: str, name: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{fn_name}: argument {name} sets an array size, so its value must be known, but an "
        "outer JAX transformation (jax.jit, jax.vmap, ...) traces it. Pass it as a static "
        "argument of that transformation (static_argnums) or keep it out of the transformation."
    )


def _is_int_scalar_spec(spec: LeafSpec) -> bool:
    """A flat argument that can set sizes: a signed integer scalar."""
    return spec.shape == () and jax.dtypes.issubdtype(spec.dtype, np.signedinteger)


def _with_constant_leaves(fn: Callable, constants: dict[int, Any]) -> Callable:
    """``fn`` with some of its flat argument leaves replaced by constants."""

    def with_constants(*args: Any) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(args)
        leaves = [constants.get(j, leaf) for j, leaf in enumerate(leaves)]
        return fn(*jax.tree_util.tree_unflatten(tree, leaves))

    return with_constants


def _is_int_scalar(x: Any) -> bool:
    """A known integer scalar (an argument that may set sizes)."""
    return (
        np.ndim(x) == 0 and np.issubdtype(dtype_of(x), np.integer) and not isinstance(x, bool)
        and is_concrete_value(x)
    )


def qjit(fn: Callable | None = None, **options: Any) -> QJIT | Callable[[Callable], QJIT]:
    """Compile ``fn`` with symbolic sizes; usable bare (``@qjit``) or with options.

    Args:
        fn: the function to compile.
        abstracted_axes: axes whose sizes are symbolic: one ``{axis: name}`` dict applied to every
            argument that has the axis, or one entry per argument (a dict, a tuple of names or
            ``None``). Equal names are one shared dimension.
        static_argnums / static_argnames: arguments that are compile-time values.
        capture: Catalyst's program-capture switch. ``"global"`` (default): as
            ``qml.capture.enabled()`` says when the function is traced; ``True``: trace it through
            PennyLane's program capture (``qml.for_loop``, QNodes, ... become PennyLane's
            primitives, which catalyst_lite then compiles); ``False``: catalyst_lite's own
            frontend. See docs/pennylane.md.
        autograph: convert Python ``if``/``for``/``while`` (and ``and``/``or``/``not``,
            ``x[i] = v``) in ``fn`` and the user functions it calls into ``cond``/``for_loop``/
            ``while_loop`` (see docs/autograph.md). ``autograph_include``: library modules whose
            functions are converted too.
        tiered_compilation: compile each new size fast (XLA optimization level 0) and run it at
            once; when the size runs again, compile it optimized in the background and swap it in
            (``QJIT.wait_for_compilations()`` waits). Off by default: the fast tier may round
            reductions differently from ``jax.jit`` in the last bits. ``None``: the environment
            variable ``CATALYST_LITE_TIERED`` (``1`` turns it on). See docs/architecture.md.
        size_generic: with IREE installed (``pip install 'catalyst-lite[iree]'``), compile the
            program once for every size and run new sizes on that executable while XLA compiles
            the sizes that come back (see docs/architecture.md). ``None`` (the default): on, unless
            the environment variable ``CATALYST_LITE_SIZE_GENERIC`` is ``0``; without IREE, off.

    >>> import jax.numpy as jnp
    >>> @qjit(abstracted_axes={0: "n"})
    ... def total(x):
    ...     return jnp.sum(x * 2.0)
    >>> float(total(jnp.arange(4.0)))
    12.0
    """
    if fn is None:
        return functools.partial(qjit, **options)
    return QJIT(fn, **options)
