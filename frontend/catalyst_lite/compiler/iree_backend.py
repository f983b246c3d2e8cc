"""IREE (the optional ``iree`` extra), the size-generic compiler: StableHLO with its ``?`` dimensions
compiled once for every size; recent modules kept in memory, modules and failures in :mod:`.disk_cache`."""

from __future__ import annotations

import atexit
import collections
import contextlib
import gc
import hashlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import jax
import numpy as np

from ..diagnostics import first_line
from ..jax_extras import ClosedJaxpr, Jaxpr, weakly_typed
from ..jax_extras.iree_lowering import lower_for_iree
from . import disk_cache

try:  # the optional extra
    import iree.compiler as iree_compiler
    import iree.runtime as iree_runtime
    from iree.compiler.tools import core as iree_compiler_tools
    from iree.compiler.tools.debugging import TempFileSaver
except ImportError:
    iree_compiler = iree_runtime = None

__all__ = ["available", "Unsupported", "Cancelled", "LoweredProgram", "IreeExecutable", "lower",
           "forget_compiled", "compiler_identity"]

# llvm-cpu code for this machine's CPU; float64 kept (IREE demotes it to float32 by default); the
# system linker, because the embedded one lacks float64 `sin`.
COMPILE_FLAGS = ("--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false",
                 "--iree-llvmcpu-link-embedded=false")
MODULE_NAME = "program"  # every module is named so: the name is no part of what it computes


def available() -> bool:
    """Whether IREE's compiler and runtime are installed."""
    return iree_compiler is not None and iree_runtime is not None


class Unsupported(Exception):
    """IREE cannot compile (or run) the program; the message says why."""


class Cancelled(Exception):
    """The compile was stopped by the interpreter's exit: it says nothing of the program."""


def lower(jaxpr: Jaxpr) -> LoweredProgram:
    """The program's StableHLO for IREE; :class:`Unsupported` when it has none (a resizing loop)."""
    try:
        text = lower_for_iree(ClosedJaxpr(jaxpr, ()), MODULE_NAME)
        weak = [getattr(v.aval, "weak_type", False) for v in jaxpr.outvars]
        return LoweredProgram(text, [v.aval.dtype for v in jaxpr.invars], weak)
    except Exception as err:  # any failure to lower means: not for this backend
        raise Unsupported(f"{type(err).__name__}: {first_line(err)}") from err


class LoweredProgram:
    """A program's StableHLO for IREE, and its key in the disk cache."""

    def __init__(self, text: str, in_dtypes: Sequence[np.dtype], weak_outputs: Sequence[bool]):
        self.text = text
        self.in_dtypes = [np.dtype(d) for d in in_dtypes]
        self.weak_outputs = list(weak_outputs)
        # disk_cache adds the JAX versions and the CPU's features.
        self.key = {"program": hashlib.sha256(text.encode()).hexdigest(),
                    "iree": compiler_identity(), "flags": list(COMPILE_FLAGS)}
        self.digest = disk_cache.digest(self.key)

    def cached(self) -> bytes | None:
        """The module compiled before (in memory or on disk) or ``None``; :class:`Unsupported`: it failed."""
        vmfb = _recent_module(self.digest) or disk_cache.read(self.key, "vmfb")
        if vmfb is None:
            failure = disk_cache.read(self.key, "unsupported")
            if failure is not None:
                raise Unsupported(failure.decode(errors="replace"))
        return vmfb

    def compile(self) -> bytes:
        """Compile in an ``iree-compile`` subprocess (:class:`Cancelled` at exit); the module is kept in
        memory (the caller writes it to :mod:`.disk_cache`, ``vmfb``)."""
        returncode, vmfb, stderr = _run_compiler(self.text)
        if returncode < 0:  # killed by a signal (out of memory): nothing to remember of the program
            raise Unsupported(f"iree-compile was killed by signal {-returncode}")
        if returncode != 0:
            reason = _compiler_diagnostic(stderr.decode(errors="replace"))
            # Remembered (for every process) only when a program known to compile does: else the
            # failure is this environment's (no system linker, a full or unwritable TMPDIR).
            if _run_compiler(CANARY_PROGRAM)[0] == 0:
                disk_cache.write(self.key, "unsupported", reason.encode())
            raise Unsupported(reason)
        _recent_module(self.digest, vmfb)
        return vmfb

    def load(self, vmfb: bytes, cached: bool) -> IreeExecutable | None:
        """The module ``vmfb`` loaded; ``None`` when a ``cached`` one cannot be (it is removed)."""
        try:
            return IreeExecutable(vmfb, self.in_dtypes, self.weak_outputs)
        except Unsupported as err:
            if not cached:
                raise
            with _recent_lock:
                _recent_modules.pop(self.digest, None)
            disk_cache.discard(self.key, "vmfb", str(err))
            return None


