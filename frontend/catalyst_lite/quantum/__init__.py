"""Quantum circuits compiled into the same XLA program as the classical code around them.

- :mod:`.qnode`: QNode interception while tracing, ambient state and key, mid-circuit ``measure``;
  :mod:`.recorder`, :mod:`.regions`: where operations queue, ``qml.adjoint``/``qml.ctrl`` regions;
  :mod:`.operators`: Catalyst's ``adjoint``/``ctrl``.
- :mod:`.gates`, :mod:`.transforms`, :mod:`.wires`: which operations compile and the records they
  become, the QNode's own transforms, a device's wires as state-vector indices.
- :mod:`.application`, :mod:`.fusion`, :mod:`.table`, :mod:`.statevector`, :mod:`.monomials`:
  applying gate records to the state vector.
- :mod:`.measurements`, :mod:`.sampling`: terminal measurements; :mod:`.gradients`,
  :mod:`.adjoint`: ``diff_method`` and the adjoint method; :mod:`.shots`, :mod:`.mcm`,
  :mod:`.repeated`: shots, mid-circuit measurements, one execution per shot or branch;
  :mod:`.prng`: the PRNG; :mod:`.sharded`: a state vector split over devices;
  :mod:`.mitigation`: ``mitigate_with_zne``.
"""

from .qnode import measure
from .operators import adjoint, ctrl
from .mitigation import mitigate_with_zne

__all__ = ["measure", "adjoint", "ctrl", "mitigate_with_zne"]
