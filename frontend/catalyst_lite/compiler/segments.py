"""Segmentation: run a program that needs the host as compiled segments around its host steps.

Staging a program whose sizes are known only after part of it ran raises
:class:`~.specialize.NeedsHost` at one equation; the jaxpr is split there into a prefix (compiled),
the step (its host rule, on concrete values) and a suffix (split again if it needs), each run by a
runner keyed on its own size inputs. A host step that ran compiled leaves a replay; on a repeated
call :class:`Speculation` stages the whole program with its replays, one XLA program whose flags
say whether the sizes found last time held. See docs/architecture.md, "2. Specialize".

>>> import jax, jax.numpy as jnp
>>> closed = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0 + 1.0)(1.0)
>>> s = split_at(closed.jaxpr, 1)
>>> str(s.step.primitive), len(s.prefix.eqns), len(s.suffix.eqns)
('mul', 1, 1)
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import jax.numpy as jnp
import numpy as np

from ..trace_context import current as current_context, scope as context_scope
from ..jax_extras import DropVar, Jaxpr, Literal, Tracer, Var
from ..jax_extras.literals import literals_by_value
from .compilation import Specialization

__all__ = ["Segmentation", "SegmentedProgram", "Speculation", "free_variables", "split_at", "recording",
           "record_replay", "Replay", "MAX_MISSES", "MAX_SPECULATIONS"]

# A replay: the host step's equation operands -> (its results at the predicted sizes, flags that
# are true when the prediction holds: traced, or known booleans).
Replay = Callable[[list[Any]], tuple[list[Any], list[Any]]]


class _Recording:
    """The trace context's ``replays``: what the host steps of the program being run left."""

    def __init__(self) -> None:
        self.outcomes: dict[Any, Replay] = {}  # host step equation -> its replay
        self.step: tuple[dict, Replay] | None = None  # what the host step running now left


@contextmanager
def recording() -> Iterator[dict[Any, Replay]]:
    """Collect the replays of the host steps run in this block (nested blocks share the
    outermost one's: a suffix's steps belong to the program too)."""
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
    free: dict[Var, None] = {}

    def use(atom: Any) -> None:
        if isinstance(atom, Var) and not isinstance(atom, DropVar) and atom not in defined:
            free.setdefault(atom, None)

    for eqn in eqns:
        for v in eqn.invars:
            use(v)
        defined.update(v for v in eqn.outvars if not isinstance(v, DropVar))
    for v in outvars:
        use(v)
    return list(free)


def _sub_jaxpr(parent: Jaxpr, invars: Sequence[Var], eqns: Sequence[Any], outvars: Sequence[Any]) -> Jaxpr:
    debug_info = parent.debug_info._replace(arg_names=("",) * len(invars), result_paths=("",) * len(outvars))
    return Jaxpr([], list(invars), list(outvars), list(eqns), parent.effects, debug_info)


@dataclass(frozen=True)
class Segmentation:
    """``jaxpr`` split at equation ``index``: ``prefix`` (the program's inputs to the values the
    rest reads), the host ``step``, and ``suffix`` (the values it reads to the program's outputs).
    ``prefix`` and ``suffix`` are ``None`` when they have no equations."""

    jaxpr: Jaxpr
    prefix: Jaxpr | None
    step: Any
    suffix: Jaxpr | None
    suffix_inputs: list[Var]


def split_at(jaxpr: Jaxpr, index: int) -> Segmentation:
    """Split ``jaxpr`` (no constvars) before and after its equation ``index``."""
    eqns = jaxpr.eqns
    before, step, after = eqns[:index], eqns[index], eqns[index + 1 :]
    suffix_inputs = free_variables(after, jaxpr.outvars)
    needed_later = free_variables([step], []) + suffix_inputs
    defined_before = {v for e in before for v in e.outvars if not isinstance(v, DropVar)}
    prefix_outputs = list(dict.fromkeys(v for v in needed_later if v in defined_before))
    prefix = _sub_jaxpr(jaxpr, jaxpr.invars, before, prefix_outputs) if before else None
    suffix = _sub_jaxpr(jaxpr, suffix_inputs, after, jaxpr.outvars) if after else None
    return Segmentation(jaxpr, prefix, step, suffix, suffix_inputs)


