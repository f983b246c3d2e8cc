"""Known gates with one non-zero entry per matrix row (``X``, ``CNOT``, ``SWAP``, ``CZ``, ``S``,
``Toffoli``...): a sequence of them maps ``new[i] = phase(i) * old[j(i)]``, applied in one pass
as one gather and one phase. ``j`` is computed per gate by index arithmetic on ``iota`` (fused by
XLA into the gather), or, when every gate permutes without phases by a map affine over GF(2)
(``X``, ``CNOT``, ``SWAP``; not ``Toffoli``), as an :class:`AffineMap` computed on the host and
applied as one or two lookups into small tables, whatever the number of gates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from .statevector import basis_indices, bit_position, controls_hold, lookup, wire_bits

__all__ = ["Monomial", "AffineMap", "apply_monomials"]

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
