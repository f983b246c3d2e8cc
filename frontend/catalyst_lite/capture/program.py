"""Tracing a function through PennyLane's program capture, inside a catalyst_lite trace.

:func:`captured_program` captures the function as PennyLane does, in a trace nested in ours
(arrays keep their symbolic sizes; :func:`~catalyst_lite.jax_extras.hosted_capture`), then
evaluates the captured program into our trace with :class:`~.interpreter.PlxprCompiler`. For
example, ``qjit(capture=True)`` of ``lambda n: qml.for_loop(0, n, 1)(lambda i, acc: acc + i)(jnp.zeros(n))``
compiles PennyLane's for_loop primitive as catalyst_lite's ``for_loop``.
"""

from __future__ import annotations

from typing import Any, Callable

from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from ..jax_extras import hosted_capture
from ..jax_extras.dynshape import ExpansionStrategy, expand_args
from ..jax_extras.nested import trace_nested
from ..trace_context import capture_switched
from .interpreter import PlxprCompiler

__all__ = ["captured_program"]


def captured_program(fn: Callable, name: str) -> Callable:
    """``fn`` captured by PennyLane and compiled by catalyst_lite: a function of the same
    (positional) arguments, to be called while catalyst_lite traces."""

    def program(*args: Any) -> Any:
        flat_args, in_tree = tree_flatten(args)
        _, in_type = expand_args(flat_args, ExpansionStrategy(preserve_dimensions=True))
        trees: list[PyTreeDef] = []

        def under_capture(*flat: Any) -> list[Any]:
            with capture_switched(True, name), hosted_capture():
                leaves, tree = tree_flatten(fn(*tree_unflatten(in_tree, list(flat))))
            trees.append(tree)
            return leaves

        # PennyLane's program: a jaxpr taking its captured values (.consts), then flat_args
        plxpr = trace_nested(under_capture, in_type, name, expand=lambda _, results: (results, 0))
        results = PlxprCompiler().eval(plxpr.jaxpr, [], *plxpr.consts, *flat_args)
        return tree_unflatten(trees[-1], results)

    program.__name__ = program.__qualname__ = name
    return program
