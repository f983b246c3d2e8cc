"""Running a dynamic program at concrete sizes: :class:`JaxprRunner`, one compiled executable per
size signature, or compiled segments around host steps, later a :class:`Speculation` of the whole
program replaying them (see docs/architecture.md, "2. Specialize")."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..trace_context import current as current_context, scope as context_scope
from ..errors import ArgumentTypeError, CatalystLiteError
from ..jax_extras import DropVar, Jaxpr, Literal, Tracer, Var, is_tracing, x64_scope
from ..jax_extras.autodiff import is_concrete_value
from ..jax_extras.literals import literals_by_value
from .compilation import Specialization
from .options import RunnerOptions
from .specialize import (Mode, NeedsHost, any_traced, is_int_scalar, dimension_inputs, eval_jaxpr, needs_reverse_mode,
                         reverse_mode, reverse_mode_requested)

__all__ = ["JaxprRunner", "kept_by_program", "runner_for", "Speculation", "record_replay", "MAX_MISSES"]

# A replay: a host step's operands -> (its results at the predicted sizes, flags of the prediction).
Replay = Callable[[list[Any]], tuple[list[Any], list[Any]]]


class _Recording:
    """The trace context's ``replays``: what the host steps of the program being run left."""

    def __init__(self) -> None:
        self.outcomes: dict[Any, Replay] = {}  # host step equation -> its replay
        self.step: tuple[dict, Replay] | None = None  # what the host step running now left


@contextmanager
def recording() -> Iterator[dict[Any, Replay]]:
    """Collect the replays of the host steps run in this block (nested blocks share the outermost's)."""
    outer = current_context().replays
    if outer is not None:
        yield outer.outcomes
        return
    with context_scope(replays=_Recording()) as ctx:
        yield ctx.replays.outcomes


def record_replay(params: dict[str, Any], replay: Replay) -> None:
    """Called by a host rule that ran its equation (the one with these ``params``) compiled."""
    recorder = current_context().replays
    if recorder is not None:
        recorder.step = (params, replay)


def free_variables(eqns: Sequence[Any], outvars: Sequence[Any]) -> list[Var]:
    """The variables ``eqns`` and ``outvars`` read without defining them, in order of first use."""
    defined: set[Var] = set()
    free: dict[Var, None] = {}  # in order of first use
    for reads, writes in [*((eqn.invars, eqn.outvars) for eqn in eqns), (outvars, ())]:
        free.update((v, None) for v in reads if isinstance(v, Var) and v not in defined)
        defined.update(writes)
    return list(free)


class SegmentedProgram:
    """``program``'s jaxpr split at the host step ``index``: segments before and after it (runners
    sharing the program's options), the step run by its host rule."""

    def __init__(self, program: "JaxprRunner", index: int):
        jaxpr = self.jaxpr = program.jaxpr
        before, step, after = jaxpr.eqns[:index], jaxpr.eqns[index], jaxpr.eqns[index + 1 :]
        self.step, self.suffix_inputs = step, free_variables(after, jaxpr.outvars)
        defined_before = {v for e in before for v in e.outvars if not isinstance(v, DropVar)}
        needed_later = free_variables([step], []) + self.suffix_inputs
        self.prefix_outputs = list(dict.fromkeys(v for v in needed_later if v in defined_before))

        def segment(invars: Sequence[Var], eqns: Sequence[Any], outvars: Sequence[Any], where: str) -> Any:
            if not eqns:
                return None
            info = jaxpr.debug_info._replace(arg_names=("",) * len(invars), result_paths=("",) * len(outvars))
            sub = Jaxpr([], list(invars), list(outvars), list(eqns), jaxpr.effects, info)
            name = f"{program.name} ({where} {step.primitive})"
            return JaxprRunner(sub, name, program.options, program._nested)

        self._prefix = segment(jaxpr.invars, before, self.prefix_outputs, "before")
        self._suffix = segment(self.suffix_inputs, after, jaxpr.outvars, "after")

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        env: dict[Var, Any] = dict(zip(self.jaxpr.invars, args))
        if self._prefix is not None:
            env.update(zip(self.prefix_outputs, self._prefix(*args)))

        def read(atom: Any) -> Any:
            return atom.val if isinstance(atom, Literal) else env[atom]

        step, recorder = self.step, current_context().replays
        if recorder is not None:
            recorder.step = None
        outs = Mode.HOST.equation(step, [read(v) for v in step.invars], {})
        if recorder is not None:
            left, recorder.step = recorder.step, None
            if left is not None and left[0] is step.params:
                recorder.outcomes[step] = left[1]
        env.update((v, x) for v, x in zip(step.outvars, outs) if not isinstance(v, DropVar))
        if self._suffix is not None:
            return self._suffix(*[env[v] for v in self.suffix_inputs])
        return [read(v) for v in self.jaxpr.outvars]


