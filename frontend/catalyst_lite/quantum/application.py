"""Applying a circuit's gate records to the state vector, each run of them in the cheapest way:
runs on known wires are planned by :mod:`.fusion` (long irregular ones as tables, below); runs with
traced wires, and every gate when the number of wires is traced, go to the index kernel
:func:`.statevector.apply_matrix`, each run of gates of one shape as one counted loop over their
stacked matrices. ``state_carry`` (:class:`.qnode.QuantumState`) is threaded by the loops.

Long runs of gates are applied as data: one counted loop over a table of ``4 x 4`` matrices, wires
and control values, so that a circuit of thousands of gates compiles as fast as one of ten. A run
too irregular to unroll is fused into blocks on at most two wires; each block, and each gate on
more wires, becomes an *entry* (a :class:`~.fusion.PlannedGate`): a ``4 x 4`` matrix on two
targets plus up to :data:`CONTROL_SLOTS` controls (a one-wire block times the identity on a
neighbour; ``CCX`` is a ``CNOT`` matrix controlled by its second control). One ``for_loop``
applies the entries with :func:`~.statevector.apply_matrix`; a gate that fits no entry splits the
run and is applied by itself.

>>> import numpy as np
>>> x = np.array([[0, 1], [1, 0]])
>>> ccx = GateRecord(None, (2,), (0, 1), (1, 1), explicit=x)
>>> [(e.targets, e.controls) for e in table_segments([ccx], 3)[0]]
[((0, 2), (1, -1))]
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from ..jax_extras import Tracer
from .fusion import (
    Block, PlannedGate, Shape, apply_known_wires, block_matrices, fuse, has_known_wires, planned_gates,
)
from .gates import GateRecord, stacked_matrices
from .statevector import apply_matrix, apply_stacked

__all__ = ["apply_records", "CONTROL_SLOTS", "table_segments", "apply_as_tables"]

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


CONTROL_SLOTS = 2  # control wires of an entry besides its two targets (unused slots hold wire -1)
MAX_BLOCK_GATES = 8  # gates fused into one entry at most: the depth bounds the program's size
_TARGETS = 2


def _matrices(table: Sequence[PlannedGate]) -> Any:
    """``(entries, 4, 4)``: a constant, or one gather from the known ones and the run's one stack of
    traced ones (:func:`table_segments`)."""
    known = [e.known for e in table if e.known is not None]
    if len(known) == len(table):
        return np.stack(known).astype(complex)
    stack = next(e.stack for e in table if e.known is None)
    counter = itertools.count()  # the known matrices come first, in order
    order = [next(counter) if e.known is not None else len(known) + e.position for e in table]
    parts = ([np.stack(known)] if known else []) + [stack]
    return jnp.take(jnp.concatenate([jnp.asarray(p, jnp.complex128) for p in parts]), np.array(order), axis=0)


def _entry_block(block: Block, gates: list[PlannedGate], n_wires: int) -> tuple[Block, tuple, tuple] | None:
    """A block as a two-wire dense block (its gates embedded by :func:`~.fusion.block_matrices`) and
    the entry's control slots and values; ``None`` for a gate that fits no entry. A one-wire block
    takes a neighbour; a gate on more wires its first control as second target (``gates`` then
    holds it with the other controls left to the entry's slots)."""
    if block.kind == "dense":
        wires = set(block.wires)
        if len(wires) == 1:
            (w,) = wires
            wires.add(w + 1 if w + 1 < n_wires else w - 1)
        return Block("dense", wires, block.members), (-1,) * CONTROL_SLOTS, (1,) * CONTROL_SLOTS
    m = block.members[0]
    gate = gates[m]
    inner = 1 if len(gate.targets) == 1 else 0  # the controls inside the entry's two wires
    controls, values = gate.controls[inner:], gate.control_values[inner:]
    if len(gate.targets) + inner != _TARGETS or len(controls) > CONTROL_SLOTS:
        return None
    gates[m] = replace(gate, controls=gate.controls[:inner], control_values=gate.control_values[:inner])
    free = CONTROL_SLOTS - len(controls)
    slots = controls + (-1,) * free, values + (1,) * free
    return Block("dense", {*gate.targets, *gate.controls[:inner]}, [m]), *slots


def table_segments(records: Sequence[GateRecord], n_wires: int) -> list[list[PlannedGate] | GateRecord]:
    """The run ``records`` as segments: tables (lists of entries) and records that fit no entry."""
    shapes = [Shape(r.controls + r.targets, False) for r in records]
    blocks = fuse(shapes, max_block_wires=_TARGETS, max_members=MAX_BLOCK_GATES)
    gates = planned_gates([[r] for r in records])
    entries = [_entry_block(block, gates, n_wires) for block in blocks]
    matrices = block_matrices([e[0] for e in entries if e is not None], gates, 1)
    stacks = [stack[0] for stack in matrices.stacks]  # (one: every traced entry is on two wires)
    number = itertools.count()  # of the entry among the blocks given to block_matrices
    segments: list[list[PlannedGate] | GateRecord] = [[]]
    for block, entry in zip(blocks, entries):
        if entry is None:
            segments += [records[block.members[0]], []]
            continue
        b, (two_wire, controls, values) = next(number), entry
        stack, position = matrices.slot.get(b, (None, 0))
        traced = None if stack is None else stacks[stack]
        on = tuple(sorted(two_wire.wires))
        segments[-1].append(PlannedGate(on, controls, values, matrices.known.get(b), None, traced, position))
    return [s for s in segments if not isinstance(s, list) or s]


def apply_as_tables(state_carry: Any, vector, records: Sequence[GateRecord], n_wires: int):
    """``records`` (known wires, at least two) applied as tables (one loop each) and lone gates."""
    for s in table_segments(records, n_wires):
        if isinstance(s, list):
            wires = np.array([e.targets + e.controls for e in s], np.int64)
            values = np.array([e.control_values for e in s], np.int64)
            vector = apply_stacked(state_carry, vector, _matrices(s), wires, values, _TARGETS, n_wires)
        else:
            vector = apply_matrix(vector, s.matrix, s.targets, n_wires, s.controls, s.control_values)
    return vector
