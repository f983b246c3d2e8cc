"""Arguments of a compiled function: static/dynamic split, pytrees, abstracted axes, and the
signature that decides when a function must be traced again.

A function is re-traced only when its *signature* changes: the pytree structure of its dynamic
arguments, their dtypes and ranks, the sizes of the axes that are not abstracted, and the values of
its static arguments. Sizes of abstracted axes and the values of integer arguments are not part of
it: a program traced once runs at every size.
"""

from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import jax
import numpy as np
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure

from .errors import ArgumentTypeError, ArgumentValueError, function_name

__all__ = ["LeafSpec", "ArgumentLayout", "AxesSpec"]

AxesSpec = dict[int, Hashable]


@dataclass(frozen=True)
class LeafSpec:
    """What the trace depends on for one flat argument: dtype, weak type and shape with ``None``
    for each abstracted axis."""

    shape: tuple[int | None, ...]
    dtype: np.dtype
    weak_type: bool


def leaf_aval_parts(x: Any, fn_name: str, where: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """Shape, dtype and weak type of one argument leaf as qjit traces it (64-bit types)."""
    if isinstance(x, bool):
        return (), np.dtype(bool), True
    if isinstance(x, numbers.Integral) and not isinstance(x, np.generic):
        return (), np.dtype("int64"), True
    if isinstance(x, float):
        return (), np.dtype("float64"), True
    if isinstance(x, complex):
        return (), np.dtype("complex128"), True
    if isinstance(x, jax.ShapeDtypeStruct) or hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape), np.dtype(x.dtype), bool(getattr(x, "weak_type", False))
    raise ArgumentTypeError(
        f"{fn_name}: argument {where} is a {type(x).__name__}; compiled functions take arrays, "
        "numbers and pytrees of them. Pass it with static_argnums/static_argnames if it is a "
        "compile-time option."
    )


def _axes_for_leaf(entry: Any, ndim: int, fn_name: str, where: str, strict: bool) -> AxesSpec:
    if entry is None:
        return {}
    if isinstance(entry, dict):
        spec = {int(k): v for k, v in entry.items()}
    elif isinstance(entry, (tuple, list)):
        spec = {i: name for i, name in enumerate(entry) if name is not None}
    else:
        raise ArgumentTypeError(
            f"{fn_name}: abstracted_axes entry for argument {where} must be a dict "
            f"{{axis: name}}, a tuple of names or None, got {entry!r}."
        )
    if not strict:
        return {k: v for k, v in spec.items() if k < ndim}
    for axis in spec:
        if not 0 <= axis < ndim:
            raise ArgumentValueError(
                f"{fn_name}: abstracted_axes names axis {axis} of argument {where}, which has "
                f"rank {ndim} (valid axes: 0..{ndim - 1})."
            )
    return spec


