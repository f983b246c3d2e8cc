"""A QNode's own transforms (``@qml.transforms.cancel_inverses``, ``decompose``...) applied to the
gates of each straight-line segment of a compiled circuit (see :mod:`.qnode`). A transform must
rewrite the gates into one circuit (one tape, the same measurements, no post-processing) or keep
the results (:data:`RESULT_PRESERVING_PASSES`); anything else is a ``QuantumOperationError``.
Control flow that a transform calls has Catalyst's ``.operation``, which it may put on its tape
(the circuit calls that control flow again there, see ``QuantumState._replay``).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..control_flow.common import control_flow_handler
from ..errors import CompileError, QuantumOperationError
from .gates import RecordedOnTape

__all__ = ["transformed_operations", "qnode_pipeline", "RESULT_PRESERVING_PASSES"]

RESULT_PRESERVING_PASSES = frozenset({
    # Catalyst's own passes: optimizations and decompositions of the gates
    "cancel-inverses", "merge-rotations", "combine-global-phases", "disentangle-cnot",
    "disentangle-swap", "parity-synth", "decompose-lowering", "graph-decomposition",
    "ions-decomposition", "gridsynth", "diagonalize-final-measurements", "to-ppr", "commute-ppr",
    "merge-ppr-ppm", "ppr-to-ppm", "ppm-compilation", "reduce-t-depth", "ppr-to-mbqc",
    "decompose-arbitrary-ppr",
    # how the circuit is executed: separate executions per measurement group, one per shot
    "split-non-commuting", "dynamic-one-shot",
})
"""Compiler passes (``qml.transform(pass_name=...)``, ``passes.apply_pass``) that keep the results."""


def qnode_pipeline(qnode: Any) -> Any:
    """The QNode's own transforms (PennyLane >= 0.45 calls them its ``compile_pipeline``)."""
    return getattr(qnode, "compile_pipeline", None)


def transformed_operations(pipeline: Any, ops: Sequence[Any], measurements: Sequence[Any]) -> list:
    """``ops`` after every transform of ``pipeline``, run one at a time on a tape of ``ops`` and
    ``measurements``."""
    import pennylane as qml

    tape = qml.tape.QuantumScript(list(ops), list(measurements))
    errors = qml.exceptions  # PennyLane's own, about the circuit (a user's transform raises what it raises)
    about_the_circuit = (errors.TransformError, errors.QuantumFunctionError, errors.DecompositionError,
                         errors.OperatorPropertyUndefined, errors.WireError, errors.DeviceError)
    for i in range(len(pipeline)):
        name = str(pipeline[i]).strip("<>")
        pass_name = getattr(pipeline[i], "pass_name", None)
        if pass_name is not None and pipeline[i].tape_transform is None:
            tape = _compiler_pass(pass_name, pipeline[i], tape)
            continue
        try:
            with control_flow_handler(RecordedOnTape()):
                tapes, post = pipeline[i : i + 1]((tape,))
        except about_the_circuit as e:  # name the transform that raised
            raise QuantumOperationError(f"The QNode's transform {name} failed on a compiled circuit: {e}") from e
        if not _one_circuit(tapes, post, tape):
            as_pass = getattr(pipeline[i].tape_transform, "__name__", "").replace("_", "-")
            if as_pass in RESULT_PRESERVING_PASSES:  # split_non_commuting...
                continue
            raise QuantumOperationError(
                f"catalyst_lite cannot apply the QNode's transform {name}: it splits the circuit, "
                "changes its measurements or post-processes its results: only transforms that "
                "rewrite the gates into one circuit (cancel_inverses, merge_rotations, decompose...) "
                "are supported inside qjit; apply the others outside it."
            )
        tape = tapes[0]
    return list(tape.operations)

def _compiler_pass(pass_name: str, bound: Any, tape: Any) -> Any:
    """``tape`` after the compiler pass ``pass_name`` (with no tape transform of its own): by
    PennyLane's tape transform of that name when it rewrites the gates into one circuit; otherwise
    unchanged (every known pass preserves the results)."""
    import pennylane as qml

    if pass_name not in RESULT_PRESERVING_PASSES:
        raise CompileError(
            f"unknown pass or pass pipeline: {pass_name}. catalyst_lite applies the passes "
            f"{', '.join(sorted(RESULT_PRESERVING_PASSES))}; apply other transforms outside qjit "
            "or as PennyLane tape transforms (qml.transform(tape_transform))."
        )
    counterpart = getattr(qml.transforms, pass_name.replace("-", "_"), None)
    if getattr(counterpart, "tape_transform", None) is None:
        return tape
    tapes, post = counterpart(tape, *bound.args, **bound.kwargs)
    return tapes[0] if _one_circuit(tapes, post, tape) else tape


def _one_circuit(tapes: Sequence[Any], post: Any, old: Any) -> bool:
    """One tape with ``old``'s measurements, and a post-processing that returns its result."""
    import pennylane as qml

    if len(tapes) != 1:
        return False
    sentinel = object()
    try:
        out = post((sentinel,))
    except Exception:  # a real post-processing step cannot handle the sentinel
        return False
    if not (out is sentinel or (isinstance(out, (tuple, list)) and len(out) == 1 and out[0] is sentinel)):
        return False
    new = tapes[0]
    return len(new.measurements) == len(old.measurements) and all(
        a is b or qml.equal(a, b) for a, b in zip(new.measurements, old.measurements))
