"""Errors raised while tracing a user function, made to point at the user's code.

:func:`user_facing_trace_errors` wraps a trace: our own errors get the user's source line; JAX's
errors about Python control flow on a traced value become :class:`~.errors.ControlFlowError` with
a hint; a size that is not an integer becomes :class:`~.errors.ArgumentTypeError`; a failure on
symbolic sizes becomes :class:`~.jax_extras.patches.NeedsCallSizes` (traced again with the call's
sizes); any other error is left as it is. Each is typed where it is raised (no message is read).
:func:`filtered` drops catalyst_lite's and JAX's frames from a traceback, as ``jax.jit`` does
(``CATALYST_LITE_TRACEBACK_FILTERING=off`` keeps them).
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.errors
import numpy as np

from .errors import ArgumentTypeError, CatalystLiteError, ControlFlowError, UnsupportedOperationError
from .jax_extras.frames import HIDDEN_DIRS, user_line_of_traceback, user_line_of_equation
from .jax_extras.patches import NeedsCallSizes, NonIntegerSizeError, ShapeBroadcastError, error_standing_for
from .jax_extras.size_facts import SizeScope

__all__ = [
    "user_facing_trace_errors", "ShapeBroadcastError", "unsupported_equation_error", "escaped_size_error",
    "FILTERING_ENV_VAR", "filtered", "api_boundary", "first_line",
]

_HINTS: dict[type[BaseException], str] = {
    jax.errors.TracerBoolConversionError: (
        "Python `if`/`while`/`and`/`or`/`not` on a traced value: its truth is only known when the "
        "program runs. Use catalyst_lite.cond for `if`, catalyst_lite.while_loop for `while`, "
        "jnp.where for an elementwise choice, or pass the value as a static argument "
        "(static_argnums/static_argnames) if it is a compile-time option."
    ),
    jax.errors.TracerIntegerConversionError: (
        "a traced integer used as a Python int (`range(n)`, a list index): its value is only known "
        "when the program runs. Use catalyst_lite.for_loop(0, n, 1) instead of `for i in range(n)`, "
        "jnp indexing instead of list indexing, or pass the value as a static argument "
        "(static_argnums/static_argnames)."
    ),
    jax.errors.TracerArrayConversionError: (
        "a traced array passed to NumPy (np.asarray, np.sum, ...): use the jax.numpy function "
        "instead, which works on traced arrays."
    ),
    jax.errors.ConcretizationTypeError: (
        "a traced value where Python needs a concrete one (int(x), float(x), a data-dependent "
        "size): its value is only known when the program runs. Use cond/for_loop/while_loop for "
        "control flow, x.astype(...) to convert, the `size=` argument of jnp functions with "
        "data-dependent sizes, or pass the value as a static argument (static_argnums)."
    ),
}


def unsupported_equation_error(eqn, err: BaseException) -> UnsupportedOperationError:
    """The error for a primitive that JAX fails to run when a traced program is specialized."""
    location = user_line_of_equation(eqn.source_info)
    return UnsupportedOperationError(
        (f"at {location.described()}: " if location else "")
        + f"primitive {eqn.primitive.name!r} cannot run on the specialized sizes: JAX 0.7's "
        f"dynamic-shape path does not support it ({type(err).__name__}: {first_line(err)}). "
        "Give the array a static shape (drop its axis from abstracted_axes, or pass its size with "
        "static_argnums), or compute it with other jax.numpy functions."
    )


def escaped_size_error(fn_name: str, eqn) -> NeedsCallSizes:
    """The signal for a traced program that holds a tracer as a constant (a size escaped a trace
    JAX ran inside ours): it is traced with the call's sizes."""
    location = user_line_of_equation(eqn.source_info)
    return NeedsCallSizes(f"{fn_name}: a size escaped JAX's nested trace" + (f" at {location.described()}" if location else ""))


def _where(fn_name: str, err: BaseException) -> str:
    location = user_line_of_traceback(err.__traceback__)
    return f"{fn_name} (at {location.described()})" if location else fn_name