class ArgumentLayout:
    """How a user function's arguments map to the flat list that is traced.

    >>> layout = ArgumentLayout(lambda x, n: x, abstracted_axes={0: "n"})
    >>> dyn, static = layout.split((np.ones(3), 2), {})
    >>> [str(s.shape) for s in layout.leaf_specs(dyn)[1]]
    ['(None,)', '()']
    """

    def __init__(
        self,
        fn: Callable,
        abstracted_axes: Any = None,
        static_argnums: Sequence[int] | int | None = None,
        static_argnames: Sequence[str] | str | None = None,
    ):
        self.fn = fn
        self.fn_name = function_name(fn)
        self.abstracted_axes = abstracted_axes
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        params = list(self.signature.parameters) if self.signature else []
        nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
        names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
        for name in names:
            if name not in params:
                raise ArgumentValueError(f"{self.fn_name}: static_argnames names {name!r}, which is not a parameter.")
            nums.add(params.index(name))
        self.static_argnums = frozenset(nums)
        self.param_names = params

    def arg_name(self, i: int) -> str:
        return repr(self.param_names[i]) if i < len(self.param_names) else f"#{i}"

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """Positional arguments after binding keywords; a clear error on a wrong count."""
        if self.signature is None:
            if kwargs:
                raise ArgumentTypeError(f"{self.fn_name}: keyword arguments need an inspectable signature.")
            return args
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentTypeError(f"{self.fn_name}: {e}") from None
        bound.apply_defaults()
        return tuple(bound.args) + tuple(bound.kwargs.values())

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, tuple]:
        """``(dynamic_args, static_key)``: the static ones as a hashable key."""
        args = self.bind(args, kwargs)
        dynamic = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        static = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                try:
                    hash(a)
                except TypeError:
                    raise ArgumentTypeError(
                        f"{self.fn_name}: static argument {self.arg_name(i)} must be hashable, "
                        f"got {type(a).__name__}."
                    ) from None
                static.append((i, a))
        return dynamic, tuple(static)

    def merge(self, dynamic: Sequence[Any], static: tuple) -> list[Any]:
        """Rebuild the full positional argument list from its two parts."""
        out: list[Any] = []
        dyn = iter(dynamic)
        static_map = dict(static)
        for i in range(len(dynamic) + len(static)):
            out.append(static_map[i] if i in static_map else next(dyn))
        return out

    def dynamic_names(self, n: int) -> list[str]:
        names = [self.arg_name(i) for i in range(n + len(self.static_argnums)) if i not in self.static_argnums]
        return names[:n]

    def axes_specs(self, dynamic: tuple, leaves_per_arg: list[list[Any]]) -> list[AxesSpec]:
        """One ``{axis: name}`` per flat leaf, from the ``abstracted_axes`` option."""
        axes = self.abstracted_axes
        names = self.dynamic_names(len(dynamic))
        specs: list[AxesSpec] = []
        if axes is None:
            return [{} for leaves in leaves_per_arg for _ in leaves]
        if _is_axes_dict(axes):
            # One dict for every argument that has the axis.
            for leaves, name in zip(leaves_per_arg, names):
                for leaf in leaves:
                    ndim = len(leaf_aval_parts(leaf, self.fn_name, name)[0])
                    specs.append(_axes_for_leaf(axes, ndim, self.fn_name, name, strict=False))
            return specs
        entries = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        if len(entries) != len(dynamic):
            raise ArgumentValueError(
                f"{self.fn_name}: abstracted_axes has {len(entries)} entries but the function "
                f"takes {len(dynamic)} non-static arguments."
            )
        for arg, entry, leaves, name in zip(dynamic, entries, leaves_per_arg, names):
            per_leaf = _broadcast_entry(entry, arg, len(leaves), self.fn_name, name)
            for leaf, leaf_entry in zip(leaves, per_leaf):
                ndim = len(leaf_aval_parts(leaf, self.fn_name, name)[0])
                specs.append(_axes_for_leaf(leaf_entry, ndim, self.fn_name, name, strict=True))
        return specs

    def leaf_specs(self, dynamic: tuple) -> tuple[PyTreeDef, list[LeafSpec], list[Any], list[AxesSpec]]:
        """Flatten the dynamic arguments: tree, per-leaf specs, leaves and axes specs."""
        names = self.dynamic_names(len(dynamic))
        leaves_per_arg = [tree_flatten(a)[0] for a in dynamic]
        leaves, tree = tree_flatten(dynamic)
        specs = self.axes_specs(dynamic, leaves_per_arg)
        out = []
        owners = [name for name, ls in zip(names, leaves_per_arg) for _ in ls]
        for leaf, spec, owner in zip(leaves, specs, owners):
            shape, dtype, weak = leaf_aval_parts(leaf, self.fn_name, owner)
            out.append(LeafSpec(tuple(None if i in spec else d for i, d in enumerate(shape)), dtype, weak))
        return tree, out, leaves, specs


def _is_axes_dict(entry: Any) -> bool:
    """``{axis: name}`` (integer keys), as opposed to a dict-shaped pytree of entries."""
    return isinstance(entry, dict) and all(isinstance(k, (int, np.integer)) for k in entry)


def _broadcast_entry(entry: Any, arg: Any, nleaves: int, fn_name: str, where: str) -> list[Any]:
    """An abstracted_axes entry for one argument, as one entry per leaf of that argument."""
    if entry is None or _is_axes_dict(entry) or (
        isinstance(entry, tuple) and all(e is None or isinstance(e, (str, int)) for e in entry)
    ):
        return [entry] * nleaves
    # A pytree of entries matching the argument's structure.
    structure = tree_structure(arg)
    try:
        return list(structure.flatten_up_to(entry))
    except (ValueError, TypeError) as err:
        raise ArgumentTypeError(
            f"{fn_name}: the abstracted_axes entry for argument {where} does not match its pytree "
            f"structure ({err}). The argument is {structure}; give one {{axis: name}} per leaf in "
            "that structure, or one dict for all its leaves."
        ) from None
