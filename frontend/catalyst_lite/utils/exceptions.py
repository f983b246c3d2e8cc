"""Catalyst's exception classes at Catalyst's import path, ``catalyst.utils.exceptions``.

>>> from catalyst_lite.utils.exceptions import CompileError
>>> import catalyst_lite
>>> CompileError is catalyst_lite.CompileError
True
"""

from ..errors import (
    AutoGraphError, CompileError, DifferentiableCompileError, PlxprCaptureCFCompatibilityError,
)

__all__ = ["AutoGraphError", "CompileError", "DifferentiableCompileError", "PlxprCaptureCFCompatibilityError"]
