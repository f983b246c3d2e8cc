"""What a call does, reported: to Python's ``logging`` (logger ``catalyst_lite``, level ``DEBUG``)
and, with Catalyst's ``qjit(verbose=True)``, to ``logfile`` (``sys.stderr`` by default).

>>> import io
>>> out = io.StringIO()
>>> report = Reporter("f", verbose=True, logfile=out)
>>> report("traced in %.1f s", 0.5)
>>> out.getvalue()
'[catalyst_lite] f: traced in 0.5 s\\n'
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

__all__ = ["LOGGER", "Reporter", "QUIET"]

LOGGER = logging.getLogger("catalyst_lite")


class Reporter:
    """Reports the events of one compiled function (``name``); cheap when nobody listens."""

    def __init__(self, name: str, verbose: bool = False, logfile: TextIO | None = None):
        self.name = name
        self.verbose = bool(verbose)
        self.logfile = logfile

    @property
    def enabled(self) -> bool:
        """Whether a report would go anywhere."""
        return self.verbose or LOGGER.isEnabledFor(logging.DEBUG)

    def __call__(self, message: str, *args: Any) -> None:
        if not self.enabled:
            return
        text = f"{self.name}: {message % args if args else message}"
        LOGGER.debug(text)
        if self.verbose:
            print(f"[catalyst_lite] {text}", file=self.logfile or sys.stderr, flush=True)


QUIET = Reporter("")  # to the logger only (for runners made outside a qjit function)
