"""A state vector split over devices: ``qjit(state_sharding=...)``.

The state of ``n`` qubits is split over ``2**k`` devices along ``k`` *global* qubits (the most
significant index bits; one mesh axis of size 2 each), in one ``jax.shard_map``. Gates on local
wires run fused on each slice; a gate on a global qubit first swaps it with a local one (an
``all_to_all``), and a *layout* records which wire sits where. Measurements reduce with ``psum``.
Only straight-line circuits on known wires without mid-circuit measurements run here.

>>> import jax, numpy as np, pennylane as qml
>>> from jax.sharding import NamedSharding, PartitionSpec as P
>>> from catalyst_lite import qjit
>>> mesh = jax.make_mesh((1,), ("s",))                # 2**k devices: here k = 0
>>> @qjit(state_sharding=NamedSharding(mesh, P("s")))
... @qml.qnode(qml.device("default.qubit", wires=3))
... def ghz(x: float):
...     qml.RY(x, 0); qml.CNOT([0, 1]); qml.CNOT([1, 2])
...     return qml.expval(qml.Z(0) @ qml.Z(2)), qml.probs(wires=[2])
>>> e, p = ghz(0.5)
>>> round(float(e), 6), [round(float(v), 6) for v in p]
(1.0, [0.938791, 0.061209])
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import replace
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..control_flow.common import control_flow_handler
from ..errors import ArgumentValueError, QuantumOperationError
from ..jax_extras import context_mesh, use_abstract_mesh
from . import prng
from .fusion import apply_fused
from .gates import DecomposesIntoControlFlow, GateRecord, WireMap, _qml, gate_records
from .measurements import apply_observable
from .statevector import basis_indices, outcome_index, probabilities, zero_state

__all__ = ["StateSharding", "execute_sharded_qnode"]


class StateSharding:
    """``qjit(state_sharding=...)``: a ``NamedSharding(mesh, P(axes))`` (a 1-D spec) or mesh axis
    names under ``jax.sharding.set_mesh``, axes of power-of-2 sizes."""

    def __init__(self, option: Any, fn_name: str):
        if isinstance(option, NamedSharding):
            mesh, spec = option.mesh, tuple(option.spec)
            if len(spec) != 1 or spec[0] is None:
                raise ArgumentValueError(
                    f"qjit(state_sharding=...) of {fn_name}: the state is a vector, its sharding "
                    f"names the mesh axes of its one dimension, got {option.spec}."
                )
            names = spec[0]
        elif isinstance(option, (str, tuple)):
            mesh, names = context_mesh(), option
            if mesh is None:
                raise ArgumentValueError(
                    f"qjit(state_sharding={option!r}) of {fn_name}: mesh axis names need a mesh: call "
                    "it under jax.sharding.set_mesh(mesh), or give NamedSharding(mesh, P(axes))."
                )
        else:
            raise ArgumentValueError(
                f"qjit(state_sharding={option!r}) of {fn_name}: give a jax.sharding.NamedSharding "
                "(or mesh axis names under jax.sharding.set_mesh)."
            )
        self.names = names if isinstance(names, tuple) else (names,)
        unknown = [a for a in self.names if a not in mesh.axis_names]
        sizes = [mesh.shape[a] for a in self.names if a not in unknown]
        if unknown or any(s & (s - 1) for s in sizes):
            raise ArgumentValueError(
                f"qjit(state_sharding=...) of {fn_name}: the state is split over mesh axes of sizes "
                f"that are powers of 2; {self.names} on a mesh {dict(mesh.shape)}."
            )
        # One axis of size 2 per global qubit (most significant first), in the devices' order.
        split = {a: [f"{a}:{i}" for i in range(int(math.log2(mesh.shape[a])))] for a in self.names}
        self.qubit_axes = tuple(q for a in self.names for q in split[a])
        self.k = len(self.qubit_axes)
        axis_names = [q for a in mesh.axis_names for q in split.get(a, [a])]
        shape = [2 if a in split else mesh.shape[a] for a in mesh.axis_names for _ in split.get(a, [a])]
        self.mesh = Mesh(mesh.devices.reshape(shape), tuple(axis_names))


class _Layout:
    """Inside ``shard_map``: this device's slice and the wire at each position (``< k``: global)."""

    def __init__(self, n: int, sharding: StateSharding, uses: Sequence[Sequence[int]] = ()):
        self.n, self.k, self.axes = n, sharding.k, sharding.qubit_axes
        self.wire_at = list(range(n))  # position -> wire
        self.local = zero_state(n - self.k) * (self.device() == 0)
        self.pending: list[GateRecord] = []  # gates on local positions, not yet applied
        self.uses: dict[int, list[int]] = {}  # wire -> the gates (their order) that act on it
        for gate, wires in enumerate(uses):
            for w in wires:
                self.uses.setdefault(w, []).append(gate)
        self.gate = 0  # the gate being applied

    def device(self) -> Any:
        return functools.reduce(lambda index, axis: index * 2 + lax.axis_index(axis), self.axes, 0)

    def position(self, wire: int) -> int:
        return self.wire_at.index(wire)

    def swap(self, g: int, p: int) -> None:
        """Swap global position ``g`` with local ``p``: one all_to_all over ``g``'s axis."""
        j = p - self.k
        view = (self.flush() if j in self._queued_positions() else self.local).reshape(2**j, 2, -1)
        self.local = lax.all_to_all(view, self.axes[g], 1, 1, tiled=True).reshape(-1)
        self.wire_at[g], self.wire_at[p] = self.wire_at[p], self.wire_at[g]

    def _queued_positions(self) -> set[int]:  # the local positions queued gates act on
        return {q for r in self.pending for q in (*r.targets, *r.controls)}

    def _next_use(self, wire: int) -> float:
        later = self.uses.get(wire, [])
        i = bisect.bisect_right(later, self.gate)
        return later[i] if i < len(later) else math.inf

    def localize(self, wires: Sequence[int]) -> list[int]:
        """The local positions of ``wires``, each global one swapped with a local position holding
        none of them: preferably one no queued gate acts on, then the one needed latest."""
        for w in wires:
            g = self.position(w)
            if g < self.k:
                queued = self._queued_positions()
                free = [p for p in range(self.k, self.n) if self.wire_at[p] not in wires]
                if not free:
                    raise QuantumOperationError(
                        f"state_sharding: an operation on {len(wires)} wires needs them on one device, "
                        f"which holds {self.n - self.k} of the {self.n} qubits."
                    )
                self.swap(g, min(free, key=lambda p: (p - self.k in queued, -self._next_use(self.wire_at[p]), p)))
        return [self.position(w) - self.k for w in wires]

    def apply(self, record: GateRecord) -> None:
        """Queue gate number ``self.gate`` on the slice (on positions), its global wires swapped in
        first; the queued gates are applied fused when a swap or measurement needs them."""
        positions = self.localize([*record.targets, *record.controls])
        k = len(record.targets)
        self.pending.append(replace(record, targets=tuple(positions[:k]), controls=tuple(positions[k:])))
        self.gate += 1

    def flush(self) -> Any:
        if self.pending:
            self.local = apply_fused(self.local, self.pending, self.n - self.k)
            self.pending = []
        return self.local

    def indices(self) -> Any:
        """The index (in positions) of each amplitude of the slice in the whole state."""
        return basis_indices(self.n - self.k) + self.device() * 2 ** (self.n - self.k)

    def restore(self) -> Any:
        """The slice with wire ``i`` at position ``i`` again (the order of ``qml.state()``)."""
        for g in range(self.k):
            if self.wire_at[g] != g:
                if self.position(g) < self.k:  # held by another global position: through a local one
                    self.swap(self.position(g), self.k)
                self.swap(g, self.position(g))
        local = self.wire_at[self.k:]  # local positions: a transpose, no communication
        tensor = self.local.reshape((2,) * (self.n - self.k))
        self.local = jnp.transpose(tensor, [local.index(w) for w in range(self.k, self.n)]).reshape(-1)
        self.wire_at = list(range(self.n))
        return self.local


