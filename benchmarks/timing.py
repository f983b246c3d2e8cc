"""Timing helpers: medians of wall-clock samples of a thunk whose result is waited for."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax

__all__ = ["Budget", "time_steady", "time_cold"]


@dataclass(frozen=True)
class Budget:
    """How long to measure: samples per case, and the minimum duration of one steady sample."""

    cold_repeats: int
    steady_repeats: int
    min_sample_seconds: float
    max_case_seconds: float


def _run_once(thunk: Callable[[], Any]) -> float:
    start = time.perf_counter()
    jax.block_until_ready(thunk())
    return time.perf_counter() - start


def time_steady(thunk: Callable[[], Any], budget: Budget) -> float:
    """Median seconds per call of an already-compiled ``thunk``.

    Fast calls are batched so that one sample lasts at least ``budget.min_sample_seconds``
    (timer resolution and loop overhead then do not matter); each call is waited for, as a
    user reading the result would.
    """
    _run_once(thunk)  # warm-up: trace, compile, fill caches
    per_call = _run_once(thunk)
    batch = max(1, int(budget.min_sample_seconds / max(per_call, 1e-7)))
    # A slow call (a second or more) gets fewer samples, at least three.
    repeats = max(3, min(budget.steady_repeats, int(budget.max_case_seconds / (batch * per_call))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            jax.block_until_ready(thunk())
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def time_cold(thunk: Callable[[], Any], budget: Budget) -> float:
    """Median seconds of ``thunk``, which builds everything afresh each time (no warm-up)."""
    return statistics.median(_run_once(thunk) for _ in range(budget.cold_repeats))
