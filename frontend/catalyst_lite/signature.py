"""A compiled function's signature: how a call binds to its parameters (:class:`CallBinding`), what
their type annotations ask for (:func:`example_of`), and the arguments as traced (:class:`ArgumentLayout`).

>>> binding = CallBinding(lambda x, *, scale=2.0, mode="sum": x, static_argnames="mode")
>>> call = binding.bind((1.0,), {"mode": "max"})
>>> call.dynamic, call.static
((1.0,), ((('', 'mode'), 'max'),))
"""

from __future__ import annotations

import inspect
import numbers
import sys
import types
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import jax
import numpy as np
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure

from .compile_options import checked_tuple
from .errors import (
    ArgumentTypeError, ArgumentValueError, StaticArgnumsError, UnhashableStaticArgumentError, function_name,
)
from .jax_extras import ShapedArray, Tracer

__all__ = [
    "CallArguments", "CallBinding", "PYTHON_SCALARS", "resolved_annotation", "qjit_annotation",
    "is_type_annotation",
    "example_of", "as_annotated", "promotes", "promoted_leaf", "promoted_leaves", "dtype_of", "LeafSpec",
    "ArgumentLayout", "AxesSpec",
]

# --- binding a call to the parameters -------------------------------------------------------------

# How an argument is known: ("", name) for a named parameter, ("*", i) for the i-th element of
# `*args`, ("**", key) for an entry of `**kwargs`, ("call", name) for a call-site keyword.
ArgumentKey = tuple[str, Any]
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True)
class CallArguments:
    """The arguments one call gives (not the defaults), bound to the parameters in order."""

    keys: tuple[ArgumentKey, ...]
    values: tuple[Any, ...]
    names: tuple[str, ...]  # for messages: "'x'", "'args'[1]", "'opts'['mode']"
    is_static: tuple[bool, ...]
    # Each argument's position among the non-static ones (its entry of abstracted_axes).
    slots: tuple[int, ...]
    nslots: int

    def _pick(self, what: Sequence[Any], static: bool) -> tuple:
        return tuple(x for x, s in zip(what, self.is_static) if s == static)

    @property
    def dynamic(self) -> tuple:
        return self._pick(self.values, False)

    @property
    def dynamic_keys(self) -> tuple[ArgumentKey, ...]:
        return self._pick(self.keys, False)

    @property
    def dynamic_names(self) -> tuple[str, ...]:
        return self._pick(self.names, False)

    @property
    def dynamic_slots(self) -> tuple[int, ...]:
        return self._pick(self.slots, False)

    @property
    def static(self) -> tuple[tuple[ArgumentKey, Any], ...]:
        return tuple(zip(self._pick(self.keys, True), self._pick(self.values, True)))

    def with_dynamic(self, dynamic: Sequence[Any]) -> "CallArguments":
        values = iter(dynamic)
        return dataclasses.replace(
            self, values=tuple(v if s else next(values) for v, s in zip(self.values, self.is_static))
        )


