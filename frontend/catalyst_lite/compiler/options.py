"""How a qjit function's programs are compiled (:class:`RunnerOptions`, shared by all their
runners), and the bounded cache of their executables."""

from __future__ import annotations

import collections
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping

from ..reporting import QUIET, Reporter

__all__ = ["RunnerOptions", "ExecutableCache", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 128  # executables a qjit function keeps (``cache_size``), about 1 MB each


class ExecutableCache:
    """A qjit function's compiled executables, least recently used first, evicted beyond ``maxsize``;
    ``when_full`` runs when one is added to a full cache (the C++ dispatcher bypasses :meth:`used`)."""

    def __init__(self, maxsize: int | None = DEFAULT_CACHE_SIZE, when_full: Callable[[], None] | None = None):
        self.maxsize = maxsize
        self.when_full = when_full
        # (id(runner), key) -> (runner, key); the runner is held, so its id stays its own.
        self._entries: collections.OrderedDict[tuple, tuple[Any, Hashable]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.generation = 0  # counts the clears: work started before one is not added

    def added(self, runner: Any, key: Hashable, generation: int | None = None) -> None:
        """``runner`` compiled ``key``'s executable (dropped if :meth:`clear` came since ``generation``)."""
        with self._lock:
            stale = generation is not None and generation != self.generation
            evicted = [(runner, key)] if stale else []
            if not stale:
                self._entries[id(runner), key] = (runner, key)
            while self.maxsize is not None and len(self._entries) > self.maxsize:
                evicted.append(self._entries.popitem(last=False)[1])
            full = not self.has_room()
        if full and self.when_full is not None:
            self.when_full()
        for old_runner, old_key in evicted:
            old_runner.forget(old_key)

    def has_room(self) -> bool:
        return self.maxsize is None or len(self._entries) < self.maxsize

    def used(self, runner: Any, key: Hashable) -> None:
        """``runner``'s executable for ``key`` ran (it becomes the most recently used)."""
        with contextlib.suppress(KeyError):  # evicted meanwhile, or never compiled (host-driven)
            self._entries.move_to_end((id(runner), key))

    def clear(self) -> None:
        """Drop every executable, and those being compiled."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), collections.OrderedDict()
            self.generation += 1
        for runner, key in entries:
            runner.forget(key)

    def keys(self) -> list[Hashable]:
        """The keys of the executables held, least recently used first."""
        return [key for _, key in list(self._entries.values())]


@dataclass(frozen=True)
class RunnerOptions:
    """How the runners of one qjit function's programs compile and report (``jit``: ``jax.jit``'s options)."""

    xla: Mapping[str, Any] = field(default_factory=dict)
    cache: ExecutableCache = field(default_factory=lambda: ExecutableCache(None))
    report: Reporter = QUIET
    size_generic: bool | None = None
    jit: Mapping[str, Any] = field(default_factory=dict)
