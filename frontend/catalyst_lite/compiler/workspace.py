"""``qjit(keep_intermediate=...)``: a directory per traced program holding what was compiled.

As Catalyst, in a directory of the working directory named after the function (``f``, ``f_1``...):
``<name>.jaxpr`` and, when it can be shown, ``<name>.mlir`` (as ``QJIT.mlir``). ``QJIT.workspace``
is the directory of the most recent program.

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

from __future__ import annotations

import os
import pathlib
import shutil

from ..jax_extras.lowering_targets import UnsupportedLowering
from ..tracing import Program
from .lowering import program_to_mlir

__all__ = ["Workspace"]


class Workspace:
    """A directory of intermediate files (Catalyst's ``QJIT.workspace``): ``str()`` is its path."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    @classmethod
    def create(cls, name: str, parent: str | os.PathLike | None = None) -> "Workspace":
        """A new directory ``name`` (``name_1``... when taken) in ``parent``, by default the working one.

        >>> import tempfile
        >>> parent = tempfile.mkdtemp()
        >>> [Workspace.create("f", parent).path.name for _ in range(3)]
        ['f', 'f_1', 'f_2']
        """
        base = pathlib.Path(os.getcwd() if parent is None else parent)
        count = 0
        while True:
            path = base / (name if count == 0 else f"{name}_{count}")
            try:
                path.mkdir()  # atomic: two programs traced at once never share a directory
                return cls(path)
            except FileExistsError:
                count += 1

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

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"
