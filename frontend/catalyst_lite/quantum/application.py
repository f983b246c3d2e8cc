"""Applying a circuit's gate records to the state vector, each run of them in the cheapest way:
runs on known wires are planned by :mod:`.fusion` (long irregular ones as tables, :mod:`.table`);
runs with traced wires, and every gate when the number of wires is traced, go to the index kernel
:func:`.statevector.apply_matrix`, each run of gates of one shape as one counted loop over their
stacked matrices. ``state_carry`` (:class:`.qnode.QuantumState`) is threaded by the loops.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from ..jax_extras import Tracer
from .fusion import apply_known_wires, has_known_wires
from .gates import GateRecord, stacked_matrices
from .statevector import apply_matrix, apply_stacked
from .table import apply_as_tables

__all__ = ["apply_records"]

LOOP_MIN_GATES = 2
"""Runs of at least this many gates are applied by one counted loop (one compiled kernel)."""

MAX_LOOP_CONTROLS = (1, 2)
"""Control slots of the loop kernels: a gate takes the first that fits (unused slots hold wire -1)."""


def _loop_shape(r: GateRecord) -> tuple[int, int] | None:
    """``(targets, control slots)`` of the loop kernel that applies a record; ``None``: none."""
    slots = [c for c in MAX_LOOP_CONTROLS if len(r.controls) <= c]
    return (len(r.targets), slots[0]) if slots and len(r.targets) in (1, 2) else None


def _table(rows: list[list[Any]]) -> Any:
    """Integer rows as a NumPy constant, or a traced array when some entry is traced."""
    if any(isinstance(x, Tracer) for row in rows for x in row):
        return jnp.stack([jnp.stack([jnp.asarray(x, jnp.int64) for x in row]) for row in rows])
    return np.asarray(rows, np.int64).reshape(len(rows), -1)


def _apply_run_in_loop(state_carry: Any, vector, run: Sequence[GateRecord]):
    """A run of gates of one shape applied by one counted loop over their stacked matrices."""
    k, c = _loop_shape(run[0])
    wires = _table([list(r.targets) + list(r.controls) + [-1] * (c - len(r.controls)) for r in run])
    values = _table([list(r.control_values) + [1] * (c - len(r.controls)) for r in run])
    return apply_stacked(state_carry, vector, stacked_matrices(run), wires, values, k, state_carry.n_wires)


def apply_records(state_carry: Any, vector, records: Sequence[GateRecord]):
    """``records`` applied to ``vector`` in order (see the module docstring)."""
    n = state_carry.n_wires
    if isinstance(n, Tracer):  # a symbolic number of wires: no wire is a known bit position
        return _apply_by_shape(state_carry, vector, records)

    def irregular(v, rs):  # a long run on known wires that neither repeats nor fuses into few blocks
        return apply_as_tables(state_carry, v, rs, n) if n >= 2 else _apply_by_shape(state_carry, v, rs)

    for known, group in itertools.groupby(records, has_known_wires):  # runs of known, or traced, wires
        run = list(group)
        if known:
            vector = apply_known_wires(state_carry, vector, run, n, fallback=irregular)
        else:
            vector = _apply_by_shape(state_carry, vector, run)
    return vector


def _apply_by_shape(state_carry: Any, vector, records: Sequence[GateRecord]):
    """``records`` applied by the indexed gate kernel, runs of one shape by a counted loop."""
    n = state_carry.n_wires
    for shape, group in itertools.groupby(records, _loop_shape):
        run = list(group)
        if shape is not None and len(run) >= LOOP_MIN_GATES:
            vector = _apply_run_in_loop(state_carry, vector, run)
        else:
            for r in run:
                vector = apply_matrix(vector, r.matrix, r.targets, n, r.controls, r.control_values)
    return vector
