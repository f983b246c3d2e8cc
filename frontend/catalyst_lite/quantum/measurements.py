"""Terminal measurements of a compiled circuit, computed from the final state vector: exact
without shots, else statistics of the shots' records (:mod:`.sampling`), as ``default.qubit``
gives them. Observables with a Pauli sentence are applied as a bit flip and a sign per word;
others by their matrix.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import QuantumOperationError
from ..jax_extras import Tracer
from .gates import _qml
from .sampling import (
    measured_wires, measurement_kind, rotate_to_eigenbasis, shot_records, static_eigvals, statistic, value_record,
)
from .mcm import ShotPlan
from .statevector import apply_matrix, basis_indices, bit_mask, outcome_index, probabilities, wire_bits
from .wires import WireMap

__all__ = ["measure_terminal", "exact_measurement", "check_hermitian", "SUPPORTED_MEASUREMENTS",
           "apply_observable"]

SUPPORTED_MEASUREMENTS = ("expval", "var", "probs", "state", "sample", "counts", "density_matrix", "vn_entropy",
                          "purity", "mutual_info")


def _pauli_word_apply(state, word: dict, coeff: Any, n_wires: int, wires: WireMap):
    """``coeff * P|state>`` for one Pauli word ``{wire: "X"|"Y"|"Z"}``."""
    # The barrier keeps XLA from constant-folding index arithmetic into 2**n-element literals.
    indices = lax.optimization_barrier(basis_indices(n_wires))
    flips = []
    factor = jnp.asarray(coeff, jnp.complex128)
    for label, pauli in word.items():
        w = wires.index(label, "observable")
        bit = wire_bits(indices, w, n_wires)
        if pauli in "XY":
            flips.append(bit_mask(w, n_wires))
        if pauli == "Y":
            factor = factor * 1j * (2 * bit - 1)
        elif pauli == "Z":
            factor = factor * (1 - 2 * bit)
    if not flips:
        return factor * state
    partner = indices ^ functools.reduce(operator.or_, flips)
    return factor * state.at[partner].get(mode="promise_in_bounds", unique_indices=True)


def apply_observable(obs: Any, state, n_wires: int, wires: WireMap):
    """``O|state>`` for an observable ``O``."""
    sentence = obs.pauli_rep
    if sentence is not None:
        out = jnp.zeros_like(state)
        for word, coeff in sentence.items():
            out = out + _pauli_word_apply(state, dict(word), coeff, n_wires, wires)
        return out
    qml = _qml()
    if isinstance(obs, (qml.ops.Prod, qml.ops.Sum, qml.ops.SProd)) and any(isinstance(w, Tracer) for w in obs.wires):
        # PennyLane's matrix of a composite observable compares its wires (traced here): by its parts
        if isinstance(obs, qml.ops.Sum):
            return functools.reduce(operator.add, [apply_observable(o, state, n_wires, wires) for o in obs.operands])
        if isinstance(obs, qml.ops.SProd):
            return obs.scalar * apply_observable(obs.base, state, n_wires, wires)
        for factor in reversed(obs.operands):  # the matrix of A @ B is A's times B's
            state = apply_observable(factor, state, n_wires, wires)
        return state
    if not obs.has_matrix:
        raise QuantumOperationError(
            f"catalyst_lite cannot measure the observable {obs}: it has neither a Pauli "
            "representation nor a matrix."
        )
    matrix, size = obs.matrix(), 2 ** len(obs.wires)
    if tuple(matrix.shape) != (size, size):  # PennyLane checks only matrices that are not traced
        raise QuantumOperationError(  # PennyLane's phrase first, then ours
            f"Expected input matrix to have shape {size}x{size}, but a matrix with shape "
            f"{'x'.join(map(str, matrix.shape))} was passed: {obs.name} on the wires {obs.wires.tolist()} "
            f"needs a {size}x{size} matrix."
        )
    return apply_matrix(state, matrix, wires.indices(obs.wires, obs.name), n_wires)


def _marginal(probs, targets: tuple | None, n_wires: Any):
    """Probabilities of the ``targets`` wires (in that order, ``None``: all)."""
    if targets is None:
        return probs
    if isinstance(n_wires, Tracer) or any(isinstance(t, Tracer) for t in targets):
        # a symbolic number of amplitudes, or wires known when the program runs
        outcome = outcome_index(basis_indices(n_wires), targets, n_wires)
        return jnp.zeros(2 ** len(targets), probs.dtype).at[outcome].add(probs)
    summed = jnp.sum(probs.reshape((2,) * n_wires), axis=tuple(a for a in range(n_wires) if a not in targets))
    return jnp.transpose(summed, [sorted(targets).index(t) for t in targets]).reshape(-1)


def exact_measurement(mp: Any, state, n_wires: int, wires: WireMap):
    """The exact value of ``mp`` on the final ``state`` (no shots)."""
    kind = measurement_kind(mp)
    if getattr(mp, "mv", None) is not None:
        raise QuantumOperationError(
            f"{kind} of a mid-circuit measurement value needs finite shots or "
            "mcm_method='deferred': without shots catalyst_lite follows a single branch (Catalyst's "
            "'single-branch-statistics'). Return the value of measure() itself, or set shots."
        )
    if kind in ("expval", "var"):
        if mp.obs is None:
            raise QuantumOperationError(f"{kind} needs an observable.")
        applied = apply_observable(mp.obs, state, n_wires, wires)
        mean = jnp.real(jnp.vdot(state, applied))
        return mean if kind == "expval" else jnp.real(jnp.vdot(applied, applied)) - mean**2
    if kind == "probs":
        if mp.obs is not None:  # probs(op=...): in the observable's eigenbasis, on its wires
            rotated = rotate_to_eigenbasis(state, mp.obs, n_wires, wires)
            return _marginal(probabilities(rotated), wires.indices(mp.obs.wires, kind), n_wires)
        return _marginal(probabilities(state), measured_wires(mp, n_wires, wires), n_wires)
    if kind == "state":
        if len(mp.wires) and (isinstance(n_wires, Tracer) or len(mp.wires) != n_wires):
            raise QuantumOperationError("state() of a subset of wires (a density matrix) is not supported.")
        return state
    if kind in STATE_MEASUREMENTS:
        return _from_state(mp, state, n_wires, wires)
    if kind in ("sample", "counts"):
        raise QuantumOperationError(
            f"qml.{kind} cannot work with shots=None (Catalyst's words; default.qubit refuses it "
            "too): it needs a finite number of shots. Set shots on the QNode with qml.set_shots "
            "(or qml.qnode(..., shots=...))."
        )
    raise QuantumOperationError(
        f"catalyst_lite cannot compile the measurement {type(mp).__name__}. Supported: "
        f"{', '.join(SUPPORTED_MEASUREMENTS)}."
    )


STATE_MEASUREMENTS = {
    "DensityMatrixMP": "qml.math.reduce_statevector(state, indices)",
    "VnEntropyMP": "qml.math.vn_entropy(qml.math.dm_from_state_vector(state), indices)",
    "MutualInfoMP": "qml.math.mutual_info(qml.math.dm_from_state_vector(state), indices0, indices1)",
    "PurityMP": "qml.math.purity(qml.math.dm_from_state_vector(state), indices)",
}  # computed from the exact state (``process_state``): the qml.math function that does it


def _from_state(mp: Any, state, n_wires: Any, wires: WireMap):
    if wires.traced or isinstance(n_wires, Tracer):
        raise QuantumOperationError(
            f"{type(mp).__name__} needs a device with a known number of wires; return qml.state() "
            f"and compute it with {STATE_MEASUREMENTS[measurement_kind(mp)]} instead."
        )
    qml = _qml()
    device_order = qml.wires.Wires(range(n_wires))
    mutual = isinstance(mp, qml.measurements.MutualInfoMP)
    groups = [wires.indices(g, measurement_kind(mp)) for g in (mp.raw_wires if mutual else [mp.wires])]
    if any(isinstance(w, Tracer) for g in groups for w in g):
        # wires known when the program runs: the state with them first, measured as wires 0, 1, ...
        state = _targets_first(state, [w for g in groups for w in g], n_wires)
        return _numbered(mp, [len(g) for g in groups]).process_state(state, device_order)
    # PennyLane's functions take the measurement's wires as indices in the device's order
    numbered = mp.map_wires({label: k for k, label in enumerate(wires.labels)})
    return numbered.process_state(state, device_order)


def _targets_first(state, targets: list, n_wires: int):
    """``state`` with its wires reordered: ``targets`` (traced indices) first, in that order, then
    the others in theirs."""
    k = len(targets)
    is_target = [functools.reduce(operator.or_, [t == p for t in targets]) for p in range(n_wires)]
    # the position of each other wire after the targets: how many others come before it
    rest = [k + sum((~is_target[q]).astype(jnp.int64) for q in range(p)) for p in range(n_wires)]
    indices = basis_indices(n_wires)
    moved = outcome_index(indices, tuple(targets), n_wires) << (n_wires - k)
    for p in range(n_wires):
        moved += jnp.where(is_target[p], 0, wire_bits(indices, p, n_wires) << (n_wires - 1 - rest[p]))
    return jnp.zeros_like(state).at[moved].set(state)


def _numbered(mp: Any, sizes: list[int]) -> Any:
    """A measurement like ``mp`` of the wires ``0, 1, ...``: its groups of ``sizes`` wires in turn."""
    qml = _qml()
    starts = [sum(sizes[:g]) for g in range(len(sizes))]
    groups = [list(range(s, s + n)) for s, n in zip(starts, sizes)]
    with qml.QueuingManager.stop_recording():
        if len(groups) == 2:
            return qml.mutual_info(*groups, log_base=mp.log_base)
        if isinstance(mp, qml.measurements.VnEntropyMP):
            return qml.vn_entropy(groups[0], log_base=mp.log_base)
        return type(mp)(wires=qml.wires.Wires(groups[0]))  # density_matrix, purity


def check_hermitian(mp: Any) -> None:
    """A product of Paulis on one wire (``X(0) @ Z(0)`` is ``-1j * Y(0)``) or an imaginary multiple
    is not an observable: ``default.qubit`` returns a complex expectation and a meaningless
    variance, where the state-vector formulas here would give a real number silently."""
    sentence = None if mp.obs is None else mp.obs.pauli_rep
    if sentence is None or any(isinstance(c, Tracer) for c in sentence.values()):
        return
    if any(np.imag(c) != 0 for c in sentence.values()):
        raise QuantumOperationError(
            f"qml.{measurement_kind(mp)} of {mp.obs}: the operator is not Hermitian (as Pauli words it "
            f"is {sentence}), so it is no observable. Measure a Hermitian one: the Pauli words with real "
            "coefficients (X(0) @ Z(0) on one wire is -1j * Y(0): measure Y(0))."
        )


def measure_terminal(mps: list, state, n_wires: int, wires: WireMap, shots: ShotPlan = ShotPlan(), split=None,
                     simulated: bool = True) -> list:
    """The values of ``mps`` on the final ``state``: exact without shots, else statistics of
    ``shots`` drawn with keys from ``split()`` (a tuple per shot vector entry). ``simulated=False``
    (``null.qubit``): results of the right shape, ``expval``/``var`` 0, every shot all-zero."""
    results: list = [None] * len(mps)
    sampled = []
    for i, mp in enumerate(mps):
        kind = measurement_kind(mp)
        if shots.finite and kind in STATE_MEASUREMENTS:
            raise QuantumOperationError(
                f"{type(mp).__name__} is a function of the exact state: it needs shots=None, as on "
                "default.qubit. Remove the shots (qml.set_shots(..., shots=None)) or measure it in "
                "another QNode."
            )
        if not shots.finite or kind == "state":
            exact = not simulated and kind in ("expval", "var")
            results[i] = jnp.zeros((), jnp.float64) if exact else exact_measurement(mp, state, n_wires, wires)
        elif getattr(mp, "mv", None) is not None:  # one branch (single-branch-statistics): every shot alike
            record = value_record(mp)
            results[i] = jnp.broadcast_to(record, (shots.total,) + record.shape)
        elif not simulated and mp.obs is not None:  # an eigenvalue (the first for counts) or 0
            first = static_eigvals(mp.obs).min() if kind == "counts" else 0.0
            results[i] = jnp.full((shots.total,), first, jnp.float64)
        else:  # drawn from the state (null.qubit's is |0...0>: every shot the all-zero outcome)
            sampled.append(i)
    for i, records in zip(sampled, shot_records([mps[i] for i in sampled], state, split, shots.total, n_wires, wires)):
        results[i] = records
    for i, mp in enumerate(mps):
        if shots.finite and measurement_kind(mp) != "state":
            records = results[i]
            results[i] = (statistic(mp, records, n_wires) if not shots.partitioned else
                          tuple(statistic(mp, records[start:stop], n_wires) for start, stop in shots.slices()))
    return results
