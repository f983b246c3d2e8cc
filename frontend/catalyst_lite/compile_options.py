"""``qjit``'s options: :class:`CompileOptions`, Catalyst's record (``QJIT.compile_options``; most
fields configure Catalyst's MLIR/LLVM compiler and change nothing here), and :class:`JitOptions`,
``jax.jit``'s options with ``jax.jit``'s meaning for each size's XLA compilation.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import sys
from typing import Any, Iterable, Mapping, Sequence, TextIO

import jax
import numpy as np

from .trace_context import check_capture_option
from .errors import ArgumentTypeError, ArgumentValueError, CompileError

__all__ = ["CompileOptions", "KeepIntermediateLevel", "check_seed", "JIT_OPTIONS", "JitOptions", "checked_tuple"]


def check_seed(seed: Any, name: str) -> None:
    """``qjit(seed=...)`` is ``None`` or an unsigned 32-bit integer, as in Catalyst."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ArgumentTypeError(
            f"qjit(seed={seed!r}) of {name}: the seed must be an integer in 0..{2**32 - 1}, "
            f"got {type(seed).__name__}."
        )
    if not 0 <= seed < 2**32:
        raise ArgumentValueError(
            f"qjit(seed={seed}) of {name}: Seed must be an unsigned 32-bit integer! Use a seed in 0..{2**32 - 1}."
        )


class KeepIntermediateLevel(enum.IntEnum):
    """Catalyst's ``keep_intermediate`` levels (every level but ``NONE`` keeps the same files here)."""

    NONE = 0
    PIPELINE = 1
    CHANGED = 2
    PASS = 3


@dataclasses.dataclass
class CompileOptions:
    """``qjit``'s options: Catalyst's ``CompileOptions``, with its fields, defaults and checks.

    >>> from catalyst_lite import QJIT, CompileOptions
    >>> options = CompileOptions(static_argnums=1, keep_intermediate=True)
    >>> options.static_argnums, options.keep_intermediate, options.target
    ((1,), <KeepIntermediateLevel.PIPELINE: 1>, 'binary')
    >>> float(QJIT(lambda x, n: x * n, CompileOptions(static_argnums=1))(2.0, 3))
    6.0
    """

    verbose: bool = False
    logfile: TextIO | None = dataclasses.field(default_factory=lambda: sys.stderr)
    target: str = "binary"
    link: bool = True
    keep_intermediate: Any = False
    use_nameloc: bool = False
    pipelines: Any = None
    autograph: bool = False
    autograph_include: Iterable[str] = ()
    async_qnodes: bool = False
    static_argnums: Any = None
    static_argnames: Any = None
    abstracted_axes: Any = None
    lower_to_llvm: bool = True
    checkpoint_stage: str = ""
    disable_assertions: bool = False
    seed: int | None = None
    circuit_transform_pipeline: Any = None
    pass_plugins: Any = None
    dialect_plugins: Any = None
    capture: Any = "global"
    skip_preprocess: bool = False

    def __post_init__(self) -> None:
        level = self.keep_intermediate  # True/False, 0..3, None or a level's name
        if level is None or isinstance(level, str) and level in ("none", "pipeline", "changed", "pass"):
            self.keep_intermediate = KeepIntermediateLevel[(level or "none").upper()]
        elif isinstance(level, int) and 0 <= level <= 3:  # bools too: False is 0, True is 1
            self.keep_intermediate = KeepIntermediateLevel(int(level))
        else:
            raise ArgumentValueError(
                f"qjit(keep_intermediate={level!r}): use True, False, 0, 1, 2, 3, 'none', 'pipeline', "
                "'changed' or 'pass'."
            )
        if self.async_qnodes and self.seed is not None:
            raise CompileError(
                "qjit(seed=..., async_qnodes=True): a seed cannot make asynchronous QNodes "
                "reproducible (their order is not fixed); drop one of the two options."
            )
        check_seed(self.seed, "CompileOptions")
        if self.static_argnums is None:
            self.static_argnums = ()
        elif isinstance(self.static_argnums, int):
            self.static_argnums = (self.static_argnums,)
        elif isinstance(self.static_argnums, Iterable):
            self.static_argnums = tuple(self.static_argnums)
        self.pass_plugins = set(self.pass_plugins or ())
        self.dialect_plugins = set(self.dialect_plugins or ())
        self.autograph_include = tuple(self.autograph_include)
        check_capture_option(self.capture, "CompileOptions")


JIT_OPTIONS = ("donate_argnums", "donate_argnames", "keep_unused", "device", "backend", "in_shardings",
               "out_shardings", "compiler_options")


@dataclasses.dataclass(frozen=True)
class JitOptions:
    """A qjit function's ``jax.jit`` options: donated arguments, ``in_shardings``/``out_shardings``
    (placed around the call), and the others passed to ``jax.jit`` (``jit``) or XLA (``xla``).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit
    >>> @qjit(abstracted_axes={0: "n"}, donate_argnums=0)
    ... def double(x):
    ...     return x * 2.0
    >>> double(jnp.arange(3.0)).tolist()
    [0.0, 2.0, 4.0]
    """

    donated: frozenset[str] = frozenset()  # parameter names (donate_argnums resolved)
    jit: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    xla: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    in_shardings: Any = None
    out_shardings: Any = None
    fn_name: str = ""
    state_sharding: Any = None  # the QNodes' state split (quantum/sharded.py)

    @classmethod
    def of(cls, options: Mapping[str, Any], positional: Sequence[str], fn_name: str) -> "JitOptions":
        """From ``qjit``'s options; ``positional``: the function's positional parameters."""
        nums = checked_tuple(options.get("donate_argnums"), int, "donate_argnums", fn_name)
        names = checked_tuple(options.get("donate_argnames"), str, "donate_argnames", fn_name)
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
        """The flat leaves (by index) of the donated arguments among a call's dynamic ones."""
        ends = list(itertools.accumulate(len(jax.tree_util.tree_leaves(value)) for value in arguments))
        return frozenset(i for (tag, name), end, value_end in zip(keys, [0, *ends], ends)
                         if tag == "" and name in self.donated for i in range(end, value_end))

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

        # A PartitionSpec is a tuple: a leaf here (under jax.sharding.set_mesh, device_put resolves it).
        leaf = (jax.sharding.Sharding, jax.sharding.PartitionSpec, type(None))
        return jax.tree_util.tree_map(place, shardings, value, is_leaf=lambda s: isinstance(s, leaf))


def checked_tuple(value: Any, kind: Any, option: str, fn_name: str, message: str | None = None) -> tuple:
    """An option that is one ``kind`` or a sequence of them, as a tuple (else ``message``)."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, kind) else value
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if items is None or not all(isinstance(v, kind) and not isinstance(v, bool) for v in items):
        raise ArgumentTypeError(message or (
            f"qjit({option}={value!r}) of {fn_name}: {option} must be a {kind.__name__} or a sequence of "
            f"{kind.__name__}s."
        ))
    return items
