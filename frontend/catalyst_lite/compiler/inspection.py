"""What a compiled function holds, as plain records (:meth:`catalyst_lite.QJIT.inspect`): readers
need not know the runners behind them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["LoopInfo", "SizeGenericInfo", "ProgramInfo", "FunctionInfo"]


@dataclass(frozen=True)
class LoopInfo:
    """A loop compiled whole (:mod:`.capacity`): ``kind`` (``"capacity buffers"`` or ``"bounded
    scan"``), its ``primitive`` name, whether it is ``supported`` (else run per size), its compiled
    ``executables``, the ``capacities`` (trip count buckets) they were compiled for, and those
    ``learned`` for sizes computed in the body."""

    kind: str
    primitive: str
    supported: bool
    executables: int
    capacities: frozenset
    learned: tuple[int, ...] = ()


@dataclass(frozen=True)
class SizeGenericInfo:
    """A program's size-generic tier: its ``status``, why it is unsupported, whether it was cached."""

    status: Any
    reason: str | None
    from_cache: bool


@dataclass(frozen=True)
class ProgramInfo:
    """One traced program (``jaxpr``, valid where its ``facts`` hold) and what runs it:
    ``strategies``, per ``(size signature, reverse mode)``, ``"xla"`` or ``"host"`` (segments
    around the ``host_steps``); ``speculations``, per size signature and ``int`` arguments,
    ``"compiled"``, ``"recorded"`` or ``"refused"``, and their ``misses``; its compiled ``loops``;
    its ``size_generic`` tier (or ``None``); ``fresh_consts`` (constants drawn anew at each call)
    and ``compile_options``."""

    jaxpr: Any
    facts: Any
    strategies: Mapping[tuple, str]
    host_steps: tuple[str, ...]
    speculations: Mapping[tuple, str]
    misses: Mapping[tuple, int]
    loops: tuple[LoopInfo, ...]
    size_generic: SizeGenericInfo | None
    fresh_consts: int
    compile_options: Mapping[str, Any]


@dataclass(frozen=True)
class FunctionInfo:
    """What a :class:`~catalyst_lite.QJIT` holds: its traced ``programs``, the ``last`` one called
    or traced, and ``validated_calls`` (argument types whose calls take the fast path)."""

    programs: tuple[ProgramInfo, ...]
    last: ProgramInfo | None
    validated_calls: int
