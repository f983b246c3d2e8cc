"""Terminal measurements of a compiled circuit, computed from the final state vector: exact
without shots, else statistics of the shots' records, as ``default.qubit`` gives them.
Observables with a Pauli sentence are applied as a bit flip and a sign per word; others by their
matrix.

With finite shots, as ``default.qubit`` estimates them: what each shot *records*
(:func:`shot_records` from a final state; :func:`value_record` of mid-circuit measurement values,
per shot in :mod:`.qnode`), and the :func:`statistic` of many shots' records. Shots that
post-selection discards are left out of statistics; their samples are ``INVALID_SAMPLE``, as
PennyLane pads them under ``jax.jit``.

>>> import pennylane as qml
>>> from catalyst_lite.quantum.gates import WireMap
>>> from catalyst_lite.quantum.prng import key_from_seed
>>> from catalyst_lite.quantum.statevector import zero_state
>>> mp = qml.counts(wires=[0])
>>> (records,) = shot_records([mp], zero_state(1), lambda: key_from_seed(0), 5, 1, WireMap([0]))
>>> [x.tolist() for x in statistic(mp, records, 1)]
[[0, 1], [5, 0]]
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..debug import callback
from ..errors import QuantumOperationError
from ..jax_extras import Tracer
from . import prng
from .gates import WireMap, _qml, gate_records
from .mcm import ShotPlan
from .statevector import (
    apply_matrix, basis_indices, bit_mask, outcome_index, probabilities, state_size, wire_bits,
)

__all__ = ["measure_terminal", "exact_measurement", "check_hermitian", "SUPPORTED_MEASUREMENTS",
           "apply_observable", "INVALID_SAMPLE", "measurement_kind", "is_measurement", "flatten_results",
           "measured_wires", "rotate_to_eigenbasis", "shot_records", "value_record", "statistic",
           "static_eigvals"]

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


INVALID_SAMPLE = int(np.iinfo(np.int32).min)  # the sample of a shot post-selection discarded

_KINDS = {
    "ExpectationMP": "expval", "VarianceMP": "var", "ProbabilityMP": "probs",
    "StateMP": "state", "SampleMP": "sample", "CountsMP": "counts",
}


def measurement_kind(mp: Any) -> str:
    """``"expval"``, ``"var"``, ``"probs"``, ``"state"``, ``"sample"``, ``"counts"`` or a class name."""
    name = type(mp).__name__
    return _KINDS.get(name, name)


def is_measurement(x: Any) -> bool:
    """``x`` is a PennyLane measurement process: a QNode's result to compute, not a value."""
    return isinstance(x, _qml().measurements.MeasurementProcess)


def flatten_results(output: Any) -> tuple[list, Any]:
    """What a quantum function returned, flattened with its measurement processes as leaves."""
    return jax.tree_util.tree_flatten(output, is_leaf=is_measurement)


def measured_wires(mp: Any, n_wires: Any, wires: WireMap) -> tuple | None:
    """The wire indices a measurement without observable reads (``None``: all, naming none)."""
    return wires.indices(mp.wires, measurement_kind(mp)) if len(mp.wires) else None


def _basis_samples(state, key, shots: Any):
    return prng.sample_indices(key, probabilities(state), shots)


def _by_factor(obs: Any) -> bool:
    """A product with traced wires, taken factor by factor: PennyLane's compares its factors' wires."""
    return isinstance(obs, _qml().ops.Prod) and any(isinstance(w, Tracer) for w in obs.wires)


def _diagonalized_by_eigh(obs: Any, in_order: bool) -> bool:
    """``obs`` (with traced data) is diagonalized by JAX's ``eigh`` of its matrix: PennyLane
    diagonalizes a Hermitian with NumPy (it cannot when the matrix is traced), and other traced
    data give eigenvalues known only when the program runs. ``in_order``: the order of the
    eigenbasis matters (``probs(op=...)``); ``eigh``'s (ascending eigenvalues) is PennyLane's
    only for a ``Hermitian``."""
    if not _traced_data(obs) or _by_factor(obs):
        return False
    return not in_order or isinstance(obs, _qml().Hermitian)


def _traced_data(obs: Any) -> bool:
    return any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(getattr(obs, "data", ())))


def _eigh(obs: Any):
    """``(eigenvalues, eigenvectors)`` of ``obs``'s matrix on its wires, traced."""
    return jnp.linalg.eigh(jnp.asarray(obs.matrix(), jnp.complex128))


