"""Quantum circuits compiled into the same XLA program as the classical code around them.

- :mod:`.qnode`: QNode interception while tracing, ambient state and key, mid-circuit ``measure``.
- :mod:`.recorder`, :mod:`.regions`: where operations queue; ``qml.adjoint``/``qml.ctrl`` regions.
- :mod:`.operators`: ``catalyst_lite.adjoint``/``ctrl`` (Catalyst's), returning operators.
- :mod:`.gates`, :mod:`.transforms`: which operations compile, the records they become, the
  QNode's own transforms.
- :mod:`.wires`: a device's wires as indices of the state vector (labels, a traced number, or
  allocated as the circuit uses them).
- :mod:`.application`, :mod:`.fusion`, :mod:`.table`, :mod:`.statevector`, :mod:`.monomials`:
  applying gate records to the state vector (planned blocks, loops, long runs of gates as a
  table, kernels).
- :mod:`.measurements`, :mod:`.sampling`: terminal measurements, exact or from shots.
- :mod:`.gradients`: a QNode's ``diff_method`` when it is differentiated.
- :mod:`.adjoint`: derivatives of expectation values by the adjoint method (two compiled loops).
- :mod:`.shots`, :mod:`.mcm`, :mod:`.repeated`: shots and ``mcm_method``; mid-circuit measurement
  outcomes; one execution per shot or per branch.
- :mod:`.prng`: the seedable PRNG.
- :mod:`.sharded`: ``qjit(state_sharding=...)``: the state vector split over devices.
- :mod:`.mitigation`: Catalyst's ``mitigate_with_zne`` (zero-noise extrapolation).
"""

from .qnode import execute_qnode, measure, quantum_tracing
from .operators import adjoint, ctrl
from .mitigation import mitigate_with_zne

__all__ = ["execute_qnode", "measure", "quantum_tracing", "adjoint", "ctrl", "mitigate_with_zne"]
