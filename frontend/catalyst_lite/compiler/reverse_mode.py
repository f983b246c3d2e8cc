"""Whether the program being specialized will be differentiated in reverse mode.

JAX cannot transpose ``lax.while_loop`` or a ``fori_loop`` with traced bounds, so while
:func:`reverse_mode_requested` holds, those loops run on the host (as bounded scans,
:mod:`.capacity`). Runners key their executables on it."""

from __future__ import annotations

from typing import Any, Sequence

from ..trace_context import current, scope
from ..jax_extras.autodiff import is_reverse_mode_value

__all__ = ["reverse_mode", "reverse_mode_requested", "needs_reverse_mode"]


def reverse_mode_requested() -> bool:
    """True inside :func:`reverse_mode` (in this thread)."""
    return current().reverse_mode


def reverse_mode(active: bool = True) -> scope:
    """Specialize for reverse-mode differentiation during a ``with`` block (``active=False``: do not)."""
    return scope(reverse_mode=active)


def needs_reverse_mode(args: Sequence[Any]) -> bool:
    """Whether a program run on ``args`` needs reverse mode: requested, or an argument is linearized."""
    return reverse_mode_requested() or any(is_reverse_mode_value(a) for a in args)
