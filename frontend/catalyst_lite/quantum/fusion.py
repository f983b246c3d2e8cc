"""Applying a circuit's gate records to the state vector, each run of them in the cheapest way:
runs on known wires are planned (long irregular ones as tables, below); runs with traced wires,
and every gate when the number of wires is traced, go to the index kernel
:func:`.statevector.apply_matrix`, each run of gates of one shape as one counted loop over their
stacked matrices. ``state_carry`` (:class:`.qnode.QuantumState`) is threaded by the loops.

Gates on known wires are planned before they are applied: few passes over the state, a program
whose size does not grow with the circuit's. A stretch that repeats (:func:`repeated_stretches`)
becomes one loop over stacked matrices; gates are fused (:func:`fuse`) into blocks applied in one
pass each: *dense* (at most two wires, or one three-wire gate, :func:`~.statevector.apply_block`),
*monomial* (known gates with one non-zero per matrix row, ``CNOT``, ``S``..., on any wires:
:func:`~.statevector.apply_monomials`) or *wide* (a dense gate on more wires, alone). A gate joins
an earlier block only if no block after it touches its wires: fusion never reorders gates that do
not commute.

>>> shapes = [Shape((w,), False) for w in range(4)] + [Shape((w, w + 1), True) for w in range(3)]
>>> [(b.kind, sorted(b.wires)) for b in fuse(shapes)]
[('dense', [0, 1]), ('dense', [2, 3]), ('monomial', [1, 2, 3])]

Long runs of gates are applied as data: one counted loop over a table of ``4 x 4`` matrices, wires
and control values, so that a circuit of thousands of gates compiles as fast as one of ten. A run
too irregular to unroll is fused into blocks on at most two wires; each block, and each gate on
more wires, becomes an *entry* (a :class:`PlannedGate`): a ``4 x 4`` matrix on two
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

import bisect
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Hashable, NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..jax_extras import Tracer
from .gates import GateRecord, stacked_matrices
from .statevector import Monomial, apply_block, apply_in_loop, apply_matrix, apply_monomials, apply_stacked

__all__ = ["Shape", "Block", "PlannedGate", "fuse", "repeated_stretches", "has_known_wires", "planned_gates",
           "block_matrices", "BlockMatrices", "apply_known_wires", "apply_fused", "apply_records",
           "CONTROL_SLOTS", "table_segments", "apply_as_tables"]

MAX_FUSED_WIRES = 2  # of a dense block: a pass costs 2**k multiply-adds per amplitude
MAX_BLOCK_WIRES = 3  # a dense gate on more wires is wide
MAX_UNROLLED_BLOCKS = 24  # more blocks (not repeating): the caller's loop over gates applies them
LOOP_MIN_BLOCKS = 6  # a repeated stretch becomes a loop when unrolled it would be more blocks
MAX_PERIOD = 512  # the longest repeating body looked for


class Shape(NamedTuple):
    """A gate's wires (controls first) and whether it is a known monomial."""

    wires: tuple
    monomial: bool


@dataclass
class Block:
    """Gates (positions in the planned run) applied together in one pass."""

    kind: str  # "dense", "monomial" or "wide"
    wires: set
    members: list = field(default_factory=list)


def fuse(shapes: Sequence[Shape], max_block_wires: int = MAX_BLOCK_WIRES, max_members: int | None = None) -> list[Block]:
    """Group gates, in order, into blocks (see the module docstring) of at most ``max_members``
    gates; a dense gate on more than ``max_block_wires`` wires is a wide block of its own."""
    blocks: list[Block] = []
    last_on: dict[Any, int] = {}  # wire -> the last block touching it
    for position, shape in enumerate(shapes):
        wires = set(shape.wires)
        last = max((last_on.get(w, -1) for w in wires), default=-1)
        kind = "monomial" if shape.monomial else "dense" if len(shape.wires) <= max_block_wires else "wide"
        block = None if kind == "wide" else _block_to_join(blocks, last, shape, wires)
        if block is not None and max_members is not None and len(block.members) >= max_members:
            block = None
        if block is None:
            block = Block(kind, set())
            blocks.append(block)
        block.wires |= wires
        block.members.append(position)
        index = next(b for b in range(len(blocks) - 1, last - 1, -1) if blocks[b] is block)
        last_on.update((w, index) for w in wires)
    return blocks


