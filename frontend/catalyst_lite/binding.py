"""Binding a call to a function's parameters, as Python does, and which arguments are static.

A call binds by name, as in Python: keywords, keyword-only parameters, ``*args`` and ``**kwargs``.
Parameters the caller leaves out get their defaults from Python when the function runs, as with
``jax.jit``: they are not arguments of the trace (a default function or string is just used). The
static ones (``static_argnums``/``static_argnames``, checked when the decorator runs) are part of
the trace's key; the others are traced.

>>> binding = CallBinding(lambda x, *, scale=2.0, mode="sum": x, static_argnames="mode")
>>> call = binding.bind((1.0,), {"mode": "max"})
>>> call.dynamic, call.static
((1.0,), ((('', 'mode'), 'max'),))
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    StaticArgnumsError,
    UnhashableStaticArgumentError,
    function_name,
)

__all__ = ["CallArguments", "CallBinding"]

# How an argument is known: ("", name) for a named parameter, ("*", i) for the i-th element of
# `*args`, ("**", key) for an entry of `**kwargs`, ("call", name) for a call-site keyword.
ArgumentKey = tuple[str, Any]
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True)
class CallArguments:
    """The arguments one call gives, bound to the function's parameters in signature order.

    Parameters the caller leaves out are absent: Python fills in their defaults when the function
    is called, as ``jax.jit`` does, so they are neither traced nor part of the signature.
    """

    keys: tuple[ArgumentKey, ...]
    values: tuple[Any, ...]
    names: tuple[str, ...]  # for messages: "'x'", "'args'[1]", "'opts'['mode']"
    is_static: tuple[bool, ...]
    # For each argument, its position among the function's non-static arguments (the entry of a
    # per-argument abstracted_axes that applies to it).
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
        """The static arguments as a hashable part of a trace's key."""
        return tuple(zip(self._pick(self.keys, True), self._pick(self.values, True)))


