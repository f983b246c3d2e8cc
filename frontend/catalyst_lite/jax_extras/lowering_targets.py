"""Who reads the StableHLO of a dynamically-shaped program (:class:`LoweringTarget`), and the target
of the lowering running in the calling thread (:func:`current_target`).

>>> current_target().name
'display'
>>> with lowering_for(LoweringTarget("reader")):
...     current_target().name
'reader'
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from jax._src import core
from jax._src.lib.mlir import ir

from ..trace_context import current, scope

__all__ = ["UnsupportedLowering", "LoweringTarget", "DISPLAY", "current_target", "lowering_for"]


class UnsupportedLowering(NotImplementedError):
    """The program uses something the lowering target cannot express (a loop that resizes its
    carried arrays, for IREE)."""


@dataclass(frozen=True)
class LoweringTarget:
    """What the StableHLO is for, and what that reader needs beyond JAX's own lowering
    (:data:`DISPLAY`, ``QJIT.mlir``, needs nothing; IREE's is in :mod:`.iree_lowering`): ``rules``
    used instead of JAX's, by primitive; ``dynamic_reshape(ctx, x, aval_out)`` and
    ``dynamic_broadcast(ctx, x, aval_out, broadcast_dimensions)``, how a reshape or broadcast to
    symbolic sizes is emitted; ``tie_sizes``, whether nested bodies and our primitives' results
    re-derive their sizes from the dimension values in scope; ``resizing_loops``, whether a loop
    may resize its carried arrays; ``foreign_ops``, whether other dialects' operations may appear.
    """

    name: str
    rules: tuple[tuple[core.Primitive, Callable[..., Any]], ...] = ()
    dynamic_reshape: Callable[..., ir.Value] | None = None
    dynamic_broadcast: Callable[..., ir.Value] | None = None
    tie_sizes: bool = False
    resizing_loops: bool = True
    foreign_ops: bool = False


DISPLAY = LoweringTarget("display")


def current_target() -> LoweringTarget:
    """The target of the lowering running in this thread (:data:`DISPLAY` outside one)."""
    return current().lowering_target or DISPLAY


@contextlib.contextmanager
def lowering_for(target: LoweringTarget) -> Iterator[None]:
    """Lower for ``target`` in this thread during the block."""
    with scope(lowering_target=target):
        yield
