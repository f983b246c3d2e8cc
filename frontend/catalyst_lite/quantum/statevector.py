"""Gate application on a state vector, as plain ``jax.numpy``/``lax`` array operations.

The state of ``n`` qubits is a flat ``complex128`` vector of length ``2**n``; wire ``w`` is bit
``n - 1 - w`` of an amplitude's index (as in PennyLane). The general kernel :func:`apply_matrix`
works on indices, not axes, so a wire may be a traced integer (gathers at ``index ^ flip``).

Known gates with one non-zero entry per matrix row (``X``, ``CNOT``, ``SWAP``, ``CZ``, ``S``,
``Toffoli``...) are :class:`Monomial` s: a sequence of them maps ``new[i] = phase(i) * old[j(i)]``,
applied in one pass as one gather and one phase (:func:`apply_monomials`). ``j`` is computed per
gate by index arithmetic on ``iota`` (fused by XLA into the gather), or, when every gate permutes
without phases by a map affine over GF(2) (``X``, ``CNOT``, ``SWAP``; not ``Toffoli``), as an
:class:`AffineMap` computed on the host and applied as one or two lookups into small tables,
whatever the number of gates.

>>> import numpy as np
>>> psi = zero_state(2)
>>> h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
>>> [round(float(a.real), 3) for a in apply_matrix(psi, h, [0], n_wires=2)]
[0.707, 0.0, 0.707, 0.0]
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..control_flow import for_loop

__all__ = ["wire_entanglement", "state_size", "zero_state", "bit_position", "bit_mask", "basis_indices",
           "wire_bits", "outcome_index", "controls_hold", "apply_matrix", "apply_tensor", "apply_block",
           "apply_in_loop", "apply_stacked", "lookup", "probabilities", "wire_probability", "project_wire",
           "Monomial", "AffineMap", "apply_monomials"]

Wire = Any  # a Python int or a traced integer scalar: the wire's index on the device


def state_size(n_wires: Any) -> Any:
    """``2**n_wires``: a Python int, or a traced size (one per traced number of wires)."""
    if _is_static(n_wires):
        return 2 ** int(n_wires)
    # Computed again (in a loop body, say), it would be another dimension: the length would change.
    known = _sizes.get(id(n_wires))
    if known is not None and known[0]() is n_wires:
        return known[1]
    size = lax.shift_left(np.int64(1), jnp.asarray(n_wires, jnp.int64))
    _sizes[id(n_wires)] = (weakref.ref(n_wires, lambda _, key=id(n_wires), sizes=_sizes: sizes.pop(key, None)), size)
    return size


_sizes: dict[int, tuple[Any, Any]] = {}  # id(traced number of wires) -> (weak reference to it, 2**n)


def zero_state(n_wires: Any) -> jnp.ndarray:
    """``|0...0>`` as a flat ``complex128`` vector."""
    # Behind a barrier, XLA builds it when run instead of folding it into a 2**n-element literal.
    return (lax.optimization_barrier(basis_indices(n_wires)) == 0).astype(jnp.complex128)


INDEX = jnp.int32  # basis indices (up to 2**31 amplitudes): half the integer work of 64-bit


def _is_static(x: Any) -> bool:
    return isinstance(x, (int, np.integer, bool, np.bool_))


def bit_mask(wire: Wire, n_wires: Any) -> Any:
    """``1 << bit_position(wire)`` as a 32-bit index (a NumPy scalar when known)."""
    p = bit_position(wire, n_wires)
    return np.int32(1 << p) if _is_static(p) else jnp.left_shift(np.int32(1), p)


def bit_position(wire: Wire, n_wires: int) -> Any:
    """The bit of an amplitude's index that holds ``wire`` (wire 0 is the most significant)."""
    if isinstance(wire, (int, np.integer)) and _is_static(n_wires):
        return int(n_wires) - 1 - int(wire)
    return jnp.asarray(n_wires - 1 - wire).astype(INDEX)