def rotate_to_eigenbasis(state, obs, n_wires: int, wires: WireMap, in_order: bool = True):
    """``state`` after ``obs``'s diagonalizing gates (a basis sample picks an eigenvalue); with
    ``in_order=False`` only the eigenvalue of each outcome (:func:`eigenvalues`) must be known."""
    qml = _qml()
    if _diagonalized_by_eigh(obs, in_order):
        vectors = _eigh(obs)[1]
        return apply_matrix(state, jnp.conj(vectors).T, wires.indices(obs.wires, obs.name), n_wires)
    if isinstance(obs, qml.ops.Sum) and any(isinstance(w, Tracer) for w in obs.wires):
        raise QuantumOperationError(
            f"catalyst_lite cannot sample {obs} with finite shots: a sum measured this way is sampled "
            "in the eigenbasis of the whole observable, as PennyLane does, which needs its wires known "
            "when compiling (here a wire is traced). Measure the expval of its terms, or use known wires."
        )
    if _by_factor(obs):
        for factor in obs.operands:
            state = rotate_to_eigenbasis(state, factor, n_wires, wires, in_order)
        return state
    with qml.QueuingManager.stop_recording():
        gates = obs.diagonalizing_gates()
    for op in gates:
        for r in gate_records(op, wires):
            state = apply_matrix(state, r.matrix, r.targets, n_wires, r.controls, r.control_values)
    return state


def static_eigvals(obs) -> np.ndarray:
    """``obs.eigvals()`` as a constant (a traced observable's are unknown)."""
    if _by_factor(obs):  # the factors' eigenvalues, in the order of the product's wires
        return functools.reduce(np.kron, [static_eigvals(factor) for factor in obs.operands])
    if _traced_data(obs):  # (PennyLane's eigvals would convert the traced data to NumPy)
        raise QuantumOperationError(
            f"catalyst_lite cannot sample the observable {obs} with finite shots: its eigenvalues "
            "depend on traced values. Sample its Pauli words separately."
        )
    return np.asarray(obs.eigvals())


def _distinct(eigvals: Any) -> Any:
    """``eigvals`` (ascending), checked distinct when the program runs: counts has one entry per
    eigenvalue, which traced eigenvalues cannot merge (their number would depend on the data)."""
    callback(_raise_if_degenerate)(jnp.min(jnp.diff(eigvals), initial=jnp.inf))
    return eigvals


def _raise_if_degenerate(gap: Any) -> None:
    if float(gap) <= 1e-10:
        raise QuantumOperationError(
            "qml.counts of a qml.Hermitian whose matrix is traced and has a repeated eigenvalue: the "
            "counts of a traced observable have one entry per eigenvalue, so equal eigenvalues cannot "
            "be merged as PennyLane merges them. Pass the matrix as a constant, or count "
            "qml.counts(wires=...) in the observable's eigenbasis."
        )


def eigenvalues(obs: Any, in_order: bool = True):
    """The eigenvalue of each outcome of :func:`rotate_to_eigenbasis` (traced for a traced observable
    :func:`_diagonalized_by_eigh`; else constants, as :func:`static_eigvals`)."""
    return _eigh(obs)[0] if _diagonalized_by_eigh(obs, in_order) else static_eigvals(obs)


def _in_word_basis(state, word: dict, n_wires: Any, wires: WireMap):
    """``state`` in the eigenbasis of the Pauli word ``{wire: "X"|"Y"|"Z"}``."""
    qml = _qml()
    with qml.QueuingManager.stop_recording():
        operation = qml.pauli.PauliWord(word).operation()
    return rotate_to_eigenbasis(state, operation, n_wires, wires)


def _word_eigenvalues(samples, word: dict, n_wires: Any, wires: WireMap):
    """The eigenvalue ``±1`` of the Pauli word in each of its basis' ``samples`` (the parity)."""
    bits = (wire_bits(samples, wires.index(label, "observable"), n_wires) for label in word)
    return 1.0 - 2.0 * (sum(bits, jnp.zeros_like(samples)) & 1).astype(jnp.float64)