class SpeculationFails(Exception):
    """Staging a speculation showed that a prediction cannot hold."""


# Predictions that may fail before a size signature stops speculating; speculations a runner keeps.
MAX_MISSES = 3
MAX_SPECULATIONS = 64


class Speculation:
    """The whole program compiled (``stage(overrides, finish)``, on the ``kept`` dynamic arguments),
    its host steps replayed at the sizes a segmented run found; ``missed`` runs it if they fail."""

    def __init__(self, outcomes: dict[Any, Replay], stage: Callable[[dict[Any, Callable], Callable], Callable],
                 missed: Callable[[Sequence[Any]], list[Any]], kept: Sequence[int] | None,
                 size_outputs: frozenset[int], compile_options: dict[str, Any]):
        self._flags: list[Any] = []

        def replayed(replay: Replay, invals: list[Any]) -> list[Any]:
            outs, flags = replay(invals)
            self._flags.extend(flags)
            return outs

        overrides = {eqn: functools.partial(replayed, replay) for eqn, replay in outcomes.items()}

        def with_flag(outs: list[Any]) -> list[Any]:
            flags, self._flags = self._flags, []
            known = [f for f in flags if not isinstance(f, Tracer)]
            if not all(np.all(np.asarray(f)) for f in known):
                raise SpeculationFails("a prediction fails at these sizes")
            traced = [f for f in flags if isinstance(f, Tracer)]
            self._checked = bool(traced)  # else every prediction holds whatever the values
            self._sizes = {k: outs[k] for k in size_outputs if type(outs[k]) is int}
            outs = [x for k, x in enumerate(outs) if k not in self._sizes]
            return [*outs, jnp.all(jnp.stack(traced))] if traced else outs

        self._jitted = stage(overrides, with_flag)
        self._missed = missed
        self._kept = None if kept is None else tuple(kept)
        self._options = compile_options
        self._spec: Specialization | None = None

    def direct(self) -> tuple[Any, tuple[int, ...] | None, frozenset[int]] | None:
        """The executable, its dynamic arguments and fixed outputs when a run is the executable's alone."""
        final = None if self._checked or self._spec is None else self._spec.final
        return None if final is None else (final, self._kept, frozenset(self._sizes))

    def _arguments(self, dynamic_args: Sequence[Any]) -> Sequence[Any]:
        return dynamic_args if self._kept is None else [dynamic_args[j] for j in self._kept]

    def lower(self, dynamic_args: Sequence[Any]) -> None:
        """Stage and lower (raises ``NeedsHost`` when a host step left no replay)."""
        with literals_by_value():  # as JaxprRunner lowers: many scalar constants lower fast
            lowered = self._jitted.lower(*self._arguments(dynamic_args))
        self._spec = Specialization(self._jitted, lowered, self._options)

    def run(self, dynamic_args: Sequence[Any]) -> list[Any]:
        """The program's outputs: the speculation's when its predictions held, else ``missed``'s."""
        outs = self._spec.run(self._arguments(dynamic_args))
        if self._checked:
            *outs, holds = outs
            if not np.asarray(holds):
                return self._missed(dynamic_args)
        if self._sizes:
            outs = list(outs)
            for k in sorted(self._sizes):
                outs.insert(k, self._sizes[k])
        return outs