def execute_sharded_qnode(qnode: Any, qfunc: Any, args: tuple, kwargs: dict, sharding: StateSharding,
                          key: Any, shots: Any) -> Any:
    """The results of ``qnode`` (running ``qfunc``) with its state split by ``sharding``."""
    qml = _qml()
    labels = None if qnode.device.wires is None else list(qnode.device.wires.labels)
    if labels is None or len(labels) <= sharding.k:
        raise QuantumOperationError(
            f"state_sharding: the device needs known wires, more than the {sharding.k} global qubits of "
            f"{2**sharding.k} devices."
        )
    if shots.partitioned or isinstance(shots.total, jax.core.Tracer):
        raise QuantumOperationError("state_sharding: shots must be one known number (no shot vector).")
    with qml.queuing.AnnotatedQueue() as queue, control_flow_handler(_StraightLine()):
        output = qfunc(*args, **kwargs)
    tape = qml.tape.QuantumScript.from_queue(queue)
    wires = WireMap(labels)
    records = _records(tape.operations, wires)
    n, sharded_state = len(labels), P(sharding.qubit_axes)
    draw_key = key.split() if shots.finite else jnp.zeros(2, jnp.uint32)
    # Known matrices stay constants for fusion; traced ones enter as replicated arguments.
    traced = [i for i, r in enumerate(records) if not r.is_static]

    def circuit(draw_key: Any, *matrices: Any) -> list[Any]:
        layout = _Layout(n, sharding, [(*r.targets, *r.controls) for r in records])
        given = dict(zip(traced, matrices))
        for i, r in enumerate(records):
            layout.apply(replace(r, op=None, adjoint=False, explicit=given[i]) if i in given else r)
        layout.flush()
        return [_measure(m, layout, wires, shots.total, draw_key) for m in tape.measurements]

    specs = [sharded_state if isinstance(m, qml.measurements.StateMP) else P() for m in tape.measurements]
    # The qubits' mesh in effect while the circuit is traced (shard_map wants the context's).
    with use_abstract_mesh(sharding.mesh.abstract_mesh):
        results = jax.shard_map(circuit, mesh=sharding.mesh, in_specs=P(), out_specs=specs,
                                check_vma=False)(draw_key, *(records[i].matrix for i in traced))
    found = dict(zip(map(id, tape.measurements), results))
    return jax.tree_util.tree_map(lambda x: found.get(id(x), x), output, is_leaf=lambda x: id(x) in found)


