"""The user's line for messages: the innermost frame of the call stack, of a traceback or of an
equation's recorded traceback that is not in catalyst_lite, JAX, jaxlib, NumPy, malt or the
standard library's call wrappers. Nothing is decided by it (see ``tests/test_layering.py``).

>>> where = user_line()
>>> where is None or where.lineno > 0
True
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import linecache
import os
import sys
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Iterable

import jax
import jaxlib
import numpy as np

# catalyst_lite's and JAX's directories: their frames are left out of the tracebacks users see.
HIDDEN_DIRS = (os.path.dirname(os.path.dirname(__file__)) + os.sep, os.path.dirname(jax.__file__) + os.sep)
# autograph's converter and PennyLane (qml.measure calls ours), when installed (not imported here)
_PACKAGES = [spec for spec in map(importlib.util.find_spec, ("malt", "pennylane")) if spec]
_LIBRARY_DIRS = (
    HIDDEN_DIRS
    + tuple(os.path.dirname(path) + os.sep for path in (jaxlib.__file__, np.__file__))
    + tuple(location + os.sep for spec in _PACKAGES for location in spec.submodule_search_locations or ())
    + tuple(module.__file__ for module in (contextlib, functools))
)


def is_library_file(filename: str) -> bool:
    """A file whose lines are never the user's (a path test: live frames and JAX's source info)."""
    return filename.startswith(_LIBRARY_DIRS)


@dataclass(frozen=True)
class Location:
    """A line of the user's source."""

    filename: str
    lineno: int
    function: str = "?"

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"

    def described(self) -> str:
        """``file:line: `source``` (the source when the file can be read)."""
        code = linecache.getline(self.filename, self.lineno).strip()
        return f"{self}" + (f": `{code}`" if code else "")

    def as_traceback_entry(self) -> str:
        """The line as Python's tracebacks show it (``File "...", line N, in f`` and the source)."""
        source = linecache.getline(self.filename, self.lineno).strip()
        return f'  File "{self.filename}", line {self.lineno}, in {self.function}\n    {source}\n'


def _innermost(frames: Iterable[tuple[str, int, str]]) -> Location | None:
    """The first of ``frames`` (innermost first: file, line, function) that is the user's."""
    return next((Location(*f) for f in frames if not is_library_file(f[0])), None)


def user_line(depth: int = 1) -> Location | None:
    """The innermost user line on the call stack, from the caller ``depth`` frames up."""
    stack = traceback.walk_stack(sys._getframe(depth))
    return _innermost((f.f_code.co_filename, lineno, f.f_code.co_name) for f, lineno in stack)


def user_line_of_traceback(tb: TracebackType | None) -> Location | None:
    """The innermost user line of an exception's traceback."""
    frames = [(f.f_code.co_filename, lineno, f.f_code.co_name) for f, lineno in traceback.walk_tb(tb)]
    return _innermost(reversed(frames))


def user_line_of_equation(source_info: object) -> Location | None:
    """The user line that created a jaxpr equation (from its ``source_info`` traceback)."""
    frames = getattr(getattr(source_info, "traceback", None), "frames", None) or []
    return _innermost((f.file_name, f.line_num, f.function_name) for f in frames)