def _size_outputs(jaxpr: Jaxpr) -> frozenset[int]:
    """Positions of ``jaxpr``'s outputs that are sizes of others (each variable's first)."""
    sizes = {d for v in jaxpr.outvars for d in getattr(v.aval, "shape", ()) if isinstance(d, Var)}
    first = {v: k for k, v in reversed(list(enumerate(jaxpr.outvars))) if isinstance(v, Var) and v in sizes}
    return frozenset(first.values())


_NOT_COMPILED = object()  # a missing entry of JaxprRunner._executables (None: host-driven)


class JaxprRunner:
    """Runs one jaxpr at concrete sizes, compiling it once per size signature (the values of its
    :func:`dimension_inputs`), or host-driven (``None``); its nested bodies' runners share its options."""

    def __init__(self, jaxpr: Jaxpr, name: str = "jaxpr", options: RunnerOptions | None = None,
                 nested: dict[int, tuple[Jaxpr, "JaxprRunner"]] | None = None):
        self.jaxpr = jaxpr
        self.name = name
        self.options = RunnerOptions() if options is None else options
        self.static_positions = tuple(sorted(dimension_inputs(jaxpr)))
        self.dynamic_positions = tuple(i for i in range(len(jaxpr.invars)) if i not in self.static_positions)
        # Keyed on the size signature and whether reverse mode is requested.
        self._executables: dict[tuple[tuple[int, ...], bool], Specialization | None] = {}
        self._segmented: dict[tuple[tuple[int, ...], bool], Callable[[Sequence[Any]], list[Any]]] = {}
        # Keyed on the size signature and the integer arguments (see _speculation_key).
        self._speculations: dict[tuple, Speculation | dict | None] = {}
        self._misses: dict[tuple, int] = {}
        self._staged_ints: set[tuple] = set()  # speculation keys staged whole first (see _run_host)
        self._int_positions = tuple(i for i in self.dynamic_positions if is_int_scalar(jaxpr.invars[i]))
        self._size_outputs = _size_outputs(jaxpr)
        self._lock = threading.Lock()
        self.size_generic: Any = None  # a .size_generic.SizeGenericTier, set by its Executable
        # What the program keeps for its nested bodies (see nested), shared with their runners.
        self._nested = {} if nested is None else nested
        self._reports_hits = nested is None  # a program's runner, not a body's (run per iteration)
        self.donated: frozenset[int] = frozenset()  # inputs donated to XLA (a program's, by qjit)

    def signature(self, args: Sequence[Any]) -> tuple[int, ...]:
        return tuple(int(args[i]) for i in self.static_positions)

    def _arguments(self, *placed: Iterable[tuple[int, Any]]) -> list[Any]:
        """The jaxpr's arguments from ``(position, value)`` pairs (its sizes, its dynamic inputs)."""
        values = dict(itertools.chain(*placed))
        return [values.get(i) for i in range(len(self.jaxpr.invars))]

    def _staged_function(self, key: tuple[int, ...], reverse: bool = False, overrides: Mapping | None = None,
                         finish: Callable = list, known: Mapping[int, int] | None = None) -> Callable:
        """The ``jax.jit`` function of the program at ``key``'s sizes, of its dynamic inputs not ``known``."""
        static = {**dict(zip(self.static_positions, key)), **(known or {})}
        positions = tuple(i for i in self.dynamic_positions if i not in static)
        jaxpr = self.jaxpr

        def specialized(*dynamic_args):
            args = self._arguments(static.items(), zip(positions, dynamic_args))
            with reverse_mode(reverse):
                return finish(eval_jaxpr(jaxpr, args, Mode.STAGED, overrides))

        specialized.__name__ = self.name
        donate = tuple(j for j, i in enumerate(positions) if i in self.donated)
        return jax.jit(specialized, donate_argnums=donate, **self.options.jit)

    def executable(self, key: tuple[int, ...], dynamic_args: Sequence[Any], reverse: bool = False
                   ) -> Specialization | None:
        """The specialization for ``key`` (``reverse``: for reverse mode), ``None``: host-driven."""
        spec = self._executables.get((key, reverse), _NOT_COMPILED)
        if spec is not _NOT_COMPILED:
            return spec
        with self._lock:
            spec = self._executables.get((key, reverse), _NOT_COMPILED)
            new = spec is _NOT_COMPILED
            if new:
                spec = self._executables[key, reverse] = self._specialize(key, dynamic_args, reverse)
        if new:
            self.options.report(
                "new specialization of %s for sizes %s%s: %s", self.name, key, " (reverse mode)" if reverse else "",
                "host-driven (a size is known only at run time)" if spec is None else "one XLA program",
            )
            if spec is not None:  # outside the lock: the cache may evict one of this runner's
                self.options.cache.added(self, (key, reverse))
        return spec

    def forget(self, key: tuple[tuple[int, ...], bool]) -> None:
        """Drop the executable of ``(sizes, reverse)``, evicted from the function's cache."""
        with self._lock:
            self._executables.pop(key, None)

    def _specialize(self, key: tuple[int, ...], dynamic_args: Sequence[Any], reverse: bool
                    ) -> Specialization | None:
        """Stage and lower the program at ``key``'s sizes; ``None`` when it needs the host."""
        fn = self._staged_function(key, reverse)
        try:
            with literals_by_value():  # thousands of scalar constants (a circuit's) lower fast
                lowered = fn.lower(*dynamic_args)
        except NeedsHost as err:
            self._segmented[key, reverse] = self._segmentation(err)
            return None
        lowered = None if any_traced(dynamic_args) else lowered
        return Specialization(fn, lowered, self.options.xla, self.options.report,
                              f"{self.name} at sizes {key}")

    def prepare(self, key: tuple[int, ...], dynamic_args: Sequence[Any], generation: int | None = None) -> None:
        """Compile ``key``'s XLA executable, then let calls use it (unless cleared since ``generation``)."""
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
        """What a repeated call with validated concrete ``args`` runs, if compiled (``None`` when tracing)."""
        if reverse_mode_requested() or is_tracing():
            return None
        key = (self.signature(args) if self.static_positions else (), False)
        spec = self._executables.get(key)
        if spec is not None:
            self._hit(key)
            return spec
        speculation = self._speculations.get(self._speculation_key(key[0], args)) if self._speculations else None
        return speculation if isinstance(speculation, Speculation) else None

    def _hit(self, key: tuple[tuple[int, ...], bool]) -> None:
        self.options.cache.used(self, key)
        if self._reports_hits and self.options.report.enabled:
            self.options.report("cache hit: %s at sizes %s", self.name, key[0])

    def __call__(self, *args: Any) -> list[Any]:
        key = self.signature(args) if self.static_positions else ()
        dynamic_args = [args[i] for i in self.dynamic_positions]
        reverse = needs_reverse_mode(dynamic_args)
        spec = self._executables.get((key, reverse), _NOT_COMPILED)
        if (spec is _NOT_COMPILED or spec is None) and self.size_generic is not None and not reverse:
            outs = self.size_generic.run(key, args)
            if outs is not None:
                return outs
            if spec is _NOT_COMPILED and not (any_traced(dynamic_args) or is_tracing()):
                start = time.perf_counter()  # a new size the tier left: it learns what that costs
                outs = self._run(key, reverse, args, dynamic_args, spec)
                self.size_generic.new_size_served(time.perf_counter() - start)
                return outs
        return self._run(key, reverse, args, dynamic_args, spec)

    def _run(self, key: tuple[int, ...], reverse: bool, args: Sequence[Any], dynamic_args: Sequence[Any],
             spec: Any) -> list[Any]:
        """The call at ``key`` with its executable ``spec`` (``_NOT_COMPILED``: specialized now)."""
        if spec is _NOT_COMPILED:
            spec = self.executable(key, dynamic_args, reverse)
        else:
            self._hit((key, reverse))
        if spec is None:
            if not all(is_concrete_value(a) for a in dynamic_args):  # hidden by an outer jax.jit or vmap
                forward = self.executable(key, dynamic_args) if reverse else None
                if forward is not None:  # only its reverse mode needs the host: derivatives by forward mode
                    return list(jacobian_transposable(forward.jitted, dynamic_args))
                raise ArgumentTypeError(
                    f"{self.name} must run host-driven (a size or a loop's trip count is only known "
                    "at run time, or a while loop is differentiated in reverse mode), which needs "
                    "concrete values, but it is called inside jax.jit or jax.vmap; call it outside."
                )
            with context_scope(host_driving=self):
                return self._run_host(key, reverse, args, dynamic_args)
        if any_traced(dynamic_args) or is_tracing():
            # Staged into the caller's program (also a qjit program called while another is traced).
            return list(spec.jitted(*dynamic_args))
        return list(spec.run(dynamic_args))

    def _run_host(self, key: tuple[int, ...], reverse: bool, args: Sequence[Any],
                  dynamic_args: Sequence[Any]) -> list[Any]:
        """A program that needs the host: its speculation for these arguments, else its segments."""
        if reverse:
            with reverse_mode(True):
                return self._segmented[key, True](args)
        skey = self._speculation_key(key, args)
        first = skey not in self._speculations and skey not in self._staged_ints
        if (first and any(v is not None for v in skey[1:]) and len(self._staged_ints) < MAX_SPECULATIONS
                and not any_traced(dynamic_args)):
            # Staged whole with its int arguments (trip counts) static first: there may be no host step.
            self._staged_ints.add(skey)
            speculation = self._speculate(skey, key, {}, dynamic_args, (CatalystLiteError,))
            if speculation is not None:
                self._speculations[skey] = speculation
        speculation = self._speculations.get(skey)
        if isinstance(speculation, dict):  # the replays of the last run: compiled at the second call
            speculation = self._speculations[skey] = self._speculate(skey, key, speculation, dynamic_args)
        return self._run_segmented(skey, key, args) if speculation is None else speculation.run(dynamic_args)

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
            self._speculations[skey] = dict(outcomes) if keep and not any_traced(args) else None
        return outs

    def _speculate(self, skey: tuple, key: tuple[int, ...], outcomes: dict, dynamic_args: Sequence[Any],
                   refused: tuple[type[Exception], ...] = ()) -> Speculation | None:
        """The whole program at ``key``, its host steps replayed (``None``: it cannot be, or ``refused``)."""
        known = {i: v for i, v in zip(self._int_positions, skey[1:]) if v is not None}
        kept = [j for j, i in enumerate(self.dynamic_positions) if i not in known] if known else None
        stage = functools.partial(self._staged_function, key, False, known=known)  # (overrides, finish)

        def missed(dynamic_args: Sequence[Any]) -> list[Any]:
            args = self._arguments(zip(self.static_positions, key), zip(self.dynamic_positions, dynamic_args))
            with x64_scope():  # the fast path of a repeated call may come without one
                return self._run_segmented(skey, key, args, missed=True)

        speculation = Speculation(outcomes, stage, missed, kept, self._size_outputs, self.options.xla)
        try:
            speculation.lower(dynamic_args)
        except (NeedsHost, SpeculationFails, *refused):
            return None
        return speculation

    def _segmentation(self, err: NeedsHost) -> Callable[[Sequence[Any]], list[Any]]:
        """How the program runs when staging raised ``err``: split around the equation that raised it."""
        if err.equation is None or err.equation[0] is not self.jaxpr:
            return lambda args: eval_jaxpr(self.jaxpr, args, Mode.HOST)
        return SegmentedProgram(self, err.equation[1])

    def lower(self, *args: Any) -> Any:
        """``jax.stages.Lowered`` of the specialization for these arguments (staged only)."""
        key = self.signature(args)
        dynamic_args = [args[i] for i in self.dynamic_positions]
        spec = self.executable(key, dynamic_args)
        if spec is None:
            raise NeedsHost(f"{self.name} has sizes known only at run time")
        return spec.jitted.lower(*dynamic_args)

    def describe(self) -> dict[str, Any]:
        """The fields of :class:`~.inspection.ProgramInfo` this runner knows."""
        return dict(
            strategies={key: "host" if spec is None else "xla" for key, spec in list(self._executables.items())},
            host_steps=tuple(str(p.step.primitive) for p in list(self._segmented.values())
                             if isinstance(p, SegmentedProgram)),
            speculations={key: "compiled" if isinstance(s, Speculation) else "recorded" if isinstance(s, dict)
                          else "refused" for key, s in list(self._speculations.items())},
            misses=dict(self._misses),
            compile_options=dict(self.options.xla),
        )

    def kept(self) -> list[Any]:
        """What this program keeps for its nested bodies (see :meth:`nested`)."""
        return [obj for _, obj in list(self._nested.values())]

    def nested(self, jaxpr: Jaxpr, kind: str, make: Callable[[], Any]) -> Any:
        """What this program keeps of ``kind`` for its nested body ``jaxpr``, made once by ``make``."""
        key = (kind, id(jaxpr))
        entry = self._nested.get(key)
        if entry is None or entry[0] is not jaxpr:
            with self._lock:
                entry = self._nested.get(key)
                if entry is None or entry[0] is not jaxpr:
                    entry = self._nested[key] = (jaxpr, make())
        return entry[1]


