"""``@qjit``: trace a function once with symbolic sizes, run it anywhere XLA runs. Ahead-of-time
stages as in ``jax.stages``: ``f.trace(*args)`` (:class:`Traced`, sizes symbolic), ``f.lower(*args)``
(:class:`Lowered`, StableHLO at the arguments' sizes), ``.compile()`` (:class:`Compiled`, which runs
calls of those types and sizes only).

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> g = qjit(lambda x: jnp.sum(x ** 2), abstracted_axes={0: "n"})
>>> x = jnp.arange(3.0)
>>> "f64[a]" in str(g.trace(x).jaxpr)            # traced once, the size symbolic
True
>>> "tensor<3xf64>" in g.lower(x).as_text()      # specialized at size 3
True
>>> float(g.lower(x).compile()(x))
5.0
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Hashable, Sequence, TextIO

import jax
import numpy as np

from .errors import (
    ArgumentOverflowError, ArgumentTypeError, ArgumentValueError, CompileError, DifferentiableCompileError,
    IncompatibleSizesError, QuantumOperationError, SizeAssumptionError, UnsupportedOperationError,
    function_name,
)
from .jax_extras import Tracer, inside_program_trace, is_tracing, x64_scope
from .jax_extras.frames import user_line
from .jax_extras.autodiff import is_concrete_value
from .jax_extras.executables import dispatcher, flat_arguments, forget_dispatch_data, wait_for_effects
from .signature import (
    ArgumentLayout, CallArguments, CallBinding, LeafSpec, as_annotated, dtype_of, example_of,
    is_type_annotation, promoted_leaves, qjit_annotation,
)
from .autograph import run_autograph
from .callbacks import callback_exception, running_program
from .compiler.compilation import wait_for_compilations
from .trace_context import capture_switched, check_capture_option, thread_collector, uses_capture
from .compile_options import JIT_OPTIONS, CompileOptions as QJITOptions, JitOptions, check_seed
from .compiler.assumptions import ProgramFamily, SignatureTrace, SizeInputs
from .compiler.executable import Executable, FastCall, call_from_transformation, register_function_compiler
from .compiler.inspection import FunctionInfo
from .compiler.lowering import Workspace, program_to_mlir
from .compiler.options import DEFAULT_CACHE_SIZE, ExecutableCache, RunnerOptions
from .compiler.specialize import NeedsHost, is_size_type
from .jax_extras.requirements import BrokenRequirement
from .jax_extras.size_expressions import UnknownSize
from .reporting import Reporter
from .diagnostics import api_boundary, filtered
from .tracing import dimension_sources, implicit_values

__all__ = ["qjit", "QJIT", "CacheInfo", "Traced", "Lowered", "Compiled"]

# Catalyst's options (most change nothing here), jax.jit's (compile_options.py) and state_sharding.
_ACCEPTED_OPTIONS = {
    "target", "keep_intermediate", "verbose", "logfile", "pipelines", "async_qnodes", "disable_assertions",
    "seed", "experimental_capture", "circuit_transform_pipeline", "pass_plugins", "dialect_plugins",
    "skip_preprocess", "use_nameloc", *JIT_OPTIONS, "state_sharding",
}
# Options that are switches: a string such as 'no' would otherwise be taken as true.
_BOOL_OPTIONS = ("autograph", "async_qnodes", "use_nameloc", "verbose", "disable_assertions", "skip_preprocess",
                 "keep_unused", "tiered_compilation", "size_generic")
_MAY_BE_NONE = ("tiered_compilation", "size_generic")
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
    """What a :class:`QJIT` holds (:meth:`QJIT.cache_info`): traced ``programs``, compiled
    ``executables`` (one per program and size signature), the ``sizes`` of each (least recently
    used first; calls the C++ dispatcher runs alone do not count as uses), and ``maxsize``."""

    programs: int
    executables: int
    sizes: tuple
    maxsize: int | None


@dataclasses.dataclass(frozen=True, eq=False)
class Traced:
    """The traced program of one argument signature (``jax.stages.Traced``): its ``jaxpr``, with
    symbolic sizes, and ``lower()`` at the traced arguments' sizes."""

    jaxpr: Any
    fun_name: str
    lower: Callable[[], "Lowered"]


class Lowered:
    """The program specialized at one call's sizes, in StableHLO (``jax.stages.Lowered``)."""

    def __init__(self, lowered: Any, arguments: Callable[[tuple, dict], list], results: Callable):
        self._lowered = lowered
        self._arguments = arguments  # a call's flat arguments, or TypeError if not of these sizes
        self._results = results

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lowered, name)

    def compile(self, compiler_options: dict[str, Any] | None = None) -> "Compiled":
        return Compiled(self._lowered.compile(compiler_options), self._arguments, self._results)


