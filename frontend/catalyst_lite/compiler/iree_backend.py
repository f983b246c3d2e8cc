"""IREE, the optional size-generic compiler: one executable for every size of a program.

XLA on the CPU needs static shapes, so it compiles a program once per size signature. IREE
(the ``iree`` extra, ``pip install -e '.[iree]'``: ``iree-base-compiler`` and ``iree-base-runtime``) compiles
the program's StableHLO with its ``?`` dimensions kept symbolic (:mod:`~..jax_extras.iree_lowering`)
and runs the result at any size. Without the extra, :func:`available` is false and nothing here is
used.

The interface is small: :func:`lower` turns a jaxpr (its constants as leading arguments, then the
implicit sizes, then the flat arguments: a :class:`~.specialize.JaxprRunner`'s jaxpr) into a
:class:`LoweredProgram`; its :meth:`~LoweredProgram.cached` or :meth:`~LoweredProgram.compile` gives
an :class:`Executable`, which takes the jaxpr's inputs and returns its flat outputs as JAX arrays.
Compiled modules are kept in memory and, when a cache directory is configured, on disk
(:mod:`.disk_cache`), keyed by the program's text, the compiler's version and options, and the CPU.
A program IREE cannot compile raises :class:`Unsupported`, and that outcome is cached too.

>>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
>>> import numpy as np
>>> with dynamic_tracing():
...     in_type = make_input_type([np.zeros(3)], [{0: "n"}])
...     jaxpr, _, consts = trace_to_jaxpr(lambda x: [x * 2.0], in_type, "double")
>>> program = lower(jaxpr)   # the StableHLO and its cache key: no IREE needed yet
>>> "tensor<?xf64>" in program.text and len(program.key)
64
>>> if available():
...     double = program.cached() or program.compile()
...     print(np.asarray(double([np.int64(4), np.arange(4.0)])[0]))
... else:
...     print(np.arange(4.0) * 2)
[0. 2. 4. 6.]
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import importlib.metadata
import os
import platform
import re
import threading
import weakref
from pathlib import Path
from typing import Any, Iterator, Sequence

import jax
import numpy as np

from ..jax_extras import ClosedJaxpr, Jaxpr, weakly_typed
from ..jax_extras.iree_lowering import lower_for_iree
from . import disk_cache

try:  # the optional extra
    import iree.compiler as iree_compiler
    import iree.runtime as iree_runtime
except ImportError:
    iree_compiler = iree_runtime = None

__all__ = [
    "available",
    "Unsupported",
    "LoweredProgram",
    "Executable",
    "lower",
    "forget_compiled",
    "COMPILE_FLAGS",
]

# llvm-cpu code for this machine's CPU; float64 kept (IREE demotes it to float32 by default); the
# system linker, because the embedded one lacks float64 `sin`.
COMPILE_FLAGS = (
    "--iree-llvmcpu-target-cpu=host",
    "--iree-input-demote-f64-to-f32=false",
    "--iree-llvmcpu-link-embedded=false",
)
MODULE_NAME = "program"  # every module is named so: the name is no part of what it computes


def available() -> bool:
    """Whether IREE's compiler and runtime are installed."""
    return iree_compiler is not None and iree_runtime is not None


class Unsupported(Exception):
    """IREE cannot compile (or run) the program; the message says why."""


def lower(jaxpr: Jaxpr) -> LoweredProgram:
    """The program's StableHLO for IREE; :class:`Unsupported` when it has no such form (a loop that
    resizes its carried arrays, an operation whose lowering fails)."""
    try:
        text = lower_for_iree(ClosedJaxpr(jaxpr, ()), MODULE_NAME)
    except Exception as err:  # any failure to lower means: not for this backend
        raise Unsupported(f"{type(err).__name__}: {_first_line(err)}") from err
    weak = [getattr(v.aval, "weak_type", False) for v in jaxpr.outvars]
    return LoweredProgram(text, [v.aval.dtype for v in jaxpr.invars], weak)


class LoweredProgram:
    """A program's StableHLO for IREE, and its key in the caches."""

    def __init__(self, text: str, in_dtypes: Sequence[np.dtype], weak_outputs: Sequence[bool]):
        self.text = text
        self.in_dtypes = [np.dtype(d) for d in in_dtypes]
        self.weak_outputs = list(weak_outputs)
        fingerprint = "\n".join((_compiler_version(), *COMPILE_FLAGS, _cpu(), text))
        self.key = hashlib.sha256(fingerprint.encode()).hexdigest()

    def cached(self) -> Executable | None:
        """The executable compiled before (in this process or, with a cache directory, another),
        or ``None``; :class:`Unsupported` when compiling it failed before."""
        vmfb = _modules.get(self.key)
        if vmfb is None:
            vmfb = disk_cache.read(self.key + ".vmfb")
        if vmfb is None:
            failure = disk_cache.read(self.key + ".unsupported")
            if failure is not None:
                raise Unsupported(failure.decode())
            return None
        _modules[self.key] = vmfb
        return Executable(vmfb, self.in_dtypes, self.weak_outputs)

    def compile(self) -> Executable:
        """Compile with IREE (about a second) and cache the result."""
        try:
            vmfb = iree_compiler.compile_str(
                self.text,
                target_backends=["llvm-cpu"],
                input_type="stablehlo",
                extra_args=list(COMPILE_FLAGS),
            )
        except iree_compiler.CompilerToolError as err:
            reason = _compiler_diagnostic(err)
            disk_cache.write(self.key + ".unsupported", reason.encode())
            raise Unsupported(reason) from err
        _modules[self.key] = vmfb
        disk_cache.write(self.key + ".vmfb", vmfb)
        return Executable(vmfb, self.in_dtypes, self.weak_outputs)


