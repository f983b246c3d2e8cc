"""A QNode's ``diff_method`` when ``grad``/``jacobian``/``jvp``/``vjp`` differentiate it.

A compiled circuit's derivatives are those of the simulation (exact); ``diff_method`` (checked as
PennyLane and Catalyst check it) decides which results may be differentiated, and results from
shots take the derivative of the exact statistic. With ``"adjoint"`` (and ``"best"`` without
shots) exact ``expval`` results of a straight-line circuit are differentiated by :mod:`.adjoint`.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import jax
import jax.numpy as jnp

from ..trace_context import current as current_context, scope as context_scope
from ..errors import DifferentiableCompileError

__all__ = ["by_adjoint_method", "differentiating", "gradient_method", "with_exact_derivative"]

_ALLOWED_RESULTS = {"adjoint": ("expval",), "parameter-shift": ("expval", "probs")}


def _auto() -> bool:
    """A ``grad``/``jacobian``... with ``method="auto"`` traces the current function."""
    return current_context().diff_methods[-1:] == ("auto",)


@contextlib.contextmanager
def differentiating(method: str) -> Iterator[None]:
    """While a function is traced to be differentiated with ``method`` (``"auto"`` or ``"fd"``)."""
    with context_scope(diff_methods=(*current_context().diff_methods, method)):
        yield


def by_adjoint_method(qnode) -> bool:
    """True while ``method="auto"`` differentiates ``qnode`` and its ``diff_method`` is
    ``"adjoint"`` or ``"best"``: its exact ``expval`` results are then differentiated by
    :mod:`.adjoint` when the circuit allows it."""
    return _auto() and qnode.diff_method in ("adjoint", "best")


def gradient_method(qnode, kinds: Sequence[str], shots_finite: bool, classical: bool = False) -> str | None:
    """The QNode's effective ``diff_method`` while ``method="auto"`` differentiates it (``None``
    otherwise), given the kinds of its measurement results and whether it also returns other
    values (``classical``); ``DifferentiableCompileError`` when it cannot be differentiated so."""
    if not _auto():
        return None
    name = getattr(qnode, "__name__", None) or getattr(qnode.func, "__name__", "the QNode")
    method = qnode.diff_method
    if method is None:
        raise DifferentiableCompileError(
            f"Cannot differentiate a QNode explicitly marked non-differentiable (with "
            f"diff_method=None): {name}. Give it a diff_method (e.g. 'parameter-shift'), or "
            "differentiate by finite differences with grad(..., method='fd')."
        )
    if method == "best" and "lightning" in getattr(qnode.device, "name", ""):
        method = "adjoint" if all(k == "expval" for k in kinds) else "parameter-shift"
    elif method == "best":
        method = "parameter-shift" if shots_finite else "backprop"
    if method not in ("adjoint", "parameter-shift", "backprop", "finite-diff"):
        raise DifferentiableCompileError(
            f"Invalid gradient method: {method} (QNode {name}). catalyst_lite differentiates QNodes with "
            "diff_method 'best', 'parameter-shift', 'adjoint', 'backprop' or 'finite-diff'."
        )
    allowed = _ALLOWED_RESULTS.get(method)
    if allowed is not None:
        if "var" in kinds:
            raise DifferentiableCompileError(
                f"Variance returns are forbidden in gradients (QNode {name}, diff_method={method!r}): "
                "differentiate qml.expval of the observable and of its square instead, or use "
                "diff_method='backprop'."
            )
        wrong = sorted({k for k in kinds if k not in allowed})
        if classical and qnode.diff_method != "best":  # "best" picks a method that can (backprop)
            wrong.append("a value that is not a measurement")
        if wrong:
            raise DifferentiableCompileError(
                f"The {method} method can only be used for QNodes which return "
                f"{' or '.join('qml.' + k for k in allowed)}; {name} returns {', '.join(wrong)}. "
                "Use diff_method='backprop', or grad(..., method='fd')."
            )
    if method == "backprop" and shots_finite:
        raise DifferentiableCompileError(
            f"diff_method='backprop' differentiates exact results only, and QNode {name} has finite "
            "shots: use diff_method='parameter-shift', or remove the shots."
        )
    return method


def with_exact_derivative(estimate: jax.Array, exact: jax.Array) -> jax.Array:
    """The value of ``estimate`` (a statistic of shots) with the derivative of ``exact``."""
    exact = jnp.asarray(exact, jnp.result_type(estimate))
    return estimate + (exact - jax.lax.stop_gradient(exact))
