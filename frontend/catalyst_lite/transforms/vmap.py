"""``vmap``: Catalyst's vectorizing map, a loop over the batch, with ``jax.vmap``'s signature.

As in Catalyst it is not a batching transformation: inside ``@qjit`` it is a ``for_loop`` calling
``fn`` on one slice per iteration (the first slice, computed before the loop, gives the stacked
outputs' types), so it works for anything ``fn`` contains and the batch size may be symbolic. A
batch split over devices runs in ``jax.shard_map``, each device over its own rows
(docs/scaling.md). Outside qjit it compiles itself with qjit once; under PennyLane's capture the
loop is ``qml.for_loop``.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, Sharding
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure, tree_unflatten

from ..trace_context import current as current_context, pennylane_capture_enabled, scope as context_scope
from ..compiler.executable import compile_function
from ..control_flow import for_loop
from ..errors import ArgumentTypeError, ArgumentValueError, function_name
from ..jax_extras import is_tracing
from ..jax_extras.dynshape import same_dim

__all__ = ["vmap"]


def _is_axis_spec(x: Any) -> bool:
    return x is None or (isinstance(x, int) and not isinstance(x, bool))


def _axis_leaves(spec: Any) -> list[Any]:
    return tree_flatten(spec, is_leaf=lambda x: x is None)[0]


def _check_axes_spec(name: str, spec: Any, containers: tuple[type, ...]) -> None:
    """An int, ``None``, or a container (``in_axes``: a tuple) of pytrees of ints and ``None``."""
    leaves_ok = all(map(_is_axis_spec, _axis_leaves(spec)))
    if _is_axis_spec(spec) or (isinstance(spec, containers) and leaves_ok):
        return
    # Catalyst's phrase: about the leaves if one is not an int, else about the container
    catalyst = f"match the {_MATCHED[name]}" if leaves_ok else f"a tuple of {_LEAVES[name]} with integer leaves"
    raise ArgumentValueError(
        f"Invalid '{name}'; it must be an int or {catalyst}: vmap's {name} must be an int, None, or a {' or '.join(c.__name__ for c in containers)} "
        f"of ints and None matching the {'positional arguments' if name == 'in_axes' else 'results'}; "
        f"got {spec!r}."
    )


# What Catalyst says an axes specification must match (its words, which its users' tests match).
_MATCHED = {"in_axes": "length of positional arguments", "out_axes": "number of function results"}
_LEAVES = {"in_axes": "PyTrees", "out_axes": "PyTree"}


def _per_leaf(name: str, spec: Any, value: Any, what: str) -> list[Any]:
    """``spec`` broadcast to one axis per leaf of ``value``: a prefix of its structure."""
    if _is_axis_spec(spec):
        return [spec] * len(tree_flatten(value)[0])
    prefix = tree_structure(spec, is_leaf=lambda x: x is None)
    try:
        subtrees = prefix.flatten_up_to(value)
    except (TypeError, ValueError):
        raise ArgumentValueError(
            f"Invalid '{name}'; it must be an int or match the {_MATCHED[name]}: vmap's {name}={spec!r} does not match the structure of the {what} "
            f"({tree_structure(value)}); give one entry per {what[:-1]}, or one int for all."
        ) from None
    return [axis for axis, sub in zip(_axis_leaves(spec), subtrees) for _ in tree_flatten(sub)[0]]


def _normalized_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        # Catalyst's phrase first (an argument's: "... for argument 0. The argument only has ..."), then ours
        raise ArgumentValueError(
            f"Axis specifier {axis} is out of bounds for {what} (vmap: an axis of rank {ndim} is in [{-ndim}, {ndim}))."
        )
    return axis % ndim


def _argument_axis(k: int, axis: int, x: Any) -> int:
    ndim = jnp.ndim(x)
    return _normalized_axis(axis, ndim, f"argument {k}. The argument only has {ndim} dimensions")


def _padded(x: Any, axis: int) -> Any:
    """``x`` with its batch axis first and one row of zeros after the batch: reading row ``i`` is
    valid code even for an empty batch, whose first "row" only gives the results' types."""
    x = jnp.moveaxis(x, axis, 0)
    return jnp.concatenate([x, jnp.zeros((1, *jnp.shape(x)[1:]), x.dtype)])


