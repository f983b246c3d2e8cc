"""Calling XLA executables compiled ahead of time, with as little Python in between as JAX allows.

``jax.stages.Compiled.__call__`` is a Python method that creates, on first use, the same C++
dispatcher ``jax.jit`` calls through (a ``PjitFunction``) and then forwards every call to it. A
specialization is called on every run of a program, so catalyst_lite keeps the dispatcher itself.
"""

from __future__ import annotations

from typing import Any, Callable

import jax

__all__ = ["entry_point"]


def entry_point(compiled: jax.stages.Compiled) -> Callable[..., Any]:
    """The fastest callable that runs ``compiled``: its C++ dispatcher when JAX makes one (it
    checks the argument types exactly as ``Compiled.__call__`` does), else ``compiled`` itself."""
    dispatcher = compiled._executable.create_cpp_call(compiled._params)
    return compiled if dispatcher is None else dispatcher