class CallBinding:
    """How calls of ``fn`` bind to its parameters, and which arguments are static."""

    def __init__(
        self,
        fn: Callable,
        static_argnums: Sequence[int] | int | None = None,
        static_argnames: Sequence[str] | str | None = None,
    ):
        self.fn_name = function_name(fn)
        self.call_keywords = _call_site_keywords(fn)
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
            nums = _checked_static_argnums(static_argnums, self.fn_name)
            if self.signature is not None:
                self._check_static_argnums_range(nums)
        except (ArgumentTypeError, StaticArgnumsError) as err:
            self.static_argnums_error, nums = err, set()
        names = _checked_static_argnames(static_argnames, self.fn_name)
        if self.signature is not None:
            self._check_static_argnames(names)
        # As jax.jit does: a positional parameter is static whether passed by position or name.
        self.static_names = frozenset(names) | {self.positional[i] for i in nums if i < len(self.positional)}
        # Positions beyond the named parameters are elements of *args.
        self.static_varargs = frozenset(i - len(self.positional) for i in nums if i >= len(self.positional))

    @property
    def has_static_arguments(self) -> bool:
        return bool(self.static_names or self.static_varargs)

    def _check_static_argnums_range(self, nums: set[int]) -> None:
        if self.var_positional is None:
            for i in sorted(nums):
                if i >= len(self.positional):
                    raise StaticArgnumsError(
                        f"{self.fn_name}: static_argnums names argnum {i}, which is beyond the valid "
                        f"range of [0, {len(self.positional)}): the function takes "
                        f"{len(self.positional)} positional argument(s)."
                    )

    def _check_static_argnames(self, names: set[str]) -> None:
        named = {n for n, p in self.parameters.items() if p.kind not in _VARIADIC}
        unknown = sorted(n for n in names if n not in named)
        if unknown and self.var_keyword is None:
            raise ArgumentValueError(
                f"{self.fn_name}: the qjitted function has invalid argname "
                f"{{{', '.join(map(repr, unknown))}}} in static_argnames: not a parameter "
                f"(parameters: {', '.join(repr(n) for n in self.parameters if n in named) or 'none'})."
            )

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
            kwargs = {k: v for k, v in kwargs.items() if k not in at_call}
            call = self.bind(args, kwargs)
            keys = [("call", k) for k in at_call]
            values = [self.call_keywords[k](v) for k, v in at_call.items()]
            return self._arguments([*call.keys, *keys], [*call.values, *values])
        if self.signature is None:  # no signature to bind by: arguments as given
            keys = [("*", i) for i in range(len(args))] + [("**", k) for k in kwargs]
            return self._arguments(keys, [*args, *kwargs.values()])
        self._check_keywords(kwargs)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentTypeError(f"{self.fn_name}: {e}") from None
        self._fill_static_defaults(bound)
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

    def _fill_static_defaults(self, bound: inspect.BoundArguments) -> None:
        """The default of a static parameter left out is its value, so that ``f(x)`` and
        ``f(x, mode="ones")`` for ``mode="ones"`` share a trace. (Other defaults are left to
        Python: they are not traced.)"""
        for name in self.static_names:
            p = self.parameters.get(name)
            if p is not None and name not in bound.arguments and p.default is not p.empty:
                try:
                    hash(p.default)
                except TypeError:
                    continue
                bound.arguments[name] = p.default

    def _check_keywords(self, kwargs: dict) -> None:
        """A keyword that names no parameter is the error, as in Python (``inspect.Signature.bind``
        would first complain about a missing argument)."""
        if self.var_keyword is not None:
            return
        accepted = {n for n, p in self.parameters.items() if p.kind not in (*_VARIADIC, inspect.Parameter.POSITIONAL_ONLY)}
        for k in kwargs:
            if k not in accepted:
                raise ArgumentTypeError(f"{self.fn_name}() got an unexpected keyword argument {k!r}")

    def _arguments(self, keys: list[ArgumentKey], values: list[Any]) -> CallArguments:
        static = [self._is_static(key) for key in keys]
        self._check_static_varargs(keys)
        for key, value, is_static in zip(keys, values, static):
            if is_static:
                try:
                    hash(value)
                except TypeError:
                    raise UnhashableStaticArgumentError(
                        f"{self.fn_name}: static argument {self._name(key)} must be hashable, got "
                        f"{type(value).__name__}."
                    ) from None
        slots, nslots = self._slots(keys, static)
        names = tuple(self._name(k) for k in keys)
        return CallArguments(tuple(keys), tuple(values), names, tuple(static), slots, nslots)

    def _is_static(self, key: ArgumentKey) -> bool:
        tag, ident = key
        if tag == "call":
            return True
        return ident in self.static_varargs if tag == "*" else ident in self.static_names

    def _check_static_varargs(self, keys: list[ArgumentKey]) -> None:
        """``static_argnums`` beyond the named parameters must name a given element of ``*args``."""
        given = sum(1 for tag, _ in keys if tag == "*")
        for i in sorted(self.static_varargs):
            if i >= given:
                npos = len(self.positional) + given
                raise StaticArgnumsError(
                    f"{self.fn_name}: static_argnums names argnum {len(self.positional) + i}, which "
                    f"is beyond the valid range of [0, {npos}): the call passes {npos} positional "
                    "argument(s)."
                )

    def _slots(self, keys: list[ArgumentKey], static: list[bool]) -> tuple[tuple[int, ...], int]:
        """Each argument's position among the function's non-static arguments, counting the named
        parameters the call leaves out (so an abstracted_axes entry keeps its parameter)."""
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
        """``fn`` as a function of ``call``'s dynamic arguments (in order), its static arguments
        fixed: what is traced."""
        static = dict(call.static)

        def with_dynamic(*dynamic: Any) -> Any:
            values = dict(zip(call.dynamic_keys, dynamic))
            return self.call(fn, call.keys, [static[k] if k in static else values[k] for k in call.keys])

        return with_dynamic

    def call(self, fn: Callable, keys: Sequence[ArgumentKey], values: Sequence[Any]) -> Any:
        """Call ``fn`` with these arguments, bound as they were (keywords by name); parameters
        without a value get their defaults from Python."""
        at_call = {k: v for (tag, k), v in zip(keys, values) if tag == "call"}
        if self.signature is None:
            args = [v for (tag, _), v in zip(keys, values) if tag == "*"]
            return fn(*args, **{k: v for (tag, k), v in zip(keys, values) if tag == "**"}, **at_call)
        arguments: dict[str, Any] = {}
        for (tag, ident), value in zip(keys, values):
            if tag == "call":
                continue
            if tag == "*":
                arguments[self.var_positional] = (*arguments.get(self.var_positional, ()), value)
            elif tag == "**":
                arguments.setdefault(self.var_keyword, {})[ident] = value
            else:
                arguments[ident] = value
        bound = inspect.BoundArguments(self.signature, arguments)
        return fn(*bound.args, **bound.kwargs, **at_call)


def _call_site_keywords(fn: Any) -> dict[str, Callable[[Any], Hashable]]:
    """Keywords a call of ``fn`` takes beyond its parameters, each static and made hashable by its
    function: ``shots`` for a QNode whose function has none (PennyLane's call-site shots,
    ``circuit(x, shots=100)``, as a ``qml.measurements.Shots``)."""
    qml = sys.modules.get("pennylane")  # not imported: fn is no QNode
    if qml is None or not isinstance(fn, qml.QNode) or fn._qfunc_uses_shots_arg:
        return {}
    return {"shots": qml.measurements.Shots}


def _checked_static_argnums(static_argnums: Any, fn_name: str) -> set[int]:
    """``static_argnums`` as a set of non-negative ints (Catalyst refuses negative ones)."""
    if static_argnums is None:
        return set()
    nums = (static_argnums,) if isinstance(static_argnums, (int, np.integer)) else static_argnums
    try:
        nums = tuple(nums)
    except TypeError:
        nums = None
    if nums is None or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in nums):
        raise ArgumentTypeError(
            f"{fn_name}: The `static_argnums` argument to qjit must be an int or a sequence of ints, "
            f"got {static_argnums!r}."
        )
    for i in nums:
        if i < 0:
            raise StaticArgnumsError(
                f"{fn_name}: static_argnums names argnum {int(i)}, which is beyond the valid range "
                "(negative); give positions from 0."
            )
    return {int(i) for i in nums}


def _checked_static_argnames(static_argnames: Any, fn_name: str) -> set[str]:
    if static_argnames is None:
        return set()
    names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
    try:
        names = tuple(names)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        raise ArgumentTypeError(
            f"{fn_name}: static_argnames must be a str or a sequence of str, got {static_argnames!r}."
        )
    return set(names)