def kept_by_program(jaxpr: Jaxpr, kind: str, make: Callable[[JaxprRunner | None], Any]) -> Any:
    """What the program run host-driven keeps of ``kind`` for ``jaxpr`` (else ``make(None)`` afresh)."""
    program = current_context().host_driving
    return make(None) if program is None else program.nested(jaxpr, kind, lambda: make(program))


def runner_for(jaxpr: Jaxpr, name: str) -> JaxprRunner:
    """The :class:`JaxprRunner` of a nested body (see :func:`kept_by_program`)."""
    return kept_by_program(jaxpr, "runner", lambda program: JaxprRunner(jaxpr, name) if program is None else
                           JaxprRunner(jaxpr, name, program.options, program._nested))


def jacobian_transposable(fn: Callable[..., Sequence[Any]], args: Sequence[Any]) -> Sequence[Any]:
    """``fn(*args)`` whose derivative JAX can transpose although ``fn`` has loops of traced trip
    counts (a ``lax.while_loop``, which JAX cannot transpose): its JVP is the Jacobian, computed in
    forward mode from the primal values alone, times the tangents (linear in them). A complex
    argument is differentiated by its real and imaginary parts.

    Used where the values are hidden by an outer ``jax.jit`` (no host-driven reverse mode)."""

    @jax.custom_jvp
    def call(*xs: Any) -> Sequence[Any]:
        return fn(*xs)

    @call.defjvp
    def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        outs = fn(*primals)
        wrt = [i for i, x in enumerate(primals) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
        parts = [p for i in wrt for p in _real_parts(primals[i], jnp.iscomplexobj(primals[i]))]
        dirs = [d for i in wrt for d in _real_parts(tangents[i], jnp.iscomplexobj(primals[i]))]

        def of_parts(*ps: Any) -> Sequence[Any]:
            full, it = list(primals), iter(ps)
            for i in wrt:
                full[i] = next(it) + 1j * next(it) if jnp.iscomplexobj(primals[i]) else next(it)
            return fn(*full)

        jacobians = jax.jacfwd(of_parts, argnums=tuple(range(len(parts))))(*parts) if parts else None
        dots = []
        for k, out in enumerate(outs):
            if not jnp.issubdtype(out.dtype, jnp.inexact):
                dots.append(np.zeros(out.shape, jax.dtypes.float0))
                continue
            terms = [jnp.tensordot(jacobians[k][j], d, axes=np.ndim(d)) for j, d in enumerate(dirs)]
            dots.append(sum(terms, jnp.zeros_like(out)).astype(out.dtype))
        return outs, type(outs)(dots)

    return call(*args)


def _real_parts(x: Any, split: bool) -> list[Any]:
    """``[real, imag]`` of ``x`` if ``split`` (a complex argument, or its tangent), else ``[x]``."""
    return [jnp.real(x), jnp.imag(x)] if split else [x]
