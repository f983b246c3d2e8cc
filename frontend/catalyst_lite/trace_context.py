"""The trace context: what the calling thread's trace (or call) is doing, as one frozen
:class:`TraceContext` in a ``ContextVar``, read with :func:`current` and changed for a block by
:func:`scope` (threads start from the empty record). Also PennyLane's process-wide capture switch
(:func:`pennylane_capture_enabled`, :func:`capture_switched`).

>>> from catalyst_lite.trace_context import current, scope
>>> current().reverse_mode
False
>>> with scope(reverse_mode=True):
...     current().reverse_mode
True
>>> current().reverse_mode
False
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from .errors import ArgumentValueError, CaptureUnavailableError, PlxprCaptureCFCompatibilityError

__all__ = ["TraceContext", "current", "scope", "thread_collector", "CAPTURE_VALUES", "check_capture_option",
           "pennylane_capture_enabled", "uses_capture", "capture_switched", "refuse_under_capture"]


@dataclass(frozen=True)
class TraceContext:
    """What the calling thread's trace is doing (the defaults: nothing)."""

    # jax_extras: patch sets in effect, foreign captures hosted, lowering target, size scopes.
    patch_sets: tuple[Any, ...] = ()
    hosted_captures: int = 0
    jax_nested_traces: int = 0  # functions JAX traces itself (patches.jax_nested_trace_depth)
    lowering_target: Any = None
    size_scopes: tuple[Any, ...] = ()
    static_index: bool = False  # in JAX's index_to_gather: a size compared with 0 is an index's bound
    qjit_options: Mapping[str, Any] | None = None
    # control_flow: ambient carries (outermost first), the handler of traced control flow.
    ambient_carries: tuple[Any, ...] = ()
    control_flow_handler: Any = None
    # autograph: library modules converted, open disable_autograph blocks, converted functions.
    autograph_include: tuple[str, ...] = ()
    autograph_disabled: tuple[Any, ...] = ()
    function_scopes: tuple[Any, ...] = ()
    traced_branches: tuple[Any, ...] = ()  # the traced `if`s whose branches are being traced
    # quantum: QNodes compiled, circuits being compiled, enclosing grad/jacobian methods.
    traced_circuits: Any = None
    circuits: tuple[Any, ...] = ()
    diff_methods: tuple[str, ...] = ()
    # transforms: tracing one device's rows of a batch split over devices (vmap's shard_map).
    sharded_batch: bool = False
    # compiler: the host runner, reverse-mode specialization, the recorder of host steps' replays.
    host_driving: Any = None
    reverse_mode: bool = False
    replays: Any = None
    # The exceptions host callbacks raised during the thread's call (see thread_collector).
    callback_errors: list[BaseException] | None = None


_EMPTY = TraceContext()
_CONTEXT: contextvars.ContextVar[TraceContext] = contextvars.ContextVar("catalyst_lite_trace", default=_EMPTY)


def current() -> TraceContext:
    return _CONTEXT.get()


_FIELDS = frozenset(f.name for f in dataclasses.fields(TraceContext))


class scope:
    """The trace context with ``changes`` within a ``with`` block (``__enter__`` returns it). A
    class, not a generator: the call path enters one per call."""

    __slots__ = ("_changes", "_previous")

    def __init__(self, **changes: Any) -> None:
        if not _FIELDS.issuperset(changes):
            raise TypeError(f"no trace context field {sorted(set(changes) - _FIELDS)}")
        self._changes = changes

    def __enter__(self) -> TraceContext:
        self._previous = previous = _CONTEXT.get()
        new = object.__new__(TraceContext)  # dataclasses.replace, without re-checking each field
        new.__dict__.update(previous.__dict__, **self._changes)
        _CONTEXT.set(new)
        return new

    def __exit__(self, *exc: Any) -> None:
        _CONTEXT.set(self._previous)


def thread_collector(field: str) -> Any:
    """The calling thread's own list in ``field``, made on first use: not a :class:`scope`, as it
    must outlive the block that asked for it. Scopes copy it."""
    collector = getattr(_CONTEXT.get(), field)
    if collector is None:
        collector = []
        scope(**{field: collector}).__enter__()  # never exited: the thread keeps it
    return collector


CAPTURE_VALUES = ("global", True, False)  # what qjit(capture=...) accepts (Catalyst's)


def check_capture_option(value: Any, fn_name: str) -> None:
    """Raise :class:`~catalyst_lite.errors.ArgumentValueError` unless ``value`` equals one of
    :data:`CAPTURE_VALUES` (as Catalyst checks: ``1`` is ``True``)."""
    if not any(isinstance(value, (str, bool, int, np.bool_)) and value == v for v in CAPTURE_VALUES):
        raise ArgumentValueError(
            f"{fn_name}: invalid value for capture: {value!r}. Valid values are 'global', True "
            "and False."
        )


def pennylane_capture_enabled() -> bool:
    """``qml.capture.enabled()``, without importing PennyLane."""
    qml = sys.modules.get("pennylane")
    return qml is not None and qml.capture.enabled()


def uses_capture(option: Any) -> bool:
    """Whether a program compiled with ``capture=option`` is traced through program capture now."""
    return pennylane_capture_enabled() if option == "global" else bool(option)


@contextlib.contextmanager
def capture_switched(enabled: bool, fn_name: str) -> Iterator[None]:
    """PennyLane's program capture held on or off within the block (where PennyLane refuses:
    :class:`~catalyst_lite.errors.CaptureUnavailableError`)."""
    was_enabled = pennylane_capture_enabled()
    if enabled != was_enabled:
        _switch(enabled, fn_name)
    try:
        yield
    finally:
        if enabled != was_enabled:
            _switch(was_enabled, fn_name)


def _switch(enabled: bool, fn_name: str) -> None:
    qml = importlib.import_module("pennylane")
    if not enabled:
        qml.capture.disable()
        return
    try:
        qml.capture.enable()
    except ImportError as e:
        raise CaptureUnavailableError(
            f"{fn_name}: qjit(capture=True) traces the program through PennyLane's program "
            f"capture, which PennyLane {qml.__version__} refuses to switch on here: {e} "
            "Either install the JAX version it asks for, or compile with capture=False (the "
            "default 'global' also does while qml.capture is disabled): catalyst_lite's own "
            "frontend compiles the same qml.for_loop/qml.while_loop/qml.cond and QNode programs."
        ) from e


def refuse_under_capture(control_flow_type: str) -> None:
    """Raise :class:`~catalyst_lite.errors.PlxprCaptureCFCompatibilityError` while PennyLane's
    program capture is on (as Catalyst does for its own control flow)."""
    if pennylane_capture_enabled():
        raise PlxprCaptureCFCompatibilityError(control_flow_type)
