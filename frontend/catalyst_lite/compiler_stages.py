"""Catalyst's ``catalyst.debug`` functions about its compiler's stages, as far as they mean
something for a program XLA compiles.

There is one stage, ``"mlir"`` (:func:`get_compilation_stage`), and no MLIR pipelines
(:func:`get_compilation_stages_groups` is ``[]``); :func:`instrumentation` reports traces,
specializations and XLA compile times. :func:`replace_ir`, :func:`get_cmain`,
:func:`compile_executable` and :func:`draw_graph` need Catalyst's pipeline, shared library or MLIR
program: they raise :class:`~catalyst_lite.errors.UnsupportedOperationError`.

>>> from catalyst_lite import qjit, debug
>>> @qjit
... def f(x: float):
...     return x * 2
>>> debug.get_compilation_stage(f, "mlir") == f.mlir
True
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Iterator

from .errors import ArgumentTypeError, ArgumentValueError, UnsupportedOperationError
from .reporting import LOGGER

__all__ = [
    "get_compilation_stage",
    "get_compilation_stages_groups",
    "instrumentation",
    "replace_ir",
    "get_cmain",
    "compile_executable",
    "draw_graph",
]

_STAGES = ("mlir",)


def _checked_qjit(fn: Any, what: str) -> Any:
    # By its interface: catalyst_lite.compiled imports this module (through debug), not the
    # other way round.
    if not (hasattr(type(fn), "jit_compile") and hasattr(type(fn), "mlir")):
        raise ArgumentTypeError(f"debug.{what}: the first argument must be a qjit function, got {type(fn).__name__}.")
    return fn


def get_compilation_stage(fn: Any, stage: str) -> str:
    """The program of ``fn`` at compiler stage ``stage``. catalyst_lite has one, ``"mlir"``:
    StableHLO of the traced program, symbolic sizes as ``?`` dimensions (``fn.mlir``); Catalyst's
    other stage names are a ``ValueError``. ``fn`` must have been traced (called, or annotated).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, debug
    >>> f = qjit(lambda x: jnp.sum(x), abstracted_axes={0: "n"})
    >>> _ = f(jnp.ones(3))
    >>> "tensor<?xf64>" in debug.get_compilation_stage(f, "mlir")
    True
    """
    fn = _checked_qjit(fn, "get_compilation_stage")
    if stage not in _STAGES:
        raise ArgumentValueError(
            f"debug.get_compilation_stage({fn.name}, {stage!r}): catalyst_lite compiles StableHLO "
            f"with XLA and has one stage, {_STAGES[0]!r} (Catalyst's MLIR pipeline stages do not exist here)."
        )
    text = fn.mlir
    if text is None:
        raise ArgumentValueError(
            f"debug.get_compilation_stage({fn.name}, {stage!r}): {fn.name} has not been traced yet; "
            "call it (or annotate its parameters with types) first."
        )
    return text


def get_compilation_stages_groups(options: Any) -> list:
    """Catalyst's MLIR pipelines (stage names and their passes) for ``options``: none here.

    >>> from catalyst_lite import CompileOptions, debug
    >>> debug.get_compilation_stages_groups(CompileOptions())
    []
    """
    return []


@contextlib.contextmanager
def instrumentation(session_name: str, filename: str | None = None, detailed: bool = False) -> Iterator[None]:
    """Report what the qjit calls inside the block do: each trace (and its time), each new
    specialization, XLA's compile times, cache hits; to ``filename`` (appended) or standard
    output, each line prefixed with ``session_name``. ``detailed`` is accepted (every report is
    already given).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, debug
    >>> with debug.instrumentation("demo"):  # doctest: +ELLIPSIS
    ...     _ = qjit(lambda x: x + 1.0, abstracted_axes={0: "n"})(jnp.ones(2))
    [demo] <lambda>: traced for (float64[n]) in ... s
    ...
    """
    stream = open(filename, "a", encoding="utf-8") if filename else sys.stdout
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(f"[{session_name}] %(message)s"))
    handler.setLevel(logging.DEBUG)
    level = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
        handler.flush()
        if filename:
            stream.close()


def _unsupported(what: str, why: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"debug.{what}: {why}; catalyst_lite compiles with XLA, which keeps its IR and code "
        "internal. Inspect the program with QJIT.jaxpr, QJIT.mlir or QJIT.specialized_mlir(...)."
    )


def replace_ir(fn: Any, stage: str, new_ir: str) -> None:
    """Catalyst: run ``fn`` from edited IR of a stage. Not possible here.

    >>> from catalyst_lite import qjit, debug
    >>> debug.replace_ir(qjit(lambda x: x), "mlir", "")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: debug.replace_ir: ...
    """
    _checked_qjit(fn, "replace_ir")
    raise _unsupported("replace_ir", "it replaces a stage of Catalyst's MLIR pipeline")


def get_cmain(fn: Any, *args: Any) -> str:
    """Catalyst: a C program calling ``fn``'s shared library. Not possible here.

    >>> from catalyst_lite import qjit, debug
    >>> debug.get_cmain(qjit(lambda x: x), 1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: debug.get_cmain: ...
    """
    _checked_qjit(fn, "get_cmain")
    raise _unsupported("get_cmain", "it writes a C main for Catalyst's shared library")


def compile_executable(fn: Any, *args: Any) -> str:
    """Catalyst: a stand-alone executable of ``fn``. Not possible here.

    >>> from catalyst_lite import qjit, debug
    >>> debug.compile_executable(qjit(lambda x: x), 1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: debug.compile_executable: ...
    """
    _checked_qjit(fn, "compile_executable")
    raise _unsupported("compile_executable", "it links Catalyst's shared library into an executable")


def draw_graph(qnode: Any, *, level: int | None = None) -> Any:
    """Catalyst: a drawing of the MLIR program of a qjit function. Not possible here.

    >>> from catalyst_lite import qjit, draw_graph
    >>> draw_graph(qjit(lambda x: x))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: draw_graph draws Catalyst's MLIR program; ...
    """
    raise UnsupportedOperationError(
        "draw_graph draws Catalyst's MLIR program; catalyst_lite compiles with XLA. Draw a QNode "
        "with qml.draw, or inspect the program with QJIT.jaxpr / QJIT.mlir."
    )