class Vmapped:
    """``vmap(fn, ...)``: call it like ``fn``, with a batch axis in (some of) the arguments."""

    def __init__(self, fn: Callable, in_axes: Any, out_axes: Any, axis_size: int | None,
                 spmd_axis_name: Any = None):
        _check_axes_spec("in_axes", in_axes, (tuple,))
        _check_axes_spec("out_axes", out_axes, (tuple, list, dict))
        if axis_size is not None and (isinstance(axis_size, bool) or not isinstance(axis_size, int) or axis_size < 0):
            raise ArgumentValueError(f"vmap: axis_size must be a non-negative int or None, got {axis_size!r}.")
        # Not functools.wraps: qjit would then bind fn's signature (its defaults as arguments).
        self.fn, self.in_axes, self.out_axes, self.axis_size = fn, in_axes, out_axes, axis_size
        self.__name__ = self.__qualname__ = f"vmap({function_name(fn)})"
        self.__doc__ = getattr(fn, "__doc__", None)
        self.spmd_axis_name = spmd_axis_name
        self._compiled: dict[Any, Any] = {}  # qjit of the map outside qjit, per sharding of the batch

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not is_tracing() and not pennylane_capture_enabled():
            batch = self._argument_shards(args, kwargs)
            if batch not in self._compiled:
                def mapped(args, kwargs):  # unannotated: qjit would trace it ahead of time
                    return self._map(tuple(args), dict(kwargs), batch)

                mapped.__name__ = mapped.__qualname__ = self.__name__
                self._compiled[batch] = compile_function(mapped)
            return self._compiled[batch](args, kwargs)
        return self._map(args, kwargs)

    def _argument_shards(self, args: tuple, kwargs: dict) -> tuple[Any, Any] | None:
        """Outside qjit: the mesh and axis names of the first mapped argument whose batch axis is
        sharded by a ``NamedSharding`` (``spmd_axis_name``'s axes if given), else ``None``."""
        flat = tree_flatten((args, kwargs))[0]
        for k, (x, a) in enumerate(zip(flat, self._flat_axes(args, flat))):
            sharding = getattr(x, "sharding", None)
            if a is None or not isinstance(sharding, NamedSharding):
                continue
            spec = tuple(sharding.spec) + (None,) * jnp.ndim(x)
            names = spec[_argument_axis(k, a, x)]
            if names is not None and self.spmd_axis_name in (None, names):
                return sharding.mesh, names
        return None

    def _flat_axes(self, args: tuple, flat: list[Any]) -> list[Any]:
        """One axis per flat argument; keyword arguments are mapped over axis 0, as jax.vmap does."""
        axes = _per_leaf("in_axes", self.in_axes, args, "positional arguments")
        return axes + [0] * (len(flat) - len(axes))

    def _map(self, args: tuple, kwargs: dict, batch: tuple[Any, Any] | None = None) -> Any:
        flat, in_tree = tree_flatten((args, kwargs))
        flat, axes = [jnp.asarray(x) for x in flat], self._flat_axes(args, flat)
        axes = [None if a is None else _argument_axis(k, a, x) for k, (a, x) in enumerate(zip(axes, flat))]
        size = self._batch_size(flat, axes)
        batch = _batch_shards(self.spmd_axis_name, batch, size, self.__name__)
        if batch is None:
            stacked, first, out_tree = self._stacked(flat, axes, size, in_tree)
        else:  # each device maps its own rows: shard_map of the loop, no gather of the batch
            mesh, names = batch
            trees: list[PyTreeDef] = []

            def local(*leaves: Any) -> list[Any]:
                with context_scope(sharded_batch=True):
                    stacked, _, tree = self._stacked(list(leaves), axes, size // _axis_size(mesh, names), in_tree)
                trees[:] = [tree]
                return stacked

            specs = tuple(P() if a is None else P(*([None] * a), names) for a in axes)
            stacked = jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P(names), check_vma=False)(*flat)
            (out_tree,) = trees
            first = [s[0] for s in stacked]  # out_axes=None: the first row (of the whole batch)
        out_axes = _per_leaf("out_axes", self.out_axes, tree_unflatten(out_tree, first), "results")
        outs = [
            r0 if axis is None else jnp.moveaxis(s, 0, _normalized_axis(axis, s.ndim, f"a mapped result of rank {s.ndim}"))
            for r0, s, axis in zip(first, stacked, out_axes)
        ]
        return tree_unflatten(out_tree, outs)

    def _stacked(self, flat: list[Any], axes: list[Any], size: Any, in_tree: PyTreeDef
                 ) -> tuple[list[Any], list[Any], PyTreeDef]:
        """The loop over the batch: the results stacked (axis 0), the first slice's, their structure."""
        flat = [x if a is None else _padded(x, a) for x, a in zip(flat, axes)]

        def call_at(i: Any) -> tuple[list[Any], PyTreeDef]:
            leaves = [x if a is None else lax.dynamic_index_in_dim(x, i, 0, keepdims=False)
                      for x, a in zip(flat, axes)]
            call_args, call_kwargs = tree_unflatten(in_tree, leaves)
            results, out_tree = tree_flatten(self.fn(*call_args, **call_kwargs))
            return [jnp.asarray(r) for r in results], out_tree

        first, out_tree = call_at(0)
        # One spare row here too (row `size`, never written): writing row i is valid code at any size.
        stacked = tuple(jnp.broadcast_to(r, (size + 1, *jnp.shape(r))) for r in first)

        # PennyLane's for_loop while PennyLane captures the program (ours is refused there)
        loop = importlib.import_module("pennylane").for_loop if pennylane_capture_enabled() else for_loop

        @loop(1, size, 1)
        def rows(i: Any, stacked: tuple) -> tuple:
            results, tree = call_at(i)
            if tree != out_tree:
                raise ArgumentValueError(
                    f"{self.__name__}: the function returns {tree} for one slice and {out_tree} "
                    "for another; it must return the same structure for every slice."
                )
            return tuple(lax.dynamic_update_index_in_dim(s, r.astype(s.dtype), i, 0)
                         for s, r in zip(stacked, results))

        stacked = [lax.dynamic_slice_in_dim(s, 0, size) for s in (rows(stacked) if stacked else ())]
        return stacked, first, out_tree

    def _batch_size(self, flat: list[Any], axes: list[Any]) -> Any:
        """The batch size every mapped leaf agrees on (``axis_size`` when nothing is mapped)."""
        sizes = [jnp.shape(x)[a] for x, a in zip(flat, axes) if a is not None]
        if not sizes:
            if self.axis_size is None:
                raise ArgumentValueError(
                    f"{self.__name__}: no argument is mapped (in_axes is None for all of them), so "
                    "the batch size is unknown; pass axis_size."
                )
            return self.axis_size
        if any(not same_dim(sizes[0], s) for s in sizes[1:]):
            shown = [s if isinstance(s, int) else "?" for s in sizes]
            raise ArgumentValueError(
                "Invalid batch sizes; expected the batch size to be the same for all arguments: "
                f"in {self.__name__}, the mapped axes of the arguments have different sizes {shown}."
            )
        if self.axis_size is not None and not same_dim(sizes[0], self.axis_size):
            raise ArgumentValueError(
                _axis_size_phrase(self.axis_size, sizes[0])
                + f"{self.__name__}: axis_size={self.axis_size} but the mapped axes have size {sizes[0]}."
            )
        return sizes[0]


