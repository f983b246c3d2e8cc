"""Errors raised while tracing a user function, made to point at the user's code.

:func:`user_facing_trace_errors` wraps the trace of a ``@qjit`` function. Whatever goes wrong in it
comes out naming the function and the user's source line (``file:line``, the innermost frame of the
traceback that is not JAX's, NumPy's or catalyst_lite's own):

- our own errors (a loop body that changes a dimension, a non-scalar predicate) get the location;
- JAX's errors about Python control flow on a traced value (``if x > 0:``, ``range(n)``,
  ``int(x)``) become :class:`~.errors.ControlFlowError` saying to use ``cond``/``for_loop``/
  ``while_loop`` or a static argument;
- a size that is not an integer (``jnp.ones(x)`` with a float ``x``) becomes
  :class:`~.errors.ArgumentTypeError` naming the scalar arguments that are not integers;
- an internal failure of JAX's dynamic-shape path becomes :class:`~.errors.UnsupportedOperationError`
  naming the JAX function and primitive;
- any other error (JAX's own, about the user's program) is left as it is, with a note saying where.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import pathlib
import traceback
from types import TracebackType
from typing import Iterator, Sequence

import jax
import jax.errors
import jaxlib
import numpy as np

from .errors import (
    ArgumentTypeError,
    CatalystLiteError,
    ControlFlowError,
    SymbolicShapeError,
    UnsupportedOperationError,
)
from .jax_extras import Primitive
from .jax_extras.size_facts import NeedsCallSizes

__all__ = [
    "user_facing_trace_errors",
    "is_broadcast_error",
    "user_location",
    "equation_location",
    "unsupported_equation_error",
    "escaped_size_error",
    "needs_static_sizes",
    "raised_inside_jax",
]

# Directories whose files are never the user's line: JAX, NumPy, catalyst_lite and the standard
# library modules that wrap calls (a path test works for live frames and for JAX's source info).
_LIBRARY_DIRS = tuple(
    os.path.dirname(path) + os.sep for path in (jax.__file__, jaxlib.__file__, np.__file__, __file__)
) + tuple(module.__file__ for module in (contextlib, functools))

# Fragments of JAX's *internal* failures on dynamically-shaped values: a JAX function that has no
# dynamic-shape support trips over these types instead of raising a user-facing error.
# (`Var(id=...)` is a size variable of a jaxpr that JAX traced itself: lax.cond's branches
# disagreeing on sizes that JAX cannot relate.)
_INTERNAL_MARKERS = ("DShapedArray", "DynamicJaxprTracer", "DBIdx", "JaxprEqn", "TracingEqn", "hashable", "Var(id=")

_HINTS: tuple[tuple[type[BaseException], str], ...] = (
    (
        jax.errors.TracerBoolConversionError,
        "Python `if`/`while`/`and`/`or`/`not` on a traced value: its truth is only known when the "
        "program runs. Use catalyst_lite.cond for `if`, catalyst_lite.while_loop for `while`, "
        "jnp.where for an elementwise choice, or pass the value as a static argument "
        "(static_argnums/static_argnames) if it is a compile-time option.",
    ),
    (
        jax.errors.TracerIntegerConversionError,
        "a traced integer used as a Python int (`range(n)`, a list index): its value is only known "
        "when the program runs. Use catalyst_lite.for_loop(0, n, 1) instead of `for i in range(n)`, "
        "jnp indexing instead of list indexing, or pass the value as a static argument "
        "(static_argnums/static_argnames).",
    ),
    (
        jax.errors.TracerArrayConversionError,
        "a traced array passed to NumPy (np.asarray, np.sum, ...): use the jax.numpy function "
        "instead, which works on traced arrays.",
    ),
    (
        jax.errors.ConcretizationTypeError,
        "a traced value where Python needs a concrete one (int(x), float(x), a data-dependent "
        "size): its value is only known when the program runs. Use cond/for_loop/while_loop for "
        "control flow, x.astype(...) to convert, the `size=` argument of jnp functions with "
        "data-dependent sizes, or pass the value as a static argument (static_argnums).",
    ),
)


# JAX calls whose result *rank or size* would depend on the values of symbolic sizes or on data:
# (exception type, start of JAX's message, the call, what to write instead).
_NO_SYMBOLIC_RESULT: tuple[tuple[type[BaseException], str, str, str], ...] = (
    (
        ValueError,
        "jnp.squeeze with axis=None",
        "jnp.squeeze(x) without axis",
        "which axes have length 1 is only known at run time; pass the axes, e.g. "
        "jnp.squeeze(x, axis=1)",
    ),
    (
        IndexError,
        "Indexing mode not yet supported. Got unsupported indexer",
        "boolean-mask indexing x[mask]",
        "the result's length depends on the data; use jnp.where(mask, x, fill) to keep the size, "
        "or jnp.nonzero(mask, size=k, fill_value=...) with a bound k",
    ),
)


def _is_library_file(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS)


def _is_library_frame(frame) -> bool:
    return _is_library_file(frame.f_code.co_filename)


def _describe_line(filename: str, lineno: int) -> str:
    code = linecache.getline(filename, lineno).strip()
    return f"{filename}:{lineno}" + (f": `{code}`" if code else "")


def user_location(tb: TracebackType | None) -> str | None:
    """``file:line: `source``` of the innermost user frame of a traceback (``None`` if none)."""
    location = None
    for frame, lineno in traceback.walk_tb(tb):
        if not _is_library_frame(frame):
            location = _describe_line(frame.f_code.co_filename, lineno)
    return location


def equation_location(source_info) -> str | None:
    """``file:line: `source``` of the user's line that created a jaxpr equation (JAX records the
    Python traceback of every equation in its ``source_info``)."""
    frames = getattr(getattr(source_info, "traceback", None), "frames", None) or []
    for frame in frames:  # innermost first
        if not _is_library_file(frame.file_name):
            return _describe_line(frame.file_name, frame.line_num)
    return None


def _unfiltered_traceback(err: BaseException) -> TracebackType | None:
    """The traceback with JAX's internal frames: JAX removes them from the traceback of errors
    crossing its API and keeps the full one on a chained ``UnfilteredStackTrace``."""
    cause = err.__cause__
    if type(cause).__name__ == "UnfilteredStackTrace" and cause.__traceback__ is not None:
        return cause.__traceback__
    return err.__traceback__


def _jax_entry_point(tb: TracebackType | None) -> str | None:
    """The public name of the JAX function the user's code called (``jax.numpy.fft.fft``)."""
    entry, after_user = None, False
    for frame, _ in traceback.walk_tb(tb):
        module = frame.f_globals.get("__name__") or ""
        if not _is_library_frame(frame):
            after_user, entry = True, None
        elif after_user and entry is None and module.startswith("jax"):
            entry = f"{module.replace('._src', '')}.{frame.f_code.co_name}"
    return entry