class CallBinding:
    """How calls of ``fn`` bind to its parameters, and which arguments are static."""

    def __init__(self, fn: Callable, static_argnums: Sequence[int] | int | None = None,
                 static_argnames: Sequence[str] | str | None = None):
        self.fn_name = function_name(fn)
        # Static keywords beyond the parameters, hashed: a QNode's call-site ``shots`` (if its
        # function has none; PennyLane not imported: fn is no QNode).
        qml = sys.modules.get("pennylane")
        self.call_keywords: dict[str, Callable[[Any], Hashable]] = {}
        if qml is not None and isinstance(fn, qml.QNode) and not fn._qfunc_uses_shots_arg:
            self.call_keywords["shots"] = qml.measurements.Shots
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        params = list(self.signature.parameters.values()) if self.signature else []
        self.parameters = {p.name: p for p in params}
        self.positional = [p.name for p in params if p.kind in _POSITIONAL]
        kinds = {p.kind: p.name for p in params}
        self.var_positional = kinds.get(inspect.Parameter.VAR_POSITIONAL)
        self.var_keyword = kinds.get(inspect.Parameter.VAR_KEYWORD)
        # Catalyst reports a bad static_argnums when the function is called: kept until then.
        self.static_argnums_error: Exception | None = None
        try:
            nums = self._checked_static_argnums(static_argnums)
        except (ArgumentTypeError, StaticArgnumsError) as err:
            self.static_argnums_error, nums = err, set()
        names = set(checked_tuple(static_argnames, str, "static_argnames", self.fn_name))
        named = {n for n, p in self.parameters.items() if p.kind not in _VARIADIC}
        unknown = sorted(n for n in names if n not in named)
        if unknown and self.signature is not None and self.var_keyword is None:
            raise ArgumentValueError(
                f"{self.fn_name}: the qjitted function has invalid argname "
                f"{{{', '.join(map(repr, unknown))}}} in static_argnames: not a parameter "
                f"(parameters: {', '.join(repr(n) for n in self.parameters if n in named) or 'none'})."
            )
        # As jax.jit does: a positional parameter is static whether passed by position or name.
        self.static_names = frozenset(names) | {self.positional[i] for i in nums if i < len(self.positional)}
        # Positions beyond the named parameters are elements of *args.
        self.static_varargs = frozenset(i - len(self.positional) for i in nums if i >= len(self.positional))

    def _checked_static_argnums(self, static_argnums: Any) -> set[int]:
        """``static_argnums`` as a set of valid positions (Catalyst refuses negative ones)."""
        fn_name = self.fn_name
        nums = checked_tuple(static_argnums, (int, np.integer), "static_argnums", fn_name, (
            f"{fn_name}: The `static_argnums` argument to qjit must be an int or a sequence of ints, "
            f"got {static_argnums!r}."
        ))
        for i in nums:
            if i < 0:
                raise StaticArgnumsError(
                    f"{fn_name}: static_argnums names argnum {int(i)}, which is beyond the valid range "
                    "(negative); give positions from 0."
                )
        nums = {int(i) for i in nums}
        if self.signature is not None and self.var_positional is None:
            for i in sorted(nums):
                if i >= len(self.positional):
                    raise StaticArgnumsError(
                        f"{fn_name}: static_argnums names argnum {i}, which is beyond the valid "
                        f"range of [0, {len(self.positional)}): the function takes "
                        f"{len(self.positional)} positional argument(s)."
                    )
        return nums

    @property
    def static_argnums(self) -> tuple[int, ...]:
        """The positions of the static arguments (those named by ``static_argnames`` too)."""
        named = {i for i, n in enumerate(self.positional) if n in self.static_names}
        return tuple(sorted(named | {len(self.positional) + i for i in self.static_varargs}))

    def bind(self, args: tuple, kwargs: dict) -> CallArguments:
        """Bind a call's arguments to the parameters; a clear error when Python would refuse it."""
        if self.static_argnums_error is not None:
            raise self.static_argnums_error.with_traceback(None)
        at_call = {k: kwargs[k] for k in self.call_keywords if k in kwargs}
        if at_call:
            call = self.bind(args, {k: v for k, v in kwargs.items() if k not in at_call})
            values = [self.call_keywords[k](v) for k, v in at_call.items()]
            return self._arguments([*call.keys, *(("call", k) for k in at_call)], [*call.values, *values])
        if self.signature is None:  # no signature to bind by: arguments as given
            keys = [("*", i) for i in range(len(args))] + [("**", k) for k in kwargs]
            return self._arguments(keys, [*args, *kwargs.values()])
        # A keyword naming no parameter is the error, as in Python (before a missing argument).
        by_keyword = (*_VARIADIC, inspect.Parameter.POSITIONAL_ONLY)
        unknown = [k for k in kwargs if k not in self.parameters or self.parameters[k].kind in by_keyword]
        if unknown and self.var_keyword is None:
            raise ArgumentTypeError(f"{self.fn_name}() got an unexpected keyword argument {unknown[0]!r}")
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentTypeError(f"{self.fn_name}: {e}") from None
        for name in self.static_names - bound.arguments.keys():  # its default: f(x), f(x, mode=default) alike
            p = self.parameters.get(name)
            if p is not None and p.default is not p.empty and _hashable(p.default):
                bound.arguments[name] = p.default
        keys, values = [], []
        for name, value in bound.arguments.items():
            kind = self.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                keys += [("*", i) for i in range(len(value))]
                values += value
            elif kind is inspect.Parameter.VAR_KEYWORD:
                keys += [("**", k) for k in value]
                values += value.values()
            else:
                keys.append(("", name))
                values.append(value)
        return self._arguments(keys, values)

    def _arguments(self, keys: list[ArgumentKey], values: list[Any]) -> CallArguments:
        static = [
            tag == "call" or (ident in self.static_varargs if tag == "*" else ident in self.static_names)
            for tag, ident in keys
        ]
        # static_argnums beyond the named parameters must name a given element of *args.
        given = sum(1 for tag, _ in keys if tag == "*")
        beyond = [len(self.positional) + i for i in sorted(self.static_varargs) if i >= given]
        if beyond:
            npos = len(self.positional) + given
            raise StaticArgnumsError(
                f"{self.fn_name}: static_argnums names argnum {beyond[0]}, which is beyond the valid "
                f"range of [0, {npos}): the call passes {npos} positional argument(s)."
            )
        for key, value, is_static in zip(keys, values, static):
            if is_static and not _hashable(value):
                raise UnhashableStaticArgumentError(
                    f"{self.fn_name}: static argument {self._name(key)} must be hashable, got "
                    f"{type(value).__name__}."
                )
        slots, nslots = self._slots(keys, static)
        names = tuple(self._name(k) for k in keys)
        return CallArguments(tuple(keys), tuple(values), names, tuple(static), slots, nslots)

    def _slots(self, keys: list[ArgumentKey], static: list[bool]) -> tuple[tuple[int, ...], int]:
        """Each argument's position among the non-static ones, counting parameters left out."""
        given = dict(zip(keys, static))
        order: list[ArgumentKey] = []
        for name, p in self.parameters.items():
            if p.kind in _VARIADIC:
                tag = "*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "**"
                order += [k for k in keys if k[0] == tag]
            elif name not in self.static_names:
                order.append(("", name))
        if self.signature is None:
            order = list(keys)
        order = [k for k in order if not given.get(k, False)]
        index = {k: i for i, k in enumerate(order)}
        return tuple(index.get(k, -1) for k in keys), len(order)

    def _name(self, key: ArgumentKey) -> str:
        tag, ident = key
        if tag == "*":
            return f"{self.var_positional!r}[{ident}]" if self.var_positional else f"#{ident}"
        if tag == "**" and self.var_keyword:
            return f"{self.var_keyword!r}[{ident!r}]"
        return repr(ident)

    def of_dynamic_arguments(self, fn: Callable, call: CallArguments) -> Callable:
        """``fn`` of ``call``'s dynamic arguments, its static ones fixed: what is traced."""
        static = dict(call.static)

        def with_dynamic(*dynamic: Any) -> Any:
            # Called with the arguments bound as they were (keywords by name).
            given = dict(zip(call.dynamic_keys, dynamic))
            keys, values = call.keys, [static[k] if k in static else given[k] for k in call.keys]
            at_call = {k: v for (tag, k), v in zip(keys, values) if tag == "call"}
            if self.signature is None:
                args = [v for (tag, _), v in zip(keys, values) if tag == "*"]
                return fn(*args, **{k: v for (tag, k), v in zip(keys, values) if tag == "**"}, **at_call)
            arguments: dict[str, Any] = {}
            for (tag, ident), value in zip(keys, values):
                if tag == "*":
                    arguments[self.var_positional] = (*arguments.get(self.var_positional, ()), value)
                elif tag == "**":
                    arguments.setdefault(self.var_keyword, {})[ident] = value
                elif tag != "call":
                    arguments[ident] = value
            bound = inspect.BoundArguments(self.signature, arguments)
            return fn(*bound.args, **bound.kwargs, **at_call)

        return with_dynamic


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


