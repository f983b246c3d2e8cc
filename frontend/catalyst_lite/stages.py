"""Ahead-of-time stages of a qjit function, shaped as ``jax.stages``: :class:`Traced`,
:class:`Lowered`, :class:`Compiled`.

``f.trace(*args)`` is the program traced for the arguments' signature, sizes symbolic (the
same for every size); ``f.lower(*args)`` is that program specialized at the arguments' sizes, in
StableHLO with static shapes (what XLA compiles for them); ``.compile()`` compiles it, and the
:class:`Compiled` runs calls of those types and sizes (others raise ``TypeError``, as a
``jax.stages.Compiled`` does).

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> f = qjit(lambda x: jnp.sum(x ** 2), abstracted_axes={0: "n"})
>>> x = jnp.arange(3.0)
>>> "f64[a]" in str(f.trace(x).jaxpr)            # traced once, the size symbolic
True
>>> "tensor<3xf64>" in f.lower(x).as_text()      # specialized at size 3
True
>>> float(f.lower(x).compile()(x))
5.0
"""

from __future__ import annotations

from typing import Any, Callable

from .errors import ArgumentTypeError
from .jax_extras import x64_scope

__all__ = ["Traced", "Lowered", "Compiled"]


class Traced:
    """The traced program of one argument signature (``jax.stages.Traced``): :attr:`jaxpr`, with
    symbolic sizes as variables, and :meth:`lower` at the traced arguments' sizes."""

    def __init__(self, jaxpr: Any, fun_name: str, lower: Callable[[], "Lowered"]):
        self.jaxpr = jaxpr
        self.fun_name = fun_name
        self._lower = lower

    def lower(self) -> "Lowered":
        return self._lower()


class Lowered:
    """The program specialized at one call's sizes, lowered to StableHLO (``jax.stages.Lowered``:
    ``as_text``, ``compiler_ir``, ``cost_analysis`` are its)."""

    def __init__(self, lowered: Any, arguments: Callable[[tuple, dict], list], results: Callable):
        self._lowered = lowered
        self._arguments = arguments  # a call's flat arguments, or TypeError if not of these sizes
        self._results = results

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lowered, name)

    def compile(self, compiler_options: dict[str, Any] | None = None) -> "Compiled":
        return Compiled(self._lowered.compile(compiler_options), self._arguments, self._results)


class Compiled(Lowered):
    """The XLA executable of a :class:`Lowered` (``jax.stages.Compiled``: ``as_text``,
    ``cost_analysis``, ``memory_analysis`` are its); callable with arguments of the types and
    sizes it was lowered for."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._arguments(args, kwargs)
        with x64_scope():
            return self._results(self._lowered(*flat))


def mismatch(fn_name: str, lowered_for: Any, called_with: Any) -> ArgumentTypeError:
    """The error of a compiled stage called with other types or sizes than it was lowered for."""
    return ArgumentTypeError(
        f"{fn_name}: this compiled stage was lowered for {lowered_for} and is called with "
        f"{called_with}. Lower again for these arguments (f.lower(*args).compile()), or call f."
    )
