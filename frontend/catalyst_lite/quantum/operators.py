"""Catalyst's quantum functions, with its signatures: ``adjoint``, ``ctrl`` and ``mitigate_with_zne``.

Of an operator ``adjoint``/``ctrl`` are ``qml.adjoint``/``qml.ctrl``. Of a quantum function in a
compiled circuit, the result applies its adjoint or controlled version (loops and branches too,
see :mod:`.regions`) and returns an operator describing it (never queued), as Catalyst's
``HybridAdjoint``/``HybridCtrl``; outside one, ``ctrl`` of a function still returns such an operator.

``mitigate_with_zne`` folds a circuit into ``U (U^dagger U)^k`` (scale factor ``2k + 1``) and
extrapolates its results to zero noise: on noiseless simulators each scale factor runs the circuit
as written, once, and the extrapolation is Catalyst's (by default an exact polynomial fit).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError, UnsupportedOperationError, function_name
from ..jax_extras import Tracer
from ..trace_context import pennylane_capture_enabled
from .gates import _qml
from .qnode import compiling_state
from .regions import RegionRun, adjoint_transform, run_adjoint, run_ctrl

__all__ = ["adjoint", "ctrl", "mitigate_with_zne"]


def _check_operand(f: Any) -> None:
    qml = _qml()
    if not (isinstance(f, qml.operation.Operator) or callable(f)):
        raise ValueError(f"Expected a callable or a qml.Operator, not {f!r}")


def _wires_of(gates: Sequence[Any], first: Sequence[Any] = ()) -> list:
    """``first``, then the wires of ``gates`` in order of appearance, each once."""
    seen: list = list(first)
    for gate in gates:
        seen += [w for w in gate.wires if not any(_same_wire(w, v) for v in seen)]
    return seen


def _same_wire(a: Any, b: Any) -> bool:
    """Equal labels; a traced wire (a loop index) is the same as itself only."""
    return a is b if isinstance(a, Tracer) or isinstance(b, Tracer) else a == b


@functools.cache
def _classes() -> tuple[type, type]:
    qml = _qml()

    class HybridAdjoint(qml.operation.Operator):
        """The adjoint of a quantum function, as applied in a compiled circuit."""

        def __init__(self, run: RegionRun, wires: Sequence[Any]):
            self._run = run
            super().__init__(wires=wires)

        @property
        def has_decomposition(self) -> bool:
            return not self._run.control_flow

        def decomposition(self) -> list:
            if self._run.control_flow:
                raise qml.operation.DecompositionUndefinedError(
                    f"{self.name} applied loops or branches, whose gates are not operators of the "
                    "circuit; only a function of gates has a decomposition."
                )
            return list(self._run.gates)

    class HybridCtrl(HybridAdjoint):
        """The controlled version of a quantum function, as applied in a compiled circuit."""

        def __init__(self, run: RegionRun, control: Sequence[Any], control_values: Sequence[Any],
                     work_wires: Sequence[Any], work_wire_type: str):
            self.control_wires = qml.wires.Wires(control)
            self.control_values = list(control_values)
            self.work_wires = qml.wires.Wires(work_wires)
            self.work_wire_type = work_wire_type
            super().__init__(run, _wires_of(run.gates, control))

    return HybridAdjoint, HybridCtrl


def adjoint(f: Any, lazy: bool = True) -> Any:
    """Catalyst's ``adjoint``: of an operator, ``qml.adjoint(f, lazy)``; of a quantum function, a
    function that applies its adjoint and returns an operator describing it (see the module
    docstring); of an operator class (``adjoint(qml.RX)(x, wires=0)``), the adjoint operator.

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit, adjoint
    >>> @qjit
    ... @qml.qnode(qml.device("default.qubit", wires=1))
    ... def undone(x: float):
    ...     def rotations(y):
    ...         qml.RX(y, 0)
    ...         qml.RY(y / 2, 0)
    ...     rotations(x)
    ...     adjoint(rotations)(x)  # undoes them: the state is |0> again
    ...     return qml.expval(qml.Z(0))
    >>> round(float(undone(0.7)), 12)
    1.0
    """
    _check_operand(f)
    qml = _qml()
    state = compiling_state()
    if state is None or isinstance(f, qml.operation.Operator):
        return qml.adjoint(f, lazy=lazy)
    if isinstance(f, type) and issubclass(f, qml.operation.Operator):
        return adjoint_transform(state, f, lazy)  # an operator class: its adjoint operator

    @functools.wraps(f)
    def apply(*args: Any, **kwargs: Any) -> Any:
        run = run_adjoint(state, f, lazy, args, kwargs)
        with qml.QueuingManager.stop_recording():  # a record of what was applied, not a gate
            # the wires in the order f applies them (its adjoint applies them last to first)
            return _classes()[0](run, _wires_of(run.gates[::-1]))

    return apply


def ctrl(f: Any, control: Any, control_values: Any = None, work_wires: Any = None,
         work_wire_type: str = "borrowed") -> Any:
    """Catalyst's ``ctrl``: of an operator, ``qml.ctrl(f, control, ...)``; of a quantum function,
    a function that applies it controlled by ``control`` (wires having ``control_values``, all 1
    by default) and returns an operator describing it (see the module docstring).

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit, ctrl
    >>> @qjit
    ... @qml.qnode(qml.device("default.qubit", wires=2))
    ... def controlled(x: float):
    ...     qml.X(0)                                        # the control is 1: RX applies
    ...     ctrl(lambda y: qml.RX(y, 1), control=0)(x)
    ...     return qml.expval(qml.Z(1))
    >>> round(float(controlled(0.5)), 6)                    # cos(0.5)
    0.877583
    """
    _check_operand(f)
    qml = _qml()
    options = (control, control_values, work_wires, work_wire_type)
    controls = qml.wires.Wires(control)
    several = isinstance(control_values, (list, tuple)) or getattr(control_values, "ndim", 0) > 0
    values = [True] * len(controls) if control_values is None else (
        list(control_values) if several else [control_values])
    # checked for operators too: qml.ctrl builds CRX... without looking at the values
    if len(values) != len(controls):
        raise ValueError(
            f"Length of the control_values ({len(values)}) differs from the number of control "
            f"wires ({len(controls)}): control_values should be the same length as control_wires."
        )
    state = compiling_state()
    spare = qml.wires.Wires([] if work_wires is None else work_wires)
    outside = (state is None and not isinstance(f, (type, qml.operation.Operator))
               and not pennylane_capture_enabled() and qml.compiler.active_compiler() is None)
    if not outside and (state is None or isinstance(f, qml.operation.Operator)):
        return qml.ctrl(f, *options)  # or PennyLane captures the program

    @functools.wraps(f)
    def apply(*args: Any, **kwargs: Any) -> Any:
        if outside:  # no circuit compiled: each operator f queues is controlled and queued, as qml.ctrl(f)
            recorded = qml.tape.make_qscript(f)(*args, **kwargs)
            run = RegionRun([qml.ctrl(op, controls, values, spare or None, work_wire_type)
                             for op in recorded.operations], False)
        else:
            run = run_ctrl(state, f, options, args, kwargs)
        with qml.QueuingManager.stop_recording():
            return _classes()[1](run, controls, values, spare, work_wire_type)

    return apply


FOLDINGS = ("global", "local-all")


def mitigate_with_zne(fn: Callable | None = None, *, scale_factors: Sequence[int],
                      extrapolate: Callable | None = None, extrapolate_kwargs: dict[str, Any] | None = None,
                      folding: str = "global") -> Callable:
    """``fn`` (a QNode, or a function of QNodes, returning float scalars) mitigated by zero-noise
    extrapolation over ``scale_factors`` (odd positive ints). ``extrapolate(scale_factors,
    results)`` gives the mitigated value (default: the exact polynomial fit); ``folding`` is
    ``"global"`` or ``"local-all"`` (``"local-random"``: ``UnsupportedOperationError``).

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit, mitigate_with_zne
    >>> @qml.qnode(qml.device("default.qubit", wires=1))
    ... def circuit(x):
    ...     qml.RX(x, 0)
    ...     return qml.expval(qml.Z(0))
    >>> mitigated = qjit(mitigate_with_zne(circuit, scale_factors=[1, 3, 5]))
    >>> round(float(mitigated(0.5)), 6)   # noiseless: folding changes nothing, cos(0.5)
    0.877583
    """
    if fn is None:
        return functools.partial(mitigate_with_zne, scale_factors=scale_factors, extrapolate=extrapolate,
                                 extrapolate_kwargs=extrapolate_kwargs, folding=folding)
    if not callable(fn):
        raise ArgumentTypeError(f"mitigate_with_zne: the target must be callable, got {type(fn).__name__}.")
    _check_scale_factors(list(scale_factors))
    if extrapolate is None:
        extrapolate = functools.partial(_qml().noise.poly_extrapolate, order=len(scale_factors) - 1)
    elif extrapolate_kwargs is not None:
        extrapolate = functools.partial(extrapolate, **extrapolate_kwargs)

    @functools.wraps(fn)
    def mitigated(*args: Any, **kwargs: Any) -> Any:
        if folding == "local-random":
            raise UnsupportedOperationError(
                "mitigate_with_zne: folding='local-random' is not available (nor in Catalyst 0.15)."
            )
        if folding not in FOLDINGS:
            raise ArgumentValueError(
                f"mitigate_with_zne: folding must be one of {[*FOLDINGS, 'local-random']}, got {folding!r}."
            )
        runs = [_float_scalars(fn, fn(*args, **kwargs)) for _ in scale_factors]
        results = jnp.stack([jnp.stack(r) for r in runs])  # (scale factors, results)
        if results.shape[1] == 1:
            results = results[:, 0]
        mitigated_values = extrapolate(jnp.asarray(scale_factors, dtype=float), results)
        return tuple(mitigated_values) if jnp.ndim(mitigated_values) else mitigated_values

    mitigated.__name__ = f"zne.{getattr(fn, '__name__', 'unknown')}"
    return mitigated


def _check_scale_factors(scale_factors: list) -> None:
    for n in scale_factors:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ArgumentTypeError(
                f"mitigate_with_zne: found non-integer {n!r} in scale_factors {scale_factors}; only odd "
                "positive integers are allowed."
            )
        if n < 0 or n % 2 == 0:
            raise ArgumentValueError(
                f"mitigate_with_zne: found {n} in scale_factors {scale_factors}; only odd positive "
                "integers are allowed (scale factor 2k + 1 folds the circuit k times)."
            )


def _float_scalars(fn: Callable, out: Any) -> list:
    """The results of one run: float scalars of one dtype, as Catalyst requires."""
    leaves = jax.tree_util.tree_leaves(out)
    if any(jnp.shape(x) for x in leaves):
        raise ArgumentTypeError(
            f"mitigate_with_zne({function_name(fn)}): only expectation values and classical scalars "
            "can be mitigated; it returns arrays."
        )
    dtypes = {jnp.result_type(x) for x in leaves}
    if len(dtypes) != 1 or not jnp.issubdtype(dtypes.pop(), jnp.floating):
        raise ArgumentTypeError(
            f"mitigate_with_zne({function_name(fn)}): all results must be floats of one dtype."
        )
    return leaves