# What every working installation compiles: with a symbolic size, and code linked by the system linker.
CANARY_PROGRAM = f"""module @{MODULE_NAME} {{
  func.func public @main(%arg0: tensor<?xf64>) -> tensor<?xf64> {{
    %0 = stablehlo.sine %arg0 : tensor<?xf64>
    return %0 : tensor<?xf64>
  }}
}}
"""


def _run_compiler(text: str) -> tuple[int, bytes, bytes]:
    """``iree-compile`` run on ``text``: its exit status, module and diagnostics."""
    options = iree_compiler_tools.CompilerOptions(target_backends=["llvm-cpu"], input_type="stablehlo",
                                                  extra_args=list(COMPILE_FLAGS))
    with TempFileSaver.implicit() as saver:  # saves IREE's temporaries if IREE_SAVE_TEMPS asks
        command = iree_compiler_tools.build_compile_command_line("-", saver, options)
        return _compiler_subprocesses.run(command, text.encode())


BACKGROUND_NICENESS = 10  # how much lower than the process's own iree-compile's priority is


def background_niceness() -> int:
    """The niceness ``iree-compile`` runs at (19 at most, the lowest priority)."""
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICENESS)


class _CompilerSubprocesses:
    """The ``iree-compile`` subprocesses running, killed at exit (their modules would go unused)."""

    def __init__(self) -> None:
        self._running: set[subprocess.Popen] = set()
        self._exiting = False
        self._lock = threading.Lock()

    def run(self, command: Sequence[str], text: bytes) -> tuple[int, bytes, bytes]:
        """Run ``command`` on ``text``: its exit status, output and diagnostics."""
        with self._lock:
            if self._exiting:
                raise Cancelled("the interpreter is exiting")
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
            self._running.add(process)
        # A background compile yields the CPU to the calls served meanwhile.
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: no setpriority (Windows)
            os.setpriority(os.PRIO_PROCESS, process.pid, background_niceness())
        try:
            stdout, stderr = process.communicate(text)
        finally:
            with self._lock:
                self._running.discard(process)
        if self._exiting:
            raise Cancelled("the interpreter is exiting")
        return process.returncode, stdout, stderr

    def kill_all(self) -> None:
        with self._lock:
            self._exiting = True
            for process in self._running:
                with contextlib.suppress(OSError):
                    process.kill()


_compiler_subprocesses = _CompilerSubprocesses()
atexit.register(_compiler_subprocesses.kill_all)


REMEMBERED_MODULES = 32


# The bytes (no IREE object) of the last REMEMBERED_MODULES modules compiled, by the digest of their
# key (``LoweredProgram.digest``), most recently used last.
_recent_modules: collections.OrderedDict[str, bytes] = collections.OrderedDict()
_recent_lock = threading.Lock()


def _recent_module(digest: str, vmfb: bytes | None = None) -> bytes | None:
    """The module of ``digest`` compiled in this process (``vmfb``: remember it)."""
    with _recent_lock:
        if vmfb is not None:
            _recent_modules[digest] = vmfb
            while len(_recent_modules) > REMEMBERED_MODULES:
                _recent_modules.popitem(last=False)
        elif digest in _recent_modules:
            _recent_modules.move_to_end(digest)
        return _recent_modules.get(digest)


def forget_compiled() -> None:
    """Forget the modules compiled in this process (not the disk cache's)."""
    with _recent_lock:
        _recent_modules.clear()


class IreeExecutable:
    """A loaded IREE module: called with the program's inputs, returns its flat outputs."""

    def __init__(self, vmfb: bytes, in_dtypes: Sequence[np.dtype], weak_outputs: Sequence[bool]):
        context = iree_runtime.SystemContext(config=_runtime_config())
        try:
            module = iree_runtime.VmModule.copy_buffer(context.instance, vmfb)
            with _private_native_code_directory():
                context.add_vm_module(module)
            self._main = _entry_point(context)
        except Exception as err:  # IREE refuses a module as RuntimeError, ValueError or KeyError
            raise Unsupported(f"IREE could not load the module: {first_line(err)}") from err
        self._context = context
        self._in_dtypes = in_dtypes
        self._weak_outputs = list(weak_outputs)  # results typed like a Python scalar's, as in JAX
        self._lock = threading.Lock()  # one invocation at a time per module context

    def release(self) -> None:
        """Free the module's IREE objects; a later call is an error."""
        with self._lock:
            self._main = self._context = None

    def __call__(self, args: Sequence[Any]) -> list[jax.Array]:
        try:
            values = [np.asarray(a, dtype=d) for a, d in zip(args, self._in_dtypes)]
            with self._lock:
                outs = self._main(*values)
                if not isinstance(outs, (tuple, list)):
                    outs = () if outs is None else (outs,)
                # Copied out of IREE's buffers: JAX would otherwise keep them mapped.
                host = [np.array(o.to_host() if hasattr(o, "to_host") else o) for o in outs]
        except Exception as err:  # IREE reports failures as IndexError, RuntimeError, ValueError
            raise Unsupported(f"IREE failed at run time: {first_line(err)}") from err
        results = jax.device_put(host)
        return [weakly_typed(r) if weak else r for r, weak in zip(results, self._weak_outputs)]


