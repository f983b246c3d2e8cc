"""``@qjit``: trace a function once with symbolic sizes, run it anywhere XLA runs.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(sz: int):
...     return jnp.ones((sz + 1,), dtype=float)
>>> f(2).tolist(), f(4).shape
([1.0, 1.0, 1.0], (5,))

Its ahead-of-time stages are shaped as ``jax.stages``: ``f.trace(*args)`` is the program traced
for the arguments' signature, sizes symbolic (:class:`Traced`, the same for every size);
``f.lower(*args)`` is that program specialized at the arguments' sizes, in StableHLO with static
shapes (:class:`Lowered`, what XLA compiles for them); ``.compile()`` compiles it, and the
:class:`Compiled` runs calls of those types and sizes (others raise ``TypeError``, as a
``jax.stages.Compiled`` does).

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
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Hashable, Sequence, TextIO

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
from .jax_extras.executables import dispatcher, flat_arguments, forget_dispatch_data, wait_for_effects
from .signature import (
    ArgumentLayout,
    CallArguments,
    CallBinding,
    LeafSpec,
    as_annotated,
    dtype_of,
    promoted_leaves,
    example_of,
    is_type_annotation,
    resolved_annotation,
)
from .autograph import run_autograph
from .callbacks import callback_exception, program_ended, program_started
from .compiler.compilation import wait_for_compilations
from .trace_context import capture_switched, check_capture_option, thread_collector, uses_capture
from .compile_options import JIT_OPTIONS, CompileOptions as QJITOptions, JitOptions, check_seed
from .compiler.assumptions import ProgramFamily, SignatureTrace, SizeInputs
from .compiler.executable import call_from_transformation
from .compiler.executable import Executable, FastCall, register_function_compiler
from .compiler.inspection import FunctionInfo
from .compiler.lowering import program_to_mlir
from .compiler.options import DEFAULT_CACHE_SIZE, ExecutableCache, RunnerOptions
from .compiler.specialize import NeedsHost
from .compiler.lowering import Workspace
from .jax_extras.requirements import BrokenRequirement
from .jax_extras.size_expressions import UnknownSize
from .reporting import Reporter
from .diagnostics import api_boundary, filtered
from .tracing import dimension_sources, implicit_values

__all__ = ["qjit", "QJIT", "CacheInfo", "Traced", "Lowered", "Compiled"]

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
    # jax.jit's, for each size's XLA compilation (see compile_options.py)
    *JIT_OPTIONS,
    "state_sharding",  # QNodes' state vectors split over devices (quantum/sharded.py)
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
    """What a :class:`QJIT` holds (:meth:`QJIT.cache_info`).

    ``programs``: traced programs (for every signature and set of size facts); ``executables``:
    compiled XLA executables, one per program and size signature (nested bodies' included);
    ``sizes``: the size signature of each, least recently used first (while the cache has room,
    calls that the C++ dispatcher runs by itself do not count as uses: the order only decides
    evictions once it is full); ``maxsize``: the bound (``None``: none).
    """

    programs: int
    executables: int
    sizes: tuple
    maxsize: int | None


# --- ahead-of-time stages, shaped as jax.stages -----------------------------------------------------


class Traced:
    """The traced program of one argument signature (``jax.stages.Traced``): :attr:`jaxpr`, with
    symbolic sizes as variables, and :meth:`lower` at the traced arguments' sizes."""

    def __init__(self, jaxpr: Any, fun_name: str, lower: Callable[[], "Lowered"]):
        self.jaxpr = jaxpr
        self.fun_name = fun_name
        self._lower = lower

    def lower(self) -> "Lowered":
        return self._lower()


class Lowered:
    """The program specialized at one call's sizes, lowered to StableHLO (``jax.stages.Lowered``:
    ``as_text``, ``compiler_ir``, ``cost_analysis`` are its)."""

    def __init__(self, lowered: Any, arguments: Callable[[tuple, dict], list], results: Callable):
        self._lowered = lowered
        self._arguments = arguments  # a call's flat arguments, or TypeError if not of these sizes
        self._results = results

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lowered, name)

    def compile(self, compiler_options: dict[str, Any] | None = None) -> "Compiled":
        return Compiled(self._lowered.compile(compiler_options), self._arguments, self._results)


