"""Exact derivatives of a circuit's expectation values by the adjoint method.

When every result is an ``expval`` without shots and every traced parameter is a real scalar of a
named gate, the results are a ``jax.custom_jvp`` function of the gates' parameters (JAX's reverse
mode of the simulation would compile the transpose of every fused block: three times the program).
The fused blocks (:func:`~.fusion.fuse`) are a table of data (wires, matrix, gates) walked by one
counted loop whose body is a ``switch`` over a fixed set of kernels (a dense block of one, two or
three wires, an affine permutation, other monomials): XLA compiles the same few kernels whatever
the circuit's depth or wires. The loop applies the blocks, then computes ``|phi_o> = O_o|psi>``
and the values, then applies each block's inverse backwards to ``|psi>`` and the ``|phi_o>``; for
a traced block it keeps ``R[a, b] = sum_r conj(phi_o[a, r]) psi[b, r]`` (``a, b`` the bits of the
block's wires) and ``d<O_o> = 2 Re sum(dB * R)``. The rule is linear in the tangents and is array
code, so higher derivatives are exact too.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..jax_extras import Tracer
from .fusion import (MAX_BLOCK_WIRES, BlockMatrices, _monomial, _shape_of, block_matrices, fuse,
                     has_known_wires, planned_gates)
from .gates import GateRecord, _dagger, batched_matrices, stacked
from .measurements import apply_observable, exact_measurement
from .monomials import AffineMap, Monomial
from .sampling import measurement_kind
from .statevector import INDEX, basis_indices

__all__ = ["adjoint_expvals"]


class _Plan:
    """A straight-line circuit on known wires: its traced parameters (stacked per gate type) and
    its fused blocks."""

    def __init__(self, records: Sequence[GateRecord], n_wires: int):
        self.records, self.n_wires = list(records), n_wires
        self.ok = isinstance(n_wires, (int, np.integer)) and all(map(has_known_wires, records))
        if not self.ok:  # a traced wire: no block can be planned
            return
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(records):
            if r.is_static:
                continue
            if r.op is None or not _real_scalars(r.op.parameters):
                self.ok = False
                return
            groups.setdefault(r.group_key(), []).append(i)
        self.groups = list(groups.values())
        self.place = {id(records[i]): (g, j) for g, rows in enumerate(self.groups) for j, i in enumerate(rows)}
        self.blocks = fuse([_shape_of(r) for r in records])
        self.ok = self.ok and bool(self.groups) and all(
            b.kind == "dense" or b.kind == "monomial" and all(len(records[m].targets) <= TARGET_SLOTS
                                                               for m in b.members) for b in self.blocks)

    def parameters(self) -> list[list[Any]]:
        """Per group, each parameter stacked over its records."""
        return [[stacked([self.records[i].op.parameters[p] for i in rows]).astype(jnp.float64)
                 for p in range(len(self.records[rows[0]].op.parameters))] for rows in self.groups]

    def block_matrices(self, params: list[list[Any]]) -> BlockMatrices:
        """The blocks' matrices, the traced ones by one ``compute_matrix`` call per group."""
        group = functools.cache(
            lambda g: batched_matrices([self.records[i] for i in self.groups[g]], params[g]))

        def matrices(records: Sequence[GateRecord]) -> Any:
            where = [self.place[id(r)] for r in records]
            used = sorted({g for g, _ in where})
            offsets = dict(zip(used, np.cumsum([0] + [len(self.groups[g]) for g in used])))
            order = np.array([offsets[g] + j for g, j in where])
            joined = jnp.concatenate([group(g) for g in used]) if len(used) > 1 else group(used[0])
            return joined if np.array_equal(order, np.arange(len(joined))) else jnp.take(joined, order, axis=0)

        return block_matrices(self.blocks, planned_gates([[r] for r in self.records], matrices), 1)

    def simulate(self, initial: Any, matrices: BlockMatrices) -> Any:
        """The final state: the blocks applied in order."""
        return _walk(self, matrices, initial)[0][0]


def _real_scalars(parameters: Sequence[Any]) -> bool:
    return all(not isinstance(p, Tracer) or (jnp.shape(p) == () and not jnp.iscomplexobj(p)) for p in parameters)


TARGET_SLOTS = 3
"""Targets of a monomial gate in the sweep's table (its controls are a mask): more, no adjoint method."""