def _sentence_samples(state, sentence, key, shots: Any, n_wires: int, wires: WireMap):
    """``(shots,)`` of ``sum_w c_w * (±1 of word w)``, each word in its own basis, with its key."""
    total = None
    for word, coeff in sentence.items():
        key, sub = prng.split(key)
        word = dict(word)
        if word:
            samples = _basis_samples(_in_word_basis(state, word, n_wires, wires), sub, shots)
            outcomes = _word_eigenvalues(samples, word, n_wires, wires)
        else:  # the identity: no draw needed
            outcomes = jnp.ones((shots,), jnp.float64)
        term = jnp.real(jnp.asarray(coeff)) * outcomes
        total = term if total is None else total + term
    return total


def _records(mp: Any, state, key, shots: Any, n_wires: int, wires: WireMap):
    """What each of ``shots`` shots records of ``mp``, of an observable, alone."""
    kind, obs = measurement_kind(mp), mp.obs
    sentence = obs.pauli_rep if kind in ("expval", "var") else None
    if sentence is not None and (kind == "expval" or len(sentence) == 1):
        return _sentence_samples(state, sentence, key, shots, n_wires, wires)
    in_order = kind not in ("expval", "var", "sample")  # counts and probs name their outcomes
    samples = _basis_samples(rotate_to_eigenbasis(state, obs, n_wires, wires, in_order), key, shots)
    if kind not in ("expval", "var", "sample", "counts"):  # probs(op=...): on the observable's wires
        return _basis_records(mp, samples, n_wires, wires)
    position = outcome_index(samples, wires.indices(obs.wires, obs.name), n_wires)
    return jnp.take(jnp.asarray(eigenvalues(obs, in_order), jnp.float64), position)


def _basis_records(mp: Any, samples, n_wires: Any, wires: WireMap):
    """What ``sample``/``probs``/``counts`` record of basis ``samples``."""
    kind = measurement_kind(mp)
    targets = measured_wires(mp, n_wires, wires) if mp.obs is None else wires.indices(mp.obs.wires, kind)
    if kind == "sample":
        if targets is None:  # every wire (none on a device without wires; a symbolic number)
            positions = (n_wires - 1 - lax.iota(jnp.int64, n_wires)).astype(samples.dtype)
            return ((samples[:, None] >> positions[None, :]) & 1).astype(jnp.int64)
        return jnp.stack([wire_bits(samples, t, n_wires) for t in targets], axis=-1).astype(jnp.int64)
    if kind in ("probs", "counts"):
        return samples if targets is None else outcome_index(samples, targets, n_wires)
    raise QuantumOperationError(
        f"catalyst_lite cannot compile {kind} with finite shots; supported: expval, var, probs, "
        "sample, counts. Call this QNode outside qjit (Catalyst 0.15 does not compile it either)."
    )


def _one_pauli_word(mp: Any) -> tuple[dict, Any] | None:
    """``(word, coefficient)`` when ``mp`` measures one Pauli word (``2 * X(0) @ Z(1)``)."""
    sentence = None if mp.obs is None else mp.obs.pauli_rep
    if sentence is None or len(sentence) != 1:
        return None
    ((word, coeff),) = sentence.items()
    if any(isinstance(w, Tracer) for w in word):
        # a traced wire: measured on its own (two tracers may be one wire when the program runs)
        return None
    return dict(word), coeff


def _sampling_groups(mps: list) -> list[tuple[dict | None, list[int]]]:
    """The measurements sharing samples, as on ``default.qubit``: ``(None, members)`` those without
    observable, ``(basis, members)`` Pauli words agreeing on common wires, ``(None, [i])`` others."""
    plain = [i for i, mp in enumerate(mps) if mp.obs is None]
    groups: list[tuple[dict | None, list[int]]] = [(None, plain)] if plain else []
    for i, mp in enumerate(mps):
        found = None if mp.obs is None else _one_pauli_word(mp)
        if mp.obs is not None and found is None:
            groups.append((None, [i]))
        elif found is not None:
            word = found[0]
            for basis, members in groups:
                if basis is not None and all(basis.get(w, p) == p for w, p in word.items()):
                    basis.update(word)
                    members.append(i)
                    break
            else:
                groups.append((dict(word), [i]))
    return groups


