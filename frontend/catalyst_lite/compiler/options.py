"""How a qjit function's programs are compiled, and the bounded cache of their executables.

:class:`CompileOptions` travels from ``qjit`` to every runner of its programs, nested bodies
included: XLA options, where to report (:mod:`catalyst_lite.reporting`) and
the function's :class:`ExecutableCache`, whether programs get a size-generic tier.

>>> cache = ExecutableCache(maxsize=2)
>>> class Runner:
...     def forget(self, key):
...         print("evicted", key)
>>> r = Runner()
>>> cache.added(r, (3,)); cache.added(r, (4,)); cache.used(r, (3,)); cache.added(r, (5,))
evicted (4,)
>>> cache.keys()
[(3,), (5,)]
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Protocol

from ..reporting import QUIET, Reporter

__all__ = ["CompileOptions", "ExecutableCache", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 128
"""Compiled executables a qjit function keeps by default (``qjit(cache_size=...)``). An
executable of a small program takes about a megabyte; a function called at thousands of sizes
keeps the most recently used ones."""


class _Runner(Protocol):
    def forget(self, key: Hashable) -> None: ...


class ExecutableCache:
    """The compiled executables of one qjit function (of all its programs and their nested
    bodies), least recently used first; beyond ``maxsize`` (``None``: no bound) the least
    recently used one is dropped (its sizes compile again when they come back)."""

    def __init__(self, maxsize: int | None = DEFAULT_CACHE_SIZE):
        self.maxsize = maxsize
        # (id(runner), key) -> (runner, key); the runner is held, so its id stays its own.
        self._entries: collections.OrderedDict[tuple[int, Hashable], tuple[_Runner, Hashable]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def added(self, runner: _Runner, key: Hashable) -> None:
        """``runner`` compiled an executable for ``key``; evicts beyond the bound."""
        with self._lock:
            self._entries[id(runner), key] = (runner, key)
            evicted = []
            while self.maxsize is not None and len(self._entries) > self.maxsize:
                evicted.append(self._entries.popitem(last=False)[1])
        for old_runner, old_key in evicted:
            old_runner.forget(old_key)

    def used(self, runner: _Runner, key: Hashable) -> None:
        """``runner``'s executable for ``key`` ran (it becomes the most recently used)."""
        try:
            self._entries.move_to_end((id(runner), key))
        except KeyError:  # evicted meanwhile by another thread, or never compiled (host-driven)
            pass

    def clear(self) -> None:
        """Drop every executable."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), collections.OrderedDict()
        for runner, key in entries:
            runner.forget(key)

    def keys(self) -> list[Hashable]:
        """The keys (size signatures) of the executables held, least recently used first."""
        return [key for _, key in list(self._entries.values())]

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class CompileOptions:
    """How the runners of one qjit function's programs compile and report.

    ``xla``: XLA options of the executables; ``cache``: the function's executables;
    ``report``: where events go; ``size_generic``: the size-generic tier of a program's runner
    (``None``: as the environment says, see :mod:`.size_generic`).
    """

    xla: Mapping[str, Any] = field(default_factory=dict)
    cache: ExecutableCache = field(default_factory=lambda: ExecutableCache(None))
    report: Reporter = QUIET
    size_generic: bool | None = None
