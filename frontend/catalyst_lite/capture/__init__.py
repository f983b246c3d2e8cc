"""Compiling programs captured by PennyLane (``qjit(capture=True)``).

- :mod:`.program`: tracing a function through PennyLane's program capture inside a catalyst_lite
  trace, and compiling the captured program (plxpr);
- :mod:`.interpreter`: the plxpr interpreter, and its rules for PennyLane's primitives in
  :mod:`.control_flow`, :mod:`.quantum` and :mod:`.differentiation`.

The ``capture`` option and PennyLane's capture switch are :mod:`catalyst_lite.trace_context`'s (they
import no PennyLane, and every layer reads them); this package (which imports PennyLane) is
imported when a program is first traced through capture.
"""

from ..trace_context import (
    CAPTURE_VALUES,
    capture_switched,
    check_capture_option,
    pennylane_capture_enabled,
    refuse_under_capture,
    uses_capture,
)

__all__ = [
    "CAPTURE_VALUES",
    "capture_switched",
    "check_capture_option",
    "pennylane_capture_enabled",
    "refuse_under_capture",
    "uses_capture",
]
