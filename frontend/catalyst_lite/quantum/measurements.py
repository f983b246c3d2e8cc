"""Terminal measurements of a compiled circuit: ``expval``, ``var``, ``probs``, ``state``,
``sample`` and ``counts``, computed from the final state vector with array operations.

Without shots ``expval``, ``var`` and ``probs`` are exact; with finite shots they are estimated
from samples drawn with :mod:`.prng`, as PennyLane's ``default.qubit`` does.

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

import jax
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


def _outcome_index(samples, targets: tuple, n_wires: int):
    """The outcome of each sampled basis index on the ``targets`` wires, as an integer whose most
    significant bit is the first target (the order of ``probs`` and of ``eigvals``)."""
    k = len(targets)
    return sum(wire_bits(samples, t, n_wires) << (k - 1 - m) for m, t in enumerate(targets))


def _rotate_to_eigenbasis(state, obs, n_wires: int, wires: WireMap):
    """``state`` after ``obs``'s diagonalizing gates: in this basis ``obs`` is diagonal, so a
    computational-basis sample picks one of its eigenvalues."""
    for op in obs.diagonalizing_gates():
        for r in gate_records(op, wires):
            state = apply_matrix(state, r.matrix, r.targets, n_wires, r.controls, r.control_values)
    return state


def _static_eigvals(obs) -> np.ndarray:
    """``obs.eigvals()`` as a constant (a traced observable's are unknown while tracing)."""
    try:
        return np.asarray(obs.eigvals())
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        raise QuantumOperationError(
            f"catalyst_lite cannot sample the observable {obs} with finite shots: its eigenvalues "
            "depend on traced values. Sample its Pauli words separately."
        ) from None


def _eigenvalue_samples(state, obs, key, shots: int, n_wires: int, wires: WireMap):
    """``(shots,)`` eigenvalues of ``obs``: samples of ``state`` measured in its eigenbasis."""
    rotated = _rotate_to_eigenbasis(state, obs, n_wires, wires)
    position = _outcome_index(_sample_indices(rotated, key, shots, n_wires),
                              wires.indices(obs.wires, obs.name), n_wires)
    return jnp.take(jnp.asarray(_static_eigvals(obs), jnp.float64), position)


def _pauli_word_samples(state, word: dict, key, shots: int, n_wires: int, wires: WireMap):
    """``(shots,)`` outcomes ``±1`` of the Pauli word ``{wire: "X"|"Y"|"Z"}``: in its eigenbasis
    the eigenvalue of a basis state is the parity of the word's bits (``+1`` when even)."""
    if not word:  # the identity: no draw needed
        return jnp.ones((shots,), jnp.float64)
    import pennylane as qml

    rotated = _rotate_to_eigenbasis(state, qml.pauli.PauliWord(word).operation(), n_wires, wires)
    samples = _sample_indices(rotated, key, shots, n_wires)
    bits = [wire_bits(samples, wires.index(label, "observable"), n_wires) for label in word]
    parity = sum(bits) & 1
    return 1.0 - 2.0 * parity.astype(jnp.float64)


def _sampled_expval(obs, state, key, shots: int, n_wires: int, wires: WireMap):
    """``<obs>`` estimated from ``shots`` samples, as PennyLane's ``default.qubit`` does: a sum
    of Pauli words term by term (each word sampled in its own basis, with its own key), any other
    observable as the mean of its eigenvalue samples."""
    sentence = obs.pauli_rep
    if sentence is None:
        return jnp.mean(_eigenvalue_samples(state, obs, key, shots, n_wires, wires))
    total = jnp.zeros((), jnp.complex128)
    for word, coeff in sentence.items():
        key, sub = prng.split(key)
        outcomes = _pauli_word_samples(state, dict(word), sub, shots, n_wires, wires)
        total = total + coeff * jnp.mean(outcomes)
    return jnp.real(total)


def _sampled_var(obs, state, key, shots: int, n_wires: int, wires: WireMap):
    """``Var(obs)`` estimated as the variance of ``shots`` eigenvalue samples (PennyLane's
    estimator, ``ddof=0``)."""
    sentence = obs.pauli_rep
    if sentence is not None and len(sentence) == 1:
        # One Pauli word times a coefficient: the coefficient may be traced, so scale the
        # word's +-1 samples rather than asking for eigenvalues.
        ((word, coeff),) = sentence.items()
        spread = jnp.var(_pauli_word_samples(state, dict(word), key, shots, n_wires, wires))
        return jnp.abs(jnp.asarray(coeff)) ** 2 * spread
    # A sum of words does not split: sample it in the eigenbasis of the whole observable.
    return jnp.var(_eigenvalue_samples(state, obs, key, shots, n_wires, wires))


def _sampled_probs(state, targets: tuple, key, shots: int, n_wires: int):
    """Probabilities of the ``targets`` wires estimated as ``counts / shots``."""
    outcomes = _outcome_index(_sample_indices(state, key, shots, n_wires), targets, n_wires)
    return jnp.bincount(outcomes, length=2 ** len(targets)).astype(jnp.float64) / shots


def _basis_samples(state, mp, key, shots, n_wires, wires):
    """``(shots, len(wires))`` bits of the measured wires, or eigenvalues of ``mp.obs``."""
    if mp.obs is not None:
        return _eigenvalue_samples(state, mp.obs, key, shots, n_wires, wires)
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
    """The value of the measurement process ``mp`` on the final ``state``: exact without
    ``shots``; with finite ``shots``, statistics are estimated from that many samples drawn with
    ``key`` (and ``sample``/``counts`` are those samples)."""
    kind = _return_name(mp)
    if getattr(mp, "mv", None) is not None:
        raise QuantumOperationError(
            f"catalyst_lite cannot compile {kind} of a mid-circuit measurement value; return the "
            "value of measure() itself."
        )
    if kind in ("expval", "var"):
        if mp.obs is None:
            raise QuantumOperationError(f"{kind} needs an observable.")
        if shots is not None:
            estimate = _sampled_expval if kind == "expval" else _sampled_var
            return estimate(mp.obs, state, key, shots, n_wires, wires)
        applied = apply_observable(mp.obs, state, n_wires, wires)
        mean = jnp.real(jnp.vdot(state, applied))
        if kind == "expval":
            return mean
        return jnp.real(jnp.vdot(applied, applied)) - mean**2
    if kind == "probs":
        if mp.obs is not None:
            raise QuantumOperationError("probs of an observable (probs(op=...)) is not supported; pass wires.")
        targets = _measured_wires(mp, n_wires, wires)
        if shots is not None:
            return _sampled_probs(state, targets, key, shots, n_wires)
        return _marginal(probabilities(state), targets, n_wires)
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
        outcomes = jnp.asarray(np.unique(_static_eigvals(mp.obs)), jnp.float64)
        return outcomes, jnp.sum(samples[:, None] == outcomes[None, :], axis=0)
    k = samples.shape[1]
    index = sum(samples[:, m] << (k - 1 - m) for m in range(k))
    outcomes = jnp.arange(2**k)
    return outcomes, jnp.sum(index[:, None] == outcomes[None, :], axis=0)