def _fits_dense(block: Block, wires: set) -> bool:
    """A gate on ``wires`` may join the dense ``block``: the union stays small, and shares a wire
    with the block or is two neighbours (distant wires make a slower pass than two)."""
    union = block.wires | wires
    if block.kind != "dense" or len(union) > max(MAX_FUSED_WIRES, len(block.wires)):
        return False
    return bool(block.wires & wires) or max(union) - min(union) == len(union) - 1


def _block_to_join(blocks: list[Block], last: int, shape: Shape, wires: set) -> Block | None:
    """The block a gate joins, or ``None``: one from ``last`` (the last block touching the gate's
    wires) on, as the gate commutes with those after it."""
    candidates = blocks[max(last, 0):]
    if last >= 0 and _fits_dense(blocks[last], wires):
        return blocks[last]
    if shape.monomial:
        return next((b for b in reversed(candidates) if b.kind == "monomial"), None)
    return next((b for b in reversed(candidates) if _fits_dense(b, wires)), None)


def repeated_stretches(keys: Sequence[Hashable]) -> list[tuple[int, int, int]]:
    """``(start, period, count)`` of stretches where ``keys[start:start + period]`` repeats
    ``count >= 2`` times, found left to right, each covering as many keys as it can."""
    table: dict[Hashable, int] = {}
    ids = [table.setdefault(k, len(table)) for k in keys]  # equal keys, equal small integers
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


@dataclass
class PlannedGate:
    """A gate of a planned run: its wires and matrix, ``known`` (NumPy) or row ``position`` of the
    traced ``stack`` ``(gates, repetitions, d, d)`` (``(entries, 4, 4)`` in a table)."""

    targets: tuple
    controls: tuple
    control_values: tuple
    known: np.ndarray | None
    monomial: Monomial | None
    stack: Any = None
    position: int = 0


def has_known_wires(record: GateRecord) -> bool:
    """Every wire and control value of ``record`` is a Python integer (plannable)."""
    return all(isinstance(x, (int, np.integer, bool, np.bool_))
               for x in record.targets + record.controls + record.control_values)


def _known_matrix(record: GateRecord) -> np.ndarray | None:
    return np.asarray(record.matrix, np.complex128) if record.is_static else None


def _key(record: GateRecord) -> Hashable:
    """Equal for gates one loop body can apply: same wires, and matrix or operator type."""
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


def planned_gates(columns: Sequence[Sequence[GateRecord]],
                  matrices: Callable[[Sequence[GateRecord]], Any] = stacked_matrices) -> list[PlannedGate]:
    """One gate per column of records (the same gate in each repetition): known matrices as
    constants, traced ones in one stack per matrix size by one call of ``matrices``."""
    known = [_known_matrix(column[0]) for column in columns]
    traced_by_size: dict[int, list[int]] = {}
    for c, column in enumerate(columns):
        if known[c] is None:
            traced_by_size.setdefault(len(column[0].targets), []).append(c)
    stacks: dict[int, tuple[Any, int]] = {}  # column -> (stack, position)
    for cols in traced_by_size.values():
        stack = matrices([r for c in cols for r in columns[c]])
        stack = jnp.reshape(stack, (len(cols), len(columns[cols[0]])) + stack.shape[1:])
        stacks.update({c: (stack, j) for j, c in enumerate(cols)})
    gates = []
    for c, column in enumerate(columns):
        r = column[0]
        monomial = None if known[c] is None else _monomial(known[c], r)
        values = tuple(int(v) for v in r.control_values)
        gates.append(PlannedGate(r.targets, r.controls, values, known[c], monomial, *stacks.get(c, (None, 0))))
    return gates


_ZERO, _ONE = -1, -2  # entries of an embedding table that are constants, not a gate's entry


def _embedding(gate: PlannedGate, block_wires: tuple) -> np.ndarray:
    """Where each entry of ``gate``'s matrix on ``block_wires`` comes from: a position in its flat
    matrix, or ``_ZERO``/``_ONE`` (the identity where controls fail and on the block's other wires)."""
    size = 2 ** len(block_wires)
    rows, columns = np.arange(size)[:, None], np.arange(size)[None, :]

    def bits(x: np.ndarray, wires: Sequence[int]) -> np.ndarray:  # x's bits of wires, as a number
        value = np.zeros_like(x)
        for w in wires:
            value = (value << 1) | ((x >> (len(block_wires) - 1 - block_wires.index(w))) & 1)
        return value

    others = [w for w in block_wires if w not in gate.controls + gate.targets]
    untouched = (bits(rows, others + list(gate.controls)) == bits(columns, others + list(gate.controls)))
    pattern = int("".join(str(v) for v in gate.control_values) or "0", 2)
    active = bits(rows, gate.controls) == pattern
    row, column = bits(rows, gate.targets), bits(columns, gate.targets)
    entry = row * 2 ** len(gate.targets) + column
    inside = np.where(active, entry, np.where(row == column, _ONE, _ZERO))
    return np.where(untouched, inside, _ZERO)


