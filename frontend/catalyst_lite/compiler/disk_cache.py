"""Compiled size-generic programs kept between processes (in ``CATALYST_LITE_CACHE_DIR``, else under
JAX's ``jax_compilation_cache_dir``): native code, so only a private directory is trusted, each entry
checked against its header's key, size and SHA-256 (the trust model: docs/troubleshooting.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import secrets
import shutil
import stat
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import jax
import jaxlib

from ..errors import CacheWarning

__all__ = ["CACHE_DIR_ENV_VAR", "read", "write", "discard", "remove_stale", "digest"]

CACHE_DIR_ENV_VAR = "CATALYST_LITE_CACHE_DIR"
FORMAT_VERSION = 1
TEMP_PREFIX = ".tmp-"
STALE_SECONDS = 600


def cache_dir() -> Path | None:
    """The cache directory, or ``None`` (also when JAX's is remote, ``gs://...``)."""
    configured = os.environ.get(CACHE_DIR_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    jax_dir = jax.config.jax_compilation_cache_dir
    return None if not jax_dir or "://" in jax_dir else Path(jax_dir).expanduser() / "catalyst_lite"


def cpu_features() -> str:
    """This CPU's instruction-set features, which compiled code may use (a model name covers several)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name.strip() in ("flags", "Features"):
                return " ".join(sorted(value.split()))
    return f"{platform.machine()} {platform.processor()}"


def read(key: Mapping[str, Any], kind: str) -> bytes | None:
    """The content of the entry of ``key`` and ``kind`` (a file suffix) if it passes the checks."""
    full = _full_key(key, kind)
    with _directory() as fd:
        if fd is None:
            return None
        name = _file_name(full)
        try:
            # O_NONBLOCK: opening a named pipe left at the entry's name would wait for a writer.
            opened = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as err:  # a symbolic link (O_NOFOLLOW), no permission
            _remove(fd, name, f"it cannot be opened as a file ({err.strerror})")
            return None
        if not stat.S_ISREG(os.fstat(opened).st_mode):  # a directory, a named pipe, a device
            os.close(opened)
            _remove(fd, name, "it is not a regular file")
            return None
        with os.fdopen(opened, "rb") as f:
            data = f.read()
        content, problem = _checked(data, full)
        if problem is not None:
            _remove(fd, name, problem)
        return content


def write(key: Mapping[str, Any], kind: str, content: bytes) -> None:
    """Store ``content`` as the entry of ``key`` and ``kind``, atomically (if the directory is writable)."""
    full = _full_key(key, kind)
    header = {"format": FORMAT_VERSION, "key": full, "size": len(content),
              "sha256": hashlib.sha256(content).hexdigest()}
    with _directory() as fd:
        if fd is None:
            return
        remove_stale(fd, TEMP_PREFIX)
        temporary = TEMP_PREFIX + secrets.token_hex(8)
        try:
            out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
            try:
                with os.fdopen(out, "wb") as f:
                    f.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())  # the content is on disk before its name is
                os.replace(temporary, _file_name(full), src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=fd)
                raise
            with contextlib.suppress(OSError):
                os.fsync(fd)  # the rename too
        except OSError:
            pass  # a cache that cannot be written is no cache, not an error


def discard(key: Mapping[str, Any], kind: str, reason: str) -> None:
    """Remove the entry of ``key`` and ``kind``, with a ``CacheWarning`` saying ``reason``."""
    with _directory() as fd:
        if fd is not None:
            _remove(fd, _file_name(_full_key(key, kind)), reason)


def remove_stale(directory_fd: int, prefix: str, in_use: Callable[[str], bool] = lambda name: False) -> None:
    """Remove this user's stale entries ``prefix...`` of ``directory_fd`` not ``in_use`` (killed writers')."""
    deadline = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory_fd):
            if not entry.name.startswith(prefix):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != os.geteuid() or info.st_mtime > deadline or in_use(entry.name):
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.name, dir_fd=directory_fd)
                else:
                    os.unlink(entry.name, dir_fd=directory_fd)


def _full_key(key: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The caller's key with what else decides whether this process can use the entry (JSON-typed)."""
    full = {**key, "kind": kind, "format": FORMAT_VERSION, "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "cpu": cpu_features()}
    return json.loads(json.dumps(full, sort_keys=True))


def digest(key: Mapping[str, Any]) -> str:
    """The SHA-256 of a JSON-typed ``key`` (its items in sorted order)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _file_name(full_key: Mapping[str, Any]) -> str:
    return f"{digest(full_key)}.{full_key['kind']}"


def _checked(data: bytes, full_key: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
    """The entry's content when its header matches, else ``None`` and what is wrong."""
    line, newline, content = data.partition(b"\n")
    if not newline:
        return None, "it has no header (truncated, or not written by catalyst_lite)"
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):  # ValueError: not UTF-8 or not JSON
        return None, "its header is not readable (corrupted)"
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        return None, f"its header is not of format version {FORMAT_VERSION} (corrupted, or another version's)"
    if header.get("key") != full_key:
        return None, "it was written for another key (another program, compiler version or CPU)"
    if header.get("size") != len(content):
        return None, f"it is truncated or extended ({len(content)} bytes, the header says {header.get('size')})"
    if header.get("sha256") != hashlib.sha256(content).hexdigest():
        return None, "its content does not match the SHA-256 of its header (corrupted)"
    return content, None


def _remove(fd: int, name: str, reason: str) -> None:
    warnings.warn(f"catalyst_lite's cache entry {cache_dir() / name} is not used: {reason}. It is removed, "
                  "and the program is compiled again.", CacheWarning, stacklevel=2)
    with contextlib.suppress(OSError):
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:  # (an empty one: a directory with files is someone's data)
            os.rmdir(name, dir_fd=fd)


@contextlib.contextmanager
def _directory() -> Iterator[int | None]:
    """The cache directory's descriptor when there is one private to this user, else ``None``."""
    path = cache_dir()
    fd = None if path is None else _open_private(path)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open_private(path: Path) -> int | None:
    if not hasattr(os, "geteuid") or os.open not in os.supports_dir_fd:
        _refuse(path, "not usable on a system without POSIX file ownership (which the checks need)")
        return None
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        _refuse(path, f"not usable ({err.strerror})")
        return None
    info = os.fstat(fd)
    problem = None
    if info.st_uid != os.geteuid():
        problem = f"owned by user id {info.st_uid}, not by you (user id {os.geteuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"writable by other users (mode {stat.filemode(info.st_mode)})"
    if problem is None:
        return fd
    os.close(fd)
    _refuse(path, problem + f"; anyone who can write it could make this process run their code. Fix: "
            f"`chmod go-w {path}` as its owner, or set {CACHE_DIR_ENV_VAR} to a directory of your own")
    return None


def _refuse(path: Path, problem: str) -> None:
    # Shown once per message (Python's default warning filter): a program compiles many times.
    warnings.warn(f"catalyst_lite's cache directory {path} is {problem}. Compiled programs are kept "
                  "in memory only.", CacheWarning, stacklevel=2)
