"""``QJIT.mlir``: the StableHLO of a traced program, symbolic sizes as ``?`` dimensions (implicit ones
``tensor<i64>`` arguments of ``@main``), and ``QJIT.workspace``, where ``keep_intermediate`` keeps it.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(sz: int):
...     return jnp.ones((sz + 1,), dtype=float)
>>> print(f.mlir.splitlines()[1].strip())
func.func public @main(%arg0: tensor<i64>) -> (tensor<i64>, tensor<?xf64>) {
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import shutil

from ..jax_extras.lowering import UnsupportedLowering, lower_jaxpr_to_stablehlo
from ..tracing import Program

__all__ = ["program_to_mlir", "Workspace"]


def program_to_mlir(program: Program, name: str) -> str:
    """StableHLO text of a traced ``program`` (``ValueError``: not showable, e.g. side effects)."""
    if not isinstance(program, Program):
        raise TypeError(f"program_to_mlir expects a Program, got {type(program).__name__}")
    return lower_jaxpr_to_stablehlo(program.closed_jaxpr, name)


class Workspace:
    """``qjit(keep_intermediate=True)``'s directory of a traced program (``QJIT.workspace``), named after
    the function in the working directory: ``<name>.jaxpr`` and, when it can be shown, ``<name>.mlir``.

    >>> import contextlib, os, tempfile
    >>> from catalyst_lite import qjit
    >>> def double(x):
    ...     return x * 2
    >>> with contextlib.chdir(tempfile.mkdtemp()):
    ...     f = qjit(double, keep_intermediate=True)
    ...     result = float(f(1.5))
    >>> result, f.workspace.path.name, sorted(os.listdir(f.workspace))
    (3.0, 'double', ['double.jaxpr', 'double.mlir'])
    >>> f.workspace.cleanup(); f.workspace.is_dir()
    False
    """

    def __init__(self, path: pathlib.Path):
        self.path = path

    @classmethod
    def create(cls, name: str, parent: str | os.PathLike | None = None) -> "Workspace":
        """A new directory ``name`` (``name_1``... when taken) in ``parent``, by default the working one."""
        base = pathlib.Path(os.getcwd() if parent is None else parent)
        for count in itertools.count():
            path = base / (name if count == 0 else f"{name}_{count}")
            with contextlib.suppress(FileExistsError):
                path.mkdir()  # atomic: two programs traced at once never share a directory
                return cls(path)

    def write_program(self, program: Program, name: str) -> None:
        """Write ``program``'s jaxpr and (if it can be shown) StableHLO, as files named ``name``."""
        (self.path / f"{name}.jaxpr").write_text(str(program.closed_jaxpr))
        try:
            text = program_to_mlir(program, name)
        except (ValueError, UnsupportedLowering):  # side effects, or nothing StableHLO can show
            return
        (self.path / f"{name}.mlir").write_text(text)

    def is_dir(self) -> bool:
        return self.path.is_dir()

    def cleanup(self) -> None:
        shutil.rmtree(self.path)

    def __str__(self) -> str:
        return str(self.path)

    __fspath__ = __str__

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"
