"""Quantum circuits compiled into the same XLA program as the classical code around them.

QNode interception and mid-circuit ``measure`` (:mod:`.qnode`); queuing and ``qml.adjoint``/
``qml.ctrl`` regions (:mod:`.regions`); Catalyst's ``adjoint``, ``ctrl`` and ``mitigate_with_zne``
(:mod:`.operators`); gates and wires (:mod:`.gates`, :mod:`.transforms`); the state-vector
simulation (:mod:`.fusion`, :mod:`.statevector`, :mod:`.sharded`);
measurements and derivatives (:mod:`.measurements`, :mod:`.gradients`, :mod:`.adjoint`); shots and
mid-circuit measurements (:mod:`.mcm`, :mod:`.prng`).
"""

from .qnode import measure
from .operators import adjoint, ctrl, mitigate_with_zne

__all__ = ["measure", "adjoint", "ctrl", "mitigate_with_zne"]