# --- type annotations ------------------------------------------------------------------------------

_ARRAY_TYPES = (ShapedArray, jax.ShapeDtypeStruct)  # the annotations of arrays
# The Python scalar annotations' dtypes (weakly typed, as Python numbers are in JAX).
PYTHON_SCALARS: dict[type, np.dtype] = {
    int: np.dtype("int64"),
    float: np.dtype("float64"),
    bool: np.dtype(bool),
    complex: np.dtype("complex128"),
}


def resolved_annotation(annotation: Any, fn: Callable) -> Any:
    """A string annotation evaluated in ``fn``'s globals and closure (left as it is if it fails)."""
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


def qjit_annotation(annotation: Any, fn: Callable) -> Any:
    """A parameter's annotation as ``qjit`` reads it: a string annotation (``from __future__ import
    annotations``) is evaluated, and asks for ahead-of-time tracing when it names a JAX type
    (``"float"``, a ``ShapedArray``); one naming another class (``"jax.Array"``) stays a string, a
    type hint asking for nothing, as Catalyst ignores string annotations (no error)."""
    resolved = resolved_annotation(annotation, fn)
    if (isinstance(annotation, str) and is_type_annotation(resolved) and resolved not in PYTHON_SCALARS
            and _scalar_dtype(resolved) is None and not isinstance(resolved, _ARRAY_TYPES)):
        return annotation  # a class example_of refuses: a type hint asking for nothing
    return resolved


