"""Compiled specializations, and the background compilation thread.

A program called at a size it has not seen is specialized, lowered and compiled by XLA (at its
default optimization level) on its first run. Sizes that come back to the size-generic tier
(:mod:`.size_generic`) are compiled on a background thread, so that no call waits for them; its
IREE compiles run on another.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from typing import Any, Callable, Sequence

import jax

from ..jax_extras import x64_scope
from ..jax_extras.executables import entry_point
from ..reporting import QUIET, Reporter

__all__ = ["Specialization", "run_in_background", "wait_for_compilations"]


class Specialization:
    """One size signature of a program, compiled.

    ``jitted`` (a ``jax.jit`` function) serves calls on tracers of an outer transformation and
    lowering; :meth:`run` runs concrete arguments through the executable (compiled on the first
    one, from ``lowered`` when given).
    """

    def __init__(
        self,
        jitted: Callable,
        lowered: jax.stages.Lowered | None = None,
        compile_options: dict[str, Any] | None = None,
        report: Reporter = QUIET,
        label: str = "",
    ):
        self.jitted = jitted
        self.report = report
        self.label = label  # what reports call it (the program and its sizes)
        self.compile_options = dict(compile_options or {})
        self._lowered = lowered  # lowered for concrete arguments, until the first run compiles it
        # Read without a lock on every call.
        self.call: Callable[..., Any] | None = None
        # The compiled executable: a qjit function's own dispatcher may run it directly (see
        # compiled.py).
        self.final: jax.stages.Compiled | None = None
        self._lock = threading.Lock()

    def compile(self, dynamic_args: Sequence[Any]) -> Callable[..., Any]:
        """Compile now (for the first run's ``dynamic_args``), unless already compiled."""
        with self._lock:
            if self.call is None:
                lowered = self._lowered or self.jitted.lower(*dynamic_args)
                self._lowered = None
                start = time.perf_counter()
                with x64_scope():  # also on the background thread, which starts in 32-bit mode
                    compiled = lowered.compile(self.compile_options or None)
                    self.call = entry_point(compiled)
                self.final = compiled
                self.report("XLA compiled %s in %.3f s", self.label, time.perf_counter() - start)
            return self.call

    def run(self, dynamic_args: Sequence[Any]) -> Sequence[Any]:
        """Run on concrete arguments (of the types lowered for, else through ``jitted``)."""
        call = self.call or self.compile(dynamic_args)
        try:
            return call(*dynamic_args)
        except TypeError:
            # Arguments of other dtypes than the first call's (same sizes): the executable
            # refuses them before running; jax.jit compiles for them.
            return self.jitted(*dynamic_args)


class _BackgroundCompiler:
    """One daemon thread running compilations in order (bounded: compiles are CPU-heavy, so more
    threads would slow the foreground; daemon: a pending compile never holds up exit). The thread
    exits when no task is left, and the next task starts another: an idle process keeps none.

    ``finish_at_exit``: at exit, tasks not started are dropped and the one in progress is waited
    for (XLA's: it must not be torn down under a compile), or not waited for (IREE's: its compile
    is a subprocess, killed at exit by :mod:`.iree_backend`)."""

    def __init__(self, name: str, finish_at_exit: bool) -> None:
        self._name = name
        self._tasks: queue.Queue[Callable[[], None]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # a task is queued and the thread's exit decided under it
        atexit.register(self._discard_pending, finish_at_exit)

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.put(task)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                try:
                    task = self._tasks.get_nowait()
                except queue.Empty:
                    self._thread = None  # idle: the next submit starts a new thread
                    return
            try:
                task()
            except Exception:
                pass  # what runs meanwhile keeps serving: background work is never required
            finally:
                # Not kept while waiting for the next: the task holds its program (and a dropped
                # function's executables would live on).
                task = None
                self._tasks.task_done()

    def wait(self) -> None:
        """Block until every submitted compilation has finished."""
        self._tasks.join()

    def _discard_pending(self, finish_in_progress: bool) -> None:
        """At exit, drop compilations not started (the results would go unused) and, when
        ``finish_in_progress``, let the one in progress finish."""
        while True:
            try:
                self._tasks.get_nowait()
            except queue.Empty:
                break
            self._tasks.task_done()
        if finish_in_progress:
            self._tasks.join()


# XLA's compiles of sizes that came back; the size-generic tier's IREE compiles, on a thread of
# their own (a new size may wait for one; an XLA compile need not wait behind it).
_background = _BackgroundCompiler("catalyst_lite-compile", finish_at_exit=True)
_size_generic_background = _BackgroundCompiler("catalyst_lite-iree", finish_at_exit=False)


def run_in_background(task: Callable[[], None], size_generic: bool = False) -> None:
    """Run ``task`` on a background compilation thread, after those submitted before it (an
    exception it raises is dropped: background work is never required). ``size_generic``: an
    IREE compile (its own thread, not waited for at exit)."""
    (_size_generic_background if size_generic else _background).submit(task)


def wait_for_compilations() -> None:
    """Block until every background compilation has finished and been swapped in: results are
    then those of XLA's executables. Tests and benchmarks call it."""
    _size_generic_background.wait()
    _background.wait()
