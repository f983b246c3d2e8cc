"""Process-wide settings that catalyst_lite applies when it is imported, as Catalyst does.

**64-bit types by default.** ``import catalyst`` switches on ``jax_enable_x64`` and Catalyst
programs rely on it, so importing catalyst_lite does the same. ``CATALYST_LITE_ENABLE_X64=0``
before the import keeps your JAX configuration: qjit programs still compute in 64 bits, for the
thread that runs them only, and their results are cast to your types (``compiler.boundary``).

>>> import jax
>>> x64_requested({}), x64_requested({X64_ENV_VAR: "0"})
(True, False)
"""

from __future__ import annotations

import os
from typing import Mapping

import jax

__all__ = ["X64_ENV_VAR", "x64_requested", "apply_import_defaults"]

X64_ENV_VAR = "CATALYST_LITE_ENABLE_X64"
_OFF = ("0", "false", "no", "off")


def x64_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether importing catalyst_lite switches on ``jax_enable_x64`` (unless the environment
    variable :data:`X64_ENV_VAR` says ``0``/``false``/``no``/``off``)."""
    return environ.get(X64_ENV_VAR, "1").strip().lower() not in _OFF


def apply_import_defaults() -> None:
    """Catalyst's import-time configuration: ``jax_enable_x64`` on (unless opted out)."""
    if x64_requested():
        jax.config.update("jax_enable_x64", True)