def _gate_entries(members: Sequence[int], gates: Sequence[PlannedGate], count: int, xp: Any) -> tuple[Any, dict[int, int], int, int]:
    """``entries`` ``(count, n)`` to gather block matrices from (the traced stacks whole, then 0,
    1 and the known gates' entries), where each member's entries start, and where 0 and 1 stand."""
    sources: list[Any] = []
    start: dict[int, int] = {}
    stacks = {id(gates[m].stack): gates[m].stack for m in members if gates[m].known is None}
    offset = 0
    for stack in stacks.values():
        width = stack.shape[-1] ** 2
        start.update({m: offset + gates[m].position * width for m in members if gates[m].stack is stack})
        sources.append(xp.reshape(xp.moveaxis(stack, 0, 1), (count, -1)))
        offset += stack.shape[0] * width
    zero, one = offset, offset + 1
    constants = [np.zeros(1), np.ones(1)]
    offset += 2
    for m in members:
        if gates[m].known is not None:
            start[m], offset = offset, offset + gates[m].known.size
            constants.append(gates[m].known.reshape(-1))
    sources.append(np.broadcast_to(np.concatenate(constants).astype(complex), (count, offset - zero)))
    entries = xp.concatenate(sources, axis=1) if len(sources) > 1 else xp.asarray(sources[0])
    return entries, start, zero, one


def _products(blocks: Sequence[Block], gates: Sequence[PlannedGate], count: int, xp: Any) -> Any:
    """The matrices ``(count, len(blocks), d, d)`` of dense ``blocks`` on as many wires (``xp``:
    ``np`` if known): a gather of embedded gates per depth, then batched products."""
    members = sorted({m for block in blocks for m in block.members})
    entries, start, zero, one = _gate_entries(members, gates, count, xp)
    depth, size = max(len(b.members) for b in blocks), 2 ** len(blocks[0].wires)
    identity = np.where(np.eye(size, dtype=bool), one, zero)
    product = None
    for k in range(depth):
        table = np.empty((len(blocks), size, size), np.int32)
        for j, block in enumerate(blocks):
            if k >= len(block.members):
                table[j] = identity
                continue
            m = block.members[k]
            embedding = _embedding(gates[m], tuple(sorted(block.wires)))
            table[j] = np.where(embedding >= 0, start[m] + embedding, np.where(embedding == _ONE, one, zero))
        embedded = entries[:, table]  # (count, blocks, size, size)
        product = embedded if product is None else embedded @ product
    return product


@dataclass
class BlockMatrices:
    """The matrices of a run's dense and wide blocks: known ones as NumPy constants, traced ones
    in one stack per matrix size, ``(count, blocks, d, d)``, picked per repetition."""

    n_blocks: int
    known: dict = field(default_factory=dict)
    stacks: list = field(default_factory=list)
    slot: dict = field(default_factory=dict)  # block -> (stack, position in the stack)

    def add_stack(self, stack: Any, blocks: Sequence[int]) -> None:
        self.slot.update({b: (len(self.stacks), j) for j, b in enumerate(blocks)})
        self.stacks.append(stack)

    def picked(self, repetition: Callable[[Any], Any]) -> list[Any]:
        """Each block's matrix (``None``: monomial), ``repetition`` picking each stack's row; the
        traced ones behind a barrier (else XLA recomputes them in every amplitude's update)."""
        fenced = lax.optimization_barrier(tuple(repetition(s) for s in self.stacks)) if self.stacks else ()
        picked = {**self.known, **{b: fenced[stack][j] for b, (stack, j) in self.slot.items()}}
        return [picked.get(b) for b in range(self.n_blocks)]