class Compiled(Lowered):
    """The XLA executable of a :class:`Lowered` (``jax.stages.Compiled``: ``as_text``,
    ``cost_analysis``, ``memory_analysis`` are its); callable with arguments of the types and
    sizes it was lowered for."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._arguments(args, kwargs)
        with x64_scope():
            return self._results(self._lowered(*flat))


@register_function_compiler
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
    are described in docs/catalyst-compatibility.md; ``jax.jit``'s AOT stages are :meth:`trace`,
    :meth:`lower` and :meth:`compile`.

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
        if compile_options is not None:
            # Catalyst's constructor, QJIT(fn, CompileOptions(...)): the record's options.
            self.__init__(fn, **_keyword_options(compile_options))
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
        self._jit = JitOptions.of(options, self.binding.positional, self.name)
        self._placing = self._jit.in_shardings is not None or self._jit.out_shardings is not None
        if self._jit.needs_xla and size_generic is not False:
            size_generic = False
            self._report("size-generic tier off: donated or sharded calls are compiled by XLA for each size")
        self._dispatch = dispatcher(self.name, *_python_calls(weakref.ref(self)))
        # Every dispatcher of this function (see _static_dispatch): evictions forget all their data.
        self._dispatchers = [self._dispatch]
        # The dispatcher of calls whose Python int arguments at these positions are static, as
        # jax.jit's static_argnums (a program that reads their values: sizes, trip counts),
        # with the number of arguments of those calls; made by the first call it can run.
        self._static_dispatch: tuple[tuple[int, ...], int, Callable[..., Any]] | None = None
        self._executable_options = RunnerOptions(
            self._jit.xla,
            ExecutableCache(cache_size, functools.partial(_forget_dispatch_data, self._dispatchers)), self._report,
            size_generic, self._jit.jit,
        )
        # The programs traced for each signature, each valid for the sizes where its facts hold.
        self._programs: dict[Hashable, ProgramFamily] = {}
        # The same families by (argument names, structure, static values), in the order they were
        # made: the signatures a call may be promoted to (see _promoted). Looked up by hash, as
        # the programs are: a static value mutated since it was traced matches neither.
        self._promotable: dict[Hashable, list[tuple[tuple, ProgramFamily]]] = {}
        # Calls already validated, by _call_key: what their repeats run (see __call__).
        self._validated_calls: dict[tuple, _RepeatedCall] = {}
        self._last: Executable | None = None
        # With keep_intermediate, each program's directory of files (see the workspace property).
        self._workspaces: weakref.WeakKeyDictionary[Executable, Workspace] = weakref.WeakKeyDictionary()
        # True while every call has been one that only Python runs (its program reads integer
        # arguments' values, say): calls then skip the dispatcher. None: no call yet.
        self._python_only: bool | None = None
        # Guards the creation of program families (each family holds a lock while it traces, so
        # that two threads calling with the same new signature or sizes trace it once).
        self._lock = threading.Lock()
        self._annotated = None if inside_program_trace() else self._annotation_call()
        if self._annotated is not None:
            try:
                self._trace_generic(self._annotated)
            except Exception as error:
                raise filtered(error)  # noqa: B904 (the user's frames first, as for a call)

    # --- tracing -----------------------------------------------------------------------------

    def _trace_generic(self, call: CallArguments) -> None:
        """Trace the generic program of this call's signature now (ahead of time)."""
        _, family, trace, *_ = self._signature_of(call)
        self._last = family.generic(trace)
        self._keep_intermediate(self._last)

    def _signature_of(self, call: CallArguments, mismatch: Exception | None = None
                      ) -> tuple[CallArguments, ProgramFamily, SignatureTrace, list, list, list[str]]:
        """The call (its arguments promoted to a compiled signature, see :meth:`_promoted`), the
        programs traced for its signature, how it is traced, and its flat arguments with their
        abstracted axes and names. ``mismatch``: why the call does not fit the type annotations,
        said in Catalyst's warning when its signature is then traced."""
        tree, specs, leaves, axes = self.layout.leaf_specs(call)
        names = [n for a, n in zip(call.dynamic, call.dynamic_names) for _ in jax.tree_util.tree_leaves(a)]
        _check_int64(self.name, names, leaves)  # before promotion would make a float of it
        key = (call.dynamic_keys, tree, tuple(specs), call.static)
        family = self._programs.get(key)
        if not _has_program(family):
            promoted = self._promoted(key, leaves)
            if promoted is not None:
                family, specs, leaves = promoted
                call = call.with_dynamic(jax.tree_util.tree_unflatten(tree, leaves))
            elif mismatch is not None:
                warnings.warn(
                    f"Provided arguments did not match declared signature, recompiling... ({mismatch})",
                    UserWarning, stacklevel=5,
                )
        trace = self._signature_trace(call, tree, specs, axes, names)
        family = family if family is not None else self._family_for(key, axes, names, specs)
        return call, family, trace, leaves, axes, names

    def _promoted(self, key: tuple, leaves: list[Any]) -> tuple[ProgramFamily, list[LeafSpec], list[Any]] | None:
        """Promote to a compiled signature, as Catalyst does: a call whose signature was never
        traced runs the most recently traced program of the same structure and static arguments
        whose signature its arguments promote to (same shapes, every dtype converting without
        loss, see :func:`.signature.promoted_leaves`), its arguments converted; ``None`` when
        there is none (the call's signature is then traced). Returns that signature's programs,
        its leaf specs and the converted leaves. Arguments traced by an outer JAX transformation
        are never converted here: they meet the program at its boundary."""
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
        """Arguments standing for the type annotations when every parameter is positional and
        annotated with a type (or there is none): the function is then traced now (ahead of time),
        as Catalyst does. An annotation that is a class but not a JAX type raises here."""
        binding = self.binding
        if binding.signature is None or binding.has_static_arguments or binding.static_argnums_error:
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
        """The call as run (conformed to the type annotations and promoted to a compiled
        signature, see :meth:`_conformed` and :meth:`_promoted`), its program
        (traced if no program of its signature holds for its sizes, see
        :mod:`.compiler.assumptions`), its flat arguments, their names, the call's
        size inputs' leading part (the lengths of its abstracted axes), and the sizes the
        program's implicit inputs take for the call."""
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
        return call, program, leaves, names, axis_lengths, program.program.implicit_args(leaves, names, self.name)

    def _signature_trace(self, call: CallArguments, tree, specs, axes, names) -> SignatureTrace:
        """How this call's signature is traced (by its :class:`ProgramFamily`, in the scopes it
        chooses): the function on the call's dynamic arguments, through PennyLane's capture when
        ``capture`` says so (imported here: it imports PennyLane, which only programs that use it
        pay for)."""
        capture = None
        if uses_capture(self._capture):
            from .capture.program import captured_program

            capture = captured_program
        donated = self._jit.donated_leaves(call.dynamic_keys, call.dynamic) if self._jit.donated else frozenset()
        return SignatureTrace(
            self.binding.of_dynamic_arguments(self.user_function, call), call.dynamic, tree, specs, axes, names,
            self.name, self.options, self._executable_options, self._report, capture, donated,
        )

    def _family_for(self, key: tuple, axes, names, specs) -> ProgramFamily:
        """The programs traced for a signature (``key``: structure, dtypes, static values), made
        if there are none yet."""
        family = self._programs.get(key)
        if family is None:
            inputs = SizeInputs.of(*dimension_sources(axes), names, [_is_int_scalar_spec(s) for s in specs])
            with self._lock:
                family = self._programs.get(key)
                if family is None:
                    family = self._programs[key] = ProgramFamily(inputs, self.name)
                    self._promotable.setdefault((key[0], key[1], key[3]), []).append((key, family))
        return family

    def _conformed(self, call: CallArguments) -> tuple[CallArguments, ArgumentTypeError | None]:
        """With type annotations, the call's values converted to them where Catalyst converts
        (see :func:`.signature.as_annotated`), and why values do not fit them (``None`` if
        they do): such a call runs a signature it promotes to, else it is traced for its own
        types with Catalyst's ``UserWarning``."""
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
        """``@qjit`` on a method: ``obj.method(x)`` calls it with ``obj`` first (pass
        ``static_argnums=0`` to make ``self`` a compile-time value, as with ``jax.jit``). A
        ``@staticmethod`` under the decorators (``@qjit @qml.qnode(dev) @staticmethod``) is
        never bound."""
        if instance is None or _wraps_staticmethod(self.original_function):
            return self
        return types.MethodType(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Exceptions leave with the user's frames first (see diagnostics.py): a try costs nothing
        # until something is raised.
        try:
            if self._placing:  # in_shardings/out_shardings: placed around the checked call
                placed = self._jit.place_arguments(args)
                running = program_started()
                try:
                    result = self._call_checked(None, placed, kwargs)[0]
                    wait_for_effects()
                finally:
                    program_ended(running)
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
            # jax.jit's C++ dispatcher: a call of argument types it has dispatch data for runs
            # the executable without Python, as a repeated jax.jit call does (never while
            # anything is traced: the trace is part of its key); the others take _python_call.
            return self._dispatch(*args, **kwargs)
        except Exception as error:  # a callback's failure as its own exception, user's frames first
            raise filtered(callback_exception(error))  # noqa: B904

    def _python_call(self, args: tuple, kwargs: dict, static: tuple[int, ...] | None = None) -> tuple[Any, Any, bool]:
        """A call the dispatcher cannot run by itself: its result, the dispatch data for the
        later calls of its argument types (or ``None``), and whether to come back to Python for
        them (see :func:`.jax_extras.executables.dispatcher`). ``static``: the positions of the
        arguments the calling dispatcher takes by value (see ``_static_dispatch``)."""
        if is_tracing():
            # Called while a program is being traced (recursion, or a qjit function calling
            # another): inlined into that program, as Catalyst does, with its symbolic sizes.
            return self.user_function(*args, **kwargs), None, True
        # Only this path runs programs with callbacks (the dispatcher never runs one by itself):
        # while it runs, a callback failing on one of XLA's worker threads finds this call.
        running = program_started()
        try:
            # Arguments of the types, shapes and dtypes of a call already validated need none of
            # the checked path's work (binding, flattening, checks, implicit sizes): the key
            # settles it.
            key = None if kwargs else _call_key(args)
            validated = self._validated_calls.get(key) if key is not None else None
            if validated is not None and (validated.facts_hold is None or validated.facts_hold(args)):
                self._last = validated.fast.executable
                try:
                    result = validated.fast(args)
                except (CompileError, UnsupportedOperationError):
                    pass  # rare (a negative size): the checked call raises it naming the arguments
                else:
                    wait_for_effects()
                    return result, *self._dispatch_data(validated, args, args, result, static)
            called = self._call_checked(key, args, kwargs, static)
            # A program with effects (callbacks) raises its callbacks' errors here, not in a later
            # program.
            wait_for_effects()
            return called
        finally:
            program_ended(running)

    def _dispatch_data(self, repeated: _RepeatedCall, args: tuple, leaves: Sequence[Any], result: Any,
                       static: tuple[int, ...] | None = None) -> tuple[Any, bool]:
        """The dispatch data of a call whose leaves are its arguments, unconverted, and whether
        to ask again at the next call of its argument types (while there is none); for the
        dispatcher that takes the arguments at ``static`` by value when given."""
        # The order of use of a full cache decides what is evicted, and hits may be reported:
        # Python sees those calls, for now.
        dispatchable = self._executable_options.cache.has_room() and not self._report.enabled
        if static is not None:
            data = repeated.fast.static_dispatch_data(leaves, static, result) if dispatchable else None
            return data, data is None
        if repeated.facts_hold is not None or repeated.fast.direct_consts is None:
            # The program reads argument values (sizes, facts), or does not take the leaves as
            # they are: Python runs every such call, without asking again. While no call has
            # been otherwise, calls skip the dispatcher's lookup.
            if self._python_only is None:
                self._python_only = True
            if dispatchable and self._static_dispatch is None:
                self._make_static_dispatch(repeated, args, leaves, result)
            return None, False
        if not dispatchable:
            return None, True
        data = repeated.fast.dispatch_data(leaves, result)
        if data is not None:
            self._python_only = False
        return data, data is None

    def _make_static_dispatch(self, repeated: _RepeatedCall, args: tuple, leaves: Sequence[Any], result: Any) -> None:
        """Make the dispatcher of calls whose Python ints at the positions they are in this call
        are static, when it can run this call: the program reads no other argument's value, and
        its executable for these values takes the other arguments as they are (a speculation
        that staged them, or the specialization of the sizes they set)."""
        static = tuple(k for k, a in enumerate(args) if type(a) is int)
        if (not static or len(args) != len(leaves) or not repeated.reads <= set(static)
                or repeated.fast.static_dispatch_data(leaves, static, result) is None):
            return
        call = dispatcher(self.name, *_python_calls(weakref.ref(self), static), static_argnums=static)
        self._dispatchers.append(call)
        self._static_dispatch = (static, len(args), call)

    def _call_checked(self, key: tuple | None, args: tuple, kwargs: dict,
                      static: tuple[int, ...] | None = None) -> tuple[Any, Any, bool]:
        """A call with every check (as :meth:`_python_call` returns it); remembered for the
        validated path when ``key`` settles them."""
        call, executable, leaves, names, axis_lengths, implicit = self._program_for(self.binding.bind(args, kwargs))
        self._check_size_arguments_known(executable, implicit, leaves, names)
        if any(isinstance(x, Tracer) for x in leaves):
            # Inside jax.grad/jvp/vmap/jit: adapt to the caller's types (see compiler.executable).
            with self._naming_size_arguments(executable, implicit, leaves, names):
                return call_from_transformation(lambda *xs: executable.run(implicit, xs), leaves), None, True
        repeated = None
        if not kwargs and not any(call.is_static) and len(call.values) == len(args) and all(
            v is a for v, a in zip(call.values, args)
        ):
            # The arguments bound unconverted (not promoted), in order: a call with the same key is
            # the same call.
            repeated = _RepeatedCall(executable, implicit, leaves, axis_lengths)
            if key is not None:
                self._validated_calls[key] = repeated
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            result = executable.run(implicit, leaves)
        if repeated is None or not _same_objects(flat_arguments(args), leaves):
            return result, None, True
        return result, *self._dispatch_data(repeated, args, leaves, result, static)

    def _check_size_arguments_known(self, executable, implicit, leaves, names) -> None:
        """Under an outer ``jax.jit``/``jax.vmap``/``jax.grad`` arrays may be tracers (their
        shapes are known), but an integer argument that sets a size must have a known value."""
        for k in executable.size_leaves(implicit):
            if not is_concrete_value(leaves[k]):
                raise _size_argument_not_known(self.name, names[k])

    @contextlib.contextmanager
    def _naming_size_arguments(self, executable, implicit, leaves, names):
        """Re-raise a specialization error (a negative size) naming the arguments sizes come from,
        and an unsupported operation naming this function; a callback's exception as itself."""
        # This thread's slot for callback exceptions, made now (outside the scopes the run enters)
        # so that a callback finds it wherever it runs.
        thread_collector("callback_errors")
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
            raise callback_exception(err) from None

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
        >>> from catalyst_lite import qjit
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

    @property
    def workspace(self) -> Workspace | None:
        """With ``keep_intermediate``, the directory holding the most recent program's files
        (Catalyst's: one per compiled program, see :mod:`.compiler.workspace`); else ``None``."""
        return None if self._last is None else self._workspaces.get(self._last)

    def _keep_intermediate(self, program: Executable) -> None:
        """With ``keep_intermediate``, write a program traced for a call of its own (not inlined
        into another program) to a new workspace, once."""
        if not self.compile_options.keep_intermediate or inside_program_trace():
            return
        with self._lock:
            if program not in self._workspaces:
                workspace = self._workspaces[program] = Workspace.create(self.__name__)
                workspace.write_program(program.program, self.__name__)

    llvmir = None
    """Catalyst's LLVM IR: XLA generates machine code without exposing one (``None``)."""

    @api_boundary
    def jit_compile(self, args: Sequence[Any], **kwargs: Any) -> bool:
        """Trace and compile the program for these arguments without running it (Catalyst's
        ``jit_compile``): the next call with their types and sizes runs at once. Returns whether
        the arguments need converting to run it: ``True`` when they promote to a signature
        compiled before (which a call then runs), else ``False``.

        >>> import jax.numpy as jnp
        >>> from catalyst_lite import qjit
        >>> f = qjit(lambda x: x * 2)
        >>> f.jit_compile((jnp.float64(1.0),)), f.jit_compile((jnp.int32(1),))
        (False, True)
        """
        bound = self.binding.bind(tuple(args), kwargs)
        call, executable, leaves, names, _, implicit = self._program_for(bound)
        with x64_scope(), self._naming_size_arguments(executable, implicit, leaves, names):
            executable.prepare(implicit, leaves)
        return not _same_objects(call.values, bound.values)

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
    def compiled_function(self) -> Any:
        """Catalyst's handle on the compiled program of the most recent call (``None`` before
        the first trace): the same object while calls run the same program (arguments promoted
        to a compiled signature included), another one once a call needs a new program (argument
        types that promote to no compiled signature, static values, or sizes its facts do not
        cover). Repeats of an earlier call's argument types that ``jax.jit``'s C++ dispatcher
        runs by itself do not update it.

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
        # Only reached for attributes QJIT does not have: Catalyst's pipeline stages explain why.
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
        """StableHLO text of the traced program; symbolic sizes are ``?`` dimensions. The module
        is named as Catalyst names it, by the function's ``__name__`` (so one program gives one
        text, wherever its function was defined)."""
        if self._last is None:
            return None
        return program_to_mlir(self._last.program, self.__name__)

    def specialized_mlir(self, *args: Any, **kwargs: Any) -> str:
        """StableHLO that XLA compiles for these concrete arguments (all sizes static):
        ``self.lower(*args, **kwargs).as_text()``."""
        return self.lower(*args, **kwargs).as_text()

    # --- jax.stages: trace, lower, compile ------------------------------------------------------

    @api_boundary
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """The program traced for these arguments' signature, its sizes symbolic (as
        ``jax.jit(f).trace``; see :class:`Traced`).

        >>> import jax.numpy as jnp
        >>> from catalyst_lite import qjit
        >>> f = qjit(lambda x: x + 1.0, abstracted_axes={0: "n"})
        >>> "f64[a]" in str(f.trace(jnp.ones(2)).jaxpr)  # the size is a variable
        True
        """
        executable = self._flat_call(args, kwargs)[0]
        return Traced(executable.program.closed_jaxpr, self.name, lambda: self.lower(*args, **kwargs))

    @api_boundary
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """The program specialized at these arguments' sizes, lowered for XLA (as
        ``jax.jit(f).lower``): ``.as_text()``, ``.cost_analysis()``, ``.compile()``.

        >>> import jax.numpy as jnp
        >>> from catalyst_lite import qjit
        >>> f = qjit(lambda x: x * 2.0, abstracted_axes={0: "n"})
        >>> x = jnp.ones(4)
        >>> compiled = f.lower(x).compile()
        >>> compiled(x).tolist()
        [2.0, 2.0, 2.0, 2.0]
        """
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
        """``self.lower(*args, **kwargs).compile()`` (Catalyst's ``compile()`` without arguments
        compiles its MLIR module: no such stage here)."""
        if not args and not kwargs:
            return self.__getattr__("compile")()
        return self.lower(*args, **kwargs).compile()

    def _flat_call(self, args: tuple, kwargs: dict) -> tuple:
        """A call's program, implicit sizes, leaves, their names, the program's flat arguments
        and its size signature."""
        args = self._jit.place_arguments(args)
        _, executable, leaves, names, _, implicit = self._program_for(self.binding.bind(args, kwargs))
        full = executable.arguments(implicit, leaves)
        return executable, implicit, leaves, names, full, executable.runner.signature(full)

    # --- the cache ---------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """What this function holds: traced programs, compiled executables and their sizes.

        >>> import jax.numpy as jnp
        >>> from catalyst_lite import qjit
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
            self._promotable = {}
            self._validated_calls = {}
            self._last = None
            self._python_only = None
            self._executable_options.cache.clear()
            _forget_dispatch_data(self._dispatchers)

    @staticmethod
    def wait_for_compilations() -> None:
        """Block until the background compilations (the size-generic tier's, and XLA's of the
        sizes that come back) are done and in use; results are then deterministic."""
        wait_for_compilations()

    def __repr__(self) -> str:
        return f"<catalyst_lite.QJIT {self.name}>"


