"""Compiled specializations (by XLA on their first run), and the background compilation threads."""

from __future__ import annotations

import atexit
import contextlib
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
    """One size signature of a program: ``jitted`` serves tracers, :meth:`run` concrete arguments."""

    def __init__(self, jitted: Callable, lowered: jax.stages.Lowered | None = None,
                 compile_options: dict[str, Any] | None = None, report: Reporter = QUIET, label: str = ""):
        self.jitted = jitted
        self.report = report
        self.label = label  # what reports call it (the program and its sizes)
        self.compile_options = dict(compile_options or {})
        self._lowered = lowered  # until the first run compiles it
        self.call: Callable[..., Any] | None = None  # read without a lock on every call
        self.final: jax.stages.Compiled | None = None  # a qjit function's dispatcher may run it
        self._lock = threading.Lock()

    def compile(self, dynamic_args: Sequence[Any]) -> Callable[..., Any]:
        """Compile now for ``dynamic_args``, unless already compiled."""
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
            # Other dtypes than the first call's: refused before running; jax.jit compiles for them.
            return self.jitted(*dynamic_args)


class _BackgroundCompiler:
    """One daemon thread running tasks in order while there are any; at exit, tasks not started are
    dropped, and with ``finish_at_exit`` the one running is waited for (XLA's compiles)."""

    def __init__(self, name: str, finish_at_exit: bool) -> None:
        self._name = name
        self._tasks: queue.Queue[Callable[[], None]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # queuing a task, and the thread's exit
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
                with contextlib.suppress(Exception):  # background work is never required
                    task()
            finally:
                task = None  # it holds its program: not kept while waiting for the next
                self._tasks.task_done()

    def wait(self) -> None:
        self._tasks.join()

    def _discard_pending(self, finish_in_progress: bool) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self._tasks.get_nowait()
                self._tasks.task_done()
        if finish_in_progress:
            self._tasks.join()


# IREE's compiles on a thread of their own: a new size may wait for one, XLA's need not.
_background = _BackgroundCompiler("catalyst_lite-compile", finish_at_exit=True)
_size_generic_background = _BackgroundCompiler("catalyst_lite-iree", finish_at_exit=False)


def run_in_background(task: Callable[[], None], size_generic: bool = False) -> None:
    """Run ``task`` after those submitted before it on a background thread (``size_generic``: IREE's)."""
    (_size_generic_background if size_generic else _background).submit(task)


def wait_for_compilations() -> None:
    """Block until every background compilation has finished and been swapped in."""
    _size_generic_background.wait()
    _background.wait()
