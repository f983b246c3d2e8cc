"""``jax.jit``'s options on ``qjit``, with ``jax.jit``'s meaning, for each size's XLA compilation
(listed in :func:`~catalyst_lite.qjit`'s docstring): donated leaves become donated inputs of every
size's ``jax.jit`` function (:meth:`JitOptions.donated_leaves`), ``in_shardings``/``out_shardings``
place arguments and results around the call, the others pass through to ``jax.jit``.

>>> import jax, jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit(abstracted_axes={0: "n"}, donate_argnums=0)
... def double(x):
...     return x * 2.0
>>> x = jnp.arange(3.0)
>>> double(x).tolist()
[0.0, 2.0, 4.0]
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax

from .errors import ArgumentTypeError

__all__ = ["JIT_OPTIONS", "JitOptions"]

JIT_OPTIONS = ("donate_argnums", "donate_argnames", "keep_unused", "device", "backend", "in_shardings",
               "out_shardings", "compiler_options")


@dataclasses.dataclass(frozen=True)
class JitOptions:
    """A qjit function's ``jax.jit`` options (see the module docstring)."""

    donated: frozenset[str] = frozenset()  # parameter names (donate_argnums resolved)
    jit: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # keep_unused, device, backend
    xla: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    in_shardings: Any = None
    out_shardings: Any = None
    fn_name: str = ""
    state_sharding: Any = None  # qjit(state_sharding=...): the QNodes' state split (quantum/sharded.py)

    @classmethod
    def of(cls, options: Mapping[str, Any], positional: Sequence[str], fn_name: str) -> "JitOptions":
        """From ``qjit``'s options; ``positional``: the function's positional parameters."""
        nums = _as_tuple(options.get("donate_argnums"), int, "donate_argnums", fn_name)
        names = _as_tuple(options.get("donate_argnames"), str, "donate_argnames", fn_name)
        beyond = [i for i in nums if not 0 <= i < len(positional)]
        if beyond:
            raise ArgumentTypeError(
                f"qjit(donate_argnums={options['donate_argnums']!r}) of {fn_name}: position(s) {beyond} "
                f"name no positional parameter (it has {len(positional)})."
            )
        jit = {k: options[k] for k in ("device", "backend") if options.get(k) is not None}
        if options.get("keep_unused"):
            jit["keep_unused"] = True
        return cls(
            frozenset(names) | {positional[i] for i in nums}, jit, dict(options.get("compiler_options") or {}),
            options.get("in_shardings"), options.get("out_shardings"), fn_name, options.get("state_sharding"),
        )

    @property
    def needs_xla(self) -> bool:
        """Whether calls need XLA's own executables (the size-generic tier cannot donate or shard)."""
        return bool(self.donated) or any(s is not None for s in (self.in_shardings, self.out_shardings,
                                                                  self.state_sharding))

    def donated_leaves(self, keys: Sequence[tuple[str, Any]], arguments: Sequence[Any]) -> frozenset[int]:
        """The flat leaves (by index) of the donated arguments among a call's dynamic ones
        (``keys``: their binding keys, ``("", name)`` for a named parameter)."""
        donated, first = set(), 0
        for (tag, name), value in zip(keys, arguments):
            count = len(jax.tree_util.tree_leaves(value))
            if tag == "" and name in self.donated:
                donated.update(range(first, first + count))
            first += count
        return frozenset(donated)

    def place_arguments(self, args: tuple) -> tuple:
        """``args`` placed with ``in_shardings`` (a leaf whose sharding is ``None`` as it is)."""
        if self.in_shardings is None:
            return args
        shardings = self.in_shardings
        if not isinstance(shardings, (tuple, list)) or isinstance(shardings, jax.sharding.PartitionSpec):
            shardings = (shardings,) * len(args)  # one sharding for every argument, as jax.jit reads it
        return tuple(self._placed(s, a) for s, a in zip(shardings, args)) + args[len(shardings):]

    def place_results(self, results: Any) -> Any:
        """``results`` placed with ``out_shardings``."""
        return results if self.out_shardings is None else self._placed(self.out_shardings, results)

    def _placed(self, shardings: Any, value: Any) -> Any:
        """``value`` with each leaf under a sharding of the prefix ``shardings`` placed with it."""

        def place(s: Any, v: Any) -> Any:
            if isinstance(s, jax.sharding.PartitionSpec) and jax.sharding.get_abstract_mesh().empty:
                raise ArgumentTypeError(
                    f"{self.fn_name}: the sharding {s} is a PartitionSpec, which needs a mesh: call "
                    "it under `with jax.sharding.set_mesh(mesh):`, or pass a "
                    "jax.sharding.NamedSharding(mesh, spec)."
                )
            return v if s is None else jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf, s), v)

        return jax.tree_util.tree_map(place, shardings, value, is_leaf=_is_sharding_leaf)


def _is_sharding_leaf(s: Any) -> bool:
    # A PartitionSpec is a tuple: a leaf here (under jax.sharding.set_mesh, device_put resolves it).
    return s is None or isinstance(s, (jax.sharding.Sharding, jax.sharding.PartitionSpec))


def _as_tuple(value: Any, kind: type, option: str, fn_name: str) -> tuple:
    if value is None:
        return ()
    items = (value,) if isinstance(value, kind) else value
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if items is None or not all(isinstance(v, kind) and not isinstance(v, bool) for v in items):
        raise ArgumentTypeError(
            f"qjit({option}={value!r}) of {fn_name}: {option} must be a {kind.__name__} or a sequence of "
            f"{kind.__name__}s."
        )
    return items
