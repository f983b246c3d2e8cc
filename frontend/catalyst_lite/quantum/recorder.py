"""The queuing context of a compiled circuit: operators wait here until the state is next needed
(see :mod:`.qnode`). Observables that are not gates stay queued until the terminal measurements,
which may take them; measuring an operator that was applied as a gate is an error.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

from ..errors import QuantumOperationError
from ..jax_extras.patches import jax_nested_trace_depth

__all__ = ["recorder_class", "queue_class"]


@functools.cache
def queue_class():
    """The queuing context of a compiled circuit or region: it refuses an operator queued inside a
    function JAX traces itself (``jax.lax.cond``, ``fori_loop``, ``jax.jit``)."""
    import pennylane as qml

    class CircuitQueue(qml.queuing.AnnotatedQueue):
        def __init__(self):
            super().__init__()
            self.jax_depth = jax_nested_trace_depth()  # that of the circuit's own code

        def append(self, obj: Any, **kwargs: Any) -> None:
            if isinstance(obj, qml.operation.Operator) and jax_nested_trace_depth() > self.jax_depth:
                raise QuantumOperationError(
                    f"{obj.name} was applied inside a function that JAX traces itself within the "
                    "circuit (a jax.lax.cond branch, a jax.lax.fori_loop/while_loop/scan body, a "
                    "jax.jit function): its gates cannot follow that control flow (JAX traces both "
                    "branches of a cond, and a loop's body once). Use catalyst_lite's "
                    "cond/for_loop/while_loop (or qml.cond/qml.for_loop/qml.while_loop) for "
                    "quantum control flow."
                )
            super().append(obj, **kwargs)

    return CircuitQueue


@functools.cache
def recorder_class():
    import pennylane as qml

    observables = (qml.ops.Prod, qml.ops.Sum, qml.ops.SProd, qml.Hermitian, qml.Projector)  # not gates

    class CircuitRecorder(queue_class()):
        """``applied``: the operators applied as gates (by ``id``), which no measurement may take;
        ``deferred``: the observable-type operators a flush left queued."""

        def __init__(self):
            super().__init__()
            self.applied: dict[int, Any] = {}
            self.deferred: dict[int, Any] = {}

        def take_operations(self, final: bool = False) -> list:
            """The queued operators to apply now, removed from the queue (but observables before
            the last segment)."""
            ops = [o for o in self.queue if isinstance(o, qml.operation.Operator)]
            if not final:
                self.deferred.update((id(o), o) for o in ops if isinstance(o, observables))
                ops = [o for o in ops if not isinstance(o, observables)]
            for o in ops:
                if self.deferred.get(id(o)) is o:
                    raise QuantumOperationError(
                        f"{o} was built before a loop, branch or mid-circuit measurement and is "
                        "never measured, so it would be applied as a gate out of order: "
                        "catalyst_lite keeps observables (products, sums, Hamiltonians, Hermitian) "
                        "out of the gates applied before such a point. Queue its gates separately "
                        "or build it after the loop."
                    )
                self.remove(o)
                self.applied[id(o)] = o
            return ops

        def check_not_applied(self, mp: Any) -> None:
            """Raise if ``mp``'s observable, or an operator inside it, was applied as a gate."""
            for part in _operator_parts(getattr(mp, "obs", None)):
                if self.applied.get(id(part)) is part:
                    raise QuantumOperationError(
                        f"The observable {part} of {type(mp).__name__} was built before a loop, "
                        "branch or mid-circuit measurement, where catalyst_lite applied it as a "
                        "gate. Build the observable where it is measured, after the loop."
                    )

    return CircuitRecorder


def _operator_parts(op: Any) -> Iterator[Any]:
    """``op`` and, recursively, the operators it is built from (operands, bases)."""
    if op is None:
        return
    yield op
    for child in getattr(op, "operands", ()):
        yield from _operator_parts(child)
    if hasattr(op, "base"):
        yield from _operator_parts(op.base)
