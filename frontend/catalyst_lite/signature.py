"""Arguments of a compiled function as traced: pytrees, abstracted axes, and the signature that
decides when a function must be traced again.

A function is re-traced only when its *signature* changes: the pytree structure of its dynamic
arguments, their dtypes and ranks, the sizes of the axes that are not abstracted, and the values of
its static arguments. Sizes of abstracted axes and the values of integer arguments are not part of
it: a program traced once runs at every size.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import jax
import numpy as np
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure

from .binding import CallArguments
from .errors import ArgumentTypeError, ArgumentValueError

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
        return tuple(x.shape), _dtype(x.dtype), bool(getattr(x, "weak_type", False))
    raise ArgumentTypeError(
        f"{fn_name}: argument {where} is a {type(x).__name__}; compiled functions take arrays, "
        "numbers and pytrees of them. Pass it with static_argnums/static_argnames if it is a "
        "compile-time option."
    )


def _dtype(dtype: Any) -> Any:
    """A NumPy dtype, or JAX's extended dtype of a typed PRNG key as it is."""
    return dtype if jax.dtypes.issubdtype(dtype, jax.dtypes.extended) else np.dtype(dtype)


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
    """How the dynamic arguments of a call (see :mod:`.binding`) map to the flat list that is
    traced: pytree leaves, and the axes of each that ``abstracted_axes`` makes symbolic.

    >>> from catalyst_lite.binding import CallBinding
    >>> call = CallBinding(lambda x, n: x).bind((np.ones(3),), {"n": 2})
    >>> layout = ArgumentLayout("f", abstracted_axes={0: "n"})
    >>> [str(s.shape) for s in layout.leaf_specs(call)[1]]
    ['(None,)', '()']
    """

    def __init__(self, fn_name: str, abstracted_axes: Any = None):
        self.fn_name = fn_name
        self.abstracted_axes = abstracted_axes

    # --- abstracted axes -----------------------------------------------------------------------

    def axes_specs(self, call: CallArguments, leaves_per_arg: list[list[Any]]) -> list[AxesSpec]:
        """One ``{axis: name}`` per flat leaf of the dynamic arguments, from ``abstracted_axes``."""
        axes = self.abstracted_axes
        dynamic, names = call.dynamic, call.dynamic_names
        if axes is None:
            return [{} for leaves in leaves_per_arg for _ in leaves]
        if _is_axes_dict(axes):
            return self._axes_from_dict(axes, leaves_per_arg, names)
        entries = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        if len(entries) > call.nslots or any(slot >= len(entries) for slot in call.dynamic_slots):
            raise ArgumentValueError(
                f"{self.fn_name}: abstracted_axes has {len(entries)} entries but the function "
                f"takes {call.nslots} non-static arguments."
            )
        specs: list[AxesSpec] = []
        for arg, slot, leaves, name in zip(dynamic, call.dynamic_slots, leaves_per_arg, names):
            per_leaf = _broadcast_entry(entries[slot], arg, len(leaves), self.fn_name, name)
            for leaf, leaf_entry in zip(leaves, per_leaf):
                ndim = len(leaf_aval_parts(leaf, self.fn_name, name)[0])
                specs.append(_axes_for_leaf(leaf_entry, ndim, self.fn_name, name, strict=True))
        return specs

    def _axes_from_dict(self, axes: dict, leaves_per_arg: list[list[Any]], names: Sequence[str]) -> list[AxesSpec]:
        """One dict for every argument that has the axis. A dict that applies to no array at all
        is a mistake (an axis beyond every argument's rank), not a request for static shapes."""
        specs: list[AxesSpec] = []
        ranks: list[tuple[str, int]] = []
        for leaves, name in zip(leaves_per_arg, names):
            for leaf in leaves:
                ndim = len(leaf_aval_parts(leaf, self.fn_name, name)[0])
                ranks.append((name, ndim))
                specs.append(_axes_for_leaf(axes, ndim, self.fn_name, name, strict=False))
        if any(ndim for _, ndim in ranks) and not any(specs):
            described = ", ".join(f"{name} has {ndim}" for name, ndim in ranks)
            raise ArgumentValueError(
                f"{self.fn_name}: abstracted_axes={axes!r} applies to no argument: it names "
                f"axes {sorted(axes)}, but {described} dimension(s). Name an axis the arguments "
                "have (axes count from 0), or give one entry per argument."
            )
        return specs

    def leaf_specs(self, call: CallArguments) -> tuple[PyTreeDef, list[LeafSpec], list[Any], list[AxesSpec]]:
        """Flatten the dynamic arguments: tree, per-leaf specs, leaves and axes specs."""
        dynamic, names = call.dynamic, call.dynamic_names
        leaves_per_arg = [tree_flatten(a)[0] for a in dynamic]
        leaves, tree = tree_flatten(dynamic)
        specs = self.axes_specs(call, leaves_per_arg)
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
