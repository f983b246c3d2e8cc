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
import threading
import time
import types
import warnings
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
    QuantumOperationError,
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
from .compiler.compilation import wait_for_compilations
from .capture import capture_switched, check_capture_option, uses_capture
from .compile_options import CompileOptions as QJITOptions, check_seed
from .compiler.assumptions import ProgramFamily, SizeFacts, SizeInputs
from .compiler.boundary import call_from_transformation
from .compiler.executable import Executable, FastCall
from .compiler.inspection import FunctionInfo
from .compiler.lowering import program_to_mlir
from .compiler.options import DEFAULT_CACHE_SIZE, CompileOptions, ExecutableCache
from .compiler.specialize import NeedsHost
from .jax_extras.requirements import BrokenRequirement
from .jax_extras.size_expressions import UnknownSize
from .jax_extras.size_facts import SizeScope
from .reporting import Reporter
from .tracing import dimension_sources, extended_trace, implicit_values, qjit_options, trace_program

__all__ = ["qjit", "QJIT", "CacheInfo"]

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
_COMPILE_OPTION_FIELDS = {f.name for f in dataclasses.fields(QJITOptions)}

# Catalyst's QJIT methods that drive its MLIR/LLVM pipeline stage by stage: no such stages here.
_PIPELINE_STAGES = {
    "compile": "compiles Catalyst's MLIR module to a shared library",
    "generate_ir": "lowers the jaxpr to Catalyst's MLIR dialects",
    "capture": "traces the function for Catalyst's compiler",
    "call_with_wrapper": "calls Catalyst's compiled shared library",
}


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """What a :class:`QJIT` holds (:meth:`QJIT.cache_info`).

    ``programs``: traced programs (for every signature and set of size facts); ``executables``:
    compiled XLA executables, one per program and size signature (nested bodies' included);
    ``sizes``: the size signature of each, least recently used first; ``maxsize``: the bound
    (``None``: none).
    """

    programs: int
    executables: int
    sizes: tuple
    maxsize: int | None