# Columns of a row of the sweep's table: the branch, the block's matrix in the stack of its size, the
# slot of its R, the bit positions of its wires (dense), the range of its gates in the gate table
# (monomial); then the layout the vectors arrive in (that of the dense block before: its wires and bits).
_BRANCH, _PICK, _SLOT, _WIRES, _FIRST, _END = 0, 1, 2, 3, 3 + MAX_BLOCK_WIRES, 4 + MAX_BLOCK_WIRES
_HELD = _END + 1


def _walk(plan: _Plan, matrices: BlockMatrices, initial: Any, observe: Callable | None = None):
    """The blocks applied to ``initial`` in order; with ``observe`` (the final state's ``(phis,
    values)``), then their inverses backwards to the state and the ``phis``, keeping ``R``: one loop
    over a table of the blocks (see the module docstring). Returns the vectors (the final state
    first, without ``observe``), the values and, per traced stack, ``R`` ``(observables, blocks,
    d, d)``."""
    n, blocks = plan.n_wires, plan.blocks
    traced = {stack.shape[-1]: s for s, stack in enumerate(matrices.stacks)}  # one stack per size
    count = {d: matrices.stacks[s].shape[1] for d, s in traced.items()}
    known: dict[int, list[np.ndarray]] = {}
    for b in sorted(matrices.known):  # after the traced matrices of their size
        known.setdefault(matrices.known[b].shape[-1], []).append(b)
    parts: dict[int, list[Any]] = {d: [matrices.stacks[s][0]] for d, s in traced.items()}
    for d, bs in known.items():
        parts.setdefault(d, []).append(jnp.asarray(np.stack([matrices.known[b] for b in bs])))
    joined = {d: jnp.concatenate(ms) if len(ms) > 1 else ms[0] for d, ms in parts.items()}
    gates: list[tuple] = []  # the gates of other monomial blocks, in the order their index maps compose
    maps: list[list[int]] = []  # the affine maps of monomial blocks
    kinds: dict[Any, int] = {}

    def row(b: int, forward: bool) -> list[int]:
        block, row = blocks[b], [0] * (_HELD + 1 + MAX_BLOCK_WIRES)
        if block.kind == "monomial":
            members = [plan.records[m] for m in block.members]
            matrices_of = [np.asarray(r.matrix, np.complex128) for r in members]
            applied = ([_monomial(m, r) for m, r in zip(matrices_of, members)] if forward else
                       [_monomial(_dagger(m), r) for m, r in zip(matrices_of, members)][::-1])
            affine = AffineMap.of(applied, n)
            if affine is not None:  # a permutation affine over GF(2) (X, CNOT, SWAP): n + 1 numbers
                row[_BRANCH], row[_FIRST] = kinds.setdefault("affine", len(kinds)), len(maps)
                maps.append([affine.offset, *affine.columns])
            else:
                row[_BRANCH], row[_FIRST] = kinds.setdefault("monomial", len(kinds)), len(gates)
                gates.extend(_gate_row(g, n) for g in reversed(applied))
                row[_END] = len(gates)
            return row
        wires = sorted(block.wires)
        row[_HELD] = len(wires)  # (moved to its own column once the table is complete)
        d = 2 ** len(wires)
        row[_BRANCH] = kinds.setdefault(d, len(kinds))
        row[_WIRES:_WIRES + len(wires)] = [n - 1 - w for w in wires]
        spare = count.get(d, 0)  # the R of a known block, or of one forwards, is dropped
        if b in matrices.known:
            row[_PICK], row[_SLOT] = spare + known[d].index(b), spare
        else:
            row[_PICK] = matrices.slot[b][1]
            row[_SLOT] = spare if forward else row[_PICK]
        row[_PICK] += 0 if forward else len(joined[d])  # the inverses follow
        return row

    rows = [row(b, True) for b in range(len(blocks))]
    vectors, values = initial[None], jnp.zeros(0)
    if observe is not None:
        rows.append([kinds.setdefault("observe", len(kinds))] + [0] * (_HELD + MAX_BLOCK_WIRES))
        rows += [row(b, False) for b in reversed(range(len(blocks)))]
        joined = {d: jnp.concatenate([m, jnp.conj(jnp.swapaxes(m, -1, -2))]) for d, m in joined.items()}
        phis, values = jax.eval_shape(observe, initial)
        vectors = jnp.concatenate([vectors, jnp.zeros(phis.shape, phis.dtype)])
        values = jnp.zeros(values.shape, values.dtype)
    observables = len(vectors) - 1
    held = [0] * (1 + MAX_BLOCK_WIRES)  # each step leaves the vectors in its block's layout (or in order)
    for r in rows:
        r[_HELD:], held = held, [r[_HELD], *r[_WIRES:_WIRES + MAX_BLOCK_WIRES]]
    table = jnp.asarray(np.asarray(rows, np.int32))
    sizes = sorted(traced, key=traced.get) if observables else []  # the stacks whose blocks keep R
    crosses = tuple(jnp.zeros((observables, count[d] + 1, d, d), jnp.complex128) for d in sizes)

    def zeros() -> tuple:
        return tuple(jnp.zeros((observables, d, d), jnp.complex128) for d in sizes)

    def dense(k: int) -> Callable:
        def branch(vectors, values, row):
            d = 2**k
            blocked = _gather(vectors, _block_layout([row[_WIRES + m] for m in range(k)], n), row)
            matrix = lax.dynamic_index_in_dim(joined[d], row[_PICK], keepdims=False)
            moved = jnp.einsum("xra,ba->xrb", blocked, matrix)
            made = list(zeros())
            if d in sizes:  # R[o, a, b] = sum_r conj(phi_o[r, a]) psi[r, b]
                made[sizes.index(d)] = jnp.einsum("ora,rb->oab", jnp.conj(blocked[1:]), moved[0])
            return moved.reshape(len(vectors), -1), values, tuple(made)  # in the block's layout

        return branch

    def monomial(vectors, values, row):
        index, phase = _monomial_map(gate_table, row[_FIRST], row[_END], n)
        return phase * _gather(vectors, index, row), values, zeros()

    def permutation(vectors, values, row):
        index = basis_indices(n)
        columns = lax.dynamic_index_in_dim(map_table, row[_FIRST], keepdims=False)
        bits = [jnp.where((index >> b) & 1 == 1, columns[1 + b], np.int32(0)) for b in range(n)]
        source = functools.reduce(jnp.bitwise_xor, bits, columns[0])
        return _gather(vectors, source, row), values, zeros()

    def observed(vectors, values, row):
        state = _gather(vectors[:1], basis_indices(n), row)
        phis, values = observe(state[0])
        return jnp.concatenate([state, phis]), values, zeros()

    gate_table = tuple(jnp.asarray(np.stack(column)) for column in zip(*gates))
    map_table = jnp.asarray(np.asarray(maps, np.int32).reshape(len(maps), n + 1))
    chosen = {"affine": permutation, "monomial": monomial, "observe": observed}
    branches = [chosen[kind] if kind in chosen else dense(kind.bit_length() - 1) for kind in kinds]

    def body(i, carry):
        vectors, values, crosses = carry
        row = table[i]
        if len(branches) > 1:
            vectors, values, made = lax.switch(row[_BRANCH], branches, vectors, values, row)
        else:
            vectors, values, made = branches[0](vectors, values, row)
        slots = [jnp.where(row[_BRANCH] == kinds[d], row[_SLOT], c.shape[1] - 1)  # else the spare slot
                 for d, c in zip(sizes, crosses)]
        crosses = tuple(lax.dynamic_update_index_in_dim(c, m, s, 1) for c, m, s in zip(crosses, made, slots))
        return vectors, values, crosses

    vectors, values, crosses = lax.fori_loop(0, len(rows), body, (vectors, values, crosses))
    vectors = _gather(vectors, basis_indices(n), [0] * _HELD + held)  # in order
    return vectors, values, tuple(c[:, :-1] for c in crosses)


