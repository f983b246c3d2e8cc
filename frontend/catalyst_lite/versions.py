"""The JAX versions catalyst_lite runs on (JAX 0.7's dynamic shapes, removed after 0.7), checked
before anything imports JAX's internals: an unsupported JAX is one clear ``ImportError``."""

from __future__ import annotations

from importlib import metadata

__all__ = ["SUPPORTED_JAX", "unsupported_jax", "check_jax"]

# jax and jaxlib alike; 0.7.1 is what a fresh install gets (PennyLane's capture needs it).
SUPPORTED_JAX = ("0.7.1", "0.7.2")


def unsupported_jax(installed: dict[str, str | None]) -> str | None:
    """The error message for these installed ``jax``/``jaxlib`` versions (``None``: supported)."""
    if all(installed.get(name) in SUPPORTED_JAX for name in ("jax", "jaxlib")):
        return None
    found = ", ".join(f"{name} {installed.get(name) or 'not installed'}" for name in ("jax", "jaxlib"))
    return (
        f"catalyst_lite needs JAX {' or '.join(SUPPORTED_JAX)} (jax and jaxlib), found {found}. "
        "It traces with JAX 0.7's dynamic shapes, which later JAX versions removed (Catalyst 0.15 "
        "pins JAX 0.7.1 for the same reason). Install it in its own virtual environment, or run: "
        "pip install 'jax==0.7.1' 'jaxlib==0.7.1'"
    )


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_jax() -> None:
    """Raise ``ImportError`` if the installed JAX (read from its metadata) is not supported."""
    message = unsupported_jax({name: _installed(name) for name in ("jax", "jaxlib")})
    if message is not None:
        raise ImportError(message)
