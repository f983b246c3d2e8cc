"""A QNode's own transforms (``@qml.transforms.cancel_inverses``, ``merge_rotations``,
``decompose``...) applied to the gates of a compiled circuit.

The circuit is applied one straight-line segment at a time (see :mod:`.qnode`), so each transform
of the QNode's compile pipeline runs on a tape of one segment's operations (the last segment's tape
also holds the terminal measurements). Only transforms that rewrite the gates into one circuit are
supported: each must return one tape, with the same measurements, and post-processing that hands
its one result back unchanged. Anything else (``split_non_commuting``, gradient transforms, a
transform that changes measurements) is a :class:`~catalyst_lite.errors.QuantumOperationError`.

>>> import pennylane as qml
>>> pipeline = qml.transforms.cancel_inverses(qml.qnode(qml.device("default.qubit", wires=1))(
...     lambda: qml.expval(qml.Z(0)))).compile_pipeline
>>> transformed_operations(pipeline, [qml.H(0), qml.H(0), qml.X(0)], [])
[X(0)]
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import QuantumOperationError

__all__ = ["transformed_operations", "qnode_pipeline"]


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
        try:
            tapes, post = pipeline[i : i + 1]((tape,))
        except Exception as e:  # PennyLane's own errors: name the transform that raised
            raise QuantumOperationError(f"The QNode's transform {name} failed on a compiled circuit: {e}") from e
        if len(tapes) != 1 or not _is_identity(post) or not _same_measurements(tapes[0], tape):
            raise QuantumOperationError(
                f"catalyst_lite cannot apply the QNode's transform {name}: it splits the circuit, "
                "changes its measurements or post-processes its results: only transforms that "
                "rewrite the gates into one circuit (cancel_inverses, merge_rotations, decompose...) "
                "are supported inside qjit; apply the others outside it."
            )
        tape = tapes[0]
    return list(tape.operations)


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
