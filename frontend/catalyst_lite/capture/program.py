"""Tracing a function through PennyLane's program capture, inside a catalyst_lite trace.

:func:`captured_program` wraps the user's function for :func:`~catalyst_lite.tracing.trace_program`:
it captures the function as PennyLane does, in a trace nested in ours (arrays keep their symbolic
sizes; :func:`~catalyst_lite.jax_extras.hosted_capture`), then evaluates the captured program
into our trace with :class:`~.interpreter.PlxprCompiler`, PennyLane's primitives becoming ours.
For example (PennyLane's capture needs the JAX version it pins, 0.7.1)::

    @qjit(capture=True)
    def total(n: int):
        return qml.for_loop(0, n, 1)(lambda i, acc: acc + i)(jnp.zeros(n))

    total(3)  # Array([3., 3., 3.]): PennyLane's for_loop primitive, compiled as catalyst_lite's
"""

from __future__ import annotations

from typing import Any, Callable

from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from ..jax_extras import hosted_capture
from ..jax_extras.dynshape import ExpansionStrategy, expand_args
from ..jax_extras.nested import NestedBody, trace_nested
from . import control_flow as _control_flow  # noqa: F401  (registers the interpreter's rules)
from . import differentiation as _differentiation  # noqa: F401  (likewise)
from . import quantum as _quantum  # noqa: F401  (likewise)
from .interpreter import PlxprCompiler
from ..trace_context import capture_switched

__all__ = ["captured_program", "capture_plxpr"]


def captured_program(fn: Callable, name: str) -> Callable:
    """``fn`` captured by PennyLane and compiled by catalyst_lite: a function of the same
    (positional) arguments, to be called while catalyst_lite traces."""

    def program(*args: Any) -> Any:
        flat_args, in_tree = tree_flatten(args)
        plxpr, out_tree = capture_plxpr(fn, flat_args, in_tree, name)
        results = PlxprCompiler().eval(plxpr.jaxpr, [], *plxpr.consts, *flat_args)
        return tree_unflatten(out_tree, results)

    program.__name__ = program.__qualname__ = name
    return program


def capture_plxpr(fn: Callable, flat_args: list[Any], in_tree: Any, name: str) -> tuple[NestedBody, PyTreeDef]:
    """PennyLane's program of ``fn`` for these arguments (tracers of the current trace): a jaxpr
    taking its captured values (``.consts``) and then ``flat_args``; and its results' structure."""
    _, in_type = expand_args(flat_args, ExpansionStrategy(preserve_dimensions=True))
    trees: list[PyTreeDef] = []

    def under_capture(*flat: Any) -> list[Any]:
        with capture_switched(True, name), hosted_capture():
            leaves, tree = tree_flatten(fn(*tree_unflatten(in_tree, list(flat))))
        trees.append(tree)
        return leaves

    plxpr = trace_nested(under_capture, in_type, name, expand=lambda _, results: (results, 0))
    return plxpr, trees[-1]