def basis_indices(n_wires: Any) -> jnp.ndarray:
    """``[0, 1, ..., 2**n - 1]``: the index of every amplitude (computed in the program)."""
    return lax.iota(INDEX, state_size(n_wires))


def wire_bits(indices: jnp.ndarray, wire: Wire, n_wires: int) -> jnp.ndarray:
    """The value (0 or 1) of ``wire`` in each basis index."""
    return (indices >> bit_position(wire, n_wires)) & 1


def outcome_index(samples, targets: tuple, n_wires: int):
    """The outcome on the ``targets`` wires of each basis index, as an integer whose most
    significant bit is the first target (the order of ``probs`` and ``eigvals``)."""
    k = len(targets)
    return sum((wire_bits(samples, t, n_wires) << (k - 1 - m) for m, t in enumerate(targets)),
               jnp.zeros_like(samples))


def controls_hold(indices, controls: Sequence[Wire], values: Sequence[Any], n_wires: int):
    """True where every control wire (``< 0``: an unused slot) has its control value: one mask
    and pattern, so one ``and`` and one comparison per amplitude."""
    mask, pattern = np.int32(0), np.int32(0)
    for wire, value in zip(controls, values):
        if _is_static(wire):
            if wire < 0:
                continue
            bit = bit_mask(wire, n_wires)
        else:
            used = wire >= 0
            bit = jnp.where(used, bit_mask(jnp.where(used, wire, 0), n_wires), np.int32(0))
        mask = mask | bit
        if _is_static(value) and _is_static(bit):
            pattern = pattern | (bit if value else np.int32(0))
        else:
            pattern = pattern | jnp.where(jnp.asarray(value, bool), bit, np.int32(0))
    return (indices & mask) == pattern


def lookup(values: Sequence[Any], row_bits: Sequence[Any], where: Callable = jnp.where) -> Any:
    """``values[row(i)]`` for every amplitude ``i``, ``row(i)`` the number whose bits (most
    significant first) are ``row_bits``: one ``where`` per bit (``np.where`` for NumPy indices)."""
    values = list(values)
    for bits in row_bits:
        bit = bits == 1
        half = len(values) // 2
        values = [where(bit, values[half + j], values[j]) for j in range(half)]
    return values[0]


def apply_matrix(state: jnp.ndarray, matrix: Any, targets: Sequence[Wire], n_wires: int,
                 controls: Sequence[Wire] = (), control_values: Sequence[Any] = ()) -> jnp.ndarray:
    """``matrix`` applied to ``targets`` where controls hold, in one pass: ``new[i] = sum_f
    matrix[row(i), row(i) ^ f] * state[i ^ flip(f)]`` (``row(i)``: ``i``'s target bits)."""
    k = len(targets)
    if k > MAX_INDEXED_TARGETS and all(_is_static(w) for w in (*targets, *controls, *control_values, n_wires)):
        return apply_tensor(state, matrix, targets, n_wires, controls, control_values)
    matrix = jnp.asarray(matrix, jnp.complex128)
    indices = basis_indices(n_wires)
    masks = [bit_mask(t, n_wires) for t in targets]
    row_bits = [wire_bits(indices, t, n_wires) for t in targets]
    new = lookup([matrix[r, r] for r in range(2**k)], row_bits) * state
    for f in range(1, 2**k):
        flip = sum((masks[m] for m in range(k) if (f >> (k - 1 - m)) & 1), np.int32(0))  # distinct bits
        partner = state.at[indices ^ flip].get(mode="promise_in_bounds", unique_indices=True)
        new = new + lookup([matrix[r, r ^ f] for r in range(2**k)], row_bits) * partner
    if controls:
        new = jnp.where(controls_hold(indices, controls, control_values, n_wires), new, state)
    return new


def apply_in_loop(state_carry: Any, vector: Any, count: Any, step: Callable[[Any, Any], Any]) -> Any:
    """``vector`` after ``step(vector, i)`` for ``i < count``: one loop threading ``state_carry``."""
    state_carry.vector = vector

    @for_loop(0, count, 1)
    def body(i):
        state_carry.vector = step(state_carry.vector, i)

    body()
    return state_carry.vector


