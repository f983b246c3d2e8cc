"""Terminal measurements of a compiled circuit: ``expval``, ``var``, ``probs``, ``state``,
``sample`` and ``counts``, computed from the final state vector with array operations.

Observables that are Pauli words, their products, sums and Hamiltonians are applied through their
Pauli sentence (a bit flip and a sign per word, no matrix); other observables with a matrix
(``Hermitian``, ``Projector``...) through :func:`~.statevector.apply_matrix`.

>>> import pennylane as qml
>>> from catalyst_lite.quantum.statevector import zero_state
>>> float(measure_terminal(qml.expval(qml.Z(0)), zero_state(1), n_wires=1, wires=WireMap([0])))
1.0
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax
import numpy as np

from ..errors import QuantumOperationError
from . import prng
from .gates import WireMap, gate_records
from .statevector import apply_matrix, basis_indices, probabilities, wire_bits

__all__ = ["measure_terminal", "SUPPORTED_MEASUREMENTS", "apply_observable"]

SUPPORTED_MEASUREMENTS = ("expval", "var", "probs", "state", "sample", "counts")


def _pauli_word_apply(state, word: dict, coeff: Any, n_wires: int, wires: WireMap):
    """``coeff * P|state>`` for one Pauli word ``{wire: "X"|"Y"|"Z"}``: a flip of the X/Y bits
    and a per-amplitude sign/phase."""
    # The barrier keeps XLA from constant-folding index arithmetic into 2**n-element literals.
    indices = lax.optimization_barrier(basis_indices(n_wires))
    flip = 0
    factor = jnp.asarray(coeff, jnp.complex128)
    for label, pauli in word.items():
        w = wires.index(label, "observable")
        bit = wire_bits(indices, w, n_wires)
        if pauli in "XY":
            flip |= 1 << (n_wires - 1 - w)
        if pauli == "Y":
            factor = factor * 1j * (2 * bit - 1)
        elif pauli == "Z":
            factor = factor * (1 - 2 * bit)
    return factor * (state if flip == 0 else jnp.take(state, indices ^ flip))


def apply_observable(obs: Any, state, n_wires: int, wires: WireMap):
    """``O|state>`` for an observable ``O``."""
    sentence = obs.pauli_rep
    if sentence is not None:
        out = jnp.zeros_like(state)
        for word, coeff in sentence.items():
            out = out + _pauli_word_apply(state, dict(word), coeff, n_wires, wires)
        return out
    if not obs.has_matrix:
        raise QuantumOperationError(
            f"catalyst_lite cannot measure the observable {obs}: it has neither a Pauli "
            "representation nor a matrix."
        )
    return apply_matrix(state, obs.matrix(), wires.indices(obs.wires, obs.name), n_wires)


def _marginal(probs, targets: tuple, n_wires: int):
    """Probabilities of the ``targets`` wires (in that order), the others summed out."""
    tensor = probs.reshape((2,) * n_wires)
    others = tuple(a for a in range(n_wires) if a not in targets)
    summed = jnp.sum(tensor, axis=others) if others else tensor
    kept = [a for a in range(n_wires) if a in targets]
    order = [kept.index(t) for t in targets]
    return jnp.transpose(summed, order).reshape(-1)


def _measured_wires(mp, n_wires: int, wires: WireMap) -> tuple:
    return wires.indices(mp.wires, _return_name(mp)) if len(mp.wires) else tuple(range(n_wires))


def _sample_indices(state, key, shots: int, n_wires: int):
    return prng.sample_indices(key, probabilities(state), shots)


def _basis_samples(state, mp, key, shots, n_wires, wires):
    """``(shots, len(wires))`` bits of the measured wires, or eigenvalues of ``mp.obs``."""
    if mp.obs is not None:
        rotated = state
        for op in mp.obs.diagonalizing_gates():
            for r in gate_records(op, wires):
                rotated = apply_matrix(rotated, r.matrix, r.targets, n_wires, r.controls, r.control_values)
        targets = wires.indices(mp.obs.wires, mp.obs.name)
        samples = _sample_indices(rotated, key, shots, n_wires)
        bits = jnp.stack([wire_bits(samples, t, n_wires) for t in targets], axis=-1)
        position = sum(bits[:, m] << (len(targets) - 1 - m) for m in range(len(targets)))
        return jnp.take(jnp.asarray(np.asarray(mp.obs.eigvals()), jnp.float64), position)
    targets = _measured_wires(mp, n_wires, wires)
    samples = _sample_indices(state, key, shots, n_wires)
    return jnp.stack([wire_bits(samples, t, n_wires) for t in targets], axis=-1)


def _return_name(mp) -> str:
    name = type(mp).__name__
    return {
        "ExpectationMP": "expval", "VarianceMP": "var", "ProbabilityMP": "probs",
        "StateMP": "state", "SampleMP": "sample", "CountsMP": "counts",
    }.get(name, name)


def measure_terminal(mp: Any, state, n_wires: int, wires: WireMap, shots: int | None = None, key=None):
    """The value of the measurement process ``mp`` on the final ``state``."""
    kind = _return_name(mp)
    if getattr(mp, "mv", None) is not None:
        raise QuantumOperationError(
            f"catalyst_lite cannot compile {kind} of a mid-circuit measurement value; return the "
            "value of measure() itself."
        )
    if kind in ("expval", "var"):
        if mp.obs is None:
            raise QuantumOperationError(f"{kind} needs an observable.")
        applied = apply_observable(mp.obs, state, n_wires, wires)
        mean = jnp.real(jnp.vdot(state, applied))
        if kind == "expval":
            return mean
        return jnp.real(jnp.vdot(applied, applied)) - mean**2
    if kind == "probs":
        if mp.obs is not None:
            raise QuantumOperationError("probs of an observable (probs(op=...)) is not supported; pass wires.")
        return _marginal(probabilities(state), _measured_wires(mp, n_wires, wires), n_wires)
    if kind == "state":
        if len(mp.wires) and len(mp.wires) != n_wires:
            raise QuantumOperationError("state() of a subset of wires (a density matrix) is not supported.")
        return state
    if kind in ("sample", "counts"):
        if shots is None:
            raise QuantumOperationError(
                f"{kind} needs a finite number of shots: set shots on the device or with "
                "qml.set_shots."
            )
        samples = _basis_samples(state, mp, key, shots, n_wires, wires)
        if kind == "sample":
            return samples
        return _counts(samples, mp)
    raise QuantumOperationError(
        f"catalyst_lite cannot compile the measurement {type(mp).__name__}. Supported: "
        f"{', '.join(SUPPORTED_MEASUREMENTS)}."
    )


def _counts(samples, mp):
    """Catalyst's form of ``counts``: ``(outcomes, counts)`` arrays covering every outcome."""
    if mp.obs is not None:
        outcomes = jnp.asarray(np.unique(np.asarray(mp.obs.eigvals())), jnp.float64)
        return outcomes, jnp.sum(samples[:, None] == outcomes[None, :], axis=0)
    k = samples.shape[1]
    index = sum(samples[:, m] << (k - 1 - m) for m in range(k))
    outcomes = jnp.arange(2**k)
    return outcomes, jnp.sum(index[:, None] == outcomes[None, :], axis=0)
