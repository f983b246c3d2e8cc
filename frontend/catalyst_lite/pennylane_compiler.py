"""catalyst_lite as a PennyLane compiler, ``qml.qjit(fn, compiler="catalyst_lite")``: the
``pennylane.compilers`` entry points that ``pyproject.toml`` declares.

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

from .compiled import QJIT, qjit as _catalyst_lite_qjit
from .control_flow import cond, for_loop, while_loop
from .jax_extras import is_tracing
from .quantum.qnode import pennylane_adjoint, pennylane_ctrl, pennylane_measure
from .transforms import grad, jacobian, jvp, value_and_grad, vjp
from .jax_extras.patches import is_active as _inside_catalyst_lite_scope

__all__ = ["COMPILER_NAME", "qjit", "TracingContext", "PennyLaneOps"]

COMPILER_NAME = "catalyst_lite"  # qml.qjit(compiler=...), our entry points' prefix


def qjit(fn: Callable | None = None, **options: Any) -> QJIT | Callable[[Callable], QJIT]:
    """The ``catalyst_lite.qjit`` entry point: :func:`catalyst_lite.qjit` (a decorator without ``fn``).

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
        """True while the calling thread traces a catalyst_lite program (inside our own scope:
        Catalyst also traces with dynamic shapes), JAX transformations inside it included."""
        return _inside_catalyst_lite_scope() and is_tracing(under_transformations=True)


class PennyLaneOps:
    """The ``catalyst_lite.ops`` entry point: what PennyLane's compiler-dispatched operations
    become under our qjit (ours take PennyLane's arguments as they are).

    >>> PennyLaneOps.for_loop is for_loop
    True
    """

    for_loop = staticmethod(for_loop)
    while_loop = staticmethod(while_loop)
    cond = staticmethod(cond)
    adjoint = staticmethod(pennylane_adjoint)
    ctrl = staticmethod(pennylane_ctrl)
    measure = staticmethod(pennylane_measure)
    grad = staticmethod(grad)
    jacobian = staticmethod(jacobian)
    value_and_grad = staticmethod(value_and_grad)
    jvp = staticmethod(jvp)
    vjp = staticmethod(vjp)
