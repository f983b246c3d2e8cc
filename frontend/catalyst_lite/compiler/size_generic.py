"""Size-generic execution (optional, with IREE): a new size runs at once on one executable compiled
for every size, a size that comes back gets XLA's code (docs/architecture.md, "The size-generic
tier"). ``qjit(size_generic=False)`` or ``CATALYST_LITE_SIZE_GENERIC=0`` turn it off."""

from __future__ import annotations

import enum
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Hashable, Sequence

from ..jax_extras import Tracer, is_tracing
from . import disk_cache, iree_backend
from .iree_backend import IreeExecutable, LoweredProgram, Unsupported
from .specialize import check_sizes
from .compilation import run_in_background

if TYPE_CHECKING:
    from .runner import JaxprRunner

__all__ = ["SizeGenericTier", "Status", "SIZE_GENERIC_ENV_VAR", "size_generic_by_default"]

SIZE_GENERIC_ENV_VAR = "CATALYST_LITE_SIZE_GENERIC"


def size_generic_by_default() -> bool:
    """Whether programs use the size-generic tier when ``qjit`` is not told (the environment)."""
    return os.environ.get(SIZE_GENERIC_ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


class Status(enum.Enum):
    NOT_LOOKED_UP = "not looked up"  # before the program's first call
    COMPILING = "compiling"  # in the background, since the first call
    READY = "ready"
    UNSUPPORTED = "unsupported"  # see SizeGenericTier.reason: XLA per size for good


class SizeGenericTier:
    """The size-generic executable of a runner's program: :meth:`run` serves a call, or ``None``."""

    CALLS_BEFORE_XLA = 2  # calls at a size after which XLA compiles it (in the background)
    REMEMBERED_SIZES = 4096  # sizes remembered (calls counted, sizes checked) before forgetting
    # New sizes arriving while IREE compiles (3-12 XLA compiles long) wait for it, rather than each
    # compile XLA, for at most this many times the longest XLA compile of a new size.
    WAIT_IN_XLA_COMPILES = 6

    def __init__(self, runner: JaxprRunner):
        self.runner = runner
        self.status = Status.NOT_LOOKED_UP
        self.reason: str | None = None  # why the status is UNSUPPORTED
        self.from_cache = False  # the executable was compiled before (this process, or on disk)
        self._executable: IreeExecutable | None = None  # set when READY and loaded
        self._vmfb: bytes | None = None  # compiled in the background, loaded at the next call
        self._release: weakref.finalize | None = None  # frees the executable's IREE objects
        self._lowered: LoweredProgram | None = None
        self._compiled = threading.Event()  # set when the IREE compile in progress ends
        self._submitted = False  # the compile is on the background thread
        self._wait_until: float | None = None  # the deadline of calls waiting for it
        self._longest_xla = 0.0  # seconds of the longest new size served by XLA
        self._calls: dict[Hashable, int] = {}  # calls served at each size (checked at the first)
        self._lock = threading.Lock()

    @classmethod
    def attach(cls, runner: JaxprRunner, enabled: bool | None = None) -> SizeGenericTier | None:
        """The tier of ``runner``'s program, or ``None``: turned off, no IREE, or no sizes to generalize."""
        enabled = size_generic_by_default() if enabled is None else enabled
        return cls(runner) if enabled and runner.static_positions and iree_backend.available() else None

    def run(self, key: Hashable, args: Sequence[Any]) -> list[Any] | None:
        """The outputs on concrete ``args`` (sizes ``key``), or ``None`` when the tier does not serve them."""
        if is_tracing() or any(isinstance(a, Tracer) for a in args):
            return None  # staged into another program: XLA's business
        executable = self._executable or self._look_up(key)
        if executable is None:
            return None
        if self.runner.options.report.enabled:
            self._report("%s at sizes %s: runs on the size-generic (IREE) executable", key)
        if key not in self._calls:
            check_sizes(self.runner.jaxpr, dict(zip(self.runner.static_positions, key)))
        try:
            outs = executable(args)
        except Unsupported as err:
            self._give_up(str(err))
            return None
        calls = self._calls.get(key, 0) + 1
        if len(self._calls) >= self.REMEMBERED_SIZES:
            self._calls.clear()
        self._calls[key] = calls
        if calls == self.CALLS_BEFORE_XLA:  # the second call at a size: XLA compiles it
            self._report("%s at sizes %s called again: XLA compiles them in the background, then they "
                         "run on XLA", key)
            dynamic_args = [args[i] for i in self.runner.dynamic_positions]
            generation = self.runner.options.cache.generation
            run_in_background(lambda: self.runner.prepare(key, dynamic_args, generation))
        return outs

    def new_size_served(self, seconds: float) -> None:
        """A new size left to the runner took ``seconds``; IREE's compile starts now (after XLA's)."""
        with self._lock:
            self._longest_xla = max(self._longest_xla, seconds)
            if self.status is Status.COMPILING and not self._submitted:
                self._submitted = True
                generation, compiled = self.runner.options.cache.generation, self._compiled
                run_in_background(lambda: self._compile(generation, compiled), size_generic=True)

    def _look_up(self, key: Hashable) -> IreeExecutable | None:
        """The executable before it is loaded: the cached one at the first call, later the one compiled."""
        with self._lock:
            if self.status is Status.NOT_LOOKED_UP:
                return self._first_look_up(key)
            if self.status is not Status.COMPILING:
                return self._loaded()
            # A call at new sizes waits for IREE's compile until a deadline (none before XLA's first).
            now, compiled = time.perf_counter(), self._compiled
            if self._wait_until is None and self._longest_xla > 0.0:
                self._wait_until = now + self.WAIT_IN_XLA_COMPILES * self._longest_xla
            if self._wait_until is None or now >= self._wait_until:
                return None
            deadline = self._wait_until
            self._report("%s at sizes %s: waits for IREE's compile (at most %.3f s) rather than compile XLA",
                         key, deadline - now)
        if not compiled.wait(max(0.0, deadline - time.perf_counter())):
            self._report("%s at sizes %s: IREE is still compiling after the wait (%d times the longest XLA "
                         "compile): XLA compiles new sizes until IREE is ready",
                         key, self.WAIT_IN_XLA_COMPILES)
            return None
        with self._lock:
            return self._loaded()

    def _first_look_up(self, key: Hashable) -> IreeExecutable | None:
        """The program's first call (under the lock): the executable from the caches, or ``None``."""
        try:
            self._lowered = iree_backend.lower(self.runner.jaxpr)
            vmfb = self._lowered.cached()
        except Unsupported as err:
            self._give_up(str(err))
            return None
        if vmfb is not None:
            self.from_cache = self._load(vmfb, cached=True)
            if self.from_cache:
                self._report("size-generic (IREE) executable of %s found in the cache")
                return self._executable
        self._report("%s first called (sizes %s, served by XLA): then IREE compiles it for every size in "
                     "the background; new sizes meanwhile wait for it", key)
        self.status, self._submitted = Status.COMPILING, False  # submitted by new_size_served
        self._compiled, self._wait_until = threading.Event(), None
        return None

    def _loaded(self) -> IreeExecutable | None:
        """The executable, loading the one compiled in the background first (under the lock)."""
        if self.status is Status.READY and self._executable is None:
            vmfb, self._vmfb = self._vmfb, None
            self._load(vmfb, cached=False)
        return self._executable

    def _load(self, vmfb: bytes, cached: bool) -> bool:
        """Load ``vmfb`` on the calling thread (not the background one); whether it could be."""
        try:
            executable = self._lowered.load(vmfb, cached)
        except Unsupported as err:
            self._give_up(str(err))
            return False
        if executable is None:
            return False
        self._release = weakref.finalize(self, executable.release)
        self._executable, self.status = executable, Status.READY
        return True

    def _compile(self, generation: int, compiled: threading.Event) -> None:
        try:
            if generation != self.runner.options.cache.generation:
                self.status = Status.NOT_LOOKED_UP  # the function's caches were cleared since: not now
                return
            start = time.perf_counter()
            try:
                vmfb = self._lowered.compile()
            except iree_backend.Cancelled:
                return  # the interpreter is exiting
            except Exception as err:  # Unsupported, or anything else: XLA per size, as without IREE
                self._give_up(str(err))
                return
            self._vmfb, self.status = vmfb, Status.READY
            self._report("IREE compiled %s for every size in %.3f s: new sizes run on it",
                         time.perf_counter() - start)
        finally:
            compiled.set()  # calls waiting for it go on
        # After them: a write and two fsyncs (25-60 ms on a loaded machine).
        disk_cache.write(self._lowered.key, "vmfb", vmfb)

    def _report(self, message: str, *args: Any) -> None:
        self.runner.options.report(message, self.runner.name, *args)

    def _give_up(self, reason: str) -> None:
        self._report("size-generic tier off for %s (XLA compiles each size): %s", reason)
        self.reason, self.status, self._executable = reason, Status.UNSUPPORTED, None
        if self._release is not None:
            self._release()