def shot_records(mps: list, state, split, shots: Any, n_wires: int, wires: WireMap) -> list:
    """What each of ``shots`` shots records of each of ``mps``, ``(shots, ...)``; a sampling group
    (:func:`_sampling_groups`) records the same shots, drawn with a key from ``split()``."""
    records: list = [None] * len(mps)
    for basis, members in _sampling_groups(mps):
        key = split()
        if basis is None and mps[members[0]].obs is not None:  # an observable of its own
            records[members[0]] = _records(mps[members[0]], state, key, shots, n_wires, wires)
            continue
        samples = _basis_samples(state if basis is None else _in_word_basis(state, basis, n_wires, wires), key, shots)
        for i in members:
            mp = mps[i]
            if basis is None or measurement_kind(mp) == "probs":
                records[i] = _basis_records(mp, samples, n_wires, wires)
            else:
                word, coeff = _one_pauli_word(mp)
                records[i] = jnp.real(jnp.asarray(coeff)) * _word_eigenvalues(samples, word, n_wires, wires)
    return records


def _values(mp: Any) -> list:
    return list(mp.mv) if isinstance(mp.mv, (list, tuple)) else [mp.mv]


def _of_expression(mp: Any) -> bool:  # of one expression of measurement values (m0 + m1, ~m)
    return getattr(mp.mv, "has_processing", False)


def value_record(mp: Any):
    """What one shot records of a statistic of mid-circuit measurement values ``mp.mv``."""
    kind = measurement_kind(mp)
    values = [jnp.asarray(v) for v in _values(mp)]
    listed = isinstance(mp.mv, (list, tuple))
    if kind == "counts" and _of_expression(mp):
        return values[0]  # counted by its values (see statistic)
    if kind in ("probs", "counts"):
        if any(v.dtype != jnp.bool_ for v in values):
            raise QuantumOperationError(
                f"{kind} of a list of combinations of mid-circuit measurements (such as "
                f"[m0 + m1, m2]) is not supported. Pass the measurements themselves "
                f"({kind}(op=[m0, m1, m2])), or take {kind} of one combination."
            )
        k = len(values)
        return sum(v.astype(jnp.int64) << (k - 1 - m) for m, v in enumerate(values))
    if kind == "sample":
        as_int = [v.astype(jnp.int64) if v.dtype == jnp.bool_ or jnp.issubdtype(v.dtype, jnp.integer)
                  else v for v in values]
        return jnp.stack(as_int) if listed else as_int[0]
    if kind in ("expval", "var"):
        if listed:
            raise QuantumOperationError(f"qml.{kind} does not take a list of mid-circuit measurements.")
        return values[0].astype(jnp.float64)
    raise QuantumOperationError(f"{kind} of mid-circuit measurement values is not supported.")


def statistic(mp: Any, records, n_wires: int, valid=None):
    """The result of ``mp`` from the records of shots (``valid``: which count; ``None``: all)."""
    kind = measurement_kind(mp)
    weights = None if valid is None else valid.astype(jnp.float64)
    if kind in ("expval", "var"):
        mean = jnp.mean(records) if weights is None else jnp.sum(records * weights) / jnp.sum(weights)
        if kind == "expval":
            return mean
        spread = (records - mean) ** 2
        return jnp.mean(spread) if weights is None else jnp.sum(spread * weights) / jnp.sum(weights)
    if kind == "sample":
        if valid is None:
            return records
        keep = jnp.reshape(valid, valid.shape + (1,) * (records.ndim - 1))
        return jnp.where(keep, records, jnp.asarray(INVALID_SAMPLE, records.dtype))
    if kind not in ("probs", "counts"):
        raise QuantumOperationError(f"catalyst_lite cannot compile {kind} with finite shots.")
    if kind == "counts" and mp.obs is not None and _diagonalized_by_eigh(mp.obs, True):
        outcomes = _distinct(_eigh(mp.obs)[0])  # a traced Hermitian's: eigh's, ascending as np.unique's
    elif kind == "counts" and (mp.obs is not None or _of_expression(mp)):  # counted by eigenvalue
        outcomes = jnp.asarray(np.unique(static_eigvals(mp.obs or mp)), records.dtype)
    elif mp.mv is not None:
        outcomes = jnp.arange(2 ** len(_values(mp)))
    else:  # (a traced size for all the wires of a traced number of them)
        outcomes = jnp.arange(state_size(len(mp.wires) or n_wires))
    hits = records[:, None] == outcomes[None, :]
    counts = jnp.sum(hits if valid is None else hits & valid[:, None], axis=0, dtype=jnp.int64)
    return (outcomes, counts) if kind == "counts" else counts / jnp.sum(counts)
