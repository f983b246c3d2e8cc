"""``qjit(capture=...)``: whether a program is traced through PennyLane's program capture.

The option takes Catalyst's values:

- ``"global"`` (the default): as ``qml.capture.enabled()`` says when the program is traced;
- ``True``: through PennyLane's program capture, whatever the global switch says;
- ``False``: with catalyst_lite's own frontend, whatever the global switch says.

While a program is traced PennyLane's (process-wide) switch is held at what the trace needs and
restored afterwards, as Catalyst does: off while catalyst_lite traces, on only while PennyLane
captures the user's function (:func:`capture_switched`). PennyLane is imported only by programs
that use it, so that ``import catalyst_lite`` stays fast.

>>> check_capture_option("global", "f")
>>> uses_capture(False), uses_capture("global")
(False, False)
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any, Iterator

import numpy as np

from ..errors import ArgumentValueError, CaptureUnavailableError, PlxprCaptureCFCompatibilityError

__all__ = [
    "CAPTURE_VALUES",
    "check_capture_option",
    "pennylane_capture_enabled",
    "uses_capture",
    "capture_switched",
    "refuse_under_capture",
]

CAPTURE_VALUES = ("global", True, False)
"""The values ``qjit(capture=...)`` accepts (Catalyst's)."""


def check_capture_option(value: Any, fn_name: str) -> None:
    """Raise :class:`~catalyst_lite.errors.ArgumentValueError` unless ``value`` is one of
    :data:`CAPTURE_VALUES` (or equal to one, as Catalyst checks: ``1`` is ``True``)."""
    if not any(isinstance(value, (str, bool, int, np.bool_)) and value == v for v in CAPTURE_VALUES):
        raise ArgumentValueError(
            f"{fn_name}: invalid value for capture: {value!r}. Valid values are 'global', True "
            "and False."
        )


def pennylane_capture_enabled() -> bool:
    """``qml.capture.enabled()``; False without importing PennyLane when nothing has imported it
    (its capture cannot be on then)."""
    qml = sys.modules.get("pennylane")
    return qml is not None and qml.capture.enabled()


def uses_capture(option: Any) -> bool:
    """Whether a program compiled with ``capture=option`` is traced through program capture now."""
    return pennylane_capture_enabled() if option == "global" else bool(option)


@contextlib.contextmanager
def capture_switched(enabled: bool, fn_name: str) -> Iterator[None]:
    """PennyLane's program capture held on (``enabled=True``) or off within the block; the switch
    is restored afterwards. Switching it on where PennyLane refuses (it supports only the JAX
    version it pins) raises :class:`~catalyst_lite.errors.CaptureUnavailableError`."""
    was_enabled = pennylane_capture_enabled()
    if enabled != was_enabled:
        _switch(enabled, fn_name)
    try:
        yield
    finally:
        if enabled != was_enabled:
            _switch(was_enabled, fn_name)


def _switch(enabled: bool, fn_name: str) -> None:
    qml = importlib.import_module("pennylane")  # imported by programs that use it only
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
    program capture is on: catalyst_lite's own control flow cannot appear in a captured program
    (as Catalyst's cannot); PennyLane's ``qml.for_loop``/``qml.while_loop``/``qml.cond`` can."""
    if pennylane_capture_enabled():
        raise PlxprCaptureCFCompatibilityError(control_flow_type)