def _python_calls(qjit: weakref.ref, static: tuple[int, ...] | None = None) -> tuple[Callable, Callable]:
    """A function's call under ``jax.disable_jit()`` and its Python call path, as its dispatcher
    (the one taking the arguments at ``static`` by value, when given) calls them (holding it
    weakly: the function owns its dispatchers)."""

    def python_call(*args: Any, **kwargs: Any) -> tuple[Any, Any, bool]:
        return qjit()._python_call(args, kwargs, static)

    return (lambda *args, **kwargs: python_call(*args, **kwargs)[0]), python_call


def _forget_dispatch_data(dispatchers: list[Callable[..., Any]]) -> None:
    for call in list(dispatchers):
        forget_dispatch_data(call)


class _RepeatedCall:
    """What a call with already-validated argument types runs (:class:`FastCall`), and the
    program's facts that read integer arguments, checked on each call (the lengths of abstracted
    axes are part of the key: facts about them hold for every call that has it)."""

    def __init__(self, executable: Executable, implicit: list[int], leaves: Sequence[Any], axis_lengths: list[int]):
        self.fast = FastCall(executable, implicit, leaves)
        facts = executable.facts
        # The arguments whose values the facts read.
        self.reads = frozenset(k - len(axis_lengths) for k in facts.inputs if k >= len(axis_lengths))
        # Whether the facts hold for a call's arguments, the axis lengths being known.
        first_broken, lengths = facts.first_broken, tuple(axis_lengths)
        self.facts_hold = (lambda args: first_broken((*lengths, *args) if lengths else args) < 0) if self.reads else None


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
    """Whether a signature has been compiled: its family holds a program (its trace may have
    failed)."""
    return family is not None and bool(family.programs or family.static_programs)


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


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


