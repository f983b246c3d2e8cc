"""Gates on known wires, planned before they are applied: few passes over the state, a program
whose size does not grow with the circuit's.

A run of gates whose wires are Python integers goes through two steps:

1. **Repetition** (:func:`repeated_stretches`): a stretch that repeats the same gates on the same
   wires (the layers of a layered circuit) becomes one counted loop whose body applies one
   repetition; each gate's matrices are stacked over the repetitions and indexed by the counter.
2. **Fusion** (:func:`fuse`): consecutive gates are grouped into blocks, each applied in one pass:

   - a *dense* block acts on at most two wires (or a single three-wire gate): the product of its
     gates' matrices, applied by :func:`~.statevector.apply_block`;
   - a *monomial* block holds any number of known gates with one non-zero per matrix row
     (``CNOT``, ``X``, ``SWAP``, ``CZ``, ``S``, ``Toffoli``...), on any wires: one gather at a
     computed index (:func:`~.statevector.apply_monomials`);
   - a *wide* gate (a dense gate on more than three wires) is applied alone by the indexed kernel
     :func:`~.statevector.apply_matrix`.

   A gate joins an earlier block only if no block after it touches the gate's wires: gates on
   disjoint wires commute, so fusion never reorders gates that do not.

>>> shapes = [Shape((w,), False) for w in range(4)] + [Shape((w, w + 1), True) for w in range(3)]
>>> [(b.kind, sorted(b.wires)) for b in fuse(shapes)]
[('dense', [0, 1]), ('dense', [2, 3]), ('monomial', [1, 2, 3])]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..control_flow import for_loop
from .gates import GateRecord, stacked_matrices
from .monomials import Monomial, apply_monomials
from .statevector import apply_block, apply_matrix

__all__ = ["Shape", "Block", "fuse", "repeated_stretches", "has_known_wires", "apply_known_wires"]

MAX_FUSED_WIRES = 2
"""Gates are fused into dense blocks of at most this many wires (a pass over the state costs
``2**k`` multiply-adds per amplitude: two wires balance passes saved against work per pass)."""
MAX_BLOCK_WIRES = 3
"""A dense gate on more wires than this is *wide*: applied alone by the indexed kernel."""
MAX_UNROLLED_BLOCKS = 24
"""A stretch that fuses into more blocks than this (and does not repeat) is handed back to the
caller's loop over gates: one compiled kernel for any length, at a higher cost per gate."""
LOOP_MIN_BLOCKS = 6
"""A repeated stretch becomes a loop when unrolling it would apply more blocks than this."""
MAX_PERIOD = 512
"""The longest repeating body looked for."""


class Shape(NamedTuple):
    """What fusion needs to know of a gate: its wires (controls first) and whether it is a known
    monomial."""

    wires: tuple
    monomial: bool


@dataclass
class Block:
    """Gates (positions in the planned run) applied together in one pass."""

    kind: str  # "dense", "monomial" or "wide"
    wires: set
    members: list = field(default_factory=list)


# --- fusion --------------------------------------------------------------------------------------


def fuse(shapes: Sequence[Shape]) -> list[Block]:
    """Group gates, in order, into blocks (see the module docstring)."""
    blocks: list[Block] = []
    for position, shape in enumerate(shapes):
        wires = set(shape.wires)
        last = max((b for b, block in enumerate(blocks) if block.wires & wires), default=-1)
        block = _block_to_join(blocks, last, shape, wires)
        if block is None:
            block = Block(_kind(shape), set())
            blocks.append(block)
        block.wires |= wires
        block.members.append(position)
    return blocks


def _kind(shape: Shape) -> str:
    if shape.monomial:
        return "monomial"
    return "dense" if len(shape.wires) <= MAX_BLOCK_WIRES else "wide"


def _fits_dense(block: Block, wires: set) -> bool:
    """True when a gate on ``wires`` may join the dense ``block``: the union stays small, and it
    shares a wire with the block or the two wires are neighbours (a block on distant wires is a
    slower pass than two one-wire passes)."""
    union = block.wires | wires
    if block.kind != "dense" or len(union) > max(MAX_FUSED_WIRES, len(block.wires)):
        return False
    return bool(block.wires & wires) or max(union) - min(union) == len(union) - 1


