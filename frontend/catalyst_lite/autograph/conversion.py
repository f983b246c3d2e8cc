"""The entry points of autograph: which functions are converted, and the converted calls.

:func:`run_autograph` converts a function; converted code calls every function through
:func:`converted_call`, which converts the callee too when it is user code (not of
:data:`.state.LIBRARY_PACKAGES` or the standard library; ``autograph_include`` adds library modules),
including functions given to ``grad``, ``for_loop``, ``qml.adjoint``... :data:`disable_autograph`
leaves a function or a ``with`` block unconverted; :func:`autograph_source` shows the result.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import sys
import types
import warnings
import weakref
from typing import Any, Callable

from malt.core import converter
from malt.operators import py_builtins
from malt.operators.variables import UndefinedReturnValue

from ..trace_context import current as current_context, pennylane_capture_enabled, scope as context_scope
from ..errors import AutoGraphError, AutoGraphWarning
from ..compiler.executable import is_compiled_function
from ..jax_extras import is_tracing
from . import builtins, conditionals, loops
from .state import Unassigned, is_library, load_or_unassigned
from .transformer import (
    ConversionFailed, ConvertedCode, cached_conversion, convert_code, converted_function, source_of,
)

_MARK = "__catalyst_lite_autograph__"  # on converted functions: "converted"; on disabled: "disabled"


class _DisableAutograph:
    """``disable_autograph``: as a decorator, the function runs unconverted (and so does every call
    it makes); as a context manager, calls made inside the block are not converted (the block's own
    ``if``/``for``/``while`` still are).

    >>> from catalyst_lite import disable_autograph
    >>> @disable_autograph
    ... def python_only(n):
    ...     return [i for i in range(n)]
    >>> python_only(3)
    [0, 1, 2]
    """

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def unconverted(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        setattr(unconverted, _MARK, "disabled")
        return unconverted

    # The open blocks are the trace context's ``autograph_disabled``, each holding its scope.
    def __enter__(self) -> "_DisableAutograph":
        block: list[Any] = []
        block.append(context_scope(autograph_disabled=(*current_context().autograph_disabled, block)))
        block[0].__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        current_context().autograph_disabled[-1][0].__exit__(*exc)

    def __repr__(self) -> str:
        return "catalyst_lite.disable_autograph"


disable_autograph = _DisableAutograph()


def _module_of(fn: Any) -> str:
    globals_ = getattr(fn, "__globals__", None)
    return (globals_ or {}).get("__name__") or getattr(fn, "__module__", None) or ""


def _convertible_function(fn: Any) -> bool:
    """A plain Python function of user code, not already converted or disabled."""
    return (
        isinstance(fn, types.FunctionType)
        and getattr(fn, _MARK, None) is None
        and not inspect.isgeneratorfunction(fn)
        and not inspect.iscoroutinefunction(fn)
        and not is_library(_module_of(fn))
    )


# converted functions by original function (the converted code is cached per code object)
_converted: "weakref.WeakKeyDictionary[Callable, Callable]" = weakref.WeakKeyDictionary()
_converted_qnodes: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_failures_warned: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


def _convert(fn: types.FunctionType, *, requested: bool = False) -> Callable:
    """``fn`` converted; a callee malt cannot convert runs as it is, with a warning."""
    converted = _converted.get(fn)
    if converted is None:
        try:
            code = convert_code(fn)
        except ConversionFailed as err:
            if requested:
                raise
            if fn.__code__ not in _failures_warned:
                _failures_warned.add(fn.__code__)
                warnings.warn(
                    f"catalyst_lite autograph: {err} It runs unconverted: Python control flow on traced "
                    "values inside it will fail.",
                    AutoGraphWarning,
                    stacklevel=3,
                )
            return fn
        converted = converted_function(fn, code, _namespace(code))
        if converted is not fn:  # (no reference back to fn: the cache must not keep it alive)
            setattr(converted, _MARK, "converted")
        _converted[fn] = converted
    return converted


def _converted_qnode(qnode: Any, *, requested: bool = False) -> Any:
    """A copy of a QNode whose quantum function is converted."""
    converted = _converted_qnodes.get(qnode)
    if converted is None:
        converted = copy.copy(qnode)
        if requested or _convertible_function(qnode.func):
            converted.func = _convert(qnode.func, requested=requested)
        _converted_qnodes[qnode] = converted
    return converted


def _is_qnode(f: Any) -> bool:
    qml = sys.modules.get("pennylane")
    return qml is not None and isinstance(f, qml.QNode)


def converted_call(
    f: Any, args: tuple, kwargs: dict | None, caller_fn_scope: Any = None, options: Any = None
) -> Any:
    """``f(*args, **kwargs)`` in converted code: user functions are converted first."""
    kwargs = kwargs or {}
    if isinstance(f, (types.BuiltinFunctionType, type)):
        if f in builtins.BUILTINS:
            return builtins.BUILTINS[f](*args, **kwargs)
        if f in _IN_CALLER_CONTEXT:  # super(), eval, locals(), globals() see the caller's frame
            return _IN_CALLER_CONTEXT[f](f, args, caller_fn_scope)
    if current_context().autograph_disabled:
        return f(*args, **kwargs)
    if isinstance(f, functools.partial):
        return converted_call(f.func, f.args + args, {**f.keywords, **kwargs}, caller_fn_scope)
    if _convertible_function(f) or _is_qnode(f):
        return _converted_argument(f)(*args, **kwargs)
    if inspect.ismethod(f) and _convertible_function(f.__func__):
        return _convert(f.__func__)(f.__self__, *args, **kwargs)
    if is_compiled_function(f) and is_tracing():  # inlined into the program being traced: converted too
        return converted_call(f.user_function, args, kwargs, caller_fn_scope)
    if not isinstance(f, type) and _convertible_function(getattr(type(f), "__call__", None)):
        return _convert(type(f).__call__)(f, *args, **kwargs)
    if _from_higher_order_package(f):
        # grad(f), qml.adjoint(f), for_loop(...)(body): the functions they are given run converted
        args = tuple(_converted_argument(a) for a in args)
        kwargs = {k: _converted_argument(v) for k, v in kwargs.items()}
    return f(*args, **kwargs)


_HIGHER_ORDER_PACKAGES = frozenset({"catalyst_lite", "pennylane"})
"""Libraries whose functions, given user functions, run them as part of the program (derivatives,
adjoints, controlled operations, loop bodies): those are converted."""


def _from_higher_order_package(fn: Any) -> bool:
    return _module_of(fn).partition(".")[0] in _HIGHER_ORDER_PACKAGES


def _with_converted_functions(obj: Any) -> Any:
    """An object of catalyst_lite or PennyLane (``vmap(f)``) with the user functions it holds as
    attributes converted (a copy); other objects as they are."""
    if isinstance(obj, types.FunctionType) or not _from_higher_order_package(type(obj)):
        return obj
    held = {k: v for k, v in getattr(obj, "__dict__", {}).items() if _convertible_function(v) or _is_qnode(v)}
    if not held:
        return obj
    clone = copy.copy(obj)
    for name, value in held.items():
        setattr(clone, name, _converted_argument(value))
    return clone


def _converted_argument(value: Any) -> Any:
    if _convertible_function(value):
        return _convert(value)
    return _converted_qnode(value) if _is_qnode(value) else value


_IN_CALLER_CONTEXT = {
    super: py_builtins.super_in_original_context,
    eval: py_builtins.eval_in_original_context,
    locals: lambda f, args, scope: py_builtins.locals_in_original_context(scope),
    globals: lambda f, args, scope: py_builtins.globals_in_original_context(scope),
}


_OPERATORS = {
    # statements and expressions (our overloads)
    **{n: getattr(conditionals, n) for n in ("if_stmt", "if_exp", "assert_stmt", "and_", "or_", "not_")},
    "with_function_scope": conditionals.with_function_scope,
    "for_stmt": loops.for_stmt,
    "while_stmt": loops.while_stmt,
    "except_handler": loops.except_handler,
    "raised": loops.raised,
    "with_context": loops.WithContext,
    "set_item": builtins.set_item,
    "contains": builtins.contains,
    "update_item": builtins.update_item,
    "converted_call": converted_call,
    # malt's bookkeeping, used as malt defines it
    "Undefined": Unassigned,
    "ldu": load_or_unassigned,
    "UndefinedReturnValue": UndefinedReturnValue,
    "ConversionOptions": converter.ConversionOptions,
    "Feature": converter.Feature,
    "STD": converter.STANDARD_OPTIONS,
}


def _artifact(fn: Any, extras: Any = None) -> Any:
    """Marks a function defined inside converted code: it is converted already."""
    try:
        setattr(fn, _MARK, "converted")
    except AttributeError:
        pass
    return fn


def _namespace(code: ConvertedCode) -> types.SimpleNamespace:
    """``ag__`` for one converted function: the operators, and its function scopes."""

    def function_scope(function_name: str, scope_name: str, options: Any) -> conditionals.FunctionScope:
        always_returns = code.always_returns.get(scope_name, True)
        return conditionals.FunctionScope(function_name, scope_name, options, always_returns)

    return types.SimpleNamespace(**_OPERATORS, FunctionScope=function_scope, autograph_artifact=_artifact)


def _target(fn: Any) -> Any:
    """The Python function behind what ``qjit``/``run_autograph`` were given."""
    if hasattr(fn, "original_function"):
        return _target(fn.original_function)
    if _is_qnode(fn):
        return _target(fn.func)
    return getattr(fn, "__func__", fn)


def run_autograph(fn: Callable, *modules: str) -> Callable:
    """``fn`` with its Python control flow converted (and that of the user functions it calls):
    ``if``/``for``/``while`` on traced values become ``cond``/``for_loop``/``while_loop`` when it
    runs inside ``qjit``, and behave as in Python on concrete values. ``modules`` names modules
    whose functions are converted although they are library code (``autograph_include``).

    >>> from catalyst_lite import qjit, run_autograph
    >>> def count_down(n):
    ...     steps = 0
    ...     while n > 0:
    ...         n = n - 2
    ...         steps += 1
    ...     return steps
    >>> int(qjit(run_autograph(count_down))(7))
    4
    """
    include = tuple(modules)
    if _is_qnode(fn):
        converted: Any = _converted_qnode(fn, requested=True)
    elif inspect.ismethod(fn):
        converted = functools.partial(_convert(fn.__func__, requested=True), fn.__self__)
    elif isinstance(fn, types.FunctionType) and not (
        hasattr(fn, "__wrapped__") and _from_higher_order_package(fn)
    ):
        converted = _convert(fn, requested=True)
    elif callable(fn):
        # A callable object (its __call__ converted), or what vmap/for_loop/while_loop/cond
        # made: run as converted code calls it, the user functions it holds converted.
        held = _with_converted_functions(fn)

        def converted(*args: Any, **kwargs: Any) -> Any:
            return converted_call(held, args, kwargs)
    else:
        raise AutoGraphError(
            f"Unsupported object for transformation: {type(fn)}. autograph converts Python "
            f"functions and callables, not {fn!r}."
        )

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if pennylane_capture_enabled():
            # Traced through PennyLane's program capture (qjit(capture=True)), which records
            # PennyLane's control-flow primitives: PennyLane's own autograph converts to those.
            return _pennylane_autograph(fn)(*args, **kwargs)
        with context_scope(autograph_include=include):
            return converted(*args, **kwargs)

    setattr(run, _MARK, "converted")
    run.ag_unconverted = fn  # (Catalyst's name for the function before conversion)
    return run


_pennylane_converted: "weakref.WeakKeyDictionary[Any, Callable]" = weakref.WeakKeyDictionary()


def _pennylane_autograph(fn: Callable) -> Callable:
    """``fn`` converted by PennyLane's autograph (for program capture), cached."""
    converted = _pennylane_converted.get(fn)
    if converted is None:
        pennylane_autograph = importlib.import_module("pennylane.capture.autograph")
        converted = _pennylane_converted[fn] = pennylane_autograph.run_autograph(fn)
    return converted


def autograph_source(fn: Callable) -> str:
    """The source code ``fn`` was converted to (``fn``: a function, a QNode or a ``qjit``
    function, converted by ``qjit(autograph=True)`` or called from converted code).

    Raises :class:`~catalyst_lite.errors.AutoGraphError` if ``fn`` was never converted.

    >>> from catalyst_lite import qjit, autograph_source
    >>> @qjit(autograph=True)
    ... def triangle(n: int):
    ...     total = 0
    ...     for i in range(n):
    ...         total += i
    ...     return total
    >>> int(triangle(4))
    6
    >>> "ag__.for_stmt" in autograph_source(triangle)
    True
    """
    target = _target(fn)
    code = getattr(target, "__code__", None)
    converted = cached_conversion(code) if code is not None else None
    if converted is None:
        raise AutoGraphError(
            f"{getattr(target, '__qualname__', target)!r}: function was not converted by AutoGraph; "
            "compile it with qjit(autograph=True), or call it from a function that is."
        )
    if converted.factory is None:  # nothing to convert
        return inspect.getsource(target)
    return source_of(converted)
