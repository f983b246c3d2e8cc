"""PennyLane's captured derivatives (``qml.grad``, ``qml.jacobian``, ``qml.value_and_grad``,
``qml.jvp``, ``qml.vjp``) as catalyst_lite's transforms of the captured function.

PennyLane's primitives take the function's flat inputs (its constants and array sizes among them)
and flat ``argnums`` into them, and return flat results: for ``jacobian``, one block per result
and differentiated input, result-major, which is how catalyst_lite's results flatten too.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from jax.tree_util import tree_leaves
from pennylane.capture.primitives import jacobian_prim, jvp_prim, value_and_grad_prim, vjp_prim

from ..transforms import grad, jacobian, jvp, value_and_grad, vjp
from .interpreter import PlxprCompiler, SizeLocations

__all__: list[str] = []


def _function(self: PlxprCompiler, jaxpr: Any, consts: Sequence[Any]) -> Callable[..., list[Any]]:
    """The captured function of its flat inputs; sizes are read from the arrays it receives (the
    transform traces it with arguments of its own)."""
    run = self.subprogram(jaxpr, consts)
    sizes = SizeLocations.of(jaxpr.invars)
    return lambda *inputs: run(*sizes.fill(inputs))


def _options(method: str, h: float, argnums: Sequence[int]) -> dict[str, Any]:
    # PennyLane always passes a step; catalyst_lite takes one with method="fd" only.
    return {"method": method, "h": h if method == "fd" else None, "argnums": tuple(argnums)}


@PlxprCompiler.register_primitive(jacobian_prim)
def _jacobian(
    self: PlxprCompiler, *invals: Any, jaxpr: Any, n_consts: int, argnums: Sequence[int], method: str,
    h: float, scalar_out: bool, fn: Callable,
) -> list[Any]:
    function = _function(self, jaxpr, invals[:n_consts])
    if scalar_out:  # qml.grad
        derivatives = grad(lambda *x: function(*x)[0], **_options(method, h, argnums))
    else:
        derivatives = jacobian(function, **_options(method, h, argnums))
    return tree_leaves(derivatives(*invals[n_consts:]))


@PlxprCompiler.register_primitive(value_and_grad_prim)
def _value_and_grad(
    self: PlxprCompiler, *invals: Any, jaxpr: Any, argnums: Sequence[int], method: str, h: float,
    fn: Callable,
) -> list[Any]:
    function = _function(self, jaxpr, ())
    value, gradient = value_and_grad(lambda *x: function(*x)[0], **_options(method, h, argnums))(*invals)
    return [value, *tree_leaves(gradient)]


def _product_rule(transform: Callable) -> Callable:
    """The rule of ``jvp_prim``/``vjp_prim``: inputs are the function's inputs, then the tangents
    (or cotangents); results are the function's results, then the derivative's."""

    def rule(
        self: PlxprCompiler, *invals: Any, jaxpr: Any, fn: Callable, method: str, h: float,
        argnums: Sequence[int],
    ) -> list[Any]:
        n = len(jaxpr.invars)
        function = _function(self, jaxpr, ())
        results, derivatives = transform(function, invals[:n], invals[n:], **_options(method, h, argnums))
        return [*tree_leaves(results), *tree_leaves(derivatives)]

    return rule


PlxprCompiler.register_primitive(jvp_prim)(_product_rule(jvp))
PlxprCompiler.register_primitive(vjp_prim)(_product_rule(vjp))