def _wraps_staticmethod(fn: Any) -> bool:
    """Whether ``fn`` or a function it wraps (``__wrapped__``: QNodes, ``functools.wraps``) is a
    ``staticmethod`` object."""
    seen = set()
    while fn is not None and id(fn) not in seen:
        if isinstance(fn, staticmethod):
            return True
        seen.add(id(fn))
        fn = getattr(fn, "__wrapped__", None)
    return False


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
        size_generic: with IREE installed (the ``iree`` extra: ``pip install -e '.[iree]'`` from a clone), compile the
            program once for every size and run new sizes on that executable while XLA compiles
            the sizes that come back (see docs/architecture.md). ``None`` (the default): on, unless
            the environment variable ``CATALYST_LITE_SIZE_GENERIC`` is ``0``; without IREE, off.

    keep_intermediate: as in Catalyst, keep what is compiled in a directory of the working
        directory named after the function, one per traced program (``QJIT.workspace``, see
        :mod:`.compiler.workspace`): the jaxpr and its StableHLO.

    Catalyst's other options (``target``, ``pipelines``, ``async_qnodes``, ``pass_plugins``...)
    are accepted and change nothing here (docs/catalyst-compatibility.md).

    ``jax.jit``'s options, with ``jax.jit``'s meaning, for each size's XLA compilation:
    ``donate_argnums``/``donate_argnames`` (arguments whose buffers the call may reuse),
    ``keep_unused``, ``device``/``backend``, ``compiler_options`` (XLA's), ``in_shardings`` and
    ``out_shardings`` (``jax.sharding`` shardings: one for every argument or result, or a pytree
    prefix of them; ``None``: unspecified). Donated or sharded calls are compiled by XLA only
    (no size-generic tier).

    ``state_sharding``: the state vector of every QNode in the program split over devices, as
    ``NamedSharding(mesh, P(axes))`` (or mesh axis names under ``jax.sharding.set_mesh``): see
    docs/scaling.md.

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
