"""Catalyst's ``catalyst.passes``: compiler passes scheduled on a QNode by decorators, each
PennyLane's ``qml.transform(pass_name=...)``. A pass with a PennyLane tape transform of the same
name rewrites the gates with it; the others change nothing a result shows (see
:mod:`catalyst_lite.quantum.transforms`). An unknown pass is a ``CompileError`` at compilation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pennylane as qml

from .errors import UnsupportedOperationError

__all__ = [
    "apply_pass", "apply_pass_plugin", "cancel_inverses", "combine_global_phases", "commute_ppr",
    "decompose_arbitrary_ppr", "diagonalize_measurements", "disentangle_cnot", "disentangle_swap",
    "graph_decomposition", "gridsynth", "ions_decomposition", "merge_ppr_ppm", "merge_rotations",
    "parity_synth", "ppm_compilation", "ppr_to_mbqc", "ppr_to_ppm", "reduce_t_depth", "to_ppr",
    "pipeline", "Pass", "PassPlugin", "ppm_specs",
]
_NOT_PASSES = {"apply_pass", "apply_pass_plugin", "pipeline", "Pass", "PassPlugin", "ppm_specs"}


def apply_pass(pass_name: str, *flags: Any, **valued_options: Any) -> Callable[[Any], Any]:
    """A decorator scheduling the compiler pass ``pass_name`` (with its options) on a QNode.

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit
    >>> from catalyst_lite.passes import apply_pass
    >>> @qjit
    ... @apply_pass("cancel-inverses")
    ... @qml.qnode(qml.device("default.qubit", wires=1))
    ... def circuit():
    ...     qml.Hadamard(0)
    ...     qml.Hadamard(0)
    ...     return qml.expval(qml.Z(0))
    >>> float(circuit())
    1.0
    """

    def decorator(qnode: Any) -> Any:
        return qml.transform(pass_name=pass_name)(qnode, *flags, **valued_options)

    return decorator


def pipeline(pass_pipeline: dict[str, dict[str, Any]]) -> Callable[[Any], Any]:
    """A decorator scheduling several passes on a QNode, in order: each key a pass (a name of this
    module, ``"cancel_inverses"``, or a pass name, ``"cancel-inverses"``), each value its options.

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit
    >>> from catalyst_lite.passes import pipeline
    >>> def flips():
    ...     qml.X(0)
    ...     qml.X(0)
    ...     return qml.probs(wires=0)
    >>> schedule = pipeline({"cancel_inverses": {}, "merge_rotations": {}})
    >>> qjit(schedule(qml.qnode(qml.device("default.qubit", wires=1))(flips)))().tolist()
    [1.0, 0.0]
    """
    if not isinstance(pass_pipeline, dict):
        raise TypeError(f"pipeline: the pass pipeline must be a dict of pass names to options, got {type(pass_pipeline).__name__}.")

    def decorator(qnode: Any) -> Any:
        for name, options in pass_pipeline.items():
            named = globals().get(name) if name in __all__ and name not in _NOT_PASSES else None
            qnode = named(qnode, **(options or {})) if named is not None else apply_pass(name, **(options or {}))(qnode)
        return qnode

    return decorator


def apply_pass_plugin(path_to_plugin: str | Path, pass_name: str, *flags: Any, **valued_options: Any):
    """Catalyst's MLIR pass plugins: catalyst_lite compiles with XLA and runs no MLIR plugin.

    >>> from catalyst_lite.passes import apply_pass_plugin
    >>> apply_pass_plugin("no/such/plugin.so", "my-pass")
    Traceback (most recent call last):
    FileNotFoundError: File 'no/such/plugin.so' does not exist.
    """
    if not Path(path_to_plugin).exists():
        raise FileNotFoundError(f"File '{path_to_plugin}' does not exist.")
    raise UnsupportedOperationError(
        f"apply_pass_plugin({str(path_to_plugin)!r}, {pass_name!r}): catalyst_lite compiles with XLA "
        "and cannot load MLIR pass plugins. Apply the transformation as a PennyLane tape transform "
        "(qml.transform) instead."
    )


class Pass:
    """A compiler pass with its flags and valued options, as Catalyst's pipelines hold one.

    >>> from catalyst_lite.passes import Pass
    >>> Pass("merge-rotations", "verbose", max_iterations=3).get_options()
    'verbose max_iterations=3'
    """

    def __init__(self, name: str, *options: str, **valued_options: Any):
        self.name = name
        self.options = options
        self.valued_options = valued_options

    def get_options(self) -> str:
        return " ".join([*map(str, self.options), *(f"{k}={v}" for k, v in self.valued_options.items())])

    def __repr__(self) -> str:
        text = self.get_options()
        return f"Pass({self.name!r}{', ' if text else ''}{text})"


class PassPlugin(Pass):
    """A pass loaded from an MLIR plugin (Catalyst's): making one raises (no MLIR here).

    >>> from catalyst_lite.passes import PassPlugin
    >>> PassPlugin("no/such/plugin.so", "my-pass")
    Traceback (most recent call last):
    FileNotFoundError: File 'no/such/plugin.so' does not exist.
    """

    def __init__(self, path: str | Path, name: str, *options: str, **valued_options: Any):
        apply_pass_plugin(path, name, *options, **valued_options)  # raises: no MLIR plugins here


def ppm_specs(fn: Any) -> dict:
    """Catalyst's counts of Pauli product rotations and measurements: none here (raises).

    >>> from catalyst_lite.passes import ppm_specs
    >>> ppm_specs(lambda: None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    catalyst_lite.errors.UnsupportedOperationError: ppm_specs(<lambda>): ...
    """
    raise UnsupportedOperationError(
        f"ppm_specs({getattr(fn, '__name__', fn)}): catalyst_lite has no Pauli-product-rotation "
        "representation (the to_ppr/ppr_to_ppm passes change nothing a result shows), so there "
        "are no PPR/PPM counts. Use qml.specs(qnode)(*args) for the circuit's resources."
    )


# Each pass: PennyLane's transform of Catalyst's pass name, the function's name dashed.
_PASS_NAMES = {"diagonalize_measurements": "diagonalize-final-measurements"}
for _name in sorted(set(__all__) - _NOT_PASSES):
    globals()[_name] = qml.transform(pass_name=_PASS_NAMES.get(_name, _name.replace("_", "-")))
