"""Whether the program being specialized will be differentiated in reverse mode.

JAX transposes ``lax.fori_loop`` with a static trip count (it becomes a ``scan``, whose iterations
are stored) and ``lax.cond``/``lax.switch``, but refuses ``lax.while_loop`` and a ``fori_loop``
with traced bounds: their number of iterations, and so the storage for what the backward pass
needs, is unknown when XLA compiles the program. catalyst_lite knows it one step later: in
host-driven execution (:attr:`~.specialize.Mode.HOST`) every loop runs from Python on concrete
values, so JAX records each iteration (the trip count and the carries) in storage sized at run
time. The staged rules of those loops therefore raise :class:`~.specialize.NeedsHost` while
:func:`reverse_mode_requested` holds.

It holds while a reverse-mode transformation of ours specializes its function (see
:mod:`catalyst_lite.transforms.differentiation`), and while a :class:`~.specialize.JaxprRunner`
runs on values that an outer ``jax.grad``/``jax.vjp`` is linearizing. Because it changes how a
program is staged, runners key their compiled executables on it.

>>> reverse_mode_requested()
False
>>> with reverse_mode():
...     reverse_mode_requested()
True
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ..trace_context import current, scope
from ..jax_extras.autodiff import is_reverse_mode_value

__all__ = ["reverse_mode", "reverse_mode_requested", "needs_reverse_mode"]

def reverse_mode_requested() -> bool:
    """True inside :func:`reverse_mode` (in this thread)."""
    return current().reverse_mode


@contextlib.contextmanager
def reverse_mode(active: bool = True) -> Iterator[None]:
    """Specialize for reverse-mode differentiation during the block (``active=False``: do not)."""
    with scope(reverse_mode=active):
        yield


def needs_reverse_mode(args: Sequence[Any]) -> bool:
    """Whether a program run on ``args`` must be specialized for reverse mode: it is requested,
    or an outer JAX transformation is linearizing one of the arguments."""
    return reverse_mode_requested() or any(is_reverse_mode_value(a) for a in args)