def is_type_annotation(annotation: Any) -> bool:
    """Whether an annotation asks for ahead-of-time tracing: a class (not ``list[int]``), an array type.

    >>> is_type_annotation(float), is_type_annotation(list[int])
    (True, False)
    """
    return isinstance(annotation, _ARRAY_TYPES) or (
        isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias)
        and getattr(annotation, "__module__", None) != "typing"  # typing.Any is a class since 3.11
    )


def example_of(annotation: Any, param: str, fn_name: str) -> jax.ShapeDtypeStruct:
    """The abstract argument an annotation stands for.

    >>> import jax.numpy as jnp
    >>> from jax.core import ShapedArray
    >>> example_of(ShapedArray((2, 3), jnp.float32), "x", "f")
    ShapeDtypeStruct(shape=(2, 3), dtype=float32)
    """
    if annotation in PYTHON_SCALARS:
        return jax.ShapeDtypeStruct((), PYTHON_SCALARS[annotation], weak_type=True)
    if isinstance(annotation, _ARRAY_TYPES):
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
    return dtype if isinstance(annotation, type) and isinstance(dtype, np.dtype) else None


def as_annotated(fn_name: str, arg_name: str, annotation: Any, a: Any) -> Any:
    """A call's argument converted to its parameter's annotation as Catalyst converts it: a
    scalar whose dtype promotes to a Python scalar annotation's, an array of an annotated array
    type's shape (a dtype's: a scalar) whose dtype promotes to it. Anything else (another dtype,
    shape or structure) is an :class:`ArgumentTypeError`: the call does not fit the annotations."""
    typed = hasattr(a, "dtype") or isinstance(a, (int, float, bool, complex))  # an array or a number
    if annotation in PYTHON_SCALARS:
        if not typed or np.ndim(a) != 0 or not promotes(dtype_of(a), PYTHON_SCALARS[annotation]):
            raise ArgumentTypeError(
                f"{fn_name}: argument {arg_name} is annotated {annotation.__name__} but got "
                f"{type(a).__name__} {a!r}."
            )
        # A tracer of an outer JAX transformation stays one (float() would cut it off).
        return a if isinstance(a, Tracer) else promoted_leaf(a, LeafSpec((), PYTHON_SCALARS[annotation], True))
    if isinstance(a, Tracer):
        return a
    target = example_of(annotation, arg_name, fn_name)  # a dtype's: a scalar of that dtype
    shape, dtype = target.shape, np.dtype(target.dtype)
    if not typed or np.shape(a) != shape or not promotes(dtype_of(a), dtype):
        got = f"{dtype_of(a)}{list(np.shape(a))}" if typed else type(a).__name__
        raise ArgumentTypeError(
            f"{fn_name}: argument {arg_name} is annotated {dtype}{list(shape)} but got {got}, "
            "which does not have that shape or does not promote to that dtype."
        )
    if hasattr(a, "dtype") and dtype_of(a) == dtype:
        return a
    # A Python number is int64/float64/complex128 here, as Catalyst types it (not weakly).
    return promoted_leaf(a, LeafSpec(shape, dtype, False))


# --- promotion to a compiled signature -------------------------------------------------------------


def promotes(dtype: Any, target: Any) -> bool:
    """Whether ``dtype`` converts to ``target`` without loss by JAX's promotion rules.

    >>> promotes(np.int32, np.float64), promotes(np.float64, np.int64), promotes(np.uint64, np.int64)
    (True, False, False)
    """
    extended = jax.dtypes.extended
    if jax.dtypes.issubdtype(dtype, extended) or jax.dtypes.issubdtype(target, extended):
        return dtype == target
    try:
        return jax.numpy.promote_types(dtype, target) == np.dtype(target)
    except (TypeError, ValueError):  # a dtype JAX has no promotion for (float128)
        return False


# A weakly typed scalar of these dtypes is what a Python number of that type is traced as.
_PYTHON_TYPE_OF = {dtype: kind for kind, dtype in PYTHON_SCALARS.items()}


