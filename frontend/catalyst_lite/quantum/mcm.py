"""How a mid-circuit measurement picks its outcome, one policy per way of running a circuit:
:class:`SingleBranch` draws it (``postselect`` forces it); :class:`OneShot` also makes a shot
invalid when a drawn outcome misses ``postselect`` (``"hw-like"``); :class:`Branches` follows one
branch of all, measurement ``j`` taking bit ``j`` of the branch index, weighted by its
probability. A policy counts the measurements traced (``sites``); the values it updates are
ambient carries, so that measurements inside loops and branches update them too.

A measurement returns PennyLane's ``MeasurementValue`` (:func:`measured_value`) whose outcome is
this execution's traced ``0``/``1``: arithmetic and statistics of outcomes are PennyLane's; as a
JAX value it is Catalyst's traced ``bool``.

A compiled QNode's shots are a :class:`ShotPlan` (an integer, a shot vector with one result per
entry, or a traced integer) and its mid-circuit measurement method a :class:`McmConfig`, resolved
as PennyLane and Catalyst resolve them.

>>> policy = SingleBranch()
>>> bool(policy.outcome(0.25, postselect=1, draw=lambda: None, in_loop=False)), policy.sites
(True, 1)
"""

from __future__ import annotations

import functools
import itertools
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import jax.numpy as jnp

from ..control_flow.common import StandsForValue, traced_value
from ..errors import ShotsError
from ..jax_extras import Tracer
from . import prng
from .gates import ValueCarry
from .transforms import qnode_pipeline

__all__ = ["ValueCarry", "McmPolicy", "SingleBranch", "OneShot", "Branches", "measured_value", "with_values",
           "ShotPlan", "McmConfig"]


# What a measurement outcome answers as the traced array it stands for.
_ARRAY_ATTRIBUTES = frozenset({"astype", "dtype", "shape", "ndim", "size", "reshape", "ravel", "squeeze"})


