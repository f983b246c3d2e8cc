"""Exact derivatives of a circuit's expectation values by the adjoint method.

When every result is an ``expval`` without shots and every traced parameter is a real scalar of a
named gate, the results are a ``jax.custom_jvp`` function of the gates' parameters (JAX's reverse
mode of the simulation would compile the transpose of every fused block: three times the program).
Its value is the forward simulation of :mod:`.fusion`; its rule walks the fused blocks
(:func:`~.fusion.fuse`) backwards in one counted loop whose body is a ``switch`` over the distinct
block kinds (one static kernel each). ``|psi>`` and ``|phi_o> = O_o|psi>`` take each block's
inverse; for a traced block the loop keeps ``R[a, b] = sum_r conj(phi_o[a, r]) psi[b, r]`` (``a,
b`` the bits of the block's wires) and ``d<O_o> = 2 Re sum(dB * R)``. The rule is linear in the
tangents and is array code, so higher derivatives are exact too.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..jax_extras import Tracer
from .fusion import (MAX_UNROLLED_BLOCKS, Block, BlockMatrices, PlannedGate, _apply_blocks, _monomial, _shape_of, block_matrices,
                     fuse, has_known_wires, planned_gates)
from .gates import GateRecord, _dagger, batched_matrices, stacked
from .measurements import apply_observable, exact_measurement, measurement_kind
from .statevector import Monomial, apply_block, apply_monomials

__all__ = ["adjoint_expvals"]

MAX_KINDS = 32
"""At most this many kernels (kinds of block) in the sweep's loop body, else JAX's reverse mode."""


def _cross(phis: Any, psi: Any, wires: Sequence[int], n_wires: int) -> Any:
    """``(observables, d, d)``: ``R[o, a, b] = sum_r conj(phi_o[a, r]) psi[b, r]``, ``a, b`` the
    bits of the ascending ``wires`` (first most significant), ``r`` those of the other wires."""
    shape, previous = [], -1
    for w in wires:  # (other wires before it, the wire)
        shape += [2 ** (w - previous - 1), 2]
        previous = w
    shape.append(2 ** (n_wires - 1 - previous))
    m = len(wires)
    rest, a, b = "cdef"[:m + 1], "klm"[:m], "pqs"[:m]
    phi_axes = "o" + "".join(rest[i] + a[i] for i in range(m)) + rest[m]
    psi_axes = "".join(rest[i] + b[i] for i in range(m)) + rest[m]
    cross = jnp.einsum(f"{phi_axes},{psi_axes}->o{a}{b}", jnp.conj(phis).reshape((-1, *shape)), psi.reshape(shape))
    return cross.reshape(-1, 2**m, 2**m)


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
        self.gates = [PlannedGate(r.targets, r.controls, tuple(int(v) for v in r.control_values), None,
                                  _monomial(np.asarray(r.matrix, np.complex128), r) if r.is_static else None)
                      for r in records]
        self.ok = self.ok and bool(self.groups) and all(b.kind != "wide" for b in self.blocks)

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
        """The final state: the blocks applied in order (unrolled when few, else by :func:`_walk`)."""
        if len(self.blocks) <= MAX_UNROLLED_BLOCKS:
            return _apply_blocks(initial, self.blocks, self.gates, matrices.picked(lambda stack: stack[0]), self.n_wires)
        return _walk(self, matrices, initial[None], forward=True)[0][0]

    def kind(self, block: Block) -> tuple:
        """Equal kinds: blocks that one kernel of the sweep applies."""
        members = [self.records[m] for m in block.members]
        if block.kind == "monomial":
            return ("monomial",) + tuple((r.targets, r.controls, tuple(r.control_values),
                                          np.asarray(r.matrix, np.complex128).tobytes()) for r in members)
        return ("dense", tuple(sorted(block.wires)), all(r.is_static for r in members))


def _real_scalars(parameters: Sequence[Any]) -> bool:
    return all(not isinstance(p, Tracer) or (jnp.shape(p) == () and not jnp.iscomplexobj(p)) for p in parameters)


def _walk(plan: _Plan, matrices: BlockMatrices, vectors: Any, forward: bool, observables: int = 0):
    """The blocks applied to ``vectors`` (rows) by one loop over a ``switch`` of block kinds: in
    order (``forward``), or their inverses backwards, keeping ``R`` for the ``observables`` vectors
    after the first. Returns the vectors and, per traced stack, ``R``: ``(observables, blocks, d,
    d)``. The branches hold only what differs between kinds (the wires): each step's matrix is picked, and
    its ``R`` stored, outside the ``switch`` (XLA compiles every branch's kernels anew)."""
    known_by_size: dict[int, list[np.ndarray]] = {}
    traced_size = [stack.shape[-1] for stack in matrices.stacks]
    kinds: dict[tuple, int] = {}  # a branch per kind of block
    branches, steps = [], []
    for b in (range(len(plan.blocks)) if forward else reversed(range(len(plan.blocks)))):
        block = plan.blocks[b]
        wires = tuple(sorted(block.wires))
        slots = [len(stack[0]) for stack in matrices.stacks]  # a spare slot: R of no traced block
        if block.kind == "monomial":
            members = [plan.records[m] for m in block.members]
            gates = ([plan.gates[m].monomial for m in block.members] if forward else
                     [_monomial(_dagger(np.asarray(r.matrix, np.complex128)), r) for r in members[::-1]])
            key, row, kept = plan.kind(block), 0, (None, gates)
        elif b in matrices.known:
            d = 2 ** len(wires)
            known_by_size.setdefault(d, []).append(matrices.known[b])
            key, row, kept = ("known", wires), ("known", d, len(known_by_size[d]) - 1), (None,)
        else:
            stack, position = matrices.slot[b]
            key, row, slots[stack] = ("traced", wires, stack), ("traced", stack, position), position
            kept = (None if forward else stack,)
        if key not in kinds:  # (kept: the branch's R to make, and its monomials)
            kinds[key] = len(branches)
            branches.append(_branch(wires, plan.n_wires, *kept))
        steps.append((kinds[key], row, slots))
    # per size of block, one stack of its matrices (inverted for the backward sweep): known ones first
    by_size = {d: [jnp.asarray(np.stack(ms))] for d, ms in sorted(known_by_size.items())}
    for s, stack in enumerate(matrices.stacks):
        by_size.setdefault(traced_size[s], []).append(stack[0])
    offset = {("known", d): 0 for d in known_by_size}
    offset.update({("traced", s): len(known_by_size.get(d, ())) for s, d in enumerate(traced_size)})
    sizes = list(by_size)
    rows = [[0] * len(sizes) for _ in steps]
    for (_, row, _), picks in zip(steps, rows):
        if row:
            d = row[1] if row[0] == "known" else traced_size[row[1]]
            picks[sizes.index(d)] = offset[row[:2]] + row[2]
    joined = {d: jnp.concatenate(ms) if len(ms) > 1 else ms[0] for d, ms in by_size.items()}
    joined = {d: m if forward else jnp.conj(jnp.swapaxes(m, -1, -2)) for d, m in joined.items()}
    table = np.asarray([[k, *picks, *slots] for (k, _, slots), picks in zip(steps, rows)], np.int32)
    table = jnp.asarray(table)
    crosses = tuple(jnp.zeros((observables, len(stack[0]) + 1) + stack.shape[2:], jnp.complex128)
                    for stack in matrices.stacks)

    def body(i, carry):
        vectors, crosses = carry
        picked = {d: lax.dynamic_index_in_dim(joined[d], table[i, 1 + j], keepdims=False)
                  for j, d in enumerate(sizes)}
        cases = [lambda v, f=f: f(v, picked, crosses) for f in branches]
        vectors, made = lax.switch(table[i, 0], cases, vectors)
        slots = table[i, 1 + len(sizes):]
        return vectors, tuple(lax.dynamic_update_index_in_dim(c, m, slots[s], 1)
                              for s, (c, m) in enumerate(zip(crosses, made)))

    vectors, crosses = lax.fori_loop(0, len(steps), body, (vectors, crosses))
    return vectors, tuple(c[:, :-1] for c in crosses)


def _branch(wires: tuple, n_wires: int, keeping: int | None, monomials: list[Monomial] | None = None):
    """A block on ``wires``: the vectors take its ``monomials``, else the picked matrix of its size;
    for the traced stack ``keeping`` (backwards), the branch makes its ``R`` (else zeros, stored in
    the spare slot)."""

    def branch(vectors, picked, crosses):
        if monomials is not None:
            moved = jax.vmap(lambda v: apply_monomials(v, monomials, n_wires))(vectors)
        else:
            moved = jax.vmap(lambda v: apply_block(v, picked[2 ** len(wires)], list(wires), n_wires))(vectors)
        made = [jnp.zeros((c.shape[0], *c.shape[2:]), c.dtype) for c in crosses]
        if keeping is not None:
            made[keeping] = _cross(vectors[1:], moved[0], wires, n_wires)
        return moved, tuple(made)

    return branch


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
    if not plan.ok or len({plan.kind(b) for b in plan.blocks}) > MAX_KINDS:
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
        state = plan.simulate(initial, matrices)
        phis = jnp.stack([apply_observable(m.obs, state, n_wires, wires) for m in mps])
        _, crosses = _walk(plan, matrices, jnp.concatenate([state[None], phis]), False, len(mps))
        out = sum(2 * jnp.real(jnp.einsum("bij,obij->o", d[0], r)) for d, r in zip(dstacks, crosses))
        return measured(state), out

    result = expvals(lax.stop_gradient(initial), plan.parameters())
    return [result[i] for i in range(len(mps))]
