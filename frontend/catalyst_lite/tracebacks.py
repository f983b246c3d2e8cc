"""Tracebacks that show the user's code: an exception leaving a qjit function (its call, its
decoration-time trace, ``lower``/``trace``) keeps the user's frames and drops catalyst_lite's and
JAX's, as ``jax.jit`` does with its ``traceback_util``. The one frame kept of ours is the call's
entry point. ``CATALYST_LITE_TRACEBACK_FILTERING=off`` keeps every frame (for debugging
catalyst_lite itself).

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(x: float):
...     raise ValueError("from the user's code")
Traceback (most recent call last):
ValueError: from the user's code
...
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any, Callable

import jax

__all__ = ["FILTERING_ENV_VAR", "filtered", "api_boundary"]

FILTERING_ENV_VAR = "CATALYST_LITE_TRACEBACK_FILTERING"
_HIDDEN = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(os.path.abspath(jax.__file__)) + os.sep)


def filtered(error: BaseException) -> BaseException:
    """``error`` with the frames of catalyst_lite and JAX left out of its traceback (unless the
    environment variable turns filtering off)."""
    if os.environ.get(FILTERING_ENV_VAR, "on").strip().lower() in ("off", "0", "false", "no"):
        return error
    kept, tb = [], error.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_HIDDEN):
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
