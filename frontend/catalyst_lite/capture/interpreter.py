"""The plxpr interpreter: a program captured by PennyLane, evaluated into a catalyst_lite trace.

:class:`PlxprCompiler` binds JAX's primitives as they are and replaces PennyLane's by ours:
operators are queued into the recorder of the QNode being compiled, control flow becomes our
control flow (:mod:`.control_flow`), QNodes, mid-circuit measurements and ``adjoint``/``ctrl``
our quantum machinery (:mod:`.quantum`), derivatives our transforms (:mod:`.differentiation`). A
PennyLane primitive without a rule is an error naming it. PennyLane's leading "abstract shapes"
inputs of nested programs are recomputed from our bodies' arrays (:class:`SizeLocations`).
"""

from __future__ import annotations

from contextlib import contextmanager
from copy import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import jax.numpy as jnp
import pennylane as qml
from pennylane.capture import PlxprInterpreter
from pennylane.capture.primitives import qnode_prim, quantum_subroutine_prim, transform_prim

from ..errors import QuantumOperationError, UnsupportedOperationError
from ..jax_extras import DropVar, Literal, Var
from ..trace_context import capture_switched

__all__ = ["PlxprCompiler", "SizeLocations"]


class _Rules(dict):
    """Primitive -> rule; a PennyLane primitive without a rule gets :func:`_unsupported` (its
    default, re-binding the primitive, would leave it in the catalyst_lite program)."""

    def get(self, primitive: Any, default: Any = None) -> Any:
        rule = super().get(primitive, default)
        if rule is None and getattr(primitive, "prim_type", "") not in ("", "operator", "measurement"):
            return _unsupported(primitive)
        return rule


def _unsupported(primitive: Any) -> Callable:
    def rule(self: PlxprCompiler, *invals: Any, **params: Any) -> Any:
        raise UnsupportedOperationError(
            f"PennyLane's {primitive.name!r} is not supported in programs compiled with "
            "qjit(capture=True); compile with capture=False (catalyst_lite's own frontend)."
        )

    return rule


class PlxprCompiler(PlxprInterpreter):
    """Evaluates plxpr into the current catalyst_lite trace (see the module docstring)."""

    def interpret_operation(self, op: Any) -> Any:
        """An operator whose result the program does not use: a gate, queued where it stands."""
        return qml.apply(op)

    def interpret_operation_eqn(self, eqn: Any) -> Any:
        with _dynamic_wires_as_integers(self, eqn) as mapped:
            invals = [self.read(v) for v in eqn.invars]
            with qml.QueuingManager.stop_recording():
                op = mapped(eqn.primitive.impl(*invals, **eqn.params))
        return self.interpret_operation(op) if isinstance(eqn.outvars[0], DropVar) else op

    def read(self, var: Any) -> Any:
        value = super().read(var)
        substitutes = getattr(self, "_substitutes", None)
        return substitutes.get(id(value), value) if substitutes else value

    def __init__(self) -> None:
        super().__init__()
        # id(traced outcome) -> (the outcome, its MeasurementValue), for each mid-circuit
        # measurement evaluated (shared by the copies evaluating nested programs).
        self.outcomes: dict[int, tuple[Any, Any]] = {}

    def interpret_measurement_eqn(self, eqn: Any) -> Any:
        if eqn.primitive.name in ("probs_mcm", "counts_mcm"):
            return self._statistics_of_outcomes(eqn)
        if not eqn.invars:
            # A measurement of every wire (qml.probs(), qml.state()): PennyLane builds it with no
            # wires only while its capture is on.
            with capture_switched(True, eqn.primitive.name):
                return super().interpret_measurement_eqn(eqn)
        return self._interpret_measurement_eqn(eqn)

    def _interpret_measurement_eqn(self, eqn: Any) -> Any:
        with _dynamic_wires_as_integers(self, eqn) as mapped:
            return mapped(super().interpret_measurement_eqn(eqn))

    def interpret_measurement(self, measurement: Any) -> Any:
        return measurement  # returned to the QNode, which measures it (not queued)

    def _statistics_of_outcomes(self, eqn: Any) -> Any:
        """``qml.probs``/``qml.counts`` of mid-circuit measurement outcomes, measured as without
        capture. The captured program holds outcomes as integers: those the measurements returned
        are known as measurement values; of an expression (``m0 + m1``), the possible values are
        not known here."""
        outcomes = [self.read(v) for v in eqn.invars]
        known = [self.outcomes.get(id(outcome)) for outcome in outcomes]
        if any(k is None or k[0] is not outcome for k, outcome in zip(known, outcomes)):
            raise QuantumOperationError(
                f"{eqn.primitive.name}: qml.probs and qml.counts of expressions of mid-circuit "
                "measurement results are not supported with qjit(capture=True) by catalyst_lite; "
                "measure the outcomes themselves (qml.probs(op=[m0, m1])), or compile without "
                "capture=True."
            )
        params = dict(eqn.params)
        values = [value for _, value in known]
        op = values[0] if params.pop("single_mcm", True) else values
        # PennyLane's counts has no implementation under capture: the measurement is built as
        # its primitive would build it.
        kind = qml.measurements.CountsMP if eqn.primitive.name == "counts_mcm" else qml.measurements.ProbabilityMP
        with qml.QueuingManager.stop_recording():
            mp = kind(obs=op, **params)
        return [mp, None] if eqn.primitive.multiple_results else mp

    def subprogram(self, jaxpr: Any, consts: Sequence[Any]) -> Callable[..., list[Any]]:
        """A nested jaxpr as a function of its inputs, evaluated by a fresh copy of this
        interpreter (each evaluation has its own variables)."""

        def run(*args: Any) -> list[Any]:
            return copy(self).eval(jaxpr, consts, *args)

        return run