class QJIT:
    """A function compiled by :func:`qjit`. Call it like the original function.

    ``QJIT(fn, **options)`` (what ``qjit`` does) or, as in Catalyst,
    ``QJIT(fn, CompileOptions(...))``.

    Attributes:
        jaxpr: the traced ``ClosedJaxpr`` of the last signature (``None`` before the first trace).
        mlir: StableHLO of :attr:`jaxpr`, symbolic sizes as ``?`` dimensions.
        compile_options: the options, a :class:`~catalyst_lite.CompileOptions` record.
        original_function, user_function: the decorated function; the function traced (with
            ``autograph=True``, the converted one).

    Catalyst's other attributes and methods (``jit_compile``, ``aot_compile``, ``mlir_opt``...)
    are described in docs/catalyst-compatibility.md.
    """

    def __init__(
        self,
        fn: Callable,
        compile_options: QJITOptions | None = None,
        *,
        abstracted_axes: Any = None,
        static_argnums: Sequence[int] | int | None = None,
        static_argnames: Sequence[str] | str | None = None,
        autograph: bool = False,
        autograph_include: Sequence[str] = (),
        tiered_compilation: bool | None = None,
        capture: bool | str = "global",
        size_generic: bool | None = None,
        cache_size: int | None = DEFAULT_CACHE_SIZE,
        **options: Any,
    ):
        if compile_options is not None:
            # Catalyst's constructor, QJIT(fn, CompileOptions(...)): the record's options.
            self.__init__(fn, **_keyword_options(compile_options))
            return
        unknown = set(options) - _ACCEPTED_OPTIONS
        if unknown:
            raise TypeError(f"qjit got unexpected option(s) {sorted(unknown)}.")
        functools.update_wrapper(self, fn)
        if not hasattr(fn, "__name__"):
            self.__name__ = "unknown"  # a functools.partial, a callable object: as Catalyst names it
        self.original_function = fn
        self.name = function_name(fn)
        check_seed(options.get("seed"), self.name)
        if autograph_include and not autograph:
            raise CompileError(
                f"qjit(autograph_include={list(autograph_include)!r}) of {self.name}: "
                "autograph_include names modules for autograph to convert; pass autograph=True too."
            )
        # What is traced: with autograph, fn with its Python control flow converted (Catalyst's
        # name for it).
        self.user_function = run_autograph(fn, *autograph_include) if autograph else fn
        check_capture_option(capture, self.name)
        if capture != "global" and capture:
            with capture_switched(True, self.name):  # PennyLane may refuse: say so at once
                pass
        self._capture = capture
        self.options = dict(options, abstracted_axes=abstracted_axes)
        self.binding = CallBinding(fn, static_argnums, static_argnames)
        # Every option, as Catalyst's QJIT.compile_options holds them (static_argnums: every
        # static position, those that static_argnames names too).
        self.compile_options = QJITOptions(
            **{k: v for k, v in options.items() if k in _COMPILE_OPTION_FIELDS},
            autograph=autograph, autograph_include=autograph_include, capture=capture,
            abstracted_axes=abstracted_axes, static_argnames=static_argnames,
            static_argnums=self.binding.static_argnums,
        )
        # The parameters' annotations as objects (strings evaluated once, here).
        self._annotations = {
            name: resolved_annotation(p.annotation, fn) for name, p in self.binding.parameters.items()
        }
        self.layout = ArgumentLayout(self.name, abstracted_axes)
        if cache_size is not None and (type(cache_size) is not int or cache_size < 1):
            raise ArgumentValueError(f"{self.name}: cache_size must be a positive int or None, got {cache_size!r}.")
        self._report = Reporter(self.name, options.get("verbose", False), options.get("logfile"))
        self._executable_options = CompileOptions(
            {}, ExecutableCache(cache_size), self._report, size_generic
        )
        # The programs traced for each signature, each valid for the sizes where its facts hold.
        self._programs: dict[Hashable, ProgramFamily] = {}
        # Calls already validated, by _call_key: what their repeats run (see __call__).
        self._validated_calls: dict[tuple, _RepeatedCall] = {}
        self._last: Executable | None = None
        # Guards the creation of program families (each family holds a lock while it traces, so
        # that two threads calling with the same new signature or sizes trace it once).
        self._lock = threading.Lock()
        self._annotated = None if inside_program_trace() else self._annotation_call()
        if self._annotated is not None:
            self._trace_generic(self._annotated)

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

    def _program_for(self, call: CallArguments) -> tuple[Executable, list[Any], list[str], list[int], list[int]]:
        """The program for this call (traced if no program of its signature holds for its
        sizes, see :mod:`.compiler.assumptions`), its flat arguments, their names, the call's
        size inputs' leading part (the lengths of its abstracted axes), and the sizes the
        program's implicit inputs take for the call."""
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
        return program, leaves, names, axis_lengths, program.program.implicit_args(leaves, names, self.name)

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
    ) -> Executable:
        """Trace the function for this call's signature in ``scope``; with ``static`` (values of
        the size inputs, ``None`` for the others), with those sizes as constants: the abstracted
        axes static and the integer arguments Python numbers, as ``jax.jit`` sees them."""
        fn = self.binding.of_dynamic_arguments(self.user_function, call)
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

    def _trace(self, fn: Callable, tree, specs, axes, names, scope: SizeScope | None = None) -> Executable:
        """Trace ``fn`` into a program, made callable with this function's compile options."""
        if uses_capture(self._capture):
            # Imported here: it imports PennyLane, which only programs that use it pay for.
            from .capture.program import captured_program

            fn = captured_program(fn, self.name)
        # PennyLane's capture is off while catalyst_lite traces (captured_program switches it on
        # while PennyLane captures); extensions (QNodes compile into the program) contribute to
        # it; debug_assert reads disable_assertions.
        start = time.perf_counter()
        with capture_switched(False, self.name), qjit_options(self.options), \
                extended_trace(self.options) as contribution:
            program = trace_program(fn, tree, specs, axes, self.name, names, scope, contribution)
        if self._report.enabled:
            self._report("traced for %s in %.3f s", _signature_text(specs, axes), time.perf_counter() - start)
        return Executable(program, self._executable_options)

    def _conformed(self, call: CallArguments) -> CallArguments:
        """With type annotations, the call's values converted to them where Catalyst converts
        (see :func:`.annotations.as_annotated`). Values that do not fit the annotations are traced
        for their own types with a ``UserWarning``, as Catalyst recompiles for them."""
        if self._annotated is None:
            return call
        out = []
        for (tag, ident), name, a in zip(call.keys, call.names, call.values):
            if tag == "":
                try:
                    a = as_annotated(self.name, name, self._annotations[ident], a)
                except ArgumentTypeError as mismatch:
                    warnings.warn(
                        f"Provided arguments did not match declared signature, recompiling... ({mismatch})",
                        UserWarning, stacklevel=4,
                    )
                    return call
            out.append(a)
        return dataclasses.replace(call, values=tuple(out))

    # --- calling -----------------------------------------------------------------------------

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """``@qjit`` on a method: ``obj.method(x)`` calls it with ``obj`` first (pass
        ``static_argnums=0`` to make ``self`` a compile-time value, as with ``jax.jit``)."""
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if is_tracing():
            # Called while a program is being traced (recursion, or a qjit function calling
            # another): inlined into that program, as Catalyst does, with its symbolic sizes.
            return self.user_function(*args, **kwargs)
        # Fast path: arguments of the types, shapes and dtypes of a call already validated need
        # none of the work below (binding, flattening, checks, implicit sizes): the key settles it.
        key = None if kwargs else _call_key(args)
        validated = self._validated_calls.get(key) if key is not None else None
        if validated is not None and (validated.facts is None or validated.facts.hold(args)):
            self._last = validated.fast.executable
            try:
                return validated.fast(args)
            except (CompileError, UnsupportedOperationError):
                pass  # rare (a negative size): the checked call raises it naming the arguments
            except jax.errors.JaxRuntimeError as err:
                raise_from_callback(err)  # a callback failed: its own exception
        return self._call_checked(key, args, kwargs)

    def _call_checked(self, key: tuple | None, args: tuple, kwargs: dict) -> Any:
        """A call with every check; remembered for the fast path when ``key`` settles them."""
        call = self._conformed(self.binding.bind(args, kwargs))
        executable, leaves, names, axis_lengths, implicit = self._program_for(call)
        self._check_size_arguments_known(executable, implicit, leaves, names)
        if any(isinstance(x, Tracer) for x in leaves):
            # Inside jax.grad/jvp/vmap/jit: adapt to the caller's types (see compiler.boundary).
            with self._naming_size_arguments(executable, implicit, leaves, names):
                return call_from_transformation(lambda *xs: executable.run(implicit, xs), leaves)
        if key is not None and not any(call.is_static) and len(call.values) == len(args) and all(
            v is a for v, a in zip(call.values, args)
        ):
            # Each argument is one leaf, passed unconverted: a call with the same key is the same
            # call.
            self._validated_calls[key] = _RepeatedCall(executable, implicit, leaves, axis_lengths)
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            return executable.run(implicit, leaves)

    def _check_size_arguments_known(self, executable, implicit, leaves, names) -> None:
        """Under an outer ``jax.jit``/``jax.vmap``/``jax.grad`` arrays may be tracers (their
        shapes are known), but an integer argument that sets a size must have a known value."""
        for k in executable.size_leaves(implicit):
            if not is_concrete_value(leaves[k]):
                raise _size_argument_not_known(self.name, names[k])

    @contextlib.contextmanager
    def _naming_size_arguments(self, executable, implicit, leaves, names):
        """Re-raise a specialization error (a negative size) naming the arguments sizes come from,
        and an unsupported operation naming this function."""
        try:
            yield
        except (DifferentiableCompileError, QuantumOperationError):
            raise  # about the function, not about sizes
        except CompileError as e:
            sizes = [f"{n}={int(x)}" for n, x in zip(names, leaves) if _is_int_scalar(x)]
            sizes += [f"axis {a!r}={v}" for a, v in zip(executable.program.axis_names, implicit)]
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

    def _traced_programs(self) -> list[Executable]:
        """Every program traced so far (for every signature, each with the facts it holds for)."""
        return [
            program
            for family in list(self._programs.values())
            for program in [*family.programs, *family.static_programs.values()]
        ]

    def inspect(self) -> FunctionInfo:
        """What this function holds: every traced program with its size facts, how each size
        signature runs (one XLA executable, or host-driven), its speculations and compiled loops
        (see :mod:`catalyst_lite.compiler.inspection`).

        >>> import jax.numpy as jnp
        >>> f = qjit(lambda x: jnp.sum(x), abstracted_axes={0: "n"})
        >>> _ = f(jnp.ones(3))
        >>> info = f.inspect()
        >>> len(info.programs), dict(info.last.strategies), info.validated_calls
        (1, {((3,), False): 'xla'}, 1)
        """
        last = self._last
        programs = self._traced_programs()
        described = {id(p): p.describe() for p in programs}
        if last is not None and id(last) not in described:
            described[id(last)] = last.describe()
        return FunctionInfo(tuple(described[id(p)] for p in programs),
                            None if last is None else described[id(last)], len(self._validated_calls))

    # --- Catalyst's compilation API -------------------------------------------------------------

    workspace = None
    """Catalyst's directory of intermediate files: catalyst_lite writes none (``None``)."""

    llvmir = None
    """Catalyst's LLVM IR: XLA generates machine code without exposing one (``None``)."""

    def jit_compile(self, args: Sequence[Any], **kwargs: Any) -> bool:
        """Trace and compile the program for these arguments without running it (Catalyst's
        ``jit_compile``): the next call with their types and sizes runs at once. Returns
        ``False``: no argument needs converting to a compiled signature (each new signature is
        traced for its own types)."""
        call = self._conformed(self.binding.bind(tuple(args), kwargs))
        executable, leaves, names, _, implicit = self._program_for(call)
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            executable.prepare(implicit, leaves)
        return False

    def aot_compile(self) -> None:
        """Trace the program of the parameters' type annotations now (Catalyst's ``aot_compile``;
        ``@qjit`` already does so when every parameter is annotated with a type)."""
        if self._annotated is None:
            raise ArgumentTypeError(
                f"{self.name}.aot_compile(): compiling ahead of time needs every parameter "
                "annotated with a type (int, float, jax.ShapeDtypeStruct((3,), jnp.float64), ...) "
                "and no static arguments."
            )
        self._trace_generic(self._annotated)

    def pre_compilation(self) -> Callable:
        """The function that is traced: :attr:`user_function` (with ``autograph=True``, the
        converted function)."""
        return self.user_function

    def run(self, args: Sequence[Any], kwargs: dict) -> Any:
        """Run the function on ``args`` and ``kwargs`` (as calling it does)."""
        return self(*args, **kwargs)

    @property
    def mlir_opt(self) -> str | None:
        """Catalyst's MLIR after its optimization passes. XLA optimizes inside its compiler, so
        this is :attr:`mlir` (``specialized_mlir(...)`` shows what XLA compiles for given
        arguments)."""
        return self.mlir

    @property
    def out_treedef(self):
        """The pytree structure of the results (of the most recent signature)."""
        return None if self._last is None else self._last.program.out_tree

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes QJIT does not have: Catalyst's pipeline stages explain why.
        if name in _PIPELINE_STAGES:
            def unsupported(*_args: Any, **_kwargs: Any) -> Any:
                raise UnsupportedOperationError(
                    f"{self.name}.{name}(): in Catalyst it {_PIPELINE_STAGES[name]}; catalyst_lite "
                    "traces on the first call (or from type annotations) and compiles with XLA per "
                    "size signature. Use jit_compile(args) to compile ahead of a call, and .jaxpr, "
                    ".mlir or specialized_mlir(...) to inspect the program."
                )
            unsupported.__name__ = name
            return unsupported
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def jaxpr(self):
        """The traced ``ClosedJaxpr`` (of the most recent signature)."""
        return None if self._last is None else self._last.program.closed_jaxpr

    @property
    def mlir(self) -> str | None:
        """StableHLO text of the traced program; symbolic sizes are ``?`` dimensions."""
        if self._last is None:
            return None
        return program_to_mlir(self._last.program, self.name)

    def specialized_mlir(self, *args: Any, **kwargs: Any) -> str:
        """StableHLO that XLA compiles for these concrete arguments (all sizes static)."""
        executable, leaves, names, _, implicit = self._program_for(self.binding.bind(args, kwargs))
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            try:
                return executable.lower(implicit, leaves).as_text()
            except NeedsHost:
                raise UnsupportedOperationError(
                    f"{self.name}: no single StableHLO program computes these arguments: a size "
                    "is only known while the program runs (a loop resizes an array, or a cond's "
                    "branches return different sizes), so the program runs host-driven, each "
                    "loop body compiled for the sizes it meets. .mlir shows the whole program "
                    "with dynamic sizes."
                ) from None

    # --- the cache ---------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """What this function holds: traced programs, compiled executables and their sizes.

        >>> import jax.numpy as jnp
        >>> f = qjit(lambda x: x * 2.0, abstracted_axes={0: "n"})
        >>> _ = f(jnp.ones(3)), f(jnp.ones(4))
        >>> info = f.cache_info()
        >>> info.programs, info.executables
        (1, 2)
        """
        cache = self._executable_options.cache
        sizes = tuple(sizes for sizes, _reverse in cache.keys())
        return CacheInfo(len(self._traced_programs()), len(sizes), sizes, cache.maxsize)

    def clear_cache(self) -> None:
        """Drop every traced program and compiled executable (as ``jax.jit``'s ``clear_cache``):
        the next call traces and compiles again."""
        with self._lock:
            self._programs = {}
            self._validated_calls = {}
            self._last = None
            self._executable_options.cache.clear()

    @staticmethod
    def wait_for_compilations() -> None:
        """Block until the background compilations (the size-generic tier's, and XLA's of the
        sizes that come back) are done and in use; results are then deterministic."""
        wait_for_compilations()

    def __repr__(self) -> str:
        return f"<catalyst_lite.QJIT {self.name}>"


class _RepeatedCall:
    """What a call with already-validated argument types runs (:class:`FastCall`), and the
    program's facts that read integer arguments, checked on each call (the lengths of abstracted
    axes are part of the key: facts about them hold for every call that has it)."""

    def __init__(self, executable: Executable, implicit: list[int], leaves: Sequence[Any], axis_lengths: list[int]):
        self.fast = FastCall(executable, implicit, leaves)
        facts = executable.facts
        self.facts = _ArgumentFacts(facts, axis_lengths) if any(k >= len(axis_lengths) for k in facts.inputs) else None


class _ArgumentFacts:
    """A program's facts checked on a call's arguments, the axis lengths being known."""

    def __init__(self, facts: SizeFacts, axis_lengths: list[int]):
        self.first_broken = facts.first_broken
        self.axis_lengths = tuple(axis_lengths)

    def hold(self, args: tuple) -> bool:
        return self.first_broken((*self.axis_lengths, *args) if self.axis_lengths else args) < 0


def _signature_text(specs: Sequence[LeafSpec], axes: Sequence[dict]) -> str:
    """The argument types of a trace, symbolic axes by name: ``(f64[n], i64[])``."""
    types = []
    for spec, spec_axes in zip(specs, axes):
        dims = ",".join(str(spec_axes.get(i, d)) for i, d in enumerate(spec.shape))
        types.append(f"{getattr(spec.dtype, 'name', spec.dtype)}[{dims}]")  # a PRNG key's dtype is not NumPy's
    return f"({', '.join(types)})"


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


def _keyword_options(record: QJITOptions) -> dict[str, Any]:
    """``qjit``'s keyword options from a ``CompileOptions`` record (its fields that only
    Catalyst's compiler driver reads, ``link``, ``lower_to_llvm``, ``checkpoint_stage``, left
    out)."""
    if not isinstance(record, QJITOptions):
        raise ArgumentTypeError(
            f"QJIT(fn, compile_options): compile_options must be a catalyst_lite.CompileOptions, got "
            f"{type(record).__name__}; or pass the options as keywords to qjit."
        )
    internal = {"link", "lower_to_llvm", "checkpoint_stage"}
    options = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in internal}
    options["static_argnums"] = options["static_argnums"] or None
    return options


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
        cache_size: how many compiled executables (one per program and size signature) the
            function keeps; beyond it the least recently used is dropped (its sizes compile
            again if they come back). ``None``: no bound. See :meth:`QJIT.cache_info` and
            :meth:`QJIT.clear_cache`.
        verbose: report what each call does (trace, new specialization, XLA compile time, cache
            hit) on ``logfile`` (``sys.stderr`` by default), as Catalyst's option does. The same
            reports go to the ``catalyst_lite`` logger of Python's ``logging`` at level ``DEBUG``.
        tiered_compilation: accepted and ignored (tiered compilation was removed: it saved less
            than half the compile time of new sizes, see docs/architecture.md).
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