def _block_to_join(blocks: list[Block], last: int, shape: Shape, wires: set) -> Block | None:
    """The block a gate joins, or ``None`` for a new one. Only blocks from ``last`` (the last
    block touching the gate's wires) on are candidates: the gate commutes with all of them."""
    if _kind(shape) == "wide":
        return None
    candidates = blocks[max(last, 0):]
    if last >= 0 and _fits_dense(blocks[last], wires):
        return blocks[last]
    if shape.monomial:
        return next((b for b in reversed(candidates) if b.kind == "monomial"), None)
    return next((b for b in reversed(candidates) if _fits_dense(b, wires)), None)


# --- repetition ----------------------------------------------------------------------------------


def repeated_stretches(keys: Sequence[Hashable]) -> list[tuple[int, int, int]]:
    """``(start, period, count)`` of stretches where ``keys[start:start + period]`` repeats
    ``count >= 2`` times, found left to right, each covering as many keys as it can.

    >>> repeated_stretches(list("xabcabcabcy"))
    [(1, 3, 3)]
    """
    ids = _interned(keys)
    positions: dict[int, list[int]] = {}
    for i, k in enumerate(ids):
        positions.setdefault(k, []).append(i)
    stretches, start = [], 0
    while start < len(ids):
        best = _best_repetition(ids, start, positions[ids[start]])
        if best is None:
            start += 1
            continue
        period, count = best
        stretches.append((start, period, count))
        start += period * count
    return stretches


def _interned(keys: Sequence[Hashable]) -> list[int]:
    table: dict[Hashable, int] = {}
    return [table.setdefault(k, len(table)) for k in keys]


