"""``catalyst_lite.debug``: Catalyst's debugging helpers. The run-time ones are host callbacks
(:mod:`catalyst_lite.callbacks`); those needing Catalyst's MLIR pipeline raise ``UnsupportedOperationError``.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import sys
from typing import Any, Callable, Iterator

import jax.numpy as jnp
import numpy as np
from jax.tree_util import tree_map

from .callbacks import call_for_effect, run_eagerly
from .errors import ArgumentTypeError, ArgumentValueError, DebugAssertionError, UnsupportedOperationError
from .jax_extras import get_aval, x64_scope
from .reporting import LOGGER
from .trace_context import current as current_context

__all__ = ["callback", "print", "print_memref", "debug_assert", "get_compilation_stage",
           "get_compilation_stages_groups", "get_cmain", "instrumentation", "replace_ir",
           "compile_executable", "draw_graph"]


def callback(callback_fn: Callable) -> Callable:
    """``callback_fn`` (returning ``None``), called with its arguments' values when the program
    runs. Usable as a decorator.

    >>> from catalyst_lite.debug import callback
    >>> from catalyst_lite import qjit
    >>> seen = []
    >>> show = callback(lambda y: seen.append(float(y)))
    >>> float(qjit(lambda x: (show(x * 2), x)[1])(1.5))
    1.5
    >>> seen
    [3.0]
    """

    @functools.wraps(callback_fn)
    def debug_callback(*args: Any, **kwargs: Any) -> None:
        if run_eagerly():
            callback_fn(*args, **kwargs)
            return
        call_for_effect(callback_fn, args, kwargs)

    return debug_callback


def print(fmt: Any, *args: Any, **kwargs: Any) -> None:  # noqa: A001 (Catalyst's name)
    """Print ``fmt.format(*args, **kwargs)`` when the program runs (an f-string would show
    tracers); a ``fmt`` that is not a string is itself printed.

    >>> from catalyst_lite import qjit, debug
    >>> @qjit
    ... def f(x: float):
    ...     debug.print("x = {:.2f}", x)
    ...     return x * 2
    >>> float(f(0.25))
    x = 0.25
    0.5
    """
    if isinstance(fmt, str):
        callback(lambda *a, **k: builtins.print(fmt.format(*_as_jax_arrays(a), **_as_jax_arrays(k))))(*args, **kwargs)
    else:
        callback(builtins.print)(fmt)


def _as_jax_arrays(tree: Any) -> Any:
    """The values as JAX arrays (their dtypes kept), as Catalyst formats them."""
    with x64_scope():
        return tree_map(lambda v: jnp.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else v, tree)


def _number_text(v: Any) -> str:
    """A number as a C++ stream prints it (Catalyst's runtime): ``1``, ``0.5``, ``1000000``."""
    if np.iscomplexobj(v):
        return f"({v.real:g},{v.imag:g})"
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return str(int(v))
    return format(v, "g")


def _memref_text(x: Any) -> str:
    """``x`` as Catalyst's runtime prints a memref."""
    array = np.asarray(x)
    separator = "," + " " * (array.ndim + 1)

    def nested(a: np.ndarray, depth: int) -> str:
        if a.ndim == 1:
            return "[" + separator.join(_number_text(v) for v in a) + "]"
        return "[" + (", \n" + " " * (depth + 1)).join(nested(row, depth + 1) for row in a) + "]"

    strides = [s // array.itemsize for s in array.strides] if array.ndim else []
    data = nested(array, 0) if array.ndim else _number_text(array[()])
    return (
        f"MemRef: base@ = 0x{id(array):x} rank = {array.ndim} offset = 0 sizes = {list(array.shape)} "
        f"strides = {strides} data =\n{data}"
    )


def print_memref(x: Any) -> None:
    """Print array ``x`` at run time with its rank, sizes and strides (Catalyst's format).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, debug
    >>> @qjit
    ... def f(x: float):
    ...     debug.print_memref(jnp.array([x, 2.0 * x]))
    ...     return x
    >>> _ = f(1.5)  # doctest: +ELLIPSIS
    MemRef: base@ = ... rank = 1 offset = 0 sizes = [2] strides = [1] data =
    [1.5,  3]
    """
    callback(lambda a: builtins.print(_memref_text(a)))(x)


def _fail_if_false(condition: Any, message: str) -> None:
    if not bool(condition):
        raise DebugAssertionError(message)


def debug_assert(condition: Any, error: str) -> None:
    """Raise ``RuntimeError(error)`` (a :class:`~catalyst_lite.errors.DebugAssertionError`) when
    the program runs and the boolean scalar ``condition`` is false (unless ``disable_assertions``).

    >>> from catalyst_lite import debug_assert
    >>> from catalyst_lite import qjit
    >>> def f(x):
    ...     debug_assert(x < 5, "x was greater than 5")
    ...     return x * 8
    >>> int(qjit(f)(4))
    32
    """
    if not isinstance(error, str):
        raise ArgumentTypeError(f"debug_assert: the error message must be a str, got {type(error).__name__}.")
    if not isinstance(condition, (bool, np.bool_)):
        numeric = hasattr(condition, "dtype") or isinstance(condition, (int, float))
        aval = get_aval(condition) if numeric else None  # (a str or a list is none)
        if aval is None or aval.shape != () or aval.dtype != np.bool_:
            found = aval.str_short() if aval else type(condition).__name__
            raise ArgumentTypeError(
                f"debug_assert ({error!r}) needs a boolean scalar condition, got {found}; reduce it first "
                "(jnp.all, jnp.any)."
            )
    if run_eagerly():
        _fail_if_false(condition, error)
        return
    if (current_context().qjit_options or {}).get("disable_assertions", False):
        return
    callback(functools.partial(_fail_if_false, message=error))(condition)


def _checked_qjit(fn: Any, what: str) -> Any:
    # By its interface: catalyst_lite.compiled imports this module, not the other way round.
    if not (hasattr(type(fn), "jit_compile") and hasattr(type(fn), "mlir")):
        raise ArgumentTypeError(f"debug.{what}: the first argument must be a qjit function, got {type(fn).__name__}.")
    return fn


def get_compilation_stage(fn: Any, stage: str) -> str:
    """The program of the traced ``fn`` at compiler stage ``stage``: only ``"mlir"`` (``fn.mlir``).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, debug
    >>> f = qjit(lambda x: jnp.sum(x), abstracted_axes={0: "n"})
    >>> _ = f(jnp.ones(3))
    >>> "tensor<?xf64>" in debug.get_compilation_stage(f, "mlir")
    True
    """
    fn = _checked_qjit(fn, "get_compilation_stage")
    if stage != "mlir":
        raise ArgumentValueError(
            f"debug.get_compilation_stage({fn.name}, {stage!r}): catalyst_lite compiles StableHLO "
            "with XLA and has one stage, 'mlir' (Catalyst's MLIR pipeline stages do not exist here)."
        )
    text = fn.mlir
    if text is None:
        raise ArgumentValueError(
            f"debug.get_compilation_stage({fn.name}, {stage!r}): {fn.name} has not been traced yet; "
            "call it (or annotate its parameters with types) first."
        )
    return text


def get_compilation_stages_groups(options: Any) -> list:
    """Catalyst's MLIR pipelines for ``options``: none here.

    >>> from catalyst_lite import CompileOptions, debug
    >>> debug.get_compilation_stages_groups(CompileOptions())
    []
    """
    return []


@contextlib.contextmanager
def instrumentation(session_name: str, filename: str | None = None, detailed: bool = False) -> Iterator[None]:
    """Report what the qjit calls inside the block do (traces, specializations, compile times,
    cache hits) to ``filename`` (appended) or standard output; ``detailed`` is accepted.

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit, debug
    >>> with debug.instrumentation("demo"):  # doctest: +ELLIPSIS
    ...     _ = qjit(lambda x: x + 1.0, abstracted_axes={0: "n"})(jnp.ones(2))
    [demo] <lambda>: traced for (float64[n]) in ... s
    ...
    """
    handler = (logging.FileHandler(filename, encoding="utf-8") if filename
               else logging.StreamHandler(sys.stdout))
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
        handler.close()  # a file's flushed and closed


def _unsupported(fn: Any, what: str, why: str) -> UnsupportedOperationError:
    _checked_qjit(fn, what)
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
    raise _unsupported(fn, "replace_ir", "it replaces a stage of Catalyst's MLIR pipeline")


def get_cmain(fn: Any, *args: Any) -> str:
    """Catalyst: a C program calling ``fn``'s shared library. Not possible here.

    >>> from catalyst_lite import qjit, debug
    >>> debug.get_cmain(qjit(lambda x: x), 1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: debug.get_cmain: ...
    """
    raise _unsupported(fn, "get_cmain", "it writes a C main for Catalyst's shared library")


def compile_executable(fn: Any, *args: Any) -> str:
    """Catalyst: a stand-alone executable of ``fn``. Not possible here.

    >>> from catalyst_lite import qjit, debug
    >>> debug.compile_executable(qjit(lambda x: x), 1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: debug.compile_executable: ...
    """
    raise _unsupported(fn, "compile_executable", "it links Catalyst's shared library into an executable")


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
