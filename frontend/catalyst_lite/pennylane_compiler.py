"""catalyst_lite as a PennyLane compiler: ``qml.qjit(fn, compiler="catalyst_lite")``.

PennyLane finds compilers through the ``pennylane.compilers`` entry points that ``pyproject.toml``
declares, all defined here: :func:`qjit`, :class:`TracingContext` (its ``is_tracing()`` answers
``qml.compiler.active_compiler()``) and :class:`PennyLaneOps` (``qml.for_loop``,
``qml.while_loop`` and ``qml.cond`` hand their work to it while catalyst_lite is active).

>>> import pennylane as qml
>>> @qml.qjit(compiler="catalyst_lite")
... def triangle(n: int):
...     @qml.for_loop(0, n, 1)
...     def body(i, total):
...         return total + i
...     return body(0)
>>> int(triangle(5))
10
"""

from __future__ import annotations

from typing import Any, Callable

from .compiled import QJIT
from .compiled import qjit as _catalyst_lite_qjit
from .control_flow import cond, for_loop, while_loop
from .jax_extras import is_tracing
from .quantum.qnode import pennylane_adjoint, pennylane_ctrl, pennylane_measure
from .transforms import grad, jacobian, jvp, value_and_grad, vjp
from .jax_extras.patches import is_active as _inside_catalyst_lite_scope

__all__ = ["COMPILER_NAME", "qjit", "TracingContext", "PennyLaneOps"]

COMPILER_NAME = "catalyst_lite"
"""The name users pass as ``qml.qjit(compiler=...)``; the prefix of our entry-point names."""


def qjit(fn: Callable | None = None, **options: Any) -> QJIT | Callable[[Callable], QJIT]:
    """The ``catalyst_lite.qjit`` entry point: compile ``fn`` with :func:`catalyst_lite.qjit`.

    ``qml.qjit(fn, compiler="catalyst_lite", **options)`` calls ``qjit(fn=fn, **options)``;
    without ``fn`` (``@qml.qjit(compiler="catalyst_lite", abstracted_axes=...)``) the result is a
    decorator. Options are those of :func:`catalyst_lite.qjit`; an unknown one is a ``TypeError``.

    >>> import jax.numpy as jnp
    >>> f = qjit(lambda x: jnp.sum(x), abstracted_axes={0: "n"})
    >>> float(f(jnp.ones(3)))
    3.0
    """
    if fn is not None and not callable(fn):
        raise TypeError(
            f"qml.qjit(compiler={COMPILER_NAME!r}) compiles a function, got "
            f"{type(fn).__name__} {fn!r}."
        )
    return _catalyst_lite_qjit(fn, **options)


class TracingContext:
    """The ``catalyst_lite.context`` entry point: tells PennyLane when catalyst_lite traces.

    >>> TracingContext.is_tracing()
    False
    """

    @staticmethod
    def is_tracing() -> bool:
        """True while the calling thread traces a catalyst_lite program.

        Other JAX-based compilers (Catalyst) also trace with dynamic shapes, so a dynamic-shape
        trace alone does not mean it is ours: the trace must also run inside catalyst_lite's own
        thread-local tracing scope. Otherwise PennyLane, which asks every installed compiler in
        turn, could hand Catalyst's loops to us. A JAX transformation applied inside the
        program (``jax.vmap``, ``jax.grad`` of a QNode) is still ours: its ``qml.measure``,
        ``qml.cond``... compile into the program.
        """
        return _inside_catalyst_lite_scope() and is_tracing(under_transformations=True)


class PennyLaneOps:
    """The ``catalyst_lite.ops`` entry point: what PennyLane operations become under our qjit.

    PennyLane calls ``for_loop(start, stop, step, allow_array_resizing=...)``,
    ``while_loop(cond_fn, allow_array_resizing=...)`` and ``cond(pred)`` (then ``else_if`` and
    ``otherwise`` on the result); catalyst_lite's functions take exactly these arguments, so they
    serve as they are.

    >>> PennyLaneOps.for_loop is for_loop
    True
    """

    for_loop = staticmethod(for_loop)
    while_loop = staticmethod(while_loop)
    cond = staticmethod(cond)

    # The rest of PennyLane's compiler-dispatched operations.
    # Quantum operations inside compiled QNodes (catalyst_lite.quantum).
    adjoint = staticmethod(pennylane_adjoint)
    ctrl = staticmethod(pennylane_ctrl)
    measure = staticmethod(pennylane_measure)
    # Derivatives (catalyst_lite.transforms): PennyLane passes (fn, method=, h=, argnums=), and
    # (f, params, tangents/cotangents, method=, h=, argnums=) for jvp/vjp, as ours take them.
    grad = staticmethod(grad)
    jacobian = staticmethod(jacobian)
    value_and_grad = staticmethod(value_and_grad)
    jvp = staticmethod(jvp)
    vjp = staticmethod(vjp)
