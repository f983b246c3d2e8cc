"""``QJIT.compile_options``: ``qjit``'s options as one record, with Catalyst's fields and defaults.

Catalyst programs read their options back (``f.compile_options.static_argnums``) or build the
record themselves (``catalyst.CompileOptions(...)``); both work with catalyst_lite. Most fields
configure Catalyst's MLIR/LLVM compiler and change nothing here (see
docs/catalyst-compatibility.md); they are kept so that reading them gives what Catalyst gives.

>>> from catalyst_lite import CompileOptions
>>> options = CompileOptions(static_argnums=1, keep_intermediate=True)
>>> options.static_argnums, options.keep_intermediate, options.target
((1,), <KeepIntermediateLevel.PIPELINE: 1>, 'binary')
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any, Iterable, TextIO

import numpy as np

from .trace_context import check_capture_option
from .errors import ArgumentTypeError, ArgumentValueError, CompileError

__all__ = ["CompileOptions", "KeepIntermediateLevel", "check_seed"]


def check_seed(seed: Any, name: str) -> None:
    """``qjit(seed=...)`` is ``None`` or an unsigned 32-bit integer, as in Catalyst.

    >>> check_seed(2**32, "f")
    Traceback (most recent call last):
    ...
    catalyst_lite.errors.ArgumentValueError: qjit(seed=4294967296) of f: Seed must be an unsigned 32-bit integer! Use a seed in 0..4294967295.
    """
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
    """How many intermediate files Catalyst keeps (``keep_intermediate``); catalyst_lite writes
    none, but normalizes the option as Catalyst does."""

    NONE = 0
    PIPELINE = 1
    CHANGED = 2
    PASS = 3


_KEEP_INTERMEDIATE_NAMES = {"none": 0, "pipeline": 1, "changed": 2, "pass": 3}


def _keep_intermediate_level(value: Any) -> KeepIntermediateLevel:
    """``True``/``False``, ``0``..``3``, ``None`` or a level's name, as a level."""
    if value is None:
        return KeepIntermediateLevel.NONE
    if isinstance(value, str) and value in _KEEP_INTERMEDIATE_NAMES:
        return KeepIntermediateLevel(_KEEP_INTERMEDIATE_NAMES[value])
    if isinstance(value, int) and 0 <= value <= 3:  # bools too: False is 0, True is 1
        return KeepIntermediateLevel(int(value))
    raise ArgumentValueError(
        f"qjit(keep_intermediate={value!r}): use True, False, 0, 1, 2, 3, 'none', 'pipeline', "
        "'changed' or 'pass'."
    )


@dataclasses.dataclass
class CompileOptions:
    """``qjit``'s options (Catalyst's ``CompileOptions``: the same fields, defaults and checks).

    ``static_argnums`` is a tuple (an int becomes a one-element tuple); on a :class:`~.QJIT` it
    also holds the positions that ``static_argnames`` names. ``keep_intermediate`` becomes a
    :class:`KeepIntermediateLevel`. ``seed`` must fit in 32 unsigned bits (``ValueError``), and
    cannot be combined with ``async_qnodes`` (``CompileError``), as in Catalyst.

    >>> from catalyst_lite import QJIT, CompileOptions
    >>> options = CompileOptions(static_argnums=1)
    >>> options.static_argnums
    (1,)
    >>> float(QJIT(lambda x, n: x * n, options)(2.0, 3))
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
        self.keep_intermediate = _keep_intermediate_level(self.keep_intermediate)
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