def _axis_size_phrase(axis_size: int, batch: Any) -> str:
    """Catalyst's phrase for an ``axis_size`` it rejects too (zero, or beyond the mapped size)."""
    if axis_size == 0:
        return "Invalid batch size; it must be a non-zero integer, but got 0. "
    if isinstance(batch, int) and axis_size > batch:
        return (
            "Invalid 'axis_size'; the default batch is expected to be None, or less than or equal "
            "to the computed batch size. "
        )
    return ""


def vmap(fn: Callable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None, spmd_axis_name: Any = None) -> Any:
    """Map ``fn`` over an axis of its arguments, with ``jax.vmap``'s ``in_axes``, ``out_axes``,
    ``axis_size`` and ``spmd_axis_name``: inside qjit, as a loop over the batch (see the module
    docstring); over a sharded batch, one loop per device over its own rows. Usable as
    ``vmap(fn)``, ``vmap(fn, in_axes=(0, None))`` or ``@vmap(in_axes=1)``.

    >>> from catalyst_lite import vmap
    >>> import jax.numpy as jnp
    >>> scale = vmap(lambda row, c: row * c, in_axes=(0, None), out_axes=1)
    >>> scale(jnp.array([[1.0, 2.0], [3.0, 4.0]]), 10.0).tolist()
    [[10.0, 30.0], [20.0, 40.0]]
    """
    if fn is None:
        return functools.partial(vmap, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size,
                                 spmd_axis_name=spmd_axis_name)
    if not callable(fn):  # jax.vmap's class and phrase, then ours
        raise ArgumentTypeError(
            f"Expected a callable value, got {fn!r:.60}: vmap maps a function over an axis of its "
            "arguments: vmap(f)(x), or @vmap(in_axes=...) above a def."
        )
    return Vmapped(fn, in_axes, out_axes, axis_size, spmd_axis_name)


