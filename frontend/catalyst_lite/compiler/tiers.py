"""Compiled specializations, and tiered compilation: run a new size at once, optimize it later.

A program called at a size it has not seen is specialized, lowered and compiled by XLA before it
runs; XLA's code generation (LLVM at optimization level 2) is most of that time. With tiered
compilation a new size is compiled at optimization level 0 (about half the time), used at once,
and compiled again with the default optimizations on a background thread; the optimized
executable replaces the fast one when it is ready. A call never waits for the background work.

Tiering is off unless asked for (``qjit(tiered_compilation=True)`` or the environment variable
``CATALYST_LITE_TIERED=1``): XLA's CPU code generation at level 0 does not round exactly as at
level 2 (sums and ``exp``/``tanh`` differ in the last bits on some sizes), so the fast tier's
results are not bit-identical to ``jax.jit``'s; the optimized tier's are.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from typing import Any, Callable, Sequence

import jax

from ..jax_extras import x64_scope
from ..jax_extras.executables import entry_point

__all__ = [
    "FAST_TIER_OPTIONS",
    "Specialization",
    "tiered_by_default",
    "wait_for_compilations",
]

# XLA options of the fast tier, through the public ``Lowered.compile`` (HLO passes are unchanged;
# only the backend's code generation is cheaper).
FAST_TIER_OPTIONS = {"xla_backend_optimization_level": 0}
TIERED_ENV_VAR = "CATALYST_LITE_TIERED"


def tiered_by_default() -> bool:
    """Whether programs use tiered compilation when ``qjit`` is not told (the environment)."""
    return os.environ.get(TIERED_ENV_VAR, "0").strip().lower() in ("1", "true", "yes", "on")


class Specialization:
    """One size signature of a program, compiled.

    ``jitted`` (a ``jax.jit`` function) serves calls on tracers of an outer transformation and
    lowering; :meth:`run` runs concrete arguments through the best executable compiled so far
    (compiled on the first concrete run when it was first called on tracers).
    """

    def __init__(self, jitted: Callable, tiered: bool):
        self.jitted = jitted
        self.tiered = tiered
        self.optimized = False
        # Read without a lock on every call: replacing it is one atomic attribute store.
        self.call: Callable[..., Any] | None = None
        self._lock = threading.Lock()

    def compile(self, lowered: jax.stages.Lowered) -> None:
        """Compile ``lowered`` (this specialization, lowered for concrete arguments): at the fast
        tier now and optimized in the background when tiered, else optimized now."""
        with self._lock:
            if self.call is not None:
                return
            if not self.tiered:
                self._optimize(lowered)
                return
            self.call = entry_point(lowered.compile(FAST_TIER_OPTIONS))
        _background.submit(lambda: self._optimize(lowered))

    def _optimize(self, lowered: jax.stages.Lowered) -> None:
        with x64_scope():  # a background thread: catalyst_lite's configuration, not the default
            self.call = entry_point(lowered.compile())
        self.optimized = True

    def run(self, dynamic_args: Sequence[Any]) -> Sequence[Any]:
        """Run on concrete arguments (of the types lowered for, else through ``jitted``)."""
        call = self.call
        if call is None:
            self.compile(self.jitted.lower(*dynamic_args))
            call = self.call
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
        self._tasks: queue.Queue[Callable[[], None] | None] = queue.Queue()
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
                if task is not None:
                    task()
            except Exception:
                pass  # the fast tier keeps serving: an optimization is never required
            finally:
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


def wait_for_compilations() -> None:
    """Block until every background (optimized-tier) compilation has finished and been swapped
    in: results are then those of the optimized executables. Tests and benchmarks call it."""
    _background.wait()