class _StraightLine:
    """The control-flow handler of a sharded circuit: loops and branches are refused."""

    def _refuse(self, *_: Any) -> Any:
        raise QuantumOperationError(
            "state_sharding: a sharded state runs straight-line circuits; for_loop, while_loop and "
            "cond inside the QNode are not supported (unroll them in Python)."
        )

    for_loop = while_loop = cond = _refuse


def _records(operations: Sequence[Any], wires: WireMap) -> list[GateRecord]:
    """The gate records of the circuit's operations (:func:`.gates.gate_records`), on known wires."""
    records = []
    for op in operations:
        if op.name in ("Barrier", "Identity") or type(op).__name__ == "Snapshot":
            continue
        if type(op).__name__ == "MidMeasureMP":
            raise QuantumOperationError(f"state_sharding: {op.name} is not supported on a sharded state.")
        try:
            records += gate_records(op, wires)
        except DecomposesIntoControlFlow:
            raise QuantumOperationError(
                f"state_sharding: the decomposition of {op.name} calls for_loop, while_loop or cond, "
                "which a sharded state does not run (straight-line circuits only)."
            ) from None
    if not all(isinstance(w, int) for r in records for w in (*r.targets, *r.controls)):
        raise QuantumOperationError("state_sharding: the wires of a sharded state's gates must be known "
                                    "labels, not traced values.")
    return records


def _measure(m: Any, layout: _Layout, device: WireMap, shots: Any, key: Any) -> Any:
    """One terminal measurement of the sharded state, reduced over the devices."""
    qml = _qml()
    axes, wires = layout.axes, list(device.indices(m.wires or device.labels, "state_sharding"))
    if isinstance(m, qml.measurements.StateMP) and shots is None:
        return layout.restore()
    if isinstance(m, qml.measurements.ProbabilityMP) and m.obs is None and shots is None:
        outcomes = outcome_index(layout.indices(), tuple(layout.position(w) for w in wires), layout.n)
        local = jnp.zeros(2 ** len(wires), jnp.float64).at[outcomes].add(probabilities(layout.local))
        return lax.psum(local, axes)
    if isinstance(m, qml.measurements.ExpectationMP) and m.obs is not None and shots is None:
        return lax.psum(_expval(m.obs, layout, device), axes)
    if isinstance(m, qml.measurements.SampleMP) and m.obs is None and shots is not None:
        return _samples(layout, wires, shots, key)
    raise QuantumOperationError(
        f"state_sharding: {type(m).__name__}{' of an observable' if m.obs is not None else ''}"
        f"{' with shots' if shots is not None else ' without shots'} is not supported on a sharded "
        "state; exact expval/probs/state and sample with shots are."
    )


def _expval(obs: Any, layout: _Layout, device: WireMap) -> Any:
    """This slice's part of ``<psi|obs|psi>``, term by term, each term's wires made local."""
    qml = _qml()
    try:
        coeffs, terms = obs.terms()
    except qml.operation.TermsUndefinedError:
        coeffs, terms = [1.0], [obs]
    total = 0.0
    for c, term in zip(coeffs, terms):
        layout.localize(device.indices(term.wires, "state_sharding"))  # swaps first: they change layout.local
        local = WireMap([device.labels[w] for w in layout.wire_at[layout.k:]])  # labels by slice position
        applied = apply_observable(term, layout.local, layout.n - layout.k, local)
        total = total + c * jnp.real(jnp.vdot(layout.local, applied))
    return total


def _samples(layout: _Layout, wires: list[int], shots: int, key: Any) -> Any:
    """``shots`` samples of ``wires``: a device drawn from the slices' totals (the same draw on
    every device), then an index in its slice; one ``psum`` of the indices."""
    probs = probabilities(layout.local)
    totals = lax.psum(jnp.zeros(2**layout.k).at[layout.device()].set(jnp.sum(probs)), layout.axes)
    device_key, index_key = prng.split(key)
    devices = prng.sample_indices(device_key, totals, shots)
    local = prng.sample_indices(index_key, probs, shots)
    mine = devices == layout.device()
    drawn = lax.psum(jnp.where(mine, local + layout.device() * 2 ** (layout.n - layout.k), 0), layout.axes)
    bits = [(drawn >> (layout.n - 1 - layout.position(w))) & 1 for w in wires]
    return jnp.stack(bits, axis=-1).astype(jnp.int64)