def promoted_leaf(x: Any, spec: LeafSpec) -> Any:
    """``x`` converted to ``spec``'s type (a Python number for a weakly typed scalar)."""
    if spec.weak_type and spec.shape == ():
        kind = _PYTHON_TYPE_OF.get(spec.dtype)
        if kind is not None:
            return x if type(x) is kind else kind(np.asarray(x).item())
    return np.asarray(x, dtype=spec.dtype)


def promoted_leaves(leaves: Sequence[Any], specs: Sequence[LeafSpec], target: Sequence[LeafSpec]) -> list | None:
    """A call's flat arguments (of ``specs``) converted to a compiled signature's, else ``None``.

    >>> f64, i32 = np.dtype("float64"), np.dtype("int32")
    >>> promoted_leaves([np.ones(2, i32)], [LeafSpec((None,), i32, False)], [LeafSpec((None,), f64, False)])[0].dtype
    dtype('float64')
    """
    # An array never takes a Python integer's or bool's place (a program may read its value).
    if len(specs) != len(target) or not all(
        s.shape == t.shape and promotes(s.dtype, t.dtype)
        and (s.weak_type or not t.weak_type or t.dtype.kind not in "biu") for s, t in zip(specs, target)
    ):
        return None
    return [x if s == t else promoted_leaf(x, t) for x, s, t in zip(leaves, specs, target)]


