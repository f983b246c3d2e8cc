"""Who reads the StableHLO of a dynamically-shaped program, and what that reader needs.

``QJIT.mlir`` shows JAX's lowering, repaired (:data:`DISPLAY`). A compiler that keeps dimensions
dynamic may need other forms of some operations: IREE's target is in :mod:`.iree_lowering`. The
target of the lowering running in the calling thread is :func:`current_target`.

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
    """The program uses something the lowering target cannot express (e.g. a loop that resizes
    its carried arrays, for a compiler that assumes carried sizes never change)."""


@dataclass(frozen=True)
class LoweringTarget:
    """What the StableHLO is for, and what that reader needs beyond JAX's own lowering.

    :data:`DISPLAY` is ``QJIT.mlir``: JAX's lowering, repaired. A compiler that keeps dimensions
    dynamic (IREE, see :mod:`.iree_lowering`) may need other forms of some operations:

    - ``rules``: lowering rules used instead of JAX's, by primitive;
    - ``dynamic_reshape(ctx, x, aval_out)`` and ``dynamic_broadcast(ctx, x, aval_out,
      broadcast_dimensions)``: how a reshape or broadcast to a shape with symbolic sizes is
      emitted (JAX's rules emit every such op through ``mlir.reshape`` and ``mlir.broadcast_in_dim``);
    - ``tie_sizes``: nested bodies re-derive the sizes of their arguments from the dimension
      values they receive, and so do the results of catalyst_lite's primitives (loops,
      conditionals) from the values in scope, so that the compiler can trace each size to a value;
    - ``resizing_loops``: whether a loop may carry arrays whose sizes change per iteration;
    - ``foreign_ops``: whether operations of other dialects may appear (in generic form).
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