def _block_layout(positions: list[Any], n_wires: int) -> Any:
    """``(2**(n - k), 2**k)``: the index of each amplitude by the bits of the other wires and of a
    block's wires at bit ``positions`` (traced; descending, the first most significant in its matrix)."""
    k = len(positions)
    rest = lax.iota(INDEX, 2 ** (n_wires - k))
    for q in reversed(positions):  # ascending
        low = (np.int32(1) << q) - 1
        rest = ((rest & ~low) << 1) | (rest & low)  # a zero bit inserted at q
    column = lax.iota(INDEX, 2**k)
    bits = [(column >> (k - 1 - m)) & 1 for m in range(k)]
    return rest[:, None] | sum((b << q for b, q in zip(bits, positions)), np.int32(0))[None, :]


def _gather(vectors: Any, index: Any, row: Any) -> Any:
    """``vectors`` (held in the layout of ``row``'s held columns) at the amplitudes ``index``: where
    each amplitude is in that layout, its position by the other wires' bits and then the block's."""
    k, inner = row[_HELD], np.int32(0)
    for m in range(MAX_BLOCK_WIRES):  # the block's bits, the first most significant
        inner = jnp.where(m < k, (inner << 1) | ((index >> row[_HELD + 1 + m]) & 1), inner)
    for m in range(MAX_BLOCK_WIRES):  # the others': each removal (descending) leaves the lower bits
        q = row[_HELD + 1 + m]
        index = jnp.where(m < k, ((index >> (q + 1)) << q) | (index & ((np.int32(1) << q) - 1)), index)
    return vectors.at[:, (index << k) | inner].get(mode="promise_in_bounds", unique_indices=True)


