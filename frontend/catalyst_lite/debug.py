"""``catalyst_lite.debug``: Catalyst's run-time debugging helpers (:func:`callback`, :func:`print`,
:func:`print_memref`, :func:`debug_assert`) and, from :mod:`catalyst_lite.compiler_stages`, its
compiler-stage functions as far as they mean something for XLA.

Each helper is a host callback (:mod:`catalyst_lite.callbacks`) that runs on the forward pass only
under differentiation; outside qjit it simply runs. ``qjit(disable_assertions=True)`` leaves
assertions out.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit, debug
>>> @qjit
... def f(a, b):
...     debug.print("b={b} a={a}", a=a, b=b)
...     return a + b
>>> int(f(1, 2))
b=2 a=1
3
"""

from __future__ import annotations

import builtins
import functools
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
from jax.tree_util import tree_flatten, tree_map

from .callbacks import HostCall, call_on_host, run_eagerly
from .errors import ArgumentTypeError, DebugAssertionError, function_name
from .jax_extras import get_aval, x64_scope
from .tracing import qjit_option

from .compiler_stages import (
    compile_executable,
    get_cmain,
    get_compilation_stage,
    get_compilation_stages_groups,
    instrumentation,
    replace_ir,
)

__all__ = ["callback", "print", "print_memref", "debug_assert", "get_compilation_stage",
           "get_compilation_stages_groups", "get_cmain", "instrumentation", "replace_ir",
           "compile_executable"]


def callback(callback_fn: Callable) -> Callable:
    """``callback_fn`` (which must return ``None``), called with its arguments' values when the
    program runs. Usable as a decorator.

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
        call = HostCall(callback_fn, function_name(callback_fn), tree_flatten((args, kwargs))[1], (), debug=True)
        call_on_host(call, args, kwargs)

    return debug_callback


def print(fmt: Any, *args: Any, **kwargs: Any) -> None:  # noqa: A001 (Catalyst's name)
    """Print ``fmt.format(*args, **kwargs)`` when the program runs (``str.format`` syntax:
    ``"{x:.2f}"``); a ``fmt`` that is not a string is itself printed. An f-string is formatted
    when traced, so it shows tracers, not values.

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
    """The values as JAX arrays, as Catalyst formats them: ``{}`` shows ``1.0`` or ``[1. 2.]``
    (as a NumPy value would), a container shows its arrays' reprs (``Array(1., dtype=float64)``);
    their dtypes kept."""
    with x64_scope():
        return tree_map(lambda v: jnp.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else v, tree)


def _number_text(v: Any) -> str:
    """A number as a C++ stream prints it (Catalyst's runtime): ``1`` and ``0.5``, not ``1.``;
    integers and bools in full (``1000000``, ``1``/``0``), floats with 6 significant digits."""
    if np.iscomplexobj(v):
        return f"({v.real:g},{v.imag:g})"
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return str(int(v))
    return format(v, "g")


def _memref_data(array: np.ndarray) -> str:
    """The elements as Catalyst's runtime prints a memref: elements of the innermost axis
    separated by a comma and ``rank + 1`` spaces, each row ending with ``", "`` and a new line
    indented by its depth."""
    separator = "," + " " * (array.ndim + 1)

    def nested(a: np.ndarray, depth: int) -> str:
        if a.ndim == 1:
            return "[" + separator.join(_number_text(v) for v in a) + "]"
        return "[" + (", \n" + " " * (depth + 1)).join(nested(row, depth + 1) for row in a) + "]"

    return nested(array, 0)


def _memref_text(x: Any) -> str:
    array = np.asarray(x)
    strides = [s // array.itemsize for s in array.strides] if array.ndim else []
    data = _memref_data(array) if array.ndim else _number_text(array[()])
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
    the program runs and the boolean scalar ``condition`` is false. Left out of programs compiled
    with ``qjit(disable_assertions=True)``; outside qjit, checked at once.

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
        aval = get_aval(condition)
        if aval.shape != () or aval.dtype != np.bool_:
            raise ArgumentTypeError(
                f"debug_assert ({error!r}) needs a boolean scalar condition, got "
                f"{aval.str_short()}; reduce it first (jnp.all, jnp.any)."
            )
    if run_eagerly():
        _fail_if_false(condition, error)
        return
    if qjit_option("disable_assertions", False):
        return
    callback(functools.partial(_fail_if_false, message=error))(condition)