def first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


@contextlib.contextmanager
def user_facing_trace_errors(
    fn_name: str, leaf_names: Sequence[str], scalar_dtypes: Sequence[np.dtype | None], scope: SizeScope
) -> Iterator[None]:
    """Translate errors raised while tracing ``fn_name`` in ``scope`` (see the module docstring);
    ``scalar_dtypes`` (``None`` for arrays) name the candidates of a size that is not an integer."""
    try:
        yield
    except NeedsCallSizes:
        raise  # not an error: the program is traced again with the call's sizes
    except CatalystLiteError as err:
        if not getattr(err, "_catalyst_lite_located", False):
            location = user_line_of_traceback(err.__traceback__)
            if location and err.args:
                err.args = (f"{err.args[0]} (at {location.described()})", *err.args[1:])
            err._catalyst_lite_located = True
        raise
    except NonIntegerSizeError as err:
        found = [f"{n} ({d})" for n, d in zip(leaf_names, scalar_dtypes) if d is not None and d.kind in "fbc"]
        raise ArgumentTypeError(
            f"Shapes must be 1D sequences of integer scalars: {_where(fn_name, err)}: a size "
            "must be an integer, but it is computed from a "
            f"non-integer value. Scalar arguments that are not integers: "
            f"{', '.join(found) or 'none (it comes from an array, a static argument or a computation)'}. "
            "Pass sizes as Python or NumPy "
            "ints (not floats, bools or NaN), or convert with x.astype(int)."
        ) from None
    except tuple(_HINTS) as err:
        hint = next(hint for jax_error, hint in _HINTS.items() if isinstance(err, jax_error))
        raise error_standing_for(ControlFlowError, type(err))(
            f"{_where(fn_name, err)}: {hint} JAX reported: {first_line(err)}"
        ) from None
    except Exception as err:
        if isinstance(err, ShapeBroadcastError) and err.args and not scope.symbolic:
            err.args = (f"{err.args[0]} (in {_where(fn_name, err)})", *err.args[1:])  # JAX names neither
        if not scope.symbolic:
            raise
        if isinstance(err, (TypeError, ValueError)) and scope.last_disagreement is not None:
            # JAX's shape logic raised right after it was told two sizes differ: at the call's
            # sizes they may not (`jnp.stack` of two abstracted axes).
            raise NeedsCallSizes.standing_for(err, "JAX's shape logic on sizes that differ") from err
        if isinstance(err, (TypeError, ValueError)) and scope.last_branch_at_point:
            # ... or right after it branched otherwise at the call's sizes than at generic ones
            # (`jnp.pad(x, 1, "reflect")` at n = 1 refuses a symbolic n): jax.jit's way serves it.
            raise NeedsCallSizes.standing_for(err, "JAX's shape logic at this call's sizes") from err
        if scope.signalled is not None:
            # The user's code asked a size's Python value, then failed (maybe catching the signal).
            raise NeedsCallSizes.standing_for(err, f"{scope.signalled}, then {type(err).__name__}") from err
        raise  # the user's own, or JAX's about the user's program: left as it is


FILTERING_ENV_VAR = "CATALYST_LITE_TRACEBACK_FILTERING"


def filtered(error: BaseException) -> BaseException:
    """``error`` without catalyst_lite's and JAX's frames (unless :data:`FILTERING_ENV_VAR` is off)."""
    if os.environ.get(FILTERING_ENV_VAR, "on").strip().lower() in ("off", "0", "false", "no"):
        return error
    kept, tb = [], error.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(HIDDEN_DIRS):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for tb in reversed(kept):
        new = types.TracebackType(new, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    # No note added: pytest's match= (and users' checks) read notes with the message.
    return error.with_traceback(new)


def api_boundary(fn: Callable) -> Callable:
    """``fn`` raising its exceptions :func:`filtered`."""

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            raise filtered(error)  # noqa: B904 (the same exception, its traceback trimmed)

    return boundary