def _best_repetition(ids: list[int], start: int, same: list[int]) -> tuple[int, int] | None:
    """The ``(period, count)`` covering most keys from ``start`` (the shortest period on ties)."""
    best, best_cover = None, 0
    limit = min(MAX_PERIOD, (len(ids) - start) // 2)
    for nxt in same[bisect.bisect_right(same, start):]:
        period = nxt - start
        if period > limit:
            break
        body = ids[start:nxt]
        count = 1
        while ids[start + count * period:start + (count + 1) * period] == body:
            count += 1
        if count >= 2 and period * count > best_cover:
            best, best_cover = (period, count), period * count
    return best


# --- gates with matrices -------------------------------------------------------------------------


@dataclass
class _Gate:
    """A gate of a planned run: its record's wires, and its matrix on its targets (a NumPy
    constant when known; else traced, with a leading axis over repetitions in a loop body)."""

    targets: tuple
    controls: tuple
    control_values: tuple
    matrix: Any
    monomial: Monomial | None


def has_known_wires(record: GateRecord) -> bool:
    """True when every wire and control value of ``record`` is a Python integer (plannable)."""
    return all(isinstance(x, (int, np.integer, bool, np.bool_))
               for x in record.targets + record.controls + record.control_values)


def _known_matrix(record: GateRecord) -> np.ndarray | None:
    return np.asarray(record.matrix, np.complex128) if record.is_static else None


def _key(record: GateRecord) -> Hashable:
    """Equal keys: gates that one loop body can apply (same wires; same matrix when known, same
    operator type when traced)."""
    wires = (record.targets, record.controls, record.control_values)
    known = _known_matrix(record)
    if known is not None:
        return ("known", wires, known.tobytes())
    if record.op is None:
        return ("explicit", wires, id(record))  # never repeats: matrices built one by one
    return ("traced", wires, record.group_key())


def _shape_of(record: GateRecord) -> Shape:
    known = _known_matrix(record)
    monomial = known is not None and _monomial(known, record) is not None
    return Shape(record.controls + record.targets, monomial)


def _monomial(known: np.ndarray, record: GateRecord) -> Monomial | None:
    values = tuple(int(v) for v in record.control_values)
    return Monomial.of(known, record.targets, record.controls, values)


def _gates(columns: Sequence[Sequence[GateRecord]]) -> list[_Gate]:
    """One gate per column of records (the same gate in each repetition): known matrices as
    constants, traced ones computed by one batched call per matrix size, shape ``(count, d, d)``."""
    traced_by_size: dict[int, list[int]] = {}
    matrices: list[Any] = []
    for c, column in enumerate(columns):
        known = _known_matrix(column[0])
        matrices.append(known)
        if known is None:
            traced_by_size.setdefault(len(column[0].targets), []).append(c)
    for cols in traced_by_size.values():
        stacked = stacked_matrices([r for c in cols for r in columns[c]])
        stacked = jnp.reshape(stacked, (len(cols), len(columns[cols[0]])) + stacked.shape[1:])
        for j, c in enumerate(cols):
            matrices[c] = stacked[j]
    gates = []
    for column, matrix in zip(columns, matrices):
        r = column[0]
        monomial = _monomial(matrix, r) if isinstance(matrix, np.ndarray) else None
        gates.append(_Gate(r.targets, r.controls, tuple(int(v) for v in r.control_values), matrix, monomial))
    return gates


def _with_controls(matrix: Any, control_values: tuple) -> Any:
    """The matrix on ``controls + targets``: the identity, except ``matrix`` on the block of rows
    and columns where the controls have their values."""
    if not control_values:
        return matrix
    d = matrix.shape[-1]
    size = d << len(control_values)
    pattern = int("".join(str(v) for v in control_values), 2)
    where = (Ellipsis, slice(pattern * d, (pattern + 1) * d), slice(pattern * d, (pattern + 1) * d))
    if isinstance(matrix, np.ndarray):
        full = np.broadcast_to(np.eye(size, dtype=np.complex128), matrix.shape[:-2] + (size, size)).copy()
        full[where] = matrix
        return full
    full = jnp.broadcast_to(jnp.eye(size, dtype=jnp.complex128), matrix.shape[:-2] + (size, size))
    return full.at[where].set(matrix)


def _embedded(matrix: Any, gate_wires: tuple, block_wires: tuple) -> Any:
    """A gate's matrix on ``gate_wires`` as a matrix on the (sorted) ``block_wires``: its tensor
    product with the identity on the block's other wires, axes put in the block's order."""
    if tuple(gate_wires) == tuple(block_wires):
        return matrix
    k, others = len(gate_wires), [w for w in block_wires if w not in gate_wires]
    batch = matrix.shape[:-2]
    xp = np if isinstance(matrix, np.ndarray) else jnp
    gate = xp.reshape(matrix, batch + (2,) * (2 * k) + (1,) * (2 * len(others)))
    identity = np.eye(2 ** len(others)).reshape((2,) * (2 * len(others)))
    # axes: gate rows, gate columns, other rows, other columns -> block rows, block columns
    axis = {w: m for m, w in enumerate(gate_wires)} | {w: 2 * k + m for m, w in enumerate(others)}
    rows = [axis[w] for w in block_wires]
    columns = [axis[w] + (k if w in gate_wires else len(others)) for w in block_wires]
    order = list(range(len(batch))) + [len(batch) + a for a in rows + columns]
    size = 2 ** len(block_wires)
    return xp.reshape(xp.transpose(gate * identity, order), batch + (size, size))


def _member_signature(gate: _Gate, wires: tuple) -> Hashable:
    relative = tuple(wires.index(w) for w in gate.controls + gate.targets)
    known = gate.matrix.tobytes() if isinstance(gate.matrix, np.ndarray) else None
    return relative, gate.control_values, known, gate.matrix.shape[-1]


def _product(members: Sequence[_Gate], matrices: Sequence[Any], wires: tuple) -> Any:
    """The product of the gates' matrices (later gates on the left) as a matrix on ``wires``."""
    product = None
    for g, matrix in zip(members, matrices):
        full = _embedded(_with_controls(matrix, g.control_values), g.controls + g.targets, wires)
        product = full if product is None else full @ product
    return product


@dataclass
class _BlockMatrices:
    """The matrices of a run's dense and wide blocks. Known ones are NumPy constants per block;
    traced ones are computed per *group* of blocks built alike (same gates at the same relative
    wires), stacked on a leading axis: a few batched operations instead of a few per block."""

    n_blocks: int
    known: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    slot: dict = field(default_factory=dict)  # block -> (group, position in the group)

    def picked(self, pick: Callable[[Any], Any] = lambda m: m) -> list[Any]:
        """Each block's matrix (``None`` for monomial blocks), the traced ones after ``pick``
        and behind one optimization barrier: XLA would otherwise fuse their computation into
        every amplitude's update, recomputing it ``2**n`` times."""
        fenced = lax.optimization_barrier(tuple(pick(g) for g in self.groups)) if self.groups else ()
        matrices: list[Any] = [None] * self.n_blocks
        for b, matrix in self.known.items():
            matrices[b] = matrix
        for b, (group, position) in self.slot.items():
            matrices[b] = fenced[group][position]
        return matrices


def _block_matrices(blocks: Sequence[Block], gates: Sequence[_Gate]) -> _BlockMatrices:
    groups: dict[Hashable, list[int]] = {}
    for b, block in enumerate(blocks):
        if block.kind == "wide":
            groups[("wide", b)] = [b]
        elif block.kind == "dense":
            wires = tuple(sorted(block.wires))
            signature = tuple(_member_signature(gates[m], wires) for m in block.members)
            groups.setdefault(signature, []).append(b)
    result = _BlockMatrices(len(blocks))
    for alike in groups.values():
        first = blocks[alike[0]]
        members = [gates[m] for m in first.members]
        stacked = [g.matrix if isinstance(g.matrix, np.ndarray)
                   else jnp.stack([gates[blocks[b].members[i]].matrix for b in alike])
                   for i, g in enumerate(members)]
        if first.kind == "wide":
            matrix = stacked[0]
        else:
            matrix = _product(members, stacked, tuple(sorted(first.wires)))
        if isinstance(matrix, np.ndarray):
            result.known.update({b: matrix for b in alike})
        else:
            result.slot.update({b: (len(result.groups), j) for j, b in enumerate(alike)})
            result.groups.append(matrix)
    return result


def _apply_blocks(vector, blocks: Sequence[Block], gates: Sequence[_Gate], matrices: Sequence[Any], n_wires: int):
    for block, matrix in zip(blocks, matrices):
        if block.kind == "dense":
            vector = apply_block(vector, matrix, sorted(block.wires), n_wires)
        elif block.kind == "monomial":
            vector = apply_monomials(vector, [gates[m].monomial for m in block.members], n_wires)
        else:
            g = gates[block.members[0]]
            vector = apply_matrix(vector, matrix, g.targets, n_wires, g.controls, g.control_values)
    return vector


# --- applying a run ------------------------------------------------------------------------------


def apply_known_wires(
    state_carry: Any,
    vector,
    records: Sequence[GateRecord],
    n_wires: int,
    fallback: Callable[[Any, Sequence[GateRecord]], Any],
):
    """``records`` (all with :func:`has_known_wires`) applied to ``vector``: repeated stretches
    as loops, the rest fused; ``fallback(vector, records)`` applies stretches too irregular to
    unroll. ``state_carry`` is the ambient carry holding the state (loops thread it)."""
    done = 0
    for start, period, count in repeated_stretches([_key(r) for r in records]):
        body = records[start:start + period]
        end = start + period * count
        if count * len(fuse([_shape_of(r) for r in body])) <= LOOP_MIN_BLOCKS:
            continue  # short: unrolled with its neighbours below
        vector = _apply_unrolled(vector, records[done:start], n_wires, fallback)
        vector = _apply_repeated(state_carry, vector, records[start:end], period, count, n_wires)
        done = end
    return _apply_unrolled(vector, records[done:], n_wires, fallback)


def _apply_unrolled(vector, records: Sequence[GateRecord], n_wires: int, fallback: Callable):
    if not records:
        return vector
    blocks = fuse([_shape_of(r) for r in records])
    if len(blocks) > MAX_UNROLLED_BLOCKS:
        return fallback(vector, records)
    gates = [_Gate(g.targets, g.controls, g.control_values,
                   g.matrix if isinstance(g.matrix, np.ndarray) else g.matrix[0], g.monomial)
             for g in _gates([[r] for r in records])]
    return _apply_blocks(vector, blocks, gates, _block_matrices(blocks, gates).picked(), n_wires)


def _apply_repeated(state_carry: Any, vector, records: Sequence[GateRecord], period: int, count: int, n_wires: int):
    """``count`` repetitions of ``period`` gates as one loop: block matrices are computed for all
    repetitions at once, outside the loop, and picked by the loop counter."""
    columns = [records[p::period] for p in range(period)]
    gates = _gates(columns)
    blocks = fuse([_shape_of(r) for r in records[:period]])
    matrices = _block_matrices(blocks, gates)
    state_carry.vector = vector

    @for_loop(0, count, 1)
    def repetition(i):
        picked = matrices.picked(lambda m: lax.dynamic_index_in_dim(m, i, axis=1, keepdims=False))
        state_carry.vector = _apply_blocks(state_carry.vector, blocks, gates, picked, n_wires)

    repetition()
    return state_carry.vector
