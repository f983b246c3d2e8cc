"""Calling XLA executables through the C++ dispatcher ``jax.jit`` uses: a qjit function has one of
its own (:func:`dispatcher`), and a call of a signature it holds :func:`dispatch_data` for runs with
no Python.

>>> import jax, jax.numpy as jnp
>>> compiled = jax.jit(lambda x: [x + 1.0]).lower(jnp.ones(2)).compile()
>>> seen = []
>>> def python_call(*args):
...     seen.append(args)
...     (result,) = compiled(*args)
...     return result, dispatch_data(compiled, [], args, result), False
>>> f = dispatcher("f", lambda *args: python_call(*args)[0], python_call)
>>> [f(jnp.ones(2)).tolist() for _ in range(3)], len(seen)
([[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]], 1)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
from jax._src import core, dispatch, dtypes, sharding_impls, tree_util
from jax._src.interpreters import pxla
from jax._src.lib import xla_client as xc

__all__ = [
    "entry_point", "dispatcher", "forget_dispatch_data", "dispatch_data", "flat_arguments", "wait_for_effects"
]


def entry_point(compiled: jax.stages.Compiled) -> Callable[..., Any]:
    """The fastest callable running ``compiled``: its C++ dispatcher when JAX makes one, else itself."""
    dispatcher = compiled._executable.create_cpp_call(compiled._params)
    return compiled if dispatcher is None else dispatcher


def dispatcher(name: str, fun: Callable[..., Any], python_call: Callable[..., tuple[Any, Any, bool]],
               static_argnums: Sequence[int] = ()) -> Callable[..., Any]:
    """``jax.jit``'s C++ dispatcher around ``python_call(*args, **kwargs) -> (result,
    :func:`dispatch_data` or None, ask again)``; ``fun`` runs the call under ``jax.disable_jit()``."""
    return xc._xla.pjit(
        name, fun, python_call, list(static_argnums), [], pxla.JitGlobalCppCacheKeys(),
        tree_util.dispatch_registry, pxla.cc_shard_arg,
    )


def forget_dispatch_data(dispatcher: Callable[..., Any]) -> None:
    """Drop the dispatch data a :func:`dispatcher` holds: every call asks Python again."""
    dispatcher._clear_cache()


def flat_arguments(args: tuple) -> list[Any]:
    """The leaves of positional arguments, in the order the dispatcher flattens them."""
    return tree_util.dispatch_registry.flatten(args, None)[0]


def dispatch_data(
    compiled: jax.stages.Compiled, const_args: Sequence[Any], leaves: Sequence[Any], result: Any
) -> Any | None:
    """What lets a :func:`dispatcher` run ``compiled`` on ``[*const_args, *leaves]`` by itself; ``None``
    where ``jax.jit`` would not (effects, non-array outputs) or the leaves' types differ."""
    executable = compiled._executable
    call = getattr(executable, "unsafe_call", None)
    if not (isinstance(executable, pxla.MeshExecutable) and isinstance(call, pxla.ExecuteReplicated)
            and not call.ordered_effects and not call.has_unordered_effects):
        return None
    const_args = [*compiled._params.const_args, *const_args]
    args = [*const_args, *leaves]
    kept = [i in executable._kept_var_idx for i in range(len(args))]
    avals = [core.shaped_abstractify(a) for a, k in zip(args, kept) if k]
    if [(a.shape, a.dtype) for a in avals] != [(a.shape, a.dtype) for a in executable.in_avals]:
        return None
    out_flat, out_tree = tree_util.dispatch_registry.flatten(result, None)
    if not all(isinstance(x, xc.ArrayImpl) for x in out_flat):
        return None
    in_shardings = [_physical_sharding(a, s) for s, a in zip(executable._in_shardings, executable.in_avals)]
    return pxla.MeshExecutableFastpathData(
        executable.xla_executable, out_tree, in_shardings, executable._out_shardings,
        [o.aval for o in out_flat], [o._committed for o in out_flat], kept,
        executable._dispatch_in_layouts, const_args,
    )


def _physical_sharding(aval: Any, sharding: Any) -> Any:
    """How the dispatcher places an argument (a PRNG key as its physical array, as jax.jit)."""
    extended = aval is not core.abstract_token and dtypes.issubdtype(aval.dtype, dtypes.extended)
    return sharding_impls.physical_sharding(aval, sharding) if extended else sharding


def wait_for_effects() -> None:
    """Wait for the side effects of the programs dispatched so far, so that a host callback's
    failure is raised by the call whose program ran it. A failed token is dropped (JAX keeps it,
    and every later program with ordered effects would fail with the same error).

    >>> wait_for_effects()  # nothing dispatched with effects: returns at once
    """
    tokens = dispatch.runtime_tokens
    if not tokens.current_tokens and not tokens.output_runtime_tokens:
        return
    try:
        tokens.block_until_ready()
    except BaseException:
        tokens.clear()
        raise