@contextmanager
def _dynamic_wires_as_integers(interpreter: PlxprCompiler, eqn: Any) -> Iterator[Callable[[Any], Any]]:
    """PennyLane builds a captured operator or measurement with integer wires; the wires of
    ``qml.allocate`` are ``DynamicWire`` labels here (see :mod:`.quantum`). They stand in as
    negative integers no program uses while it is built, and are put back by ``map_wires``."""
    dynamic = [v for v in map(interpreter.read, (x for x in eqn.invars if not isinstance(x, Literal)))
               if type(v).__name__ == "DynamicWire"]
    if not dynamic:
        yield lambda built: built
        return
    stand_ins = {id(w): -(2**62) - k for k, w in enumerate(dynamic)}
    back = {-(2**62) - k: w for k, w in enumerate(dynamic)}
    interpreter._substitutes = stand_ins
    try:
        yield lambda built: built.map_wires(back) if hasattr(built, "map_wires") else built
    finally:
        interpreter._substitutes = None


PlxprCompiler._primitive_registrations = _Rules(PlxprCompiler._primitive_registrations)


@PlxprCompiler.register_primitive(quantum_subroutine_prim)
def _subroutine(self: PlxprCompiler, *invals: Any, jaxpr: Any, **params: Any) -> list[Any]:
    """``qml.capture.subroutine``: its body, inlined."""
    return self.subprogram(jaxpr.jaxpr, jaxpr.consts)(*invals)


@PlxprCompiler.register_primitive(transform_prim)
def _transform(
    self: PlxprCompiler, *invals: Any, inner_jaxpr: Any, args_slice: tuple, consts_slice: tuple,
    targs_slice: tuple, tkwargs: Any, transform: Any,
) -> list[Any]:
    """A PennyLane transform of a QNode (``@qml.transforms.cancel_inverses`` on it) or of a
    quantum function called inside one."""
    run = self.subprogram(inner_jaxpr, invals[slice(*consts_slice)])
    args = invals[slice(*args_slice)]
    if any(eqn.primitive is qnode_prim for eqn in inner_jaxpr.eqns):
        return run(*args)  # the QNode's own transforms: compiled QNodes apply them
    return transform(run, *invals[slice(*targs_slice)], **dict(tkwargs))(*args)


# --- sizes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeLocations:
    """Which inputs of a nested plxpr are sizes of its array inputs.

    ``locations[j] = (k, axis)``: input ``j`` is the size of axis ``axis`` of input ``k``.

    >>> import numpy as np
    >>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
    >>> with dynamic_tracing():  # a jaxpr of x: f64[n], taking the size n first
    ...     in_type = make_input_type([np.ones(3)], [{0: "n"}])
    ...     jaxpr, _, _ = trace_to_jaxpr(lambda x: [x], in_type, "f")
    >>> sizes = SizeLocations.of(jaxpr.invars)
    >>> sizes.locations, sizes.leading()
    ({0: (1, 0)}, 1)
    >>> sizes.fill([None, np.ones(5)])[0]
    5
    """

    locations: dict[int, tuple[int, int]]

    @staticmethod
    def of(invars: Sequence[Any]) -> "SizeLocations":
        where: dict[Any, tuple[int, int]] = {}
        for k, v in enumerate(invars):
            for axis, d in enumerate(getattr(v.aval, "shape", ())):
                if isinstance(d, Var):
                    where.setdefault(d, (k, axis))
        return SizeLocations({j: where[v] for j, v in enumerate(invars) if v in where})

    def leading(self) -> int:
        """How many inputs, from the first, are sizes (PennyLane puts them first)."""
        n = 0
        while n in self.locations:
            n += 1
        return n

    def fill(self, values: Sequence[Any]) -> list[Any]:
        """``values`` with each size input replaced by its array's size."""
        values = list(values)
        for j, (k, axis) in self.locations.items():
            values[j] = jnp.shape(values[k])[axis]
        return values
