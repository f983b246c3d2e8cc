"""Where compiled size-generic programs are kept between processes.

The directory is ``CATALYST_LITE_CACHE_DIR`` when it is set; otherwise, when JAX's persistent
compilation cache is on (``jax_compilation_cache_dir``), its ``catalyst_lite`` subdirectory;
otherwise nothing is written to disk (as with JAX, whose cache is off until configured). Entries are
files named by a key (a hash of the program and of the compiler's options); a write is atomic, and
a directory that cannot be written only disables the cache.

>>> import os, tempfile
>>> os.environ[CACHE_DIR_ENV_VAR] = tempfile.mkdtemp()
>>> write("0123abcd.vmfb", b"compiled")
>>> read("0123abcd.vmfb")
b'compiled'
>>> read("missing.vmfb") is None
True
>>> del os.environ[CACHE_DIR_ENV_VAR]
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import jax

__all__ = ["CACHE_DIR_ENV_VAR", "cache_dir", "read", "write"]

CACHE_DIR_ENV_VAR = "CATALYST_LITE_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache directory (see the module's documentation), or ``None`` when there is none."""
    configured = os.environ.get(CACHE_DIR_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    jax_dir = jax.config.jax_compilation_cache_dir
    return Path(jax_dir).expanduser() / "catalyst_lite" if jax_dir else None


def read(name: str) -> bytes | None:
    """The entry ``name``, or ``None`` when it is not cached (or there is no cache)."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        return (directory / name).read_bytes()
    except OSError:
        return None


def write(name: str, data: bytes) -> None:
    """Store ``data`` as the entry ``name`` (atomically: a reader sees all of it or nothing)."""
    directory = cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, directory / name)
    except OSError:
        pass  # a cache that cannot be written is no cache, not an error
