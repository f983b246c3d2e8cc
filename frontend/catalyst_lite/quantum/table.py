"""Long runs of gates as data: one counted loop over a table of ``4 x 4`` matrices, wires and
control values, so that a circuit of thousands of gates compiles as fast as one of ten.

A run too irregular to unroll is fused into blocks on at most two wires; each block, and each
gate on more wires, becomes an *entry* (a :class:`~.fusion.PlannedGate`): a ``4 x 4`` matrix on
two targets plus up to :data:`CONTROL_SLOTS` controls (a one-wire block times the identity on a
neighbour; ``CCX`` is a ``CNOT`` matrix controlled by its second control). One ``for_loop``
applies the entries with :func:`~.statevector.apply_matrix`; a gate that fits no entry splits
the run and is applied by itself.

>>> import numpy as np
>>> from catalyst_lite.quantum.gates import GateRecord
>>> x = np.array([[0, 1], [1, 0]])
>>> ccx = GateRecord(None, (2,), (0, 1), (1, 1), explicit=x)
>>> [(e.targets, e.controls) for e in table_segments([ccx], 3)[0]]
[((0, 2), (1, -1))]
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from .fusion import Block, BlockMatrices, PlannedGate, Shape, block_matrices, fuse, planned_gates
from .gates import GateRecord
from .statevector import apply_matrix, apply_stacked

__all__ = ["CONTROL_SLOTS", "table_segments", "apply_as_tables"]

CONTROL_SLOTS = 2  # control wires of an entry besides its two targets (unused slots hold wire -1)
MAX_BLOCK_GATES = 8  # gates fused into one entry at most: the depth bounds the program's size
_TARGETS = 2


def _padded(controls: Sequence[int], values: Sequence[int]) -> tuple[tuple, tuple]:
    free = CONTROL_SLOTS - len(controls)
    return tuple(controls) + (-1,) * free, tuple(int(v) for v in values) + (1,) * free


def _two_wire(matrices: Any, form: str, value: int = 1) -> Any:
    """Matrices ``(..., d, d)`` as ``(..., 4, 4)``: ``"plain"`` already are; ``"identity"``: times
    the identity on the second wire; ``"controlled"``: on the second wire when the first is ``value``."""
    if form == "plain":
        return matrices
    xp = np if isinstance(matrices, np.ndarray) else jnp
    eye = xp.broadcast_to(xp.eye(2, dtype=complex), matrices.shape)
    if form == "identity":  # m ⊗ I: rows (a, b) -> m[a_r, a_c] * I[b_r, b_c]
        product = matrices[..., :, None, :, None] * eye[..., None, :, None, :]
        return xp.reshape(product, matrices.shape[:-2] + (4, 4))
    zero = xp.zeros_like(matrices)
    top, bottom = (eye, matrices) if value else (matrices, eye)
    rows = [xp.concatenate([top, zero], axis=-1), xp.concatenate([zero, bottom], axis=-1)]
    return xp.concatenate(rows, axis=-2)


def _matrices(table: Sequence[PlannedGate]) -> Any:
    """``(entries, 4, 4)``: a constant, or one gather from the known ones and traced stacks."""
    known = [e.known for e in table if e.known is not None]
    if len(known) == len(table):
        return np.stack(known).astype(complex)
    stacks = {id(e.stack): e.stack for e in table if e.known is None}
    offsets, offset = {}, len(known)
    for key, stack in stacks.items():
        offsets[key], offset = offset, offset + stack.shape[0]
    counter = itertools.count()  # the known matrices come first, in order
    order = [next(counter) if e.known is not None else offsets[id(e.stack)] + e.position for e in table]
    parts = ([np.stack(known)] if known else []) + list(stacks.values())
    return jnp.take(jnp.concatenate([jnp.asarray(p, jnp.complex128) for p in parts]), np.array(order), axis=0)


def _two_wire_stack(sources: dict, key: tuple, stack: Any, form: str, value: int = 1) -> Any:
    """``stack`` made two-wire once per run (``sources`` keeps it by ``key``)."""
    if key not in sources:
        sources[key] = _two_wire(stack, form, value)
    return sources[key]


def _gate_entry(gate: PlannedGate, sources: dict) -> PlannedGate | None:
    """The entry of a gate on more than two wires, or ``None``."""
    targets, controls, values = gate.targets, gate.controls, gate.control_values
    form, value = "plain", 1
    if len(targets) == 1 and controls:
        form, value = "controlled", values[0]
        targets, controls, values = (controls[0], targets[0]), controls[1:], values[1:]
    if len(targets) != _TARGETS or len(controls) > CONTROL_SLOTS:
        return None
    if gate.known is not None:
        return PlannedGate(tuple(targets), *_padded(controls, values), _two_wire(gate.known, form, value), None)
    stack = _two_wire_stack(sources, ("gate", id(gate.stack), form, value), gate.stack[:, 0], form, value)
    return PlannedGate(tuple(targets), *_padded(controls, values), None, None, stack, gate.position)


def _block_entry(block: Block, b: int, matrices: BlockMatrices, sources: dict, n_wires: int) -> PlannedGate:
    """The entry of a dense block (number ``b`` of ``matrices``) on one or two wires."""
    on = sorted(block.wires)
    form = "plain"
    if len(on) == 1:
        on, form = [on[0], on[0] + 1 if on[0] + 1 < n_wires else on[0] - 1], "identity"
    if b in matrices.known:
        return PlannedGate(tuple(on), *_padded((), ()), _two_wire(matrices.known[b], form), None)
    stack, position = matrices.slot[b]
    two_wire = _two_wire_stack(sources, ("block", stack), matrices.stacks[stack][0], form)
    return PlannedGate(tuple(on), *_padded((), ()), None, None, two_wire, position)


def table_segments(records: Sequence[GateRecord], n_wires: int) -> list[list[PlannedGate] | GateRecord]:
    """The run ``records`` as segments: tables (lists of entries) and records that fit no entry."""
    shapes = [Shape(r.controls + r.targets, False) for r in records]
    blocks = fuse(shapes, max_block_wires=_TARGETS, max_members=MAX_BLOCK_GATES)
    gates = planned_gates([[r] for r in records])
    dense = [b for b, block in enumerate(blocks) if block.kind == "dense"]
    matrices = block_matrices([blocks[b] for b in dense], gates, 1)
    number = {b: j for j, b in enumerate(dense)}
    sources: dict = {}  # the traced matrices of the run, made two-wire once
    segments: list[list[PlannedGate] | GateRecord] = [[]]
    for b, block in enumerate(blocks):
        if b in number:
            entry = _block_entry(block, number[b], matrices, sources, n_wires)
        else:
            entry = _gate_entry(gates[block.members[0]], sources)
        if entry is None:
            segments += [records[block.members[0]], []]
        else:
            segments[-1].append(entry)
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
