"""Timing helpers: medians of wall-clock samples of thunks whose results are waited for.

The implementations of one case are timed *interleaved*: sample 1 of each, then sample 2 of
each, and so on. A machine whose speed drifts (other processes, frequency scaling, a background
compilation) then slows every implementation alike instead of whichever happened to run during
the slow period, and the ratio of the medians measures the implementations, not the drift.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax

__all__ = ["Budget", "time_steady", "time_cold", "time_reported"]

Thunk = Callable[[], Any]


@dataclass(frozen=True)
class Budget:
    """How long to measure: samples per case, and the minimum duration of one steady sample."""

    cold_repeats: int
    steady_repeats: int
    min_sample_seconds: float
    max_case_seconds: float


def _run_once(thunk: Thunk) -> float:
    start = time.perf_counter()
    jax.block_until_ready(thunk())
    return time.perf_counter() - start


def _batch_seconds(thunk: Thunk, batch: int) -> float:
    """Seconds per call of ``batch`` calls in a row, each waited for."""
    start = time.perf_counter()
    for _ in range(batch):
        jax.block_until_ready(thunk())
    return (time.perf_counter() - start) / batch


def _interleaved_medians(
    samplers: dict[str, Callable[[], float]], repeats: int, settle: Callable[[], None]
) -> dict[str, float | Exception]:
    """Median of ``repeats`` samples of each sampler, taken in rotation; ``settle`` runs (untimed)
    after each sample. A sampler that raises is dropped from the rotation, its exception kept."""
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    failed: dict[str, Exception] = {}
    for _ in range(repeats):
        for name, sample in samplers.items():
            if name in failed:
                continue
            try:
                samples[name].append(sample())
            except Exception as e:  # a front end that cannot run a program is a result too
                failed[name] = e
            settle()
    return {name: failed.get(name) or statistics.median(samples[name]) for name in samplers}


def _nothing() -> None:
    pass


def time_steady(
    thunks: dict[str, Thunk], budget: Budget, settle: Callable[[], None] = _nothing
) -> dict[str, float | Exception]:
    """Median seconds per call of each already-compiled thunk.

    Fast calls are batched so that one sample lasts at least ``budget.min_sample_seconds``
    (timer resolution and loop overhead then do not matter); each call is waited for, as a
    user reading the result would. A slow call (a second or more) gets fewer samples, at least
    three.
    """
    batches: dict[str, int] = {}
    repeats = budget.steady_repeats
    failed: dict[str, Exception] = {}
    for name, thunk in thunks.items():
        try:
            # Warm-up: trace, compile, fill caches; the second call compiles what a repeated
            # call runs (catalyst_lite's speculation of a program that needs the host).
            _run_once(thunk)
            _run_once(thunk)
            per_call = _run_once(thunk)
        except Exception as e:
            failed[name] = e
            continue
        batches[name] = max(1, int(budget.min_sample_seconds / max(per_call, 1e-7)))
        repeats = min(repeats, int(budget.max_case_seconds / (batches[name] * per_call)))
        settle()
    samplers = {
        name: (lambda thunk=thunk, batch=batches[name]: _batch_seconds(thunk, batch))
        for name, thunk in thunks.items() if name not in failed
    }
    return {**failed, **_interleaved_medians(samplers, max(3, repeats), settle)}


def time_cold(
    thunks: dict[str, Thunk], budget: Budget, settle: Callable[[], None] = _nothing
) -> dict[str, float | Exception]:
    """Median seconds of each thunk, which builds everything afresh each time (no warm-up)."""
    samplers = {name: (lambda thunk=thunk: _run_once(thunk)) for name, thunk in thunks.items()}
    return _interleaved_medians(samplers, budget.cold_repeats, settle)


def time_reported(
    samplers: dict[str, Callable[[], float]], budget: Budget, settle: Callable[[], None] = _nothing
) -> dict[str, float | Exception]:
    """Median of the seconds each sampler reports (a fresh process timing its own work), taken in
    rotation as the other cold samples are."""
    return _interleaved_medians(samplers, budget.cold_repeats, settle)