class Executable:
    """A loaded IREE module: called with the program's inputs, returns its flat outputs."""

    def __init__(self, vmfb: bytes, in_dtypes: Sequence[np.dtype], weak_outputs: Sequence[bool]):
        context = iree_runtime.SystemContext(config=_runtime_config())
        with _removing_placeholder_files():
            context.add_vm_module(iree_runtime.VmModule.copy_buffer(context.instance, vmfb))
        self._main = getattr(context.modules, MODULE_NAME).main
        self._context = context
        self._in_dtypes = in_dtypes
        self._weak_outputs = list(weak_outputs)  # results typed like a Python scalar's, as in JAX
        self._lock = threading.Lock()  # one invocation at a time per module context
        _loaded.add(self)

    def _unload(self) -> None:
        self._main = self._context = None

    def __call__(self, args: Sequence[Any]) -> list[jax.Array]:
        values = [np.asarray(a, dtype=d) for a, d in zip(args, self._in_dtypes)]
        try:
            with self._lock:
                outs = self._main(*values)
                if not isinstance(outs, (tuple, list)):
                    outs = () if outs is None else (outs,)
                # Copied out of IREE's buffers: JAX would otherwise keep them mapped.
                host = [np.array(o.to_host() if hasattr(o, "to_host") else o) for o in outs]
        except Exception as err:  # IREE reports failures as IndexError, RuntimeError, ValueError
            raise Unsupported(f"IREE failed at run time: {_first_line(err)}") from err
        results = jax.device_put(host)
        return [weakly_typed(r) if weak else r for r, weak in zip(results, self._weak_outputs)]


# Compiled modules of this process, by key (kept: tracing the same program anew finds it).
_modules: dict[str, bytes] = {}
_config_lock = threading.Lock()
_config: Any = None
_loaded: weakref.WeakSet[Executable] = weakref.WeakSet()


def forget_compiled() -> None:
    """Forget the modules compiled in this process (the disk cache stays): the next program
    compiles anew (benchmarks of the first compilation use this)."""
    _modules.clear()


@atexit.register
def _unload_all() -> None:
    """Release IREE's runtime objects before the interpreter tears its bindings down (which
    otherwise reports every object still alive as a leak)."""
    global _config
    for executable in list(_loaded):
        executable._unload()
    _config = None
    gc.collect()


def _runtime_config() -> Any:
    """One runtime configuration (driver and device) for every module of the process."""
    global _config
    with _config_lock:
        if _config is None:
            _config = iree_runtime.Config("local-task")
        return _config


@contextlib.contextmanager
def _removing_placeholder_files() -> Iterator[None]:
    """Remove the empty files IREE's runtime leaves in the temporary directory while loading a
    module compiled with system linking: it reserves a name with ``mkstemp`` (``iree_dylib_XXXXXX``),
    writes the library next to it and deletes only the library. The placeholders are never used
    again (by this process or another), so removing the new empty ones is safe."""
    if os.environ.get("IREE_PRESERVE_DYLIB_TEMP_FILES"):  # IREE keeps its files when asked to
        yield
        return
    directory = Path(os.environ.get("TMPDIR") or "/tmp")
    before = set(directory.glob("iree_dylib_??????"))
    try:
        yield
    finally:
        for path in set(directory.glob("iree_dylib_??????")) - before:
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:
                    path.unlink()


def _compiler_version() -> str:
    try:
        return importlib.metadata.version("iree-base-compiler")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _cpu() -> str:
    """The machine's CPU model (code is compiled for it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _compiler_diagnostic(err: BaseException) -> str:
    """The first ``error:`` of IREE's diagnostics, without the operation it prints (the whole
    output is pages long), and the target of a ``custom_call`` it refused."""
    text = str(err)
    for line in text.splitlines():
        if "error:" in line:
            message = line.split("error:", 1)[1].split(": %", 1)[0].strip()
            target = re.search(r'call_target_name = "([^"]+)"', line)
            return f"iree-compile: {message}" + (f" ({target.group(1)})" if target else "")
    return "iree-compile failed: " + _first_line(err)
