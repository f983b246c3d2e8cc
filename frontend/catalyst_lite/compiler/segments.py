"""Segmentation: run a program that needs the host as compiled segments around its host steps.

A program whose sizes are known only after part of it ran (a loop resizing an array, a ``cond``
whose branches return different sizes, a loop transposed in reverse mode) cannot be one XLA
program: staging it raises :class:`~.specialize.NeedsHost` at one of its equations. Rather than
evaluating the whole jaxpr eagerly, one primitive at a time, the jaxpr is split there::

    prefix  = the equations before it       (one compiled program)
    step    = that equation                 (its host rule, on concrete values)
    suffix  = the equations after it        (a program of its own, split again if it needs)

Each part is run by a runner keyed on its *own* size inputs, so the prefix is compiled once per
size signature of the program, and the suffix once per size signature of the values it receives
(sizes the host step computed included). Only the boundaries are driven from Python.

>>> import jax, jax.numpy as jnp
>>> closed = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0 + 1.0)(1.0)
>>> s = split_at(closed.jaxpr, 1)
>>> str(s.step.primitive), len(s.prefix.eqns), len(s.suffix.eqns)
('mul', 1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..jax_extras import DropVar, Jaxpr, Literal, Var

__all__ = ["Segmentation", "SegmentedProgram", "free_variables", "split_at"]


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
    (compiled per size signature, segmenting itself again if it needs the host) and
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

        outs = self._run_step(s.step, [read(v) for v in s.step.invars])
        env.update((v, x) for v, x in zip(s.step.outvars, outs) if not isinstance(v, DropVar))
        if self._suffix is not None:
            return self._suffix(*[env[v] for v in s.suffix_inputs])
        return [read(v) for v in s.jaxpr.outvars]