def dtype_of(x: Any) -> np.dtype:
    """The dtype of an argument, without converting it (it may be a tracer)."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


# --- the arguments as traced -----------------------------------------------------------------------

AxesSpec = dict[int, Hashable]


@dataclass(frozen=True)
class LeafSpec:
    """What the trace depends on for one flat argument (``None`` for an abstracted axis's size)."""

    shape: tuple[int | None, ...]
    dtype: np.dtype
    weak_type: bool


def leaf_aval_parts(x: Any, fn_name: str, where: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """Shape, dtype and weak type of one argument leaf as qjit traces it (64-bit types)."""
    for kind in (bool, numbers.Integral, float, complex):  # a Python number (NumPy's scalars have a dtype)
        if isinstance(x, kind) and not isinstance(x, np.generic):
            return (), PYTHON_SCALARS[int if kind is numbers.Integral else kind], True
    if isinstance(x, jax.ShapeDtypeStruct) or hasattr(x, "shape") and hasattr(x, "dtype"):
        extended = jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended)  # a typed PRNG key's
        dtype = x.dtype if extended else np.dtype(x.dtype)
        if not (extended or dtype == np.dtype(bool) or jax.dtypes.issubdtype(dtype, np.number)):
            raise ArgumentTypeError(
                f"{fn_name}: argument {where} is an array of dtype {dtype} ({type(x).__name__}); "
                "compiled functions take arrays of numbers and booleans. Convert it (e.g. "
                "np.asarray(x, dtype=float)), or pass it with static_argnums/static_argnames as a "
                "hashable value (a tuple) if it is a compile-time option."
            )
        return tuple(x.shape), dtype, bool(getattr(x, "weak_type", False))
    article = "an" if type(x).__name__[:1].lower() in "aeiou" else "a"
    raise ArgumentTypeError(
        f"{fn_name}: argument {where} is {article} {type(x).__name__}; compiled functions take arrays, "
        "numbers and pytrees of them. Pass it with static_argnums/static_argnames if it is a "
        "compile-time option."
    )


def _axes_for_leaf(entry: Any, ndim: int, fn_name: str, where: str, strict: bool) -> AxesSpec:
    if entry is None:
        return {}
    if _is_axes_dict(entry):
        spec = {int(k): v for k, v in entry.items()}
    elif isinstance(entry, dict):
        raise ArgumentTypeError(
            f"{fn_name}: abstracted_axes entry {entry!r} for argument {where} must map integer axes "
            f"to names ({{0: 'n'}}), but its keys are {list(entry)}; key a dict by the argument's "
            "keys only where the argument is a dict."
        )
    elif isinstance(entry, (tuple, list)):
        spec = {i: name for i, name in enumerate(entry) if name is not None}
    else:
        raise ArgumentTypeError(
            f"{fn_name}: abstracted_axes entry for argument {where} must be a dict "
            f"{{axis: name}}, a tuple of names or None, got {entry!r}."
        )
    if not strict:
        return {k: v for k, v in spec.items() if k < ndim}
    for axis in spec:
        if not 0 <= axis < ndim:
            raise ArgumentValueError(
                f"{fn_name}: abstracted_axes names axis {axis} of argument {where}, which has "
                f"rank {ndim} (valid axes: 0..{ndim - 1})."
            )
    return spec


class ArgumentLayout:
    """A call's dynamic arguments as traced: pytree leaves, and their abstracted axes.

    >>> call = CallBinding(lambda x, n: x).bind((np.ones(3),), {"n": 2})
    >>> layout = ArgumentLayout("f", abstracted_axes={0: "n"})
    >>> [str(s.shape) for s in layout.leaf_specs(call)[1]]
    ['(None,)', '()']
    """

    def __init__(self, fn_name: str, abstracted_axes: Any = None):
        self.fn_name = fn_name
        self.abstracted_axes = abstracted_axes

    def axes_specs(self, call: CallArguments, leaves_per_arg: list[list[Any]], ndims: list[int],
                   owners: list[str]) -> list[AxesSpec]:
        """One ``{axis: name}`` per flat leaf (of rank ``ndims``, of argument ``owners``)."""
        axes, names = self.abstracted_axes, call.dynamic_names
        if axes is None:
            return [{} for _ in ndims]
        if _is_axes_dict(axes):  # one dict for every argument that has the axis
            specs = [_axes_for_leaf(axes, n, self.fn_name, o, False) for n, o in zip(ndims, owners)]
            if any(ndims) and not any(specs):
                described = ", ".join(f"{name} has {ndim}" for name, ndim in zip(owners, ndims))
                raise ArgumentValueError(
                    f"{self.fn_name}: abstracted_axes={axes!r} applies to no argument: it names "
                    f"axes {sorted(axes)}, but {described} dimension(s). Name an axis the arguments "
                    "have (axes count from 0), or give one entry per argument."
                )
            return specs
        entries = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        if len(entries) > call.nslots or any(slot >= len(entries) for slot in call.dynamic_slots):
            raise ArgumentValueError(
                f"{self.fn_name}: abstracted_axes has {len(entries)} entries but the function "
                f"takes {call.nslots} non-static arguments."
            )
        per_leaf = [e for arg, k, leaves, name in zip(call.dynamic, call.dynamic_slots, leaves_per_arg, names)
                    for e in _broadcast_entry(entries[k], arg, len(leaves), self.fn_name, name)]
        return [_axes_for_leaf(e, n, self.fn_name, o, True) for e, n, o in zip(per_leaf, ndims, owners)]

    def leaf_specs(self, call: CallArguments
                   ) -> tuple[PyTreeDef, list[LeafSpec], list[Any], list[AxesSpec], list[str]]:
        """Flatten the dynamic arguments: tree, per-leaf specs, leaves, axes specs and names."""
        leaves_per_arg = [tree_flatten(a)[0] for a in call.dynamic]
        leaves, tree = tree_flatten(call.dynamic)
        owners = [name for name, ls in zip(call.dynamic_names, leaves_per_arg) for _ in ls]
        parts = [leaf_aval_parts(leaf, self.fn_name, owner) for leaf, owner in zip(leaves, owners)]
        specs = self.axes_specs(call, leaves_per_arg, [len(shape) for shape, _, _ in parts], owners)
        out = [LeafSpec(tuple(None if i in spec else d for i, d in enumerate(shape)), dtype, weak)
               for (shape, dtype, weak), spec in zip(parts, specs)]
        return tree, out, leaves, specs, owners


def _is_axes_dict(entry: Any) -> bool:
    """``{axis: name}`` (integer keys), not a dict-shaped pytree of entries."""
    return isinstance(entry, dict) and all(isinstance(k, (int, np.integer)) for k in entry)


def _broadcast_entry(entry: Any, arg: Any, nleaves: int, fn_name: str, where: str) -> list[Any]:
    """An abstracted_axes entry for one argument, as one entry per leaf of that argument."""
    if entry is None or _is_axes_dict(entry) or (
        isinstance(entry, tuple) and all(e is None or isinstance(e, (str, int)) for e in entry)
    ):
        return [entry] * nleaves
    # A pytree of entries matching the argument's structure.
    structure = tree_structure(arg)
    try:
        return list(structure.flatten_up_to(entry))
    except (ValueError, TypeError) as err:
        raise ArgumentTypeError(
            f"{fn_name}: the abstracted_axes entry for argument {where} does not match its pytree "
            f"structure ({err}). The argument is {structure}; give one {{axis: name}} per leaf in "
            "that structure, or one dict for all its leaves."
        ) from None