def _axis_size(mesh: Any, names: Any) -> int:
    return math.prod(mesh.shape[n] for n in (names if isinstance(names, tuple) else (names,)))


def _batch_shards(requested: Any, outside: tuple[Any, Any] | None, size: Any, fn_name: str
                  ) -> tuple[Any, Any] | None:
    """The mesh and axes the batch is split over (``None``: one loop): ``outside`` qjit's; inside, the
    ``requested`` axes or those sharding dimension 0 of ``in_shardings`` (XLA fixes a wrong guess)."""
    context = current_context()
    if context.sharded_batch:
        return None  # already one device's rows
    mesh, names = outside if outside is not None else (None, requested)
    if mesh is None:
        options = context.qjit_options or {}
        leaves = tree_flatten(options.get("in_shardings"), is_leaf=lambda s: isinstance(s, (Sharding, P)))[0]
        specs = [(getattr(s, "mesh", None), tuple(getattr(s, "spec", s))) for s in leaves
                 if isinstance(s, (NamedSharding, P))]
        if names is None:  # the axes every sharding splits dimension 0 over, if they agree
            firsts = {spec[0] for _, spec in specs if spec and spec[0] is not None}
            names = firsts.pop() if len(firsts) == 1 else None
        if names is None:
            return None
        wanted = set(names if isinstance(names, tuple) else (names,))
        context_mesh = jax.sharding.get_abstract_mesh()
        meshes = [*(m for m, _ in specs if m is not None), *([] if context_mesh.empty else [context_mesh])]
        mesh = next((m for m in meshes if wanted <= set(m.axis_names)), None)
        if mesh is None:
            if requested is None:
                return None
            raise ArgumentValueError(
                f"{fn_name}: spmd_axis_name={requested!r} names no axis of a mesh: give qjit "
                "in_shardings on that mesh, or call it under jax.sharding.set_mesh."
            )
    if isinstance(size, int) and size % _axis_size(mesh, names) == 0:
        return mesh, names
    if requested is None and outside is None:
        return None
    raise ArgumentValueError(
        f"{fn_name}: a batch split over mesh axes {names!r} ({_axis_size(mesh, names)} devices) needs a "
        f"batch size known when tracing and divisible by it; got {size if isinstance(size, int) else 'a symbolic size'}."
    )
