"""Quantum circuits compiled into the same XLA program as the classical code around them.

- :mod:`.statevector`: the state vector and the gate kernel (array operations, traced wires).
- :mod:`.gates`: which PennyLane operations compile and the records they become.
- :mod:`.measurements`: terminal measurements (expval, var, probs, state, sample, counts).
- :mod:`.qnode`: QNode interception while tracing, ambient state and key, mid-circuit ``measure``.
"""

from .qnode import execute_qnode, measure, quantum_tracing

__all__ = ["execute_qnode", "measure", "quantum_tracing"]