def _failing_primitive(tb: TracebackType | None) -> str | None:
    """The innermost JAX primitive being bound in a traceback, found in the frames' locals."""
    name = None
    for frame, _ in traceback.walk_tb(tb):
        for local in ("primitive", "prim", "self"):
            if isinstance(frame.f_locals.get(local), Primitive):
                name = frame.f_locals[local].name
                break
    return name


def _operation_name(tb: TracebackType | None) -> str:
    """``jax.numpy.fft.fft (primitive 'fft')``, or as much of it as the traceback tells."""
    entry, primitive = _jax_entry_point(tb), _failing_primitive(tb)
    if entry and primitive:
        return f"{entry} (primitive {primitive!r})"
    return entry or (f"primitive {primitive!r}" if primitive else "this JAX operation")


def _raised_inside_jax(tb: TracebackType | None) -> bool:
    """The innermost frame is JAX's, or one of our repairs of it (``catalyst_lite.jax_extras``)."""
    frames = list(traceback.walk_tb(tb))
    if not frames:
        return False
    module = frames[-1][0].f_globals.get("__name__") or ""
    return module.startswith(("jax", "catalyst_lite.jax_extras"))


def raised_inside_jax(err: BaseException) -> bool:
    """``err`` was raised by JAX's code (or catalyst_lite's), not by a line of the user's: its
    innermost frame is JAX's, or JAX removed its own frames from the traceback (saying so in a
    note, or keeping them on an ``UnfilteredStackTrace``), which it does for errors that cross
    one of its API functions."""
    return (
        isinstance(err, CatalystLiteError)
        or _raised_inside_jax(_unfiltered_traceback(err))
        or type(err.__cause__).__name__ == "UnfilteredStackTrace"
        or any("JAX has removed its internal frames" in note for note in getattr(err, "__notes__", ()))
    )