@functools.cache
def _measured_value_class() -> type:
    from pennylane.ops import MeasurementValue

    class MeasuredValue(MeasurementValue, StandsForValue):
        """``outcomes``: each measurement's ``meas_uid`` to its traced ``int64`` outcome."""

        def __init__(self, measurements: list, processing_fn: Callable | None, outcomes: dict):
            super().__init__(measurements, processing_fn)
            self.outcomes = outcomes

        def _apply(self, fn: Callable) -> "MeasuredValue":
            processing = self.processing_fn
            return MeasuredValue(self.measurements, lambda *x: fn(processing(*x)), self.outcomes)

        def _merge(self, other: Any) -> "MeasuredValue":
            merged = super()._merge(other)
            outcomes = {**self.outcomes, **getattr(other, "outcomes", {})}
            return MeasuredValue(merged.measurements, merged.processing_fn, outcomes)

        def value(self) -> Any:
            """A bare outcome as Catalyst's ``bool``, an expression as PennyLane computes it."""
            if not self.has_processing:
                return self.outcomes[self.measurements[0].meas_uid] == 1
            return jnp.asarray(self.processing_fn(*(self.outcomes[m.meas_uid] for m in self.measurements)))

        __jax_array__ = value

        def __getattr__(self, name: str) -> Any:
            # Catalyst's outcome is a traced array: its array attributes work (`m.astype(int)`).
            if name in _ARRAY_ATTRIBUTES:
                return getattr(self.value(), name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    return MeasuredValue


def with_values(op: Any) -> Any:
    """``op`` with the traced values of the measurement values among its parameters."""
    data = [traced_value(p) for p in op.data]
    if all(d is p for d, p in zip(data, op.data)):
        return op
    import pennylane as qml

    return qml.ops.functions.bind_new_parameters(op, data)


def measured_value(wire: Any, reset: bool, postselect: int | None, outcome: Any) -> Any:
    """The ``MeasurementValue`` of a mid-circuit measurement of ``wire`` with traced ``outcome``."""
    import pennylane as qml

    try:
        hash(wire)
    except TypeError:  # a traced wire (a loop index) or an array: its label says so
        wire = "traced wire"
    with qml.QueuingManager.stop_recording():  # the state already holds the measurement
        mp = qml.ops.MidMeasure(wire, reset=reset, postselect=postselect, meas_uid=str(uuid.uuid4()))
    return _measured_value_class()([mp], None, {mp.meas_uid: jnp.asarray(outcome).astype(jnp.int64)})


class McmPolicy:
    """Picks the outcome of each mid-circuit measurement; ``carries``: its ambient values."""

    carries: tuple = ()
    # Whether a post-selected outcome of probability 0 leaves no state, so that results are NaN as
    # PennyLane's are (one branch followed; with shots to discard, an invalid shot is dropped).
    impossible_postselection_is_nan = False

    def __init__(self):
        self.sites = 0
        self.sites_in_loops = 0

    def outcome(self, p1: Any, postselect: int | None, draw: Callable[[], Any], in_loop: bool) -> Any:
        """The outcome (a traced ``bool``) of a measurement whose probability of 1 is ``p1``;
        ``draw()`` gives a fresh PRNG key."""
        site = self.sites
        self.sites += 1
        self.sites_in_loops += bool(in_loop)
        return self._outcome(site, p1, postselect, draw)


def _drawn(p1: Any, draw: Callable[[], Any]) -> Any:
    return prng.uniform(draw(), ()) < p1


class SingleBranch(McmPolicy):
    """Drawn outcomes; ``postselect`` forces the outcome."""

    impossible_postselection_is_nan = True

    def _outcome(self, site: int, p1: Any, postselect: int | None, draw: Callable[[], Any]) -> Any:
        return _drawn(p1, draw) if postselect is None else jnp.asarray(bool(postselect))


class OneShot(SingleBranch):
    """As :class:`SingleBranch`; ``valid``: no post-selection failed (always, with ``fill_shots``)."""

    impossible_postselection_is_nan = False

    def __init__(self, fill_shots: bool):
        super().__init__()
        self.fill_shots = fill_shots
        self.valid = ValueCarry(jnp.asarray(True))
        self.carries = (self.valid,)

    def _outcome(self, site: int, p1: Any, postselect: int | None, draw: Callable[[], Any]) -> Any:
        if postselect is not None and not self.fill_shots:  # hardware-like: the drawn outcome must match
            self.valid.set(self.valid.get() & (_drawn(p1, draw) == bool(postselect)))
        return super()._outcome(site, p1, postselect, draw)


class Branches(McmPolicy):
    """Measurement ``j`` takes bit ``j`` of ``branch``; ``weight``: the product of the outcomes'
    probabilities (zero where post-selection excludes one); ``seen``: bit ``j`` set once measurement
    ``j`` ran (a branch that skips a measurement counts once)."""

    def __init__(self, branch: Any):
        super().__init__()
        self.branch = branch
        self.weight = ValueCarry(jnp.asarray(1.0))
        self.seen = ValueCarry(jnp.zeros((), jnp.int64))
        self.carries = (self.weight, self.seen)

    def _outcome(self, site: int, p1: Any, postselect: int | None, draw: Callable[[], Any]) -> Any:
        bit = ((self.branch >> site) & 1) == 1
        probability = jnp.where(bit, p1, 1.0 - p1)
        if postselect is not None:
            probability = jnp.where(bit == bool(postselect), probability, 0.0)
        self.weight.set(self.weight.get() * probability)
        self.seen.set(self.seen.get() | (1 << site))
        return bit

    def total_weight(self) -> Any:
        """The branch's weight; zero when its index sets the bit of a measurement it skipped."""
        unseen = self.branch & ~self.seen.get()
        return jnp.where(unseen == 0, self.weight.get(), 0.0)


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