class SegmentedProgram:
    """Runs a :class:`Segmentation`: ``make_runner(jaxpr, name)`` gives the runner of a segment
    (compiled per size signature, segmenting itself again if it needs the host), and
    ``run_step(eqn, invals)`` runs the host equation."""

    def __init__(
        self,
        segmentation: Segmentation,
        name: str,
        make_runner: Callable[[Jaxpr, str], Callable[..., list[Any]]],
        run_step: Callable[[Any, list[Any]], list[Any]],
    ):
        self.segmentation = segmentation
        s = segmentation
        self._prefix = make_runner(s.prefix, f"{name} (before {s.step.primitive})") if s.prefix else None
        self._suffix = make_runner(s.suffix, f"{name} (after {s.step.primitive})") if s.suffix else None
        self._run_step = run_step

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        s = self.segmentation
        env: dict[Var, Any] = dict(zip(s.jaxpr.invars, args))
        if self._prefix is not None:
            env.update(zip(s.prefix.outvars, self._prefix(*args)))

        def read(atom: Any) -> Any:
            return atom.val if isinstance(atom, Literal) else env[atom]

        recorder = current_context().replays
        if recorder is not None:
            recorder.step = None
        outs = self._run_step(s.step, [read(v) for v in s.step.invars])
        if recorder is not None:
            left, recorder.step = recorder.step, None
            if left is not None and left[0] is s.step.params:
                recorder.outcomes[s.step] = left[1]
        env.update((v, x) for v, x in zip(s.step.outvars, outs) if not isinstance(v, DropVar))
        if self._suffix is not None:
            return self._suffix(*[env[v] for v in s.suffix_inputs])
        return [read(v) for v in s.jaxpr.outvars]


class SpeculationFails(Exception):
    """Staging a speculation showed that a prediction cannot hold."""


# After this many predictions that did not hold, a size signature stops speculating; a runner
# keeps at most this many speculations (one per size signature and integer arguments).
MAX_MISSES = 3
MAX_SPECULATIONS = 64


class Speculation:
    """The whole program as one compiled program, its host steps replayed at the sizes a
    segmented run found (see the module docstring). ``stage(overrides, finish)`` gives the
    ``jax.jit`` function of the program whose equations in ``overrides`` run by these rules
    instead of their own, its outputs passed through ``finish``, taking the ``kept`` positions of
    the runner's dynamic arguments (``None``: all; the others are known, static); ``missed(dynamic_args)`` runs
    the program otherwise, when a prediction does not hold. Outputs at ``size_outputs`` (sizes of
    other outputs) that the predictions fix are Python ints."""

    def __init__(self, outcomes: dict[Any, Replay], stage: Callable[[dict[Any, Callable], Callable], Callable],
                 missed: Callable[[Sequence[Any]], list[Any]], kept: Sequence[int] | None,
                 size_outputs: frozenset[int], compile_options: dict[str, Any]):
        self._flags: list[Any] = []

        def rule(replay: Replay) -> Callable[[list[Any]], list[Any]]:
            def replayed(invals: list[Any]) -> list[Any]:
                outs, flags = replay(invals)
                self._flags.extend(flags)
                return outs

            return replayed

        overrides = {eqn: rule(replay) for eqn, replay in outcomes.items()}

        def with_flag(outs: list[Any]) -> list[Any]:
            flags, self._flags = self._flags, []
            known = [f for f in flags if not isinstance(f, Tracer)]
            if not all(np.all(np.asarray(f)) for f in known):
                raise SpeculationFails("a prediction fails at these sizes")
            traced = [f for f in flags if isinstance(f, Tracer)]
            self._checked = bool(traced)  # else every prediction holds whatever the values
            # Sizes the prediction fixes are returned from here, not computed by XLA.
            self._sizes = {k: outs[k] for k in size_outputs if type(outs[k]) is int}
            outs = [x for k, x in enumerate(outs) if k not in self._sizes]
            return [*outs, jnp.all(jnp.stack(traced))] if traced else outs

        self._jitted = stage(overrides, with_flag)
        self._missed = missed
        self._kept = None if kept is None else tuple(kept)
        self._options = compile_options
        self._spec: Specialization | None = None

    def _arguments(self, dynamic_args: Sequence[Any]) -> Sequence[Any]:
        kept = self._kept
        return dynamic_args if kept is None else [dynamic_args[j] for j in kept]

    def lower(self, dynamic_args: Sequence[Any]) -> None:
        """Stage and lower (raises ``NeedsHost`` when a host step left no replay)."""
        with literals_by_value():  # as JaxprRunner lowers: many scalar constants lower fast
            lowered = self._jitted.lower(*self._arguments(dynamic_args))
        self._spec = Specialization(self._jitted, lowered, self._options)

    def run(self, dynamic_args: Sequence[Any]) -> list[Any]:
        """The program's outputs: the speculation's when its predictions held (one read of a
        flag), else ``missed``'s."""
        outs = self._spec.run(self._arguments(dynamic_args))
        if self._checked:
            *outs, holds = outs
            if not np.asarray(holds):
                return self._missed(dynamic_args)
        if self._sizes:
            outs = list(outs)
            for k, size in self._sizes.items():
                outs.insert(k, size)
        return outs
