"""Compiled specializations, and the background compilation thread.

A program called at a size it has not seen is specialized, lowered and compiled by XLA (at its
default optimization level) on its first run. The size-generic tier (:mod:`.size_generic`)
compiles on one background thread, so that no call waits for it.
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
    """One daemon thread running compilations in order (bounded: XLA compiles are CPU-heavy, so
    more threads would slow the foreground; daemon: a pending compile never holds up exit)."""

    def __init__(self) -> None:
        self._tasks: queue.Queue[Callable[[], None]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        atexit.register(self._discard_pending)

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="catalyst_lite-compile", daemon=True
                )
                self._thread.start()
        self._tasks.put(task)

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
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

    def _discard_pending(self) -> None:
        """At exit, drop compilations not started (the results would go unused) and let the one
        in progress finish, so that XLA is not torn down under it."""
        while True:
            try:
                self._tasks.get_nowait()
            except queue.Empty:
                break
            self._tasks.task_done()
        self._tasks.join()


_background = _BackgroundCompiler()


def run_in_background(task: Callable[[], None]) -> None:
    """Run ``task`` on the background compilation thread, after those submitted before it (an
    exception it raises is dropped: background work is never required)."""
    _background.submit(task)


def wait_for_compilations() -> None:
    """Block until every background compilation has finished and been swapped in: results are
    then those of XLA's executables. Tests and benchmarks call it."""
    _background.wait()
