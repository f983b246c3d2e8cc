"""Process-wide settings applied when catalyst_lite is imported, as Catalyst does: ``import
catalyst`` switches on ``jax_enable_x64``, and so does importing catalyst_lite, unless
``CATALYST_LITE_ENABLE_X64=0`` (qjit programs then still compute in 64 bits, their results cast to
your types by ``compiler.executable.call_from_transformation``)."""

from __future__ import annotations

import os

import jax

__all__ = ["X64_ENV_VAR", "apply_import_defaults"]

X64_ENV_VAR = "CATALYST_LITE_ENABLE_X64"


def apply_import_defaults() -> None:
    """``jax_enable_x64`` on, unless :data:`X64_ENV_VAR` is ``0``/``false``/``no``/``off``."""
    if os.environ.get(X64_ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off"):
        jax.config.update("jax_enable_x64", True)