def _gate_row(gate: Monomial, n_wires: int) -> tuple[np.ndarray, np.ndarray]:
    """A monomial gate as data: the masks of its controls and control values, of each target slot
    (the last ones used) and of them all; per row of its target bits, the bits it takes them from
    (in place) and the phase."""
    k, size = len(gate.targets), 2**TARGET_SLOTS
    masks = [0] * (TARGET_SLOTS - k) + [1 << (n_wires - 1 - t) for t in gate.targets]
    controls = [1 << (n_wires - 1 - c) for c in gate.controls]
    pattern = sum(m for m, v in zip(controls, gate.control_values) if v)
    source = [sum(masks[TARGET_SLOTS - k + m] for m in range(k) if (s >> (k - 1 - m)) & 1)
              for s in gate.source]
    ints = [sum(controls), pattern, *masks, sum(masks), *source, *[0] * (size - len(source))]
    return np.asarray(ints, np.int32), np.concatenate([gate.phase, np.ones(size - len(gate.phase))])


def _monomial_map(table: tuple[Any, Any], first: Any, end: Any, n_wires: int) -> tuple[Any, Any]:
    """``(j, phase)`` of the gates ``first .. end - 1`` of ``table`` composed: the block maps
    ``new[i] = phase[i] * old[j[i]]``; the gates' maps computed on indices, one loop step each."""

    def gate(g, carry):
        index, phase = carry
        ints, phases = table[0][g], table[1][g]
        row = sum((((index & ints[2 + m]) != 0).astype(INDEX) << (TARGET_SLOTS - 1 - m)
                   for m in range(TARGET_SLOTS)), np.int32(0))
        hold = (index & ints[0]) == ints[1]
        moved = (index & ~ints[2 + TARGET_SLOTS]) | ints[3 + TARGET_SLOTS:][row]
        return jnp.where(hold, moved, index), jnp.where(hold, phases[row], 1.0) * phase

    start = (basis_indices(n_wires), jnp.ones(2**n_wires, jnp.complex128))
    return lax.fori_loop(first, end, gate, start)


def adjoint_expvals(mps: Sequence[Any], initial: Any, records: Sequence[GateRecord], n_wires: Any,
                    wires: Any) -> list | None:
    """The values of the ``expval`` measurements ``mps`` after ``records`` applied to ``initial``
    (a constant), with derivatives by the adjoint method; ``None`` when the method does not apply."""
    if not mps or not records or any(measurement_kind(m) != "expval" or m.mv is not None or m.obs is None
                                     for m in mps):
        return None
    if any(isinstance(d, Tracer) for m in mps for d in jax.tree_util.tree_leaves(m.obs.data)):
        return None
    plan = _Plan(records, n_wires)
    if not plan.ok:
        return None

    def measured(state):
        return jnp.stack([exact_measurement(m, state, n_wires, wires) for m in mps])

    @jax.custom_jvp
    def expvals(initial, params):
        return measured(plan.simulate(initial, plan.block_matrices(params)))

    @expvals.defjvp
    def _(primals, tangents):
        (initial, params), (_, dparams) = primals, tangents  # the initial state is constant
        held = []

        def stacks(params):
            held.append(plan.block_matrices(params))
            return held[-1].stacks

        primal, dstacks = jax.jvp(stacks, (params,), (dparams,))
        matrices = replace(held[0], stacks=list(primal))

        def observe(state):
            phis = jnp.stack([apply_observable(m.obs, state, n_wires, wires) for m in mps])
            return phis, measured(state)

        _, values, crosses = _walk(plan, matrices, initial, observe)
        out = sum(2 * jnp.real(jnp.einsum("bij,obij->o", d[0], r)) for d, r in zip(dstacks, crosses))
        return values, out

    result = expvals(lax.stop_gradient(initial), plan.parameters())
    return [result[i] for i in range(len(mps))]