_config_lock = threading.Lock()
_config: Any = None
# Loads change the process's TMPDIR for their duration: one at a time.
_load_lock = threading.Lock()
NATIVE_CODE_PREFIX = "catalyst_lite-native-"
_native_code_dir: str | None = None  # made at the first load, removed at exit


@atexit.register
def _release_runtime() -> None:
    """Release IREE's runtime configuration before its bindings are torn down; remove the native code dir."""
    global _config
    _config = None
    gc.collect()
    if _native_code_dir and _native_code_dir.split("-")[-2] == str(os.getpid()):  # not a fork's
        shutil.rmtree(_native_code_dir, ignore_errors=True)


def _runtime_config() -> Any:
    """One runtime configuration (driver and device) for every module of the process."""
    global _config
    with _config_lock:
        if _config is None:
            _config = iree_runtime.Config("local-task")
        return _config


@contextlib.contextmanager
def _private_native_code_directory() -> Iterator[None]:
    """IREE's native code (written to ``$TMPDIR``, then loaded) in a directory private to this process:
    in a shared ``/tmp`` another user could replace a library between its writing and its loading."""
    global _native_code_dir
    with _load_lock:
        if _native_code_dir is None:
            temp_root = tempfile.gettempdir()
            with contextlib.suppress(OSError):
                root_fd = os.open(temp_root, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    disk_cache.remove_stale(root_fd, NATIVE_CODE_PREFIX, _process_alive)
                finally:
                    os.close(root_fd)
            _native_code_dir = tempfile.mkdtemp(prefix=f"{NATIVE_CODE_PREFIX}{os.getpid()}-", dir=temp_root)
        previous = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = _native_code_dir
        try:
            yield
        finally:
            if previous is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = previous
            if not os.environ.get("IREE_PRESERVE_DYLIB_TEMP_FILES"):  # kept for debugging if asked
                for path in Path(_native_code_dir).glob("iree_dylib_??????"):
                    with contextlib.suppress(OSError):
                        if path.stat().st_size == 0:
                            path.unlink()


def _process_alive(name: str) -> bool:
    """Whether the process whose id a native code directory's ``name`` holds is running."""
    try:
        os.kill(int(name[len(NATIVE_CODE_PREFIX):].split("-")[0]), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        pass
    return True


def _entry_point(context: Any) -> Any:
    """The module's ``main``, without the root logging handler IREE's ``logging.debug`` may add."""
    with logging._lock:  # noqa: SLF001 (an RLock: IREE's basicConfig takes it again)
        unconfigured = not logging.root.handlers
        main = getattr(context.modules, MODULE_NAME).main
        if unconfigured:
            for handler in list(logging.root.handlers):
                logging.root.removeHandler(handler)
                handler.close()
    return main


def compiler_identity() -> dict[str, Any]:
    """What tells the ``iree-compile`` that would run apart from others: its build, and its files (the
    package's version alone is "" for a source build, and ``IREE_TOOL_PATH`` may pick another one)."""
    try:
        tool = Path(iree_compiler_tools.find_tool("iree-compile")).resolve()
    except Exception as err:  # not found: compiling fails and says why (under this key only)
        return {"tool": None, "error": f"{type(err).__name__}: {first_line(err)}"}
    files = {}
    for path in [tool, *sorted(tool.parent.glob("libIREECompiler*"))]:
        with contextlib.suppress(OSError):
            info = path.stat()
            files[str(path)] = [info.st_size, info.st_mtime_ns]
    identity: dict[str, Any] = {"tool": str(tool), "files": files}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        identity["package"] = importlib.metadata.version("iree-base-compiler")
    try:
        from iree.compiler import version as build  # (absent from some source builds)
    except ImportError:
        return identity
    return {**identity, "version": getattr(build, "VERSION", ""), "revisions": getattr(build, "REVISIONS", {})}


def _compiler_diagnostic(text: str) -> str:
    """The first ``error:`` of IREE's diagnostics, and the target of a ``custom_call`` it refused."""
    for line in text.splitlines():
        if "error:" in line:
            message = line.split("error:", 1)[1].split(": %", 1)[0].strip()
            target = re.search(r'call_target_name = "([^"]+)"', line)
            return f"iree-compile: {message}" + (f" ({target.group(1)})" if target else "")
    lines = text.strip().splitlines()
    return "iree-compile failed: " + (lines[0] if lines else "no diagnostics")
