"""A compiled QNode's shots (:class:`ShotPlan`: an integer, a shot vector with one result per
entry, or a traced integer) and mid-circuit measurement method (:class:`McmConfig`), resolved as
PennyLane and Catalyst resolve them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ..errors import ShotsError
from ..jax_extras import Tracer
from .transforms import qnode_pipeline

__all__ = ["ShotPlan", "McmConfig"]


@dataclass(frozen=True)
class ShotPlan:
    """How many samples a QNode draws: ``total`` (``None``: exact results), and ``copies``, the
    ``(shots, copies)`` entries of a shot vector (``()`` unless it is one)."""

    total: Any = None
    copies: tuple = ()

    @staticmethod
    def of(qnode: Any, kwargs: dict) -> "ShotPlan":
        """The shots of a call of ``qnode`` (``kwargs`` loses a call-site ``shots=``)."""
        import pennylane as qml

        shots = qnode._get_shots(kwargs)  # PennyLane warns of a call-site keyword, and honours it
        shots = shots if isinstance(shots, qml.measurements.Shots) else qml.measurements.Shots(shots)
        if shots.total_shots is None:
            return ShotPlan()
        copies = tuple((s.shots, s.copies) for s in shots.shot_vector)
        return ShotPlan(shots.total_shots, copies if shots.has_partitioned_shots else ())

    @property
    def finite(self) -> bool:
        return self.total is not None

    @property
    def traced(self) -> bool:
        return isinstance(self.total, Tracer)

    @property
    def partitioned(self) -> bool:
        return bool(self.copies)

    def slices(self) -> list[tuple[Any, Any]]:
        """``(start, stop)`` of each result's samples among the ``total`` drawn."""
        sizes = [shots for shots, copies in self.copies for _ in range(copies)] or [self.total]
        stops = list(itertools.accumulate(sizes))
        return list(zip([0] + stops[:-1], stops))


MCM_METHODS = ("one-shot", "single-branch-statistics", "deferred", "tree-traversal", "device")


@dataclass(frozen=True)
class McmConfig:
    """The mid-circuit measurement ``method`` of a QNode call: ``"one-shot"`` (the default with
    shots), ``"single-branch-statistics"`` (without), or ``"deferred"`` (every branch; also for
    ``"tree-traversal"`` and ``"device"``). ``fill_shots``: post-selected shots are all kept;
    otherwise (``"hw-like"``) a shot missing its ``postselect`` value is discarded."""

    method: str
    fill_shots: bool = False
    explicit: bool = False  # the user chose the method

    @staticmethod
    def of(qnode: Any, shots: ShotPlan) -> "McmConfig":
        options = getattr(qnode, "execute_kwargs", {})
        method, mode = options.get("mcm_method"), options.get("postselect_mode")
        if method is not None and method not in MCM_METHODS:
            raise ShotsError(f"mcm_method={method!r} is not one of {', '.join(map(repr, MCM_METHODS))}.")
        if method == "one-shot" and not shots.finite:
            raise ShotsError(
                "Cannot use the 'one-shot' method for mid-circuit measurements with analytic mode: "
                "mcm_method='one-shot' is not supported in analytic shot mode; set finite shots."
            )
        if method == "single-branch-statistics" and mode == "hw-like":
            raise ShotsError(
                "Cannot use postselect_mode='hw-like' with Catalyst when mcm_method='single-branch-statistics': "
                "'hw-like' post-selection requires mcm_method='one-shot'."
            )
        # @qml.transforms.defer_measurements: compiled, the measurements never reach the transform
        pipeline = qnode_pipeline(qnode) or ()
        if method is None and any(getattr(pipeline[i].tape_transform, "__name__", "") == "defer_measurements"
                                  for i in range(len(pipeline))):
            method = "deferred"
        explicit = method is not None
        if method is None:
            method = "one-shot" if shots.finite else "single-branch-statistics"
        elif method in ("tree-traversal", "device"):
            method = "deferred"
        return McmConfig(method, fill_shots=method == "deferred" or mode == "fill-shots", explicit=explicit)
