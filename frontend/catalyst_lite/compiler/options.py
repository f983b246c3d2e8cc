"""How a qjit function's programs are compiled (:class:`RunnerOptions`, shared by every runner of its
programs, nested bodies included), and the bounded cache of their executables.

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
from typing import Any, Callable, Hashable, Mapping, Protocol

from ..reporting import QUIET, Reporter

__all__ = ["RunnerOptions", "ExecutableCache", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 128
"""Compiled executables a qjit function keeps by default (``qjit(cache_size=...)``). An
executable of a small program takes about a megabyte; a function called at thousands of sizes
keeps the most recently used ones."""


class _Runner(Protocol):
    def forget(self, key: Hashable) -> None: ...


class ExecutableCache:
    """The compiled executables of one qjit function (of all its programs and their nested
    bodies), least recently used first; beyond ``maxsize`` (``None``: no bound) the least
    recently used one is dropped (its sizes compile again when they come back).

    ``when_full`` runs whenever an executable is added to a full cache: calls that bypass
    :meth:`used` (a qjit function's C++ dispatcher) must stop doing so from then on, or the
    order that decides evictions would miss them."""

    def __init__(self, maxsize: int | None = DEFAULT_CACHE_SIZE, when_full: Callable[[], None] | None = None):
        self.maxsize = maxsize
        self.when_full = when_full
        # (id(runner), key) -> (runner, key); the runner is held, so its id stays its own.
        self._entries: collections.OrderedDict[tuple[int, Hashable], tuple[_Runner, Hashable]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()
        # Counts the clears: work started before one (a background compilation) is not added.
        self.generation = 0

    def added(self, runner: _Runner, key: Hashable, generation: int | None = None) -> None:
        """``runner`` compiled an executable for ``key``; evicts beyond the bound. An executable
        whose compilation started in an earlier ``generation`` (before a :meth:`clear`) is not
        kept: ``runner`` forgets it."""
        with self._lock:
            stale = generation is not None and generation != self.generation
            if not stale:
                self._entries[id(runner), key] = (runner, key)
            evicted = []
            while self.maxsize is not None and len(self._entries) > self.maxsize:
                evicted.append(self._entries.popitem(last=False)[1])
            full = not self.has_room()
        if full and self.when_full is not None:
            self.when_full()
        if stale:
            evicted.append((runner, key))
        for old_runner, old_key in evicted:
            old_runner.forget(old_key)

    def has_room(self) -> bool:
        """Whether an executable can be added without evicting one."""
        return self.maxsize is None or len(self._entries) < self.maxsize

    def used(self, runner: _Runner, key: Hashable) -> None:
        """``runner``'s executable for ``key`` ran (it becomes the most recently used)."""
        try:
            self._entries.move_to_end((id(runner), key))
        except KeyError:  # evicted meanwhile by another thread, or never compiled (host-driven)
            pass

    def clear(self) -> None:
        """Drop every executable, and those whose compilations are under way."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), collections.OrderedDict()
            self.generation += 1
        for runner, key in entries:
            runner.forget(key)

    def keys(self) -> list[Hashable]:
        """The keys (size signatures) of the executables held, least recently used first."""
        return [key for _, key in list(self._entries.values())]

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class RunnerOptions:
    """How the runners of one qjit function's programs compile and report.

    ``xla``: XLA options of the executables; ``cache``: the function's executables;
    ``report``: where events go; ``size_generic``: the size-generic tier of a program's runner
    (``None``: as the environment says, see :mod:`.size_generic`); ``jit``: ``jax.jit``'s options
    of every size's function (``keep_unused``, ``device``, ``backend``).
    """

    xla: Mapping[str, Any] = field(default_factory=dict)
    cache: ExecutableCache = field(default_factory=lambda: ExecutableCache(None))
    report: Reporter = QUIET
    size_generic: bool | None = None
    jit: Mapping[str, Any] = field(default_factory=dict)
