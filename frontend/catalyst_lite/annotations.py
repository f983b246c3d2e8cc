"""Type annotations as catalyst_lite reads them: Catalyst's ahead-of-time convention.

A function whose parameters are all annotated with types (``int``, ``float``, ``bool``,
``complex``, a JAX or NumPy scalar type, ``jax.core.ShapedArray``, ``jax.ShapeDtypeStruct``) is
traced when ``@qjit`` runs; any other class is a ``TypeError`` at decoration, as in Catalyst, and
annotations that are not classes leave tracing to the first call. String annotations are
evaluated where the function was defined.

>>> import jax.numpy as jnp
>>> from jax.core import ShapedArray
>>> example_of(ShapedArray((2, 3), jnp.float32), "x", "f")
ShapeDtypeStruct(shape=(2, 3), dtype=float32)
>>> example_of(float, "x", "f").dtype, is_type_annotation(list[int])
(dtype('float64'), False)
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable

import jax
import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError
from .jax_extras import ShapedArray, Tracer

__all__ = [
    "PYTHON_SCALARS",
    "resolved_annotation",
    "is_type_annotation",
    "example_of",
    "check_python_scalar",
    "as_annotated",
    "dtype_of",
]

# The Python scalar annotations: their dtypes (weakly typed, as Python numbers are in JAX).
PYTHON_SCALARS: dict[type, np.dtype] = {
    int: np.dtype("int64"),
    float: np.dtype("float64"),
    bool: np.dtype(bool),
    complex: np.dtype("complex128"),
}


def resolved_annotation(annotation: Any, fn: Callable) -> Any:
    """``annotation`` as the object it names: a string (``from __future__ import annotations``)
    is evaluated in ``fn``'s globals and closure; one that does not evaluate stays a string."""
    if not isinstance(annotation, str):
        return annotation
    target = inspect.unwrap(fn) if callable(fn) else fn
    scope = dict(getattr(target, "__globals__", {}))
    if inspect.isfunction(target):
        scope.update(inspect.getclosurevars(target).nonlocals)
    try:
        return eval(annotation, scope)  # noqa: S307 (the user's own annotation)
    except Exception:  # a forward reference or a name only a type checker knows
        return annotation


def is_type_annotation(annotation: Any) -> bool:
    """Whether an annotation asks for ahead-of-time tracing: a class or an array type (generic
    aliases such as ``list[int]`` are not classes)."""
    if isinstance(annotation, (ShapedArray, jax.ShapeDtypeStruct)):
        return True
    return (
        isinstance(annotation, type)
        and not isinstance(annotation, types.GenericAlias)
        and getattr(annotation, "__module__", None) != "typing"  # typing.Any is a class since 3.11
    )


def example_of(annotation: Any, param: str, fn_name: str) -> jax.ShapeDtypeStruct:
    """The abstract argument an annotation stands for (see the module docstring)."""
    if annotation in PYTHON_SCALARS:
        return jax.ShapeDtypeStruct((), PYTHON_SCALARS[annotation], weak_type=True)
    if isinstance(annotation, (ShapedArray, jax.ShapeDtypeStruct)):
        shape = tuple(annotation.shape)
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            raise ArgumentValueError(
                f"{fn_name}: parameter {param} is annotated with the shape {shape}; sizes must be "
                "non-negative integers (pass an int argument to size an array at run time)."
            )
        return jax.ShapeDtypeStruct(shape, annotation.dtype)
    dtype = _scalar_dtype(annotation)
    if dtype is None:
        name = getattr(annotation, "__name__", repr(annotation))
        raise ArgumentTypeError(  # Catalyst's phrase first
            f"{annotation!r} is not a valid JAX type: {fn_name}: parameter {param} is annotated "
            f"{name}, which is not a JAX type; annotate "
            "int, float, bool, complex, a dtype such as jnp.float32, or "
            "jax.core.ShapedArray(shape, dtype)."
        )
    return jax.ShapeDtypeStruct((), dtype)


def _scalar_dtype(annotation: Any) -> np.dtype | None:
    """The dtype of a JAX or NumPy scalar type (``jnp.float32``, ``np.int16``), else ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, np.generic):
        return np.dtype(annotation)
    dtype = getattr(annotation, "dtype", None)  # jnp.float32 and friends
    return np.dtype(dtype) if isinstance(annotation, type) and isinstance(dtype, np.dtype) else None


def check_python_scalar(fn_name: str, arg_name: str, annotation: type, a: Any) -> None:
    """An argument of a parameter annotated ``int``/``float``/``bool``/``complex`` is a scalar
    of that kind or one that promotes to it, as Catalyst converts it (a ``bool`` for ``int``, an
    ``int`` or ``bool`` for ``float``, any number for ``complex``)."""
    kind = dtype_of(a) if hasattr(a, "dtype") or isinstance(a, (int, float, bool, complex)) else None
    ok = kind is not None and np.ndim(a) == 0 and {
        int: np.issubdtype(kind, np.integer) or kind == np.dtype(bool),
        float: np.issubdtype(kind, np.floating) or np.issubdtype(kind, np.integer) or kind == np.dtype(bool),
        bool: kind == np.dtype(bool),
        complex: np.issubdtype(kind, np.number) or kind == np.dtype(bool),
    }[annotation]
    if not ok:
        raise ArgumentTypeError(
            f"{fn_name}: argument {arg_name} is annotated {annotation.__name__} but got "
            f"{type(a).__name__} {a!r}."
        )


def as_annotated(fn_name: str, arg_name: str, annotation: Any, a: Any) -> Any:
    """A call's argument for an annotated parameter: a Python scalar annotation is checked and a
    Python number converted to it (``f(2)`` for ``x: float`` is traced as a float); an array of
    an annotated array type's shape whose dtype promotes to the annotated one is converted to it,
    as Catalyst does. An array whose dtype does not promote to the annotated one is an
    :class:`ArgumentTypeError` (the caller traces it for its own types with Catalyst's warning);
    other shapes are traced for their own (with ``abstracted_axes`` sizes may differ)."""
    if annotation in PYTHON_SCALARS:
        check_python_scalar(fn_name, arg_name, annotation, a)
        # A tracer of an outer JAX transformation stays one (float() would cut it off).
        return annotation(a) if annotation in (int, float) and not isinstance(a, Tracer) else a
    if isinstance(annotation, (ShapedArray, jax.ShapeDtypeStruct)) and not isinstance(a, Tracer):
        if not hasattr(a, "dtype") and not isinstance(a, (int, float, bool, complex)):
            return a
        dtype = dtype_of(a)
        python_scalar = not hasattr(a, "dtype")  # weakly typed in JAX: given the annotated type
        promotes = jax.numpy.promote_types(dtype, annotation.dtype) == annotation.dtype
        if not promotes and not python_scalar:
            raise ArgumentTypeError(
                f"{fn_name}: argument {arg_name} is annotated with dtype {np.dtype(annotation.dtype)} "
                f"but got {dtype}, which does not promote to it."
            )
        if np.shape(a) == tuple(annotation.shape) and (python_scalar or dtype != annotation.dtype) and promotes:
            return np.asarray(a, dtype=annotation.dtype)
    return a


def dtype_of(x: Any) -> np.dtype:
    """The dtype of an argument, without converting it (it may be a tracer)."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype
