"""What a compiled function holds, as plain records: the public inspection API
(:meth:`catalyst_lite.QJIT.inspect`). Tests and users read these, never the runners themselves,
so the machinery behind them can change without breaking its readers.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> f = qjit(lambda x: x * 2.0, abstracted_axes={0: "n"})
>>> _ = f(jnp.ones(3)), f(jnp.ones(4))
>>> info = f.inspect()
>>> len(info.programs), dict(info.last.strategies)
(1, {((3,), False): 'xla', ((4,), False): 'xla'})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["LoopInfo", "SizeGenericInfo", "ProgramInfo", "FunctionInfo"]


@dataclass(frozen=True)
class LoopInfo:
    """A loop of a program compiled whole from the host (:mod:`.capacity`: a resizing loop on
    capacity buffers, or reverse mode through a run-time trip count as a bounded scan).

    ``kind``: ``"capacity buffers"`` or ``"bounded scan"``; ``primitive``: the loop's primitive
    name; ``supported``: whether it runs so (else per size, each body compiled per size
    signature); ``executables``: its compiled programs; ``capacities``: the capacities (trip
    count buckets for a scan) they were compiled for; ``learned``: capacities learned for sizes
    computed in the body (the length of ``a[-1:]``)."""

    kind: str
    primitive: str
    supported: bool
    executables: int
    capacities: frozenset
    learned: tuple[int, ...] = ()


@dataclass(frozen=True)
class SizeGenericInfo:
    """The size-generic tier of a program (:mod:`.size_generic`): its ``status`` (a
    :class:`~.size_generic.Status`), why it is unsupported (``reason``) and whether its
    executable was compiled before (in this process, or found in the disk cache)."""

    status: Any
    reason: str | None
    from_cache: bool


@dataclass(frozen=True)
class ProgramInfo:
    """One traced program and what runs it.

    ``jaxpr``: the traced ``ClosedJaxpr``; ``facts``: the size facts it holds for;
    ``strategies``: for each ``(size signature, reverse mode)`` specialized so far, ``"xla"``
    (one XLA executable) or ``"host"`` (host-driven: compiled segments around host steps);
    ``host_steps``: the primitives host-driven specializations split at; ``speculations``: for
    each speculation key (size signature and ``int`` arguments), ``"compiled"`` (the whole
    program runs as one XLA program), ``"recorded"`` (compiled at the next call) or ``"refused"``;
    ``misses``: predictions that did not hold, per key; ``loops``: its compiled loops;
    ``size_generic``: its IREE tier (``None``: none); ``fresh_consts``: constants drawn anew at
    each call (a QNode's PRNG key); ``compile_options``: the XLA options it is compiled with."""

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
    """What a :class:`~catalyst_lite.QJIT` holds: ``programs`` (every traced program),
    ``last`` (the program of the last call or trace, ``None`` before one) and
    ``validated_calls`` (argument types whose repeated calls take the fast path)."""

    programs: tuple[ProgramInfo, ...]
    last: ProgramInfo | None
    validated_calls: int