def apply_stacked(state_carry: Any, vector: Any, matrices: Any, wires: Any, values: Any, n_targets: int,
                  n_wires: Any) -> Any:
    """Gate ``g`` for each ``g`` in one loop: ``matrices[g]`` on targets ``wires[g, :n_targets]``,
    controls the rest of row ``g`` (``-1``: unused) with ``values[g]``."""
    controls = wires.shape[1] - n_targets

    def step(vector: Any, g: Any) -> Any:
        m, w, v = (lax.dynamic_index_in_dim(a, g, keepdims=False) for a in (matrices, wires, values))
        return apply_matrix(vector, m, [w[t] for t in range(n_targets)], n_wires,
                            [w[n_targets + c] for c in range(controls)], [v[c] for c in range(controls)])

    return apply_in_loop(state_carry, vector, wires.shape[0], step)


MAX_INDEXED_TARGETS = 2  # more known targets: apply_tensor (the indexed kernel has 4**k terms)


def apply_tensor(state: jnp.ndarray, matrix: Any, targets: Sequence[int], n_wires: int,
                 controls: Sequence[int] = (), control_values: Sequence[int] = ()) -> jnp.ndarray:
    """``matrix`` on known ``targets`` where known ``controls`` hold, as a tensor contraction."""
    k = len(targets)
    tensor = jnp.reshape(jnp.asarray(state), (2,) * n_wires)
    fixed = dict(zip(controls, control_values))
    where = tuple(int(fixed[w]) if w in fixed else slice(None) for w in range(n_wires))
    free = [w for w in range(n_wires) if w not in fixed]  # the axes left once the controls are fixed
    axes = [free.index(t) for t in targets]
    part = tensor[where] if controls else tensor
    moved = jnp.moveaxis(part, axes, list(range(k)))
    product = jnp.asarray(matrix, jnp.complex128) @ jnp.reshape(moved, (2**k, -1))
    part = jnp.moveaxis(jnp.reshape(product, moved.shape), list(range(k)), axes)
    tensor = tensor.at[where].set(part) if controls else part
    return jnp.reshape(tensor, (-1,))


def apply_block(state: jnp.ndarray, matrix: Any, wires: Sequence[int], n_wires: int) -> jnp.ndarray:
    """``matrix`` on known, ascending ``wires`` in one pass: ``new[.., r, ..] = sum_q matrix[r, q] *
    state[.., q, ..]``, an axis per target and per stretch of other wires (consecutive: one axis)."""
    k, state = len(wires), jnp.asarray(state)
    if list(wires) == list(range(wires[0], wires[0] + k)):
        view = state.reshape(2 ** wires[0], 1, 2**k, -1)
        return jnp.sum(matrix[None, :, :, None] * view, axis=2).reshape(-1)
    state_shape, matrix_shape, previous = [], [], -1
    for wire in wires:  # per target: (other wires before it, row axis, column axis)
        state_shape += [2 ** (wire - previous - 1), 1, 2]
        matrix_shape += [1, 2, 2]
        previous = wire
    state_shape.append(2 ** (n_wires - 1 - previous))
    matrix_shape.append(1)
    rows_and_columns = jnp.reshape(matrix, (2,) * (2 * k))
    interleaved = jnp.transpose(rows_and_columns, [a for m in range(k) for a in (m, k + m)])
    product = interleaved.reshape(matrix_shape) * state.reshape(state_shape)
    return jnp.sum(product, axis=tuple(3 * m + 2 for m in range(k))).reshape(-1)


def probabilities(state: jnp.ndarray) -> jnp.ndarray:
    """``|amplitude|**2`` of every basis state."""
    return jnp.real(state) ** 2 + jnp.imag(state) ** 2


def wire_probability(state: jnp.ndarray, wire: Wire, n_wires: int) -> jnp.ndarray:
    """The probability that measuring ``wire`` gives 1."""
    bits = wire_bits(basis_indices(n_wires), wire, n_wires)
    return jnp.sum(jnp.where(bits == 1, probabilities(state), 0.0))