def _is_internal_jax_failure(err: BaseException) -> bool:
    """JAX broke on a dynamic shape, as opposed to reporting a mistake in the user's program."""
    if isinstance(err, (jax.errors.JAXTypeError, jax.errors.JAXIndexError)) or not _raised_inside_jax(
        err.__traceback__
    ):
        return False
    if isinstance(err, (AssertionError, AttributeError, NotImplementedError, KeyError)):
        return True
    return isinstance(err, (TypeError, ValueError, IndexError)) and any(
        marker in str(err) for marker in _INTERNAL_MARKERS
    )


_STATIC_SHAPE_FIX = (
    "Give the array a static shape (drop its axis from abstracted_axes, or pass its size with "
    "static_argnums), or compute it with other jax.numpy functions."
)


def unsupported_equation_error(eqn, err: BaseException) -> UnsupportedOperationError:
    """The error for a primitive that JAX fails to run when a traced program is specialized."""
    location = equation_location(eqn.source_info)
    return UnsupportedOperationError(
        (f"at {location}: " if location else "")
        + f"primitive {eqn.primitive.name!r} cannot run on the specialized sizes: JAX 0.7's "
        f"dynamic-shape path does not support it ({type(err).__name__}: {_first_line(err)}). "
        f"{_STATIC_SHAPE_FIX}"
    )


# JAX's modules that wrap or trace functions rather than being what the user called.
_JAX_PLUMBING = {"traceback_util", "pjit", "linear_util", "core", "profiler", "api", "api_util",
                 "custom_derivatives", "dispatch", "interpreters"}


def _equation_jax_function(source_info) -> str | None:
    """``jax.numpy.linalg.det``: the JAX function the user's line called to create an equation
    (the outermost JAX frame below the user's, JAX's wrappers and tracing machinery aside)."""
    entry = None
    for frame in getattr(getattr(source_info, "traceback", None), "frames", None) or []:  # innermost first
        if not _is_library_file(frame.file_name):
            return entry
        parts = [p for p in pathlib.PurePath(frame.file_name).with_suffix("").parts if p != "_src"]
        if "jax" in parts and "<" not in frame.function_name:
            module = parts[parts.index("jax"):]
            if len(module) > 1 and module[1] not in _JAX_PLUMBING:
                entry = f"{'.'.join(module)}.{frame.function_name}"
    return entry


def escaped_size_error(fn_name: str, eqn) -> UnsupportedOperationError:
    """The error for a traced program that holds a tracer as a constant: a size of a function JAX
    traced itself inside ours (a ``custom_jvp`` function, ``lax.cond``'s branches) escaped it, so
    the program could not run."""
    location = equation_location(eqn.source_info)
    function = _equation_jax_function(eqn.source_info) or "a JAX function"
    return UnsupportedOperationError(
        f"{fn_name}" + (f" (at {location})" if location else "") + f": {function} traces a function "
        "of its own (a custom derivative or a jax.lax control-flow primitive) on symbolically-sized "
        "arrays, and JAX 0.7's dynamic-shape path loses one of its sizes there. "
        f"{_STATIC_SHAPE_FIX}"
    )


# Where a traced value is turned into a Python value: not the code that asked for it.
_CONVERSION_FILES = tuple(
    os.path.join(os.path.dirname(jax.__file__), "_src", name) for name in ("core.py", "numpy/array_methods.py")
)


def _requested_by_jax(err: BaseException) -> bool:
    """A Python value of a traced scalar was asked for by JAX's own code (``len(x)``, ``int(n)``
    in a jax.numpy function), not by the user's: with static sizes, as under ``jax.jit``, the
    function would run."""
    asking = None
    for frame, _ in traceback.walk_tb(_unfiltered_traceback(err)):
        filename = frame.f_code.co_filename
        module = frame.f_globals.get("__name__") or ""
        if not filename.startswith(_CONVERSION_FILES) and not module.startswith("catalyst_lite.jax_extras"):
            asking = frame
    return asking is not None and _is_library_frame(asking) and (
        (asking.f_globals.get("__name__") or "").startswith("jax")
    )


def needs_static_sizes(err: BaseException) -> bool:
    """``err`` was raised while tracing because JAX's own code needs a size as a Python value
    (see :func:`user_facing_trace_errors`)."""
    return getattr(err, "_catalyst_lite_needs_static_sizes", False)


def _where(fn_name: str, err: BaseException) -> str:
    location = user_location(err.__traceback__)
    return f"{fn_name} (at {location})" if location else fn_name


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def is_broadcast_error(err: BaseException) -> bool:
    """Whether ``err`` is JAX's "Incompatible shapes for broadcasting" (a ``ValueError`` on its
    dynamic-shape path)."""
    return isinstance(err, ValueError) and str(err).startswith("Incompatible shapes for broadcasting")


