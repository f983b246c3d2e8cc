"""A QNode's own transforms (``@qml.transforms.cancel_inverses``, ``merge_rotations``,
``decompose``...) applied to the gates of a compiled circuit.

The circuit is applied one straight-line segment at a time (see :mod:`.qnode`), so each transform
of the QNode's compile pipeline runs on a tape of one segment's operations (the last segment's tape
also holds the terminal measurements). Only transforms that rewrite the gates into one circuit are
supported: each must return one tape, with the same measurements, and post-processing that hands
its one result back unchanged. Compiler passes (``qml.transform(pass_name=...)``, Catalyst's
``passes.apply_pass``) and transforms that only change how a circuit is executed
(``split_non_commuting``, ``dynamic_one_shot``) keep the results: see
:data:`RESULT_PRESERVING_PASSES`. Anything else (gradient transforms, a transform that changes
measurements) is a :class:`~catalyst_lite.errors.QuantumOperationError`.

>>> import pennylane as qml
>>> pipeline = qml.transforms.cancel_inverses(qml.qnode(qml.device("default.qubit", wires=1))(
...     lambda: qml.expval(qml.Z(0)))).compile_pipeline
>>> transformed_operations(pipeline, [qml.H(0), qml.H(0), qml.X(0)], [])
[X(0)]
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import CompileError, QuantumOperationError

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
"""Compiler passes (``qml.transform(pass_name=...)``, Catalyst's ``passes.apply_pass``) that
keep a circuit's results: compiled, they change nothing a result shows."""


def qnode_pipeline(qnode: Any) -> Any:
    """The QNode's own transforms (``compile_pipeline``; ``transform_program`` before 0.45)."""
    pipeline = getattr(qnode, "compile_pipeline", None)
    return pipeline if pipeline is not None else getattr(qnode, "transform_program", None)


def transformed_operations(pipeline: Any, ops: Sequence[Any], measurements: Sequence[Any]) -> list:
    """``ops`` after every transform of ``pipeline``, run one at a time on a tape of ``ops`` and
    ``measurements`` (the terminal ones for the last segment, none before)."""
    import pennylane as qml

    tape = qml.tape.QuantumScript(list(ops), list(measurements))
    for i in range(len(pipeline)):
        name = str(pipeline[i]).strip("<>")
        pass_name = getattr(pipeline[i], "pass_name", None)
        if pass_name is not None and pipeline[i].tape_transform is None:
            tape = _compiler_pass(pass_name, pipeline[i], tape)
            continue
        try:
            tapes, post = pipeline[i : i + 1]((tape,))
        except _pennylane_errors(qml) as e:  # name the transform that raised; the user's own pass
            raise QuantumOperationError(f"The QNode's transform {name} failed on a compiled circuit: {e}") from e
        if len(tapes) != 1 or not _is_identity(post) or not _same_measurements(tapes[0], tape):
            if _pass_name(pipeline[i]) in RESULT_PRESERVING_PASSES:  # split_non_commuting...
                continue
            raise QuantumOperationError(
                f"catalyst_lite cannot apply the QNode's transform {name}: it splits the circuit, "
                "changes its measurements or post-processes its results: only transforms that "
                "rewrite the gates into one circuit (cancel_inverses, merge_rotations, decompose...) "
                "are supported inside qjit; apply the others outside it."
            )
        tape = tapes[0]
    return list(tape.operations)



def _pennylane_errors(qml: Any) -> tuple[type[BaseException], ...]:
    """PennyLane's own exceptions, which a transform raises about the circuit it was given (a
    transform the user wrote raises what it raises, untouched)."""
    errors = qml.exceptions
    return (
        errors.TransformError, errors.QuantumFunctionError, errors.DecompositionError,
        errors.OperatorPropertyUndefined, errors.WireError, errors.DeviceError,
    )

def _compiler_pass(pass_name: str, bound: Any, tape: Any) -> Any:
    """``tape`` after the compiler pass ``pass_name`` (a ``qml.transform(pass_name=...)`` or
    Catalyst's ``passes.apply_pass``, with no tape transform of its own). Every pass Catalyst
    knows preserves the circuit's results: PennyLane's tape transform of the same name applies
    it when it rewrites the gates into one circuit; otherwise (it splits the circuit, or has no
    counterpart) the exact simulation already gives the results it preserves."""
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
    if len(tapes) != 1 or not _is_identity(post) or not _same_measurements(tapes[0], tape):
        return tape
    return tapes[0]


def _pass_name(bound: Any) -> str:
    """The compiler pass named like a tape transform (``split_non_commuting``:
    ``split-non-commuting``)."""
    return getattr(bound.tape_transform, "__name__", "").replace("_", "-")


def _is_identity(post: Any) -> bool:
    """True when a batch post-processing function returns its one result unchanged."""
    sentinel = object()
    try:
        out = post((sentinel,))
    except Exception:  # a real post-processing step cannot handle the sentinel
        return False
    return out is sentinel or (isinstance(out, (tuple, list)) and len(out) == 1 and out[0] is sentinel)


def _same_measurements(new: Any, old: Any) -> bool:
    import pennylane as qml

    return len(new.measurements) == len(old.measurements) and all(
        a is b or qml.equal(a, b) for a, b in zip(new.measurements, old.measurements)
    )
