"""Compiled specializations, and tiered compilation: run a new size at once, optimize it later.

A program called at a size it has not seen is specialized, lowered and compiled by XLA before it
runs; XLA's code generation (LLVM at optimization level 2) is most of that time. With tiered
compilation a new size is compiled at optimization level 0 (about half the time) and used at
once; when the size is used again, it is compiled with the default optimizations on a background
thread, and the optimized executable replaces the fast one when it is ready. A call never waits
for the background work.

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
import time
from typing import Any, Callable, Sequence

import jax

from ..jax_extras import x64_scope
from ..jax_extras.executables import entry_point
from ..reporting import QUIET, Reporter

__all__ = [
    "FAST_TIER_OPTIONS",
    "Specialization",
    "run_in_background",
    "tiered_by_default",
    "wait_for_compilations",
]

# XLA options of the fast tier, through the public ``Lowered.compile`` (HLO passes are unchanged;
# only the backend's code generation is cheaper): LLVM at level 0, and XLA's older per-instruction
# emitters instead of the fusion emitters (a quarter less compile time, the same results as level
# 0 alone on the benchmark programs).
FAST_TIER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
TIERED_ENV_VAR = "CATALYST_LITE_TIERED"


def tiered_by_default() -> bool:
    """Whether programs use tiered compilation when ``qjit`` is not told (the environment)."""
    return os.environ.get(TIERED_ENV_VAR, "0").strip().lower() in ("1", "true", "yes", "on")


class Specialization:
    """One size signature of a program, compiled.

    ``jitted`` (a ``jax.jit`` function) serves calls on tracers of an outer transformation and
    lowering; :meth:`run` runs concrete arguments through the best executable compiled so far
    (compiled on the first one). Tiered, the first run compiles the fast tier, and the second
    starts the optimized compilation.
    """

    def __init__(
        self,
        jitted: Callable,
        tiered: bool,
        lowered: jax.stages.Lowered | None = None,
        compile_options: dict[str, Any] | None = None,
        report: Reporter = QUIET,
        label: str = "",
    ):
        self.jitted = jitted
        self.report = report
        self.label = label  # what reports call it (the program and its sizes)
        self.tiered = tiered
        # XLA options of the optimized executable (the fast tier adds its own on top).
        self.compile_options = dict(compile_options or {})
        self._lowered = lowered  # lowered for concrete arguments, until the first run compiles it
        self.optimized = False
        # Read without a lock on every call: replacing it is one atomic attribute store.
        self.call: Callable[..., Any] | None = None
        # The executable once it is the one calls keep using (optimized): a qjit function's own
        # dispatcher may then run it directly (see compiled.py).
        self.final: jax.stages.Compiled | None = None
        # Tiered: what the optimized compilation starts from, until it is submitted.
        self._to_optimize: jax.stages.Lowered | None = None
        self._lock = threading.Lock()

    def compile(self, dynamic_args: Sequence[Any]) -> None:
        """Compile now (for the first run's ``dynamic_args``), unless already compiled."""
        if self.call is None:
            self._compile(dynamic_args)

    def _compile(self, dynamic_args: Sequence[Any]) -> Callable[..., Any]:
        """The executable of the first concrete run: at the fast tier when tiered, else
        optimized."""
        with self._lock:
            if self.call is None:
                lowered = self._lowered or self.jitted.lower(*dynamic_args)
                self._lowered = None
                if self.tiered:
                    start = time.perf_counter()
                    self.call = entry_point(lowered.compile({**self.compile_options, **FAST_TIER_OPTIONS}))
                    self.report("XLA compiled %s (fast tier) in %.3f s", self.label, time.perf_counter() - start)
                    self._to_optimize = lowered
                else:
                    self._optimize(lowered)
            return self.call

    def _tier_up(self) -> None:
        """Start the optimized compilation in the background (once). It starts when the size is
        used again, not at once: most sizes seen once are never seen again, and on a machine
        with few cores an optimized compile at once competes with the compilations of the next
        new sizes (20 new sizes took 1.1-1.6x the untiered time on 2 shared cores, not ~0.5x)."""
        with self._lock:
            lowered, self._to_optimize = self._to_optimize, None
        if lowered is not None:
            _background.submit(lambda: self._optimize(lowered))

    def _optimize(self, lowered: jax.stages.Lowered) -> None:
        start = time.perf_counter()
        with x64_scope():  # a new thread starts in JAX's default (32-bit) configuration
            compiled = lowered.compile(self.compile_options or None)
            self.call = entry_point(compiled)
        self.final = compiled
        self.optimized = True
        self.report("XLA compiled %s%s in %.3f s", self.label, " (optimized tier)" if self.tiered else "",
                    time.perf_counter() - start)

    def run(self, dynamic_args: Sequence[Any]) -> Sequence[Any]:
        """Run on concrete arguments (of the types lowered for, else through ``jitted``)."""
        call = self.call
        if call is None:
            call = self._compile(dynamic_args)
        elif self._to_optimize is not None:
            self._tier_up()
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
                pass  # the fast tier keeps serving: an optimization is never required
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
    """Block until every background (optimized-tier) compilation has finished and been swapped
    in: results are then those of the optimized executables. Tests and benchmarks call it."""
    _background.wait()