class ShapeBroadcastError(ValueError, TypeError):
    """JAX's "Incompatible shapes for broadcasting" (``x + y`` of shapes ``(3,)`` and ``(4,)``):
    a ``ValueError`` on JAX's dynamic-shape path, where catalyst_lite traces, and a ``TypeError``
    under ``jax.jit``; both here, so that code catching either keeps working."""


@functools.cache
def _control_flow_error_class(jax_error: type[BaseException]) -> type[ControlFlowError]:
    """:class:`ControlFlowError` that is also ``jax_error`` (``ConcretizationTypeError``,
    ``TracerBoolConversionError``...): code written for ``jax.jit`` that catches JAX's class
    catches ours too."""

    def __init__(self, message: str) -> None:  # JAX's classes take a tracer, not a message
        Exception.__init__(self, message)

    return type("ControlFlowError", (ControlFlowError, jax_error),
                {"__init__": __init__, "__module__": ControlFlowError.__module__,
                 "__doc__": ControlFlowError.__doc__, "__str__": Exception.__str__})


def _non_integer_scalars(leaf_names: Sequence[str], leaf_dtypes: Sequence[np.dtype | None]) -> str:
    found = [f"{n} ({d})" for n, d in zip(leaf_names, leaf_dtypes) if d is not None and d.kind in "fbc"]
    return ", ".join(found) or "none"


@contextlib.contextmanager
def user_facing_trace_errors(
    fn_name: str, leaf_names: Sequence[str], scalar_dtypes: Sequence[np.dtype | None]
) -> Iterator[None]:
    """Translate errors raised while tracing ``fn_name`` (see the module docstring).

    ``leaf_names``/``scalar_dtypes`` describe the flat arguments (the dtype of each scalar one,
    ``None`` for arrays), to name the candidates when a size turns out not to be an integer.
    """
    try:
        yield
    except NeedsCallSizes:
        raise  # not an error: the program is traced again with the call's sizes
    except CatalystLiteError as err:
        if not getattr(err, "_catalyst_lite_located", False):
            location = user_location(err.__traceback__)
            if location and err.args:
                err.args = (f"{err.args[0]} (at {location})", *err.args[1:])
            err._catalyst_lite_located = True
        raise
    except Exception as err:
        for jax_error, hint in _HINTS:
            if isinstance(err, jax_error):
                translated = _control_flow_error_class(type(err))(
                    f"{_where(fn_name, err)}: {hint} JAX reported: {_first_line(err)}"
                )
                translated._catalyst_lite_needs_static_sizes = _requested_by_jax(err)
                raise translated from None
        for jax_error, prefix, call, fix in _NO_SYMBOLIC_RESULT:
            if isinstance(err, jax_error) and str(err).startswith(prefix):
                raise SymbolicShapeError(
                    f"{_where(fn_name, err)}: {call} cannot have a symbolic result shape: {fix}."
                ) from None
        # (A jaxpr variable as a size is one that escaped a nested JAX trace: not the user's value.)
        if (isinstance(err, TypeError) and str(err).startswith("Shapes must be 1D sequences of integer")
                and "Var(id=" not in str(err)):
            raise ArgumentTypeError(
                f"Shapes must be 1D sequences of integer scalars: {_where(fn_name, err)}: a size "
                "must be an integer, but it is computed from a "
                f"non-integer value. Scalar arguments that are not integers: "
                f"{_non_integer_scalars(leaf_names, scalar_dtypes)}. Pass sizes as Python or NumPy "
                "ints (not floats, bools or NaN), or convert with x.astype(int)."
            ) from None
        if _is_internal_jax_failure(err):
            raise UnsupportedOperationError(
                f"{_where(fn_name, err)}: {_operation_name(_unfiltered_traceback(err))} is not "
                "supported on dynamically-shaped arrays by JAX 0.7's dynamic-shape path "
                f"({type(err).__name__}: {_first_line(err)}). {_STATIC_SHAPE_FIX}"
            ) from err
        if is_broadcast_error(err) and not isinstance(err, TypeError):
            broadcast = ShapeBroadcastError(*err.args).with_traceback(err.__traceback__)
            _note_location(broadcast, fn_name)
            raise broadcast from None
        _note_location(err, fn_name)
        raise


def _note_location(err: BaseException, fn_name: str) -> None:
    location = user_location(err.__traceback__)
    if location:
        err.add_note(f"catalyst_lite: raised while tracing {fn_name} at {location}")