def block_matrices(blocks: Sequence[Block], gates: Sequence[PlannedGate], count: int) -> BlockMatrices:
    """The matrices of ``blocks``, for ``count`` repetitions (see :class:`BlockMatrices`)."""
    result = BlockMatrices(len(blocks))
    traced_by_size: dict[int, list[int]] = {}
    for b, block in enumerate(blocks):
        members = [gates[m] for m in block.members]
        known = all(g.known is not None for g in members)
        if block.kind == "wide" and known:
            result.known[b] = members[0].known
        elif block.kind == "wide":  # (its matrices over the repetitions)
            result.add_stack(members[0].stack[members[0].position][:, None], [b])
        elif block.kind == "dense" and known:
            result.known[b] = _products([block], gates, 1, np)[0, 0]
        elif block.kind == "dense":
            traced_by_size.setdefault(len(block.wires), []).append(b)
    for bs in traced_by_size.values():
        result.add_stack(_products([blocks[b] for b in bs], gates, count, jnp), bs)
    return result


def _apply_blocks(vector, blocks: Sequence[Block], gates: Sequence[PlannedGate], matrices: Sequence[Any], n_wires: int):
    for block, matrix in zip(blocks, matrices):
        if block.kind == "dense":
            vector = apply_block(vector, matrix, sorted(block.wires), n_wires)
        elif block.kind == "monomial":
            vector = apply_monomials(vector, [gates[m].monomial for m in block.members], n_wires)
        else:
            g = gates[block.members[0]]
            vector = apply_matrix(vector, matrix, g.targets, n_wires, g.controls, g.control_values)
    return vector


def apply_known_wires(state_carry: Any, vector, records: Sequence[GateRecord], n_wires: int):
    """``records`` (all with :func:`has_known_wires`) applied: repeated stretches as loops (threading
    ``state_carry``), the rest fused or, too irregular to unroll, as tables."""
    done = 0
    for start, period, count in repeated_stretches([_key(r) for r in records]):
        body = records[start:start + period]
        end = start + period * count
        if count * len(fuse([_shape_of(r) for r in body])) <= LOOP_MIN_BLOCKS:
            continue  # short: unrolled with its neighbours below
        vector = _apply_unrolled(state_carry, vector, records[done:start], n_wires)
        vector = _apply_repeated(state_carry, vector, records[start:end], period, count, n_wires)
        done = end
    return _apply_unrolled(state_carry, vector, records[done:], n_wires)


def _apply_unrolled(state_carry: Any, vector, records: Sequence[GateRecord], n_wires: int):
    blocks = fuse([_shape_of(r) for r in records])
    if len(blocks) <= MAX_UNROLLED_BLOCKS:
        return apply_fused(vector, records, n_wires, blocks)
    if n_wires >= 2:  # a long run that neither repeats nor fuses into few blocks
        return apply_as_tables(state_carry, vector, records, n_wires)
    return _apply_by_shape(state_carry, vector, records)


def apply_fused(vector, records: Sequence[GateRecord], n_wires: int, blocks: Sequence[Block] | None = None):
    """``records`` (all with :func:`has_known_wires`) applied as fused blocks (``blocks``: their
    grouping, when known), unrolled however many there are.

    >>> import numpy as np
    >>> from catalyst_lite.quantum.gates import GateRecord
    >>> from catalyst_lite.quantum.statevector import zero_state
    >>> h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    >>> x = np.array([[0, 1], [1, 0]])
    >>> bell = [GateRecord(None, (0,), explicit=h), GateRecord(None, (1,), (0,), (1,), explicit=x)]
    >>> [round(float(abs(a)), 3) for a in apply_fused(zero_state(2), bell, 2)]
    [0.707, 0.0, 0.0, 0.707]
    """
    if not records:
        return vector
    blocks = fuse([_shape_of(r) for r in records]) if blocks is None else blocks
    gates = planned_gates([[r] for r in records])
    matrices = block_matrices(blocks, gates, 1).picked(lambda stack: stack[0])
    return _apply_blocks(vector, blocks, gates, matrices, n_wires)


def _apply_repeated(state_carry: Any, vector, records: Sequence[GateRecord], period: int, count: int, n_wires: int):
    """``count`` repetitions of ``period`` gates as one loop (matrices computed outside it)."""
    columns = [records[p::period] for p in range(period)]
    gates = planned_gates(columns)
    blocks = fuse([_shape_of(r) for r in records[:period]])
    matrices = block_matrices(blocks, gates, count)

    def repetition(vector: Any, i: Any) -> Any:
        picked = matrices.picked(lambda stack: lax.dynamic_index_in_dim(stack, i, keepdims=False))
        return _apply_blocks(vector, blocks, gates, picked, n_wires)

    return apply_in_loop(state_carry, vector, count, repetition)


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

    for known, group in itertools.groupby(records, has_known_wires):  # runs of known, or traced, wires
        run = list(group)
        if known:
            vector = apply_known_wires(state_carry, vector, run, n)
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