def wire_entanglement(state: jnp.ndarray, wire: int, n_wires: int) -> jnp.ndarray:
    """The determinant of known ``wire``'s reduced density matrix (<= 1/4): 0 iff not entangled."""
    halves = jnp.reshape(state, (2**wire, 2, -1))
    zero, one = halves[:, 0], halves[:, 1]
    p0, p1 = jnp.sum(jnp.abs(zero) ** 2), jnp.sum(jnp.abs(one) ** 2)
    return p0 * p1 - jnp.abs(jnp.vdot(one, zero)) ** 2


def project_wire(state: jnp.ndarray, wire: Wire, outcome: Any, probability: Any, n_wires: int) -> jnp.ndarray:
    """The normalized state after measuring ``outcome`` (0/1) on ``wire`` with that probability."""
    bits = wire_bits(basis_indices(n_wires), wire, n_wires)
    kept = jnp.where(bits == outcome, state, 0.0)
    return kept / jnp.sqrt(jnp.where(probability > 0, probability, 1.0)).astype(state.dtype)


TABLE_BITS = 10
"""An affine map is looked up in tables of at most ``2**TABLE_BITS`` entries, one per chunk of bits."""


@dataclass(frozen=True)
class Monomial:
    """A known gate with one non-zero entry per row of its matrix: row ``r`` of the targets takes
    the amplitude of column ``source[r]`` times ``phase[r]``, where the controls hold."""

    targets: tuple
    controls: tuple
    control_values: tuple
    source: np.ndarray
    phase: np.ndarray

    @staticmethod
    def of(matrix: np.ndarray, targets: tuple, controls: tuple = (), control_values: tuple = ()) -> "Monomial | None":
        """The monomial form of a known matrix, or ``None`` when a row has several non-zeros."""
        nonzero = matrix != 0
        if not (nonzero.sum(axis=1) == 1).all():
            return None
        source = nonzero.argmax(axis=1)
        return Monomial(targets, controls, control_values, source, matrix[np.arange(len(source)), source])

    @property
    def has_phase(self) -> bool:
        return not np.all(self.phase == 1)

    @property
    def permutes(self) -> bool:
        return bool((self.source != np.arange(len(self.source))).any())


def apply_monomials(state: jnp.ndarray, gates: Sequence[Monomial], n_wires: int) -> jnp.ndarray:
    """``gates`` applied in order, in one pass (see the module docstring)."""
    state = jnp.asarray(state)
    affine = AffineMap.of(gates, n_wires)
    if affine is not None:
        return _gather(state, affine.indices(n_wires))
    # The barrier keeps XLA from folding the index arithmetic into a 2**n-element literal.
    index = lax.optimization_barrier(basis_indices(n_wires))
    phase = None
    for gate in reversed(gates):
        hold = controls_hold(index, gate.controls, gate.control_values, n_wires) if gate.controls else None
        if gate.has_phase:
            factor = lookup([complex(p) for p in gate.phase], _row_bits(index, gate.targets, n_wires))
            factor = factor if hold is None else jnp.where(hold, factor, 1.0 + 0j)
            phase = factor if phase is None else phase * factor
        if gate.permutes:
            moved = _new_target_bits(index, gate, n_wires)
            index = moved if hold is None else jnp.where(hold, moved, index)
    if any(gate.permutes for gate in gates):
        state = _gather(state, index)
    return state if phase is None else phase * state