class Compiled(Lowered):
    """The XLA executable of a :class:`Lowered` (``jax.stages.Compiled``), callable with
    arguments of the types and sizes it was lowered for."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._arguments(args, kwargs)
        with x64_scope():
            return self._results(self._lowered(*flat))


@register_function_compiler
class QJIT:
    """A function compiled by :func:`qjit` (``QJIT(fn, **options)``, or Catalyst's
    ``QJIT(fn, CompileOptions(...))``). Call it like the original function. Catalyst's attributes
    and methods are described in docs/catalyst-compatibility.md.

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import QJIT
    >>> f = QJIT(lambda x: jnp.cumsum(x), abstracted_axes={0: "n"})
    >>> f(jnp.arange(4)).tolist()
    [0, 1, 3, 6]
    >>> "i64[a]" in str(f.jaxpr)
    True
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
        if compile_options is not None:  # Catalyst's QJIT(fn, CompileOptions(...))
            if not isinstance(compile_options, QJITOptions):
                raise ArgumentTypeError(
                    f"QJIT(fn, compile_options): compile_options must be a catalyst_lite.CompileOptions, got "
                    f"{type(compile_options).__name__}; or pass the options as keywords to qjit."
                )
            fields = {f.name: getattr(compile_options, f.name) for f in dataclasses.fields(QJITOptions)
                      if f.name not in ("link", "lower_to_llvm", "checkpoint_stage")}  # the compiler driver's
            self.__init__(fn, **{**fields, "static_argnums": fields["static_argnums"] or None})
            return
        if not callable(fn):
            raise ArgumentTypeError(
                f"qjit({fn!r}): qjit compiles a function, got {type(fn).__name__}. Decorate a "
                "function with @qjit, or pass options by keyword: @qjit(abstracted_axes=...)."
            )
        unknown = set(options) - _ACCEPTED_OPTIONS
        if unknown:
            raise TypeError(f"qjit got unexpected option(s) {sorted(unknown)}.")
        switches = dict(options, autograph=autograph, tiered_compilation=tiered_compilation, size_generic=size_generic)
        for name in _BOOL_OPTIONS:
            value = switches.get(name, False)
            if type(value) is not bool and not (value is None and name in _MAY_BE_NONE):
                raise ArgumentTypeError(
                    f"qjit({name}={value!r}) of {function_name(fn)}: {name} must be True or False"
                    f"{' (or None)' if name in _MAY_BE_NONE else ''}, got {type(value).__name__}."
                )
        functools.update_wrapper(self, fn)
        if not hasattr(fn, "__name__"):
            self.__name__ = "unknown"  # a functools.partial, a callable object: as Catalyst names it
        self.original_function = fn
        self.name = function_name(fn)
        check_seed(options.get("seed"), self.name)
        if autograph_include and not autograph:
            raise CompileError(
                "In order for 'autograph_include' to work, 'autograph' must be set to True: "
                f"qjit(autograph_include={list(autograph_include)!r}) of {self.name} names modules "
                "for autograph to convert; pass autograph=True too."
            )
        self.user_function = run_autograph(fn, *autograph_include) if autograph else fn
        check_capture_option(capture, self.name)
        if capture != "global" and capture:
            with capture_switched(True, self.name):  # PennyLane may refuse: say so at once
                pass
        self._capture = capture
        self.options = dict(options, abstracted_axes=abstracted_axes)
        self.binding = CallBinding(fn, static_argnums, static_argnames)
        # As Catalyst's QJIT.compile_options (static_argnums: those static_argnames names too).
        self.compile_options = QJITOptions(
            **{k: v for k, v in options.items() if k in _COMPILE_OPTION_FIELDS},
            autograph=autograph, autograph_include=autograph_include, capture=capture,
            abstracted_axes=abstracted_axes, static_argnames=static_argnames,
            static_argnums=self.binding.static_argnums,
        )
        self._annotations = {
            name: qjit_annotation(p.annotation, fn) for name, p in self.binding.parameters.items()
        }
        self.layout = ArgumentLayout(self.name, abstracted_axes)
        if cache_size is not None and (type(cache_size) is not int or cache_size < 1):
            raise ArgumentValueError(f"{self.name}: cache_size must be a positive int or None, got {cache_size!r}.")
        self._report = Reporter(self.name, options.get("verbose", False), options.get("logfile"))
        self._jit = JitOptions.of(options, self.binding.positional, self.name)
        self._placing = self._jit.in_shardings is not None or self._jit.out_shardings is not None
        if self._jit.needs_xla and size_generic is not False:
            size_generic = False
            self._report("size-generic tier off: donated or sharded calls are compiled by XLA for each size")
        self._dispatch = dispatcher(self.name, *_python_calls(weakref.ref(self)))
        self._dispatchers = [self._dispatch]  # evictions forget the data of all of them
        # Calls' Python ints' positions, their number of arguments and dispatcher (_make_static_dispatch).
        self._static_dispatch: tuple[tuple[int, ...], int, Callable[..., Any]] | None = None
        self._executable_options = RunnerOptions(
            self._jit.xla,
            ExecutableCache(cache_size, functools.partial(_forget_dispatch_data, self._dispatchers)), self._report,
            size_generic, self._jit.jit,
        )
        self._forget_programs()
        self._workspaces: weakref.WeakKeyDictionary[Executable, Workspace] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # guards the creation of program families
        self._annotated = None if inside_program_trace() else self._annotation_call()
        if self._annotated is not None:
            try:
                self._trace_generic(self._annotated)
            except Exception as error:
                raise filtered(error)  # noqa: B904 (the user's frames first, as for a call)

    def _forget_programs(self) -> None:
        # Programs by signature; families by (names, structure, static values), for _promoted;
        # validated calls by _call_key; whether every call only ran in Python (None: no call yet).
        self._programs: dict[Hashable, ProgramFamily] = {}
        self._promotable: dict[Hashable, list[tuple[tuple, ProgramFamily]]] = {}
        self._validated_calls: dict[tuple, FastCall] = {}
        self._last: Executable | None = None
        self._python_only: bool | None = None

    # --- tracing -----------------------------------------------------------------------------

    def _trace_generic(self, call: CallArguments) -> None:
        _, family, trace, *_ = self._signature_of(call)
        self._last = family.generic(trace)
        self._keep_intermediate(self._last)

    def _signature_of(self, call: CallArguments, mismatch: Exception | None = None
                      ) -> tuple[CallArguments, ProgramFamily, SignatureTrace, list, list, list[str]]:
        """The call (promoted), its programs, how it is traced, its flat arguments, axes and names."""
        tree, specs, leaves, axes, names = self.layout.leaf_specs(call)
        for name, leaf in zip(names, leaves):  # (before promotion makes a float of it) as jax.jit says
            if type(leaf) is int and leaf not in _INT64_RANGE:
                raise ArgumentOverflowError(
                    f"{self.name}: argument {name} = {leaf} does not fit in a 64-bit integer, the type "
                    "of integer arguments (and of sizes). Pass a smaller value."
                )
        key = (call.dynamic_keys, tree, tuple(specs), call.static)
        family = self._programs.get(key)
        if not _has_program(family):
            promoted = self._promoted(key, leaves)
            if promoted is not None:
                family, specs, leaves = promoted
                call = call.with_dynamic(jax.tree_util.tree_unflatten(tree, leaves))
            elif mismatch is not None:
                message = f"Provided arguments did not match declared signature, recompiling... ({mismatch})"
                where = user_line()  # the user's call, however deep the call path into here
                if where is None:
                    warnings.warn(message, UserWarning, stacklevel=2)
                else:
                    warnings.warn_explicit(message, UserWarning, where.filename, where.lineno)
        trace = self._signature_trace(call, tree, specs, axes, names)
        family = family if family is not None else self._family_for(key, axes, names, specs)
        return call, family, trace, leaves, axes, names

    def _promoted(self, key: tuple, leaves: list[Any]) -> tuple[ProgramFamily, list[LeafSpec], list[Any]] | None:
        """Catalyst's promotion to the latest signature the leaves promote to (not for tracers)."""
        if any(isinstance(x, Tracer) for x in leaves):
            return None
        dynamic_keys, tree, specs, static = key
        for other, family in reversed(self._promotable.get((dynamic_keys, tree, static), ())):
            if _has_program(family):
                converted = promoted_leaves(leaves, specs, other[2])
                if converted is not None:
                    return family, list(other[2]), converted
        return None

    def _annotation_call(self) -> CallArguments | None:
        """Arguments standing for the annotations if every parameter has a type (traced ahead)."""
        binding = self.binding
        static = binding.static_names or binding.static_varargs
        if binding.signature is None or static or binding.static_argnums_error:
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

    def _program_for(self, call: CallArguments) -> tuple[CallArguments, Executable, list[Any], list[str], list[int], list[int]]:
        """The call as run, its program, flat arguments, their names, axis lengths, implicit values."""
        call, family, trace, leaves, axes, names = self._signature_of(*self._conformed(call))
        # Unequal lengths of a shared axis would otherwise surface as a JAX error from tracing.
        axis_lengths = implicit_values(*dimension_sources(axes), leaves, names, self.name)
        # A size argument traced by an outer transformation has no value to check facts with.
        values = [*axis_lengths, *(None if isinstance(x, Tracer) and not is_concrete_value(x) else x for x in leaves)]
        try:
            program = family.program_for(values, trace, lock=not inside_program_trace())
        except UnknownSize as unknown:
            raise _size_argument_not_known(self.name, names[unknown.position - len(axis_lengths)]) from None
        self._last = program
        self._keep_intermediate(program)
        traced = program.program
        implicit = implicit_values(traced.axis_names, traced.dim_sources, leaves, names, self.name)
        return call, program, leaves, names, axis_lengths, implicit

    def _signature_trace(self, call: CallArguments, tree, specs, axes, names) -> SignatureTrace:
        """How this call's signature is traced (through PennyLane's capture if ``capture`` says so)."""
        capture, fn = None, self.user_function
        if uses_capture(self._capture):
            from .capture.program import captured_program, with_static_arguments  # imports PennyLane

            capture, fn = captured_program, with_static_arguments(fn) if call.static else fn
        donated = self._jit.donated_leaves(call.dynamic_keys, call.dynamic) if self._jit.donated else frozenset()
        return SignatureTrace(
            self.binding.of_dynamic_arguments(fn, call), call.dynamic, tree, specs, axes, names,
            self.name, self.options, self._executable_options, capture, donated,
        )

    def _family_for(self, key: tuple, axes, names, specs) -> ProgramFamily:
        family = self._programs.get(key)
        if family is None:
            sizing = [is_size_type(s.shape, s.dtype) for s in specs]  # the arguments that can set sizes
            inputs = SizeInputs.of(*dimension_sources(axes), names, sizing)
            with self._lock:
                family = self._programs.get(key)
                if family is None:
                    family = self._programs[key] = ProgramFamily(inputs, self.name)
                    self._promotable.setdefault((key[0], key[1], key[3]), []).append((key, family))
                    self._forget_oldest_family()
        return family

    def _forget_oldest_family(self) -> None:
        """Beyond ``cache_size`` signatures, the oldest one's programs go (its executables age out of
        the executable cache), as ``jax.jit`` bounds its traces: a function called with many shapes
        does not keep every program it ever traced."""
        limit = self._executable_options.cache.maxsize
        if limit is None or len(self._programs) <= limit:
            return
        key = next(iter(self._programs))
        family = self._programs.pop(key)
        promotable = self._promotable[key[0], key[1], key[3]]
        promotable[:] = [entry for entry in promotable if entry[1] is not family]

    def _conformed(self, call: CallArguments) -> tuple[CallArguments, ArgumentTypeError | None]:
        """The call converted to the type annotations, and why it does not fit them (or ``None``)."""
        if self._annotated is None:
            return call, None
        out = []
        for (tag, ident), name, a in zip(call.keys, call.names, call.values):
            if tag == "":
                try:
                    a = as_annotated(self.name, name, self._annotations[ident], a)
                except ArgumentTypeError as mismatch:
                    return call, mismatch
            out.append(a)
        return dataclasses.replace(call, values=tuple(out)), None

    # --- calling -----------------------------------------------------------------------------

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """``@qjit`` on a method binds ``obj`` first (not under a ``@staticmethod``)."""
        try:
            unwrapped = inspect.unwrap(self.original_function, stop=lambda f: isinstance(f, staticmethod))
        except ValueError:  # a cycle of __wrapped__
            unwrapped = None
        if instance is None or isinstance(unwrapped, staticmethod):
            return self
        return types.MethodType(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._placing:  # in_shardings/out_shardings: placed around the checked call
                with running_program():
                    result = self._call_checked(None, self._jit.place_arguments(args), kwargs)[0]
                    wait_for_effects()
                return self._jit.place_results(result)
            static = self._static_dispatch
            if static is not None and not kwargs and len(args) == static[1] and all(
                type(args[k]) is int for k in static[0]
            ):
                return static[2](*args)
            if self._python_only:
                result, data, _ = self._python_call(args, kwargs)
                if data is not None:  # the dispatcher can run this call by itself: use it
                    self._python_only = False
                return result
            # jax.jit's C++ dispatcher runs calls it has data for; the others take _python_call.
            return self._dispatch(*args, **kwargs)
        except Exception as error:  # a callback's failure as its own exception, user's frames first
            raise filtered(callback_exception(error))  # noqa: B904

    def _python_call(self, args: tuple, kwargs: dict, static: tuple[int, ...] | None = None) -> tuple[Any, Any, bool]:
        """A call the dispatcher cannot run: its result, dispatch data, whether to come back."""
        if is_tracing():  # inside another trace: inlined into it, as Catalyst does
            return self.user_function(*args, **kwargs), None, True
        # Only this path runs programs with callbacks: one failing on an XLA thread finds this call.
        with running_program():
            # A call of the argument types of one already validated skips the checked path.
            key = None if kwargs else _call_key(args)
            validated = self._validated_calls.get(key)  # (None is never a key)
            if validated is not None and (validated.facts_hold is None or validated.facts_hold(args)):
                self._last = validated.executable
                try:
                    result = validated(args)
                except (CompileError, UnsupportedOperationError):
                    pass  # rare (a negative size): the checked call raises it naming the arguments
                else:
                    wait_for_effects()
                    return result, *self._dispatch_data(validated, args, args, result, static)
            called = self._call_checked(key, args, kwargs, static)
            wait_for_effects()  # callbacks' errors raise here, not in a later program
            return called

    def _dispatch_data(self, repeated: FastCall, args: tuple, leaves: Sequence[Any], result: Any,
                       static: tuple[int, ...] | None = None) -> tuple[Any, bool]:
        """The dispatch data of a call whose leaves are its arguments, and whether to ask again."""
        # A full cache's order of use decides evictions, and hits may be reported: Python sees them.
        dispatchable = self._executable_options.cache.has_room() and not self._report.enabled
        if static is not None:
            data = repeated.static_dispatch_data(leaves, static, result) if dispatchable else None
            return data, data is None
        if repeated.facts_hold is not None or repeated.direct_consts is None:
            # The program reads argument values or converts the leaves: Python runs such calls.
            if self._python_only is None:
                self._python_only = True
            if dispatchable and self._static_dispatch is None:
                self._make_static_dispatch(repeated, args, leaves, result)
            return None, False
        if not dispatchable:
            return None, True
        data = repeated.dispatch_data(leaves, result)
        if data is not None:
            self._python_only = False
        return data, data is None

    def _make_static_dispatch(self, repeated: FastCall, args: tuple, leaves: Sequence[Any], result: Any) -> None:
        """A dispatcher taking this call's Python ints by value, if it can run the call."""
        static = tuple(k for k, a in enumerate(args) if type(a) is int)
        if (not static or len(args) != len(leaves) or not repeated.reads <= set(static)
                or repeated.static_dispatch_data(leaves, static, result) is None):
            return
        call = dispatcher(self.name, *_python_calls(weakref.ref(self), static), static_argnums=static)
        self._dispatchers.append(call)
        self._static_dispatch = (static, len(args), call)

    def _call_checked(self, key: tuple | None, args: tuple, kwargs: dict,
                      static: tuple[int, ...] | None = None) -> tuple[Any, Any, bool]:
        """A call with every check (as :meth:`_python_call` returns it), remembered by ``key``."""
        call, executable, leaves, names, axis_lengths, implicit = self._program_for(self.binding.bind(args, kwargs))
        for k in executable.size_leaves(implicit):  # under an outer transformation, sizes must be known
            if not is_concrete_value(leaves[k]):
                raise _size_argument_not_known(self.name, names[k])
        if any(isinstance(x, Tracer) for x in leaves):
            # Inside jax.grad/jvp/vmap/jit: adapt to the caller's types (see compiler.executable).
            with self._naming_size_arguments(executable, implicit, leaves, names):
                return call_from_transformation(lambda *xs: executable.run(implicit, xs), leaves), None, True
        repeated = None
        if not kwargs and not any(call.is_static) and _same_objects(call.values, args):
            # Bound unconverted, in order: a call with the same key is the same call.
            repeated = FastCall(executable, implicit, leaves, axis_lengths)
            if key is not None:
                limit = self._executable_options.cache.maxsize  # one per argument types: bounded too
                with self._lock:
                    self._validated_calls[key] = repeated
                    while limit is not None and len(self._validated_calls) > limit:
                        del self._validated_calls[next(iter(self._validated_calls))]
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            result = executable.run(implicit, leaves)
        if repeated is None or not _same_objects(flat_arguments(args), leaves):
            return result, None, True
        return result, *self._dispatch_data(repeated, args, leaves, result, static)

    @contextlib.contextmanager
    def _naming_size_arguments(self, executable, implicit, leaves, names):
        """Errors of a run naming the arguments sizes come from, or this function."""
        thread_collector("callback_errors")  # made outside the run's scopes: callbacks find it
        try:
            yield
        except (DifferentiableCompileError, QuantumOperationError):
            raise  # about the function, not about sizes
        except CompileError as e:
            known_ints = [(n, x) for n, x in zip(names, leaves) if np.ndim(x) == 0 and is_concrete_value(x)
                          and np.issubdtype(dtype_of(x), np.integer) and not isinstance(x, bool)]
            sizes = [f"{n}={int(x)}" for n, x in known_ints]
            sizes += [f"axis {a!r}={v}" for a, v in zip(executable.program.axis_names, implicit)]
            error_type = ArgumentValueError
            if isinstance(e, (MemoryError, SizeAssumptionError)):
                error_type = type(e)
            elif isinstance(e, BrokenRequirement):  # sizes that do not fit together (a reshape)
                error_type = IncompatibleSizesError
            raise error_type(
                f"{self.name}: {e} The sizes come from {', '.join(sizes) or 'no argument'}."
            ) from None
        except UnsupportedOperationError as e:
            e.args = (f"{self.name}: {e.args[0]}", *e.args[1:])
            raise
        except jax.errors.JaxRuntimeError as err:
            raise callback_exception(err) from None

    # --- inspection --------------------------------------------------------------------------

    def _traced_programs(self) -> list[Executable]:
        families = list(self._programs.values())
        return [p for family in families for p in [*family.programs, *family.static_programs.values()]]

    def inspect(self) -> FunctionInfo:
        """Every traced program with its size facts, how each size signature runs, its
        speculations and compiled loops (:mod:`catalyst_lite.compiler.inspection`)."""
        last = self._last
        programs = self._traced_programs()
        described = {id(p): p.describe() for p in programs}
        if last is not None and id(last) not in described:
            described[id(last)] = last.describe()
        return FunctionInfo(tuple(described[id(p)] for p in programs),
                            None if last is None else described[id(last)], len(self._validated_calls))

    # --- Catalyst's compilation API -------------------------------------------------------------

    @property
    def workspace(self) -> Workspace | None:
        """With ``keep_intermediate``, the directory of the most recent program's files."""
        return None if self._last is None else self._workspaces.get(self._last)

    def _keep_intermediate(self, program: Executable) -> None:
        if not self.compile_options.keep_intermediate or inside_program_trace():
            return
        with self._lock:
            if program not in self._workspaces:
                workspace = self._workspaces[program] = Workspace.create(self.__name__)
                workspace.write_program(program.program, self.__name__)

    llvmir = None  # Catalyst's LLVM IR: XLA generates machine code without exposing one

    @api_boundary
    def jit_compile(self, args: Sequence[Any], **kwargs: Any) -> bool:
        """Catalyst's ``jit_compile``: trace and compile for these arguments without running;
        returns whether they need converting (they promote to a signature compiled before)."""
        bound = self.binding.bind(tuple(args), kwargs)
        call, executable, leaves, names, _, implicit = self._program_for(bound)
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            executable.prepare(implicit, leaves)
        return not _same_objects(call.values, bound.values)

    def aot_compile(self) -> None:
        """Trace the program of the parameters' type annotations now (Catalyst's ``aot_compile``)."""
        if self._annotated is None:
            raise ArgumentTypeError(
                f"{self.name}.aot_compile(): compiling ahead of time needs every parameter "
                "annotated with a type (int, float, jax.ShapeDtypeStruct((3,), jnp.float64), ...) "
                "and no static arguments."
            )
        self._trace_generic(self._annotated)

    def pre_compilation(self) -> Callable:
        """The function that is traced (with ``autograph=True``, the converted one)."""
        return self.user_function

    def run(self, args: Sequence[Any], kwargs: dict) -> Any:
        """``self(*args, **kwargs)``."""
        return self(*args, **kwargs)

    @property
    def mlir_opt(self) -> str | None:
        """Catalyst's optimized MLIR: :attr:`mlir` (XLA optimizes inside its compiler)."""
        return self.mlir

    @property
    def compiled_function(self) -> Any:
        """Catalyst's handle on the compiled program of the most recent call (``None`` before
        the first trace); calls that the C++ dispatcher runs alone do not update it.

        >>> from catalyst_lite import qjit
        >>> f = qjit(lambda x: x * 2)
        >>> _ = f(1.0); first = f.compiled_function
        >>> _ = f(2); f.compiled_function is first  # an int promotes to the float signature
        True
        >>> _ = f(1j); f.compiled_function is first  # a complex does not
        False
        """
        return self._last

    @property
    def out_treedef(self):
        """The pytree structure of the results (of the most recent signature)."""
        return None if self._last is None else self._last.program.out_tree

    def __getattr__(self, name: str) -> Any:
        if name in _PIPELINE_STAGES:
            def unsupported(*_args: Any, **_kwargs: Any) -> Any:
                raise UnsupportedOperationError(
                    f"{self.name}.{name}(): in Catalyst it {_PIPELINE_STAGES[name]}; catalyst_lite "
                    "traces on the first call (or from type annotations) and compiles with XLA per "
                    "size signature. Use jit_compile(args) or lower(*args).compile() to compile "
                    "ahead of a call, and .jaxpr, .mlir or lower(*args).as_text() to inspect the "
                    "program."
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
        """StableHLO text of the traced program, symbolic sizes as ``?``, named by ``__name__``."""
        return None if self._last is None else program_to_mlir(self._last.program, self.__name__)

    def specialized_mlir(self, *args: Any, **kwargs: Any) -> str:
        """``self.lower(*args, **kwargs).as_text()``: what XLA compiles for these arguments."""
        return self.lower(*args, **kwargs).as_text()

    # --- jax.stages: trace, lower, compile ------------------------------------------------------

    @api_boundary
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """The program traced for these arguments' signature, sizes symbolic (``jax.jit(f).trace``)."""
        executable = self._flat_call(args, kwargs)[0]
        return Traced(executable.program.closed_jaxpr, self.name, lambda: self.lower(*args, **kwargs))

    @api_boundary
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """The program specialized at these arguments' sizes, for XLA (``jax.jit(f).lower``)."""
        executable, implicit, leaves, names, _, key = self._flat_call(args, kwargs)
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            try:
                lowered = executable.lower(implicit, leaves)
            except NeedsHost:
                raise UnsupportedOperationError(
                    f"{self.name}: no single StableHLO program computes these arguments: a size "
                    "is only known while the program runs (a loop resizes an array, or a cond's "
                    "branches return different sizes), so the program runs host-driven, each "
                    "loop body compiled for the sizes it meets. .mlir shows the whole program "
                    "with dynamic sizes."
                ) from None

        def arguments(args: tuple, kwargs: dict) -> list:
            other, _, _, _, full, other_key = self._flat_call(args, kwargs)
            if other is not executable or other_key != key:
                what = f"sizes {other_key}" if other is executable else "other argument types"
                raise ArgumentTypeError(
                    f"{self.name}: this compiled stage was lowered for sizes {key} and is called with "
                    f"{what}. Lower again for these arguments (f.lower(*args).compile()), or call f."
                )
            return [full[i] for i in other.runner.dynamic_positions]

        return Lowered(lowered, arguments, lambda outs: self._jit.place_results(executable.program.results(outs)))

    def compile(self, *args: Any, **kwargs: Any) -> Compiled:
        """``self.lower(*args, **kwargs).compile()`` (without arguments, Catalyst's stage: none here)."""
        if not args and not kwargs:
            return self.__getattr__("compile")()
        return self.lower(*args, **kwargs).compile()

    def _flat_call(self, args: tuple, kwargs: dict) -> tuple:
        """A call's program, implicit sizes, leaves, names, full flat arguments, size signature."""
        args = self._jit.place_arguments(args)
        _, executable, leaves, names, _, implicit = self._program_for(self.binding.bind(args, kwargs))
        full = executable.arguments(implicit, leaves)
        return executable, implicit, leaves, names, full, executable.runner.signature(full)

    # --- the cache ---------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """What this function holds: traced programs, compiled executables and their sizes."""
        cache = self._executable_options.cache
        sizes = tuple(sizes for sizes, _reverse in cache.keys())
        return CacheInfo(len(self._traced_programs()), len(sizes), sizes, cache.maxsize)

    def clear_cache(self) -> None:
        """Drop every traced program and compiled executable (``jax.jit``'s ``clear_cache``)."""
        with self._lock:
            self._forget_programs()
            self._executable_options.cache.clear()
            _forget_dispatch_data(self._dispatchers)

    @staticmethod
    def wait_for_compilations() -> None:
        """Block until the background compilations are done and in use."""
        wait_for_compilations()

    def __repr__(self) -> str:
        return f"<catalyst_lite.QJIT {self.name}>"


def _python_calls(qjit: weakref.ref, static: tuple[int, ...] | None = None) -> tuple[Callable, Callable]:
    """A function's calls for its dispatcher, holding it weakly (it owns its dispatchers)."""

    def python_call(*args: Any, **kwargs: Any) -> tuple[Any, Any, bool]:
        return qjit()._python_call(args, kwargs, static)

    return (lambda *args, **kwargs: python_call(*args, **kwargs)[0]), python_call


def _forget_dispatch_data(dispatchers: list[Callable[..., Any]]) -> None:
    for call in list(dispatchers):
        forget_dispatch_data(call)


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


def _has_program(family: ProgramFamily | None) -> bool:
    """Whether a signature's family holds a program (its trace may have failed)."""
    return family is not None and bool(family.programs or family.static_programs)


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _call_key(args: tuple) -> tuple | None:
    """What a call's validation depends on, if every argument is a number or a concrete array."""
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


def _size_argument_not_known(fn_name: str, name: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{fn_name}: argument {name} sets an array size, so its value must be known, but an "
        "outer JAX transformation (jax.jit, jax.vmap, ...) traces it. Pass it as a static "
        "argument of that transformation (static_argnums) or keep it out of the transformation."
    )


def qjit(
    fn: Callable | None = None,
    *,
    autograph: bool = False,
    autograph_include: Sequence[str] = (),
    async_qnodes: bool = False,
    target: str = "binary",
    keep_intermediate: Any = False,
    use_nameloc: bool = False,
    verbose: bool = False,
    logfile: TextIO | None = None,
    pipelines: Any = None,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Sequence[str] | None = None,
    abstracted_axes: Any = None,
    disable_assertions: bool = False,
    seed: int | None = None,
    circuit_transform_pipeline: Any = None,
    pass_plugins: Any = None,
    dialect_plugins: Any = None,
    capture: bool | str = "global",
    skip_preprocess: bool = False,
    tiered_compilation: bool | None = None,
    size_generic: bool | None = None,
    cache_size: int | None = DEFAULT_CACHE_SIZE,
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: str | Sequence[str] | None = None,
    keep_unused: bool = False,
    device: jax.Device | None = None,
    backend: str | None = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
    compiler_options: dict[str, Any] | None = None,
    state_sharding: Any = None,
) -> QJIT | Callable[[Callable], QJIT]:
    """Compile ``fn`` with symbolic sizes; usable bare (``@qjit``) or with options.

    Args:
        abstracted_axes: axes whose sizes are symbolic: one ``{axis: name}`` dict for every
            argument that has the axis, or one entry per argument (a dict, a tuple of names or
            ``None``). Equal names are one shared dimension.
        static_argnums / static_argnames: arguments that are compile-time values.
        capture: ``"global"`` (default: as ``qml.capture.enabled()`` says), ``True`` (trace
            through PennyLane's program capture) or ``False`` (catalyst_lite's own frontend).
        autograph: convert Python ``if``/``for``/``while`` (and ``and``/``or``/``not``,
            ``x[i] = v``) into ``cond``/``for_loop``/``while_loop`` (docs/autograph.md);
            ``autograph_include``: library modules converted too.
        cache_size: how many compiled executables are kept (least recently used dropped first;
            ``None``: no bound), and traced programs (one per argument signature, oldest dropped). See :meth:`QJIT.cache_info` and :meth:`QJIT.clear_cache`.
        verbose: report each trace, specialization, XLA compile time and cache hit on
            ``logfile`` (``sys.stderr``); the ``catalyst_lite`` logger gets them at ``DEBUG``.
        keep_intermediate: keep each traced program's jaxpr and StableHLO in a directory named
            after the function (``QJIT.workspace``).
        size_generic: with IREE installed, compile once for every size and run new sizes on it
            while XLA compiles the sizes that come back. ``None``: on unless
            ``CATALYST_LITE_SIZE_GENERIC=0``. ``tiered_compilation`` is accepted and ignored.
        state_sharding: every QNode's state vector split over devices (docs/scaling.md).

    ``jax.jit``'s options keep their meaning for each size's XLA compilation (``donate_argnums``,
    ``donate_argnames``, ``keep_unused``, ``device``, ``backend``, ``compiler_options``,
    ``in_shardings``, ``out_shardings``). Catalyst's other options are accepted and change nothing
    here (docs/catalyst-compatibility.md).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit
    >>> @qjit(abstracted_axes={0: "n"})
    ... def total(x):
    ...     return jnp.sum(x * 2.0)
    >>> float(total(jnp.arange(4.0)))
    12.0
    """
    options = {name: value for name, value in locals().items() if name != "fn"}
    if fn is None:
        return functools.partial(qjit, **options)
    return QJIT(fn, **options)
