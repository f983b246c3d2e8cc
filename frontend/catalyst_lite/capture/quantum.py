"""PennyLane's captured quantum primitives, compiled by catalyst_lite's quantum machinery.

- ``qnode``: the QNode runs through :func:`~catalyst_lite.quantum.qnode.execute_qnode` with its
  captured quantum function in place of the Python one: operators are queued into the circuit's
  recorder and applied to the state vector, the returned measurements are measured;
- ``counts``: PennyLane's program has two results for it, its outcomes and their counts;
  catalyst_lite's ``counts`` measures both (``(outcomes, counts)``, as Catalyst returns them);
- ``measure``: :func:`catalyst_lite.measure` (PennyLane's program wants the outcome as an integer);
- ``adjoint_transform``/``ctrl_transform``: ``qml.adjoint``/``qml.ctrl`` of the captured function,
  which catalyst_lite compiles as it compiles them without capture;
- ``allocate``/``deallocate``: PennyLane's ``Allocate``/``Deallocate`` operators, queued as
  without capture; the program's wire values are their ``DynamicWire`` labels.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import pennylane as qml
from pennylane.capture.primitives import (
    adjoint_transform_prim,
    ctrl_transform_prim,
    measure_prim,
    qnode_prim,
)
from pennylane.allocation import Allocate, Deallocate, allocate_prim, deallocate_prim
from pennylane.measurements import CountsMP

from ..errors import QuantumOperationError
from ..quantum.qnode import execute_qnode, measure
from .interpreter import PlxprCompiler

__all__: list[str] = []


@PlxprCompiler.register_primitive(qnode_prim)
def _qnode(
    self: PlxprCompiler, *invals: Any, shots_len: int, qnode: Any, device: Any, execution_config: Any,
    qfunc_jaxpr: Any, n_consts: int,
) -> list[Any]:
    # Shots are the QNode's own (execute_qnode reads them from it), as in the operands.
    consts, args = invals[shots_len : shots_len + n_consts], invals[shots_len + n_consts :]
    results = execute_qnode(qnode, args, {}, qfunc=self.subprogram(qfunc_jaxpr, consts))
    return jax.tree_util.tree_leaves(results)


@PlxprCompiler.register_primitive(CountsMP._wires_primitive)
def _counts(self: PlxprCompiler, *wires: Any, all_outcomes: bool = False, has_eigvals: bool = False) -> list[Any]:
    if has_eigvals:
        raise QuantumOperationError("qml.counts with eigenvalues is not supported by catalyst_lite.")
    return [CountsMP(wires=list(wires) or None, all_outcomes=all_outcomes), None]


@PlxprCompiler.register_primitive(measure_prim)
def _measure(self: PlxprCompiler, wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    value = measure(wires, reset=reset, postselect=postselect)
    outcome = jnp.asarray(value, jnp.int64)
    self.outcomes[id(outcome)] = (outcome, value)  # for qml.probs/qml.counts of it
    return outcome


@PlxprCompiler.register_primitive(adjoint_transform_prim)
def _adjoint(self: PlxprCompiler, *invals: Any, jaxpr: Any, lazy: bool, n_consts: int) -> list[Any]:
    qml.adjoint(self.subprogram(jaxpr, invals[:n_consts]), lazy=lazy)(*invals[n_consts:])
    return []


@PlxprCompiler.register_primitive(ctrl_transform_prim)
def _ctrl(
    self: PlxprCompiler, *invals: Any, n_control: int, jaxpr: Any, control_values: Any, work_wires: Any,
    n_consts: int,
) -> list[Any]:
    consts, args, control = invals[:n_consts], invals[n_consts:-n_control], invals[-n_control:]
    function = self.subprogram(jaxpr, consts)
    qml.ctrl(function, control=list(control), control_values=control_values, work_wires=work_wires)(*args)
    return []


@PlxprCompiler.register_primitive(allocate_prim)
def _allocate(self: PlxprCompiler, *, num_wires: int, state: Any = "zero", restored: bool = False) -> list[Any]:
    with qml.QueuingManager.stop_recording():
        op = Allocate.from_num_wires(num_wires, state=state, restored=restored)
    qml.apply(op)
    return list(op.wires)


@PlxprCompiler.register_primitive(deallocate_prim)
def _deallocate(self: PlxprCompiler, *wires: Any) -> list[Any]:
    with qml.QueuingManager.stop_recording():
        op = Deallocate(list(wires))
    qml.apply(op)
    return []