def _gather(state: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    return state.at[index].get(mode="promise_in_bounds", unique_indices=True)


def _row_bits(indices, targets: Sequence[int], n_wires: int) -> list:
    return [wire_bits(indices, t, n_wires) for t in targets]


def _deposit(row: int, targets: Sequence[int], n_wires: int) -> int:
    """The index bits of ``targets`` set as in ``row`` (first target most significant)."""
    k = len(targets)
    return sum(((row >> (k - 1 - m)) & 1) << bit_position(t, n_wires) for m, t in enumerate(targets))


def _new_target_bits(index, gate: Monomial, n_wires: int, where: Callable = jnp.where):
    """``index`` with its target bits replaced by those of its row's source column (``where``:
    ``np.where`` for NumPy indices)."""
    flips = {int(s) ^ r for r, s in enumerate(gate.source)}
    if len(flips) == 1:  # the same bits flip in every row (X, CNOT, Toffoli): one xor
        return index ^ np.int32(_deposit(flips.pop(), gate.targets, n_wires))
    cleared = index & np.int32(~sum(1 << bit_position(t, n_wires) for t in gate.targets))
    deposited = [np.int32(_deposit(int(s), gate.targets, n_wires)) for s in gate.source]
    return cleared | lookup(deposited, _row_bits(index, gate.targets, n_wires), where)


def _source_indices(index: np.ndarray, gate: Monomial, n_wires: int) -> np.ndarray:
    """``source_g`` of NumPy ``index``: where each amplitude takes its value from under ``gate``."""
    moved = _new_target_bits(index, gate, n_wires, np.where)
    if not gate.controls:
        return moved
    return np.where(controls_hold(index, gate.controls, gate.control_values, n_wires), moved, index)


@dataclass(frozen=True)
class AffineMap:
    """``j(i) = offset ^ XOR of columns[b] over the set bits b of i``: an index map that is affine
    over GF(2), with ``columns[b]`` the image of bit ``b`` (least significant first).

    >>> cnot = Monomial.of(np.array([[0, 1], [1, 0]]), targets=(1,), controls=(0,), control_values=(1,))
    >>> AffineMap.of([cnot], 2)  # bit 1 (wire 0) also flips bit 0 (wire 1)
    AffineMap(offset=0, columns=(1, 3))
    """

    offset: int
    columns: tuple

    @staticmethod
    def of(gates: Sequence[Monomial], n_wires: int) -> "AffineMap | None":
        """The composed source map of ``gates``; ``None`` when a gate has phases or is not affine."""
        if any(g.has_phase or not _is_affine(g, n_wires) for g in gates):
            return None
        points = np.array([0] + [1 << b for b in range(n_wires)], np.int64)
        for gate in reversed(gates):
            points = _source_indices(points, gate, n_wires)
        return AffineMap(int(points[0]), tuple(int(p ^ points[0]) for p in points[1:]))

    def indices(self, n_wires: int) -> jnp.ndarray:
        """``j(i)`` for every basis index ``i``: one table lookup per chunk of index bits."""
        chunks = -(-n_wires // TABLE_BITS)
        width = -(-n_wires // chunks)
        # The barrier keeps XLA from folding the lookups into a 2**n-element literal.
        index = lax.optimization_barrier(basis_indices(n_wires))
        result = None
        for low in range(0, n_wires, width):
            bits = min(width, n_wires - low)
            table = self.table(low, bits, with_offset=low == 0)
            chunk = index if n_wires == bits else (index >> low) & np.int32(2**bits - 1)
            part = jnp.asarray(table).at[chunk].get(mode="promise_in_bounds")
            result = part if result is None else result ^ part
        return result

    def table(self, low: int, bits: int, with_offset: bool = False) -> np.ndarray:
        """The XOR of the columns of index bits ``low .. low + bits - 1`` for each of their values."""
        values = np.arange(2**bits)
        table = np.full(2**bits, self.offset if with_offset else 0, np.int64)
        for m in range(bits):
            table ^= np.where((values >> m) & 1 == 1, self.columns[low + m], 0)
        return table.astype(np.int32)


def _is_affine(gate: Monomial, n_wires: int) -> bool:
    """Whether ``gate``'s source map is affine: checked on every value of its own wires' bits."""
    wires = tuple(gate.controls) + tuple(gate.targets)
    local = np.array([_deposit(x, wires, n_wires) for x in range(2 ** len(wires))], np.int64)
    source = _source_indices(local, gate, n_wires)
    columns = tuple(source[1 << m] ^ source[0] for m in range(len(wires)))  # bit m of x, lsb first
    return bool((AffineMap(source[0], columns).table(0, len(wires), with_offset=True) == source).all())
