"""Compiling programs captured by PennyLane (``qjit(capture=True)``).

:func:`captured_program` captures the function as PennyLane does, in a trace nested in ours
(arrays keep their symbolic sizes; :func:`~catalyst_lite.jax_extras.hosted_capture`), then
evaluates the captured program (plxpr) into our trace with :class:`PlxprCompiler`. It binds JAX's
primitives as they are and replaces PennyLane's by ours, by the rules below: operators are queued
into the recorder of the QNode being compiled; PennyLane's control flow becomes ours (``qml.for_loop``
becomes catalyst_lite's ``for_loop``...); QNodes, mid-circuit measurements, ``adjoint``/``ctrl`` and
``allocate`` go through our quantum machinery; derivatives become our transforms. A PennyLane
primitive without a rule is an error naming it. PennyLane's leading "abstract shapes" inputs of
nested programs (the dynamic sizes of their arrays) are recomputed from the arrays our bodies
carry (:class:`SizeLocations`).
"""

from __future__ import annotations

import functools
import itertools
from contextlib import contextmanager
from copy import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
from jax.tree_util import PyTreeDef, tree_flatten, tree_leaves, tree_unflatten
from pennylane.allocation import Allocate, Deallocate, allocate_prim, deallocate_prim
from pennylane.capture import PlxprInterpreter
from pennylane.capture.primitives import (
    adjoint_transform_prim, cond_prim, ctrl_transform_prim, for_loop_prim, jacobian_prim, jvp_prim,
    measure_prim, qnode_prim, quantum_subroutine_prim, transform_prim, value_and_grad_prim, vjp_prim,
    while_loop_prim,
)
from pennylane.measurements import CountsMP

from ..control_flow import cond, for_loop, while_loop
from ..errors import DimensionError, QuantumOperationError, UnsupportedOperationError
from ..jax_extras import DropVar, Literal, Tracer, Var, hosted_capture
from ..jax_extras.dynshape import ExpansionStrategy, expand_args
from ..jax_extras.nested import trace_nested
from ..quantum.qnode import execute_qnode, measure
from ..trace_context import capture_switched
from ..transforms import grad, jacobian, jvp, value_and_grad, vjp, vmap


def captured_program(fn: Callable, name: str) -> Callable:
    """``fn`` captured by PennyLane and compiled by catalyst_lite, to be called while we trace."""

    def program(*args: Any) -> Any:
        flat_args, in_tree = tree_flatten(args)
        _, in_type = expand_args(flat_args, ExpansionStrategy(preserve_dimensions=True))
        trees: list[PyTreeDef] = []

        def under_capture(*flat: Any) -> list[Any]:
            with capture_switched(True, name), hosted_capture():
                leaves, tree = tree_flatten(fn(*tree_unflatten(in_tree, list(flat))))
            trees.append(tree)
            return leaves

        # PennyLane's program: a jaxpr taking its captured values (.consts), then flat_args
        plxpr = trace_nested(under_capture, in_type, name, expand=lambda _, results: (results, 0))
        results = PlxprCompiler().eval(plxpr.jaxpr, [], *plxpr.consts, *flat_args)
        return tree_unflatten(trees[-1], results)

    program.__name__ = program.__qualname__ = name
    return program


def with_static_arguments(fn: Callable) -> Callable:
    """A QNode compiled with static arguments (``static_argnums``/``static_argnames``) called as a
    copy whose ``static_argnums`` are the positions of the arguments holding no tracer (the static
    ones; static keywords are bound to its function), so that PennyLane's capture keeps them Python
    values, as Catalyst arranges it for positions (it was PennyLane's "Autograph must be used when
    Python control flow is dependent on a dynamic variable" for a ``range(n)`` of a static ``n``).
    Any other function is returned as it is."""
    if not isinstance(fn, qml.QNode):
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        def static(value: Any) -> bool:
            return not any(isinstance(x, Tracer) for x in tree_leaves(value))

        keywords = {k: v for k, v in kwargs.items() if static(v)}
        qnode = fn.update(static_argnums=tuple(i for i, arg in enumerate(args) if static(arg)),
                          func=functools.partial(fn.func, **keywords))
        return qnode(*args, **{k: v for k, v in kwargs.items() if k not in keywords})

    return call


class _Rules(dict):
    """Primitive -> rule; a PennyLane primitive without one is refused (re-bound, it would stay)."""

    def get(self, primitive: Any, default: Any = None) -> Any:
        rule = super().get(primitive, default)
        if rule is not None or getattr(primitive, "prim_type", "") in ("", "operator", "measurement"):
            return rule

        def unsupported(self: PlxprCompiler, *invals: Any, **params: Any) -> Any:
            raise UnsupportedOperationError(
                f"PennyLane's {primitive.name!r} is not supported in programs compiled with "
                "qjit(capture=True); compile with capture=False (catalyst_lite's own frontend)."
            )

        return unsupported


class PlxprCompiler(PlxprInterpreter):
    """Evaluates plxpr into the current catalyst_lite trace (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        # id(traced outcome) -> (the outcome, its MeasurementValue), for each mid-circuit
        # measurement evaluated (shared by the copies evaluating nested programs).
        self.outcomes: dict[int, tuple[Any, Any]] = {}
        self._substitutes: dict[int, int] = {}

    def interpret_operation(self, op: Any) -> Any:
        """An operator whose result the program does not use: a gate, queued where it stands."""
        return qml.apply(op)

    def interpret_operation_eqn(self, eqn: Any) -> Any:
        with _dynamic_wires_as_integers(self, eqn) as mapped:
            invals = [self.read(v) for v in eqn.invars]
            with qml.QueuingManager.stop_recording():
                op = mapped(eqn.primitive.impl(*invals, **eqn.params))
        return self.interpret_operation(op) if isinstance(eqn.outvars[0], DropVar) else op

    def read(self, var: Any) -> Any:
        value = super().read(var)
        return self._substitutes.get(id(value), value) if self._substitutes else value

    def interpret_measurement_eqn(self, eqn: Any) -> Any:
        if eqn.primitive.name in ("probs_mcm", "counts_mcm"):
            return self._statistics_of_outcomes(eqn)
        if not eqn.invars:
            # A measurement of every wire (qml.probs(), qml.state()): PennyLane builds it with no
            # wires only while its capture is on.
            with capture_switched(True, eqn.primitive.name):
                return super().interpret_measurement_eqn(eqn)
        with _dynamic_wires_as_integers(self, eqn) as mapped:
            return mapped(super().interpret_measurement_eqn(eqn))

    def interpret_measurement(self, measurement: Any) -> Any:
        return measurement  # returned to the QNode, which measures it (not queued)

    def _statistics_of_outcomes(self, eqn: Any) -> Any:
        """``qml.probs``/``qml.counts`` of outcomes the measurements returned (as without capture)."""
        outcomes = [self.read(v) for v in eqn.invars]
        known = [self.outcomes.get(id(outcome)) for outcome in outcomes]
        if any(k is None or k[0] is not outcome for k, outcome in zip(known, outcomes)):
            raise QuantumOperationError(
                f"{eqn.primitive.name}: qml.probs and qml.counts of expressions of mid-circuit "
                "measurement results are not supported with qjit(capture=True) by catalyst_lite; "
                "measure the outcomes themselves (qml.probs(op=[m0, m1])), or compile without "
                "capture=True."
            )
        params = dict(eqn.params)
        values = [value for _, value in known]
        op = values[0] if params.pop("single_mcm", True) else values
        # PennyLane's counts has no implementation under capture: the measurement is built as
        # its primitive would build it.
        kind = CountsMP if eqn.primitive.name == "counts_mcm" else qml.measurements.ProbabilityMP
        with qml.QueuingManager.stop_recording():
            mp = kind(obs=op, **params)
        return [mp, None] if eqn.primitive.multiple_results else mp

    def subprogram(self, jaxpr: Any, consts: Sequence[Any]) -> Callable[..., list[Any]]:
        """A nested jaxpr as a function, evaluated by a fresh copy of this interpreter."""
        return lambda *args: copy(self).eval(jaxpr, consts, *args)


@contextmanager
def _dynamic_wires_as_integers(interpreter: PlxprCompiler, eqn: Any) -> Iterator[Callable[[Any], Any]]:
    """PennyLane builds captured operators with integer wires: ``qml.allocate``'s ``DynamicWire``
    labels stand in as negative integers no program uses, put back by ``map_wires``."""
    dynamic = [v for v in map(interpreter.read, (x for x in eqn.invars if not isinstance(x, Literal)))
               if type(v).__name__ == "DynamicWire"]
    if not dynamic:
        yield lambda built: built
        return
    interpreter._substitutes = {id(w): -(2**62) - k for k, w in enumerate(dynamic)}
    back = {-(2**62) - k: w for k, w in enumerate(dynamic)}
    try:
        yield lambda built: built.map_wires(back) if hasattr(built, "map_wires") else built
    finally:
        interpreter._substitutes = {}


PlxprCompiler._primitive_registrations = _Rules(PlxprCompiler._primitive_registrations)
_rule = PlxprCompiler.register_primitive


@dataclass(frozen=True)
class SizeLocations:
    """Which inputs of a nested plxpr are sizes of its array inputs: ``locations[j] = (k, axis)``
    says that input ``j`` is the size of axis ``axis`` of input ``k``.

    >>> import numpy as np
    >>> from catalyst_lite.jax_extras.tracing import dynamic_tracing, make_input_type, trace_to_jaxpr
    >>> with dynamic_tracing():  # a jaxpr of x: f64[n], taking the size n first
    ...     in_type = make_input_type([np.ones(3)], [{0: "n"}])
    ...     jaxpr, _, _ = trace_to_jaxpr(lambda x: [x], in_type, "f")
    >>> sizes = SizeLocations.of(jaxpr.invars)
    >>> sizes.locations, sizes.leading(), sizes.fill([None, np.ones(5)])[0]
    ({0: (1, 0)}, 1, 5)
    """

    locations: dict[int, tuple[int, int]]

    @staticmethod
    def of(invars: Sequence[Any]) -> "SizeLocations":
        where: dict[Any, tuple[int, int]] = {}
        for k, v in enumerate(invars):
            for axis, d in enumerate(getattr(v.aval, "shape", ())):
                if isinstance(d, Var):
                    where.setdefault(d, (k, axis))
        return SizeLocations({j: where[v] for j, v in enumerate(invars) if v in where})

    def leading(self) -> int:
        """How many inputs, from the first, are sizes (PennyLane puts them first)."""
        return next(n for n in itertools.count() if n not in self.locations)

    def fill(self, values: Sequence[Any]) -> list[Any]:
        """``values`` with each size input replaced by its array's size."""
        values = list(values)
        for j, (k, axis) in self.locations.items():
            values[j] = jnp.shape(values[k])[axis]
        return values


# --- programs: subroutines, transforms, QNodes ---------------------------------------------------


@_rule(quantum_subroutine_prim)
def _subroutine(self: PlxprCompiler, *invals: Any, jaxpr: Any, **params: Any) -> list[Any]:
    """``qml.capture.subroutine``: its body, inlined."""
    return self.subprogram(jaxpr.jaxpr, jaxpr.consts)(*invals)


@_rule(transform_prim)
def _transform(
    self: PlxprCompiler, *invals: Any, inner_jaxpr: Any, args_slice: tuple, consts_slice: tuple,
    targs_slice: tuple, tkwargs: Any, transform: Any,
) -> list[Any]:
    """A PennyLane transform of a QNode or of a quantum function called inside one."""
    run = self.subprogram(inner_jaxpr, invals[slice(*consts_slice)])
    args = invals[slice(*args_slice)]
    if any(eqn.primitive is qnode_prim for eqn in inner_jaxpr.eqns):
        return run(*args)  # the QNode's own transforms: compiled QNodes apply them
    return transform(run, *invals[slice(*targs_slice)], **dict(tkwargs))(*args)


@_rule(qnode_prim)
def _qnode(
    self: PlxprCompiler, *invals: Any, shots_len: int, qnode: Any, device: Any, execution_config: Any,
    qfunc_jaxpr: Any, n_consts: int, batch_dims: tuple | None = None,
) -> list[Any]:
    """``execute_qnode`` with the captured quantum function (shots: the QNode's own, as in the operands);
    with ``batch_dims`` (the QNode under ``jax.vmap``), once per element of the batch (our ``vmap``)."""

    def run(*operands: Any) -> list[Any]:
        consts, args = operands[:n_consts], operands[n_consts:]
        results = execute_qnode(qnode, args, {}, qfunc=self.subprogram(qfunc_jaxpr, consts))
        return jax.tree_util.tree_leaves(results)

    if batch_dims is None:
        return run(*invals[shots_len:])
    return vmap(run, in_axes=tuple(batch_dims[shots_len:]))(*invals[shots_len:])


# --- quantum operations --------------------------------------------------------------------------


@_rule(CountsMP._wires_primitive)
def _counts(self: PlxprCompiler, *wires: Any, all_outcomes: bool = False, has_eigvals: bool = False) -> list:
    """Two results, outcomes and counts: our ``counts`` measures both (as Catalyst returns them)."""
    if has_eigvals:
        raise QuantumOperationError("qml.counts with eigenvalues is not supported by catalyst_lite.")
    return [CountsMP(wires=list(wires) or None, all_outcomes=all_outcomes), None]


@_rule(measure_prim)
def _measure(self: PlxprCompiler, wires: Any, reset: bool = False, postselect: int | None = None) -> Any:
    value = measure(wires, reset=reset, postselect=postselect)
    outcome = jnp.asarray(value, jnp.int64)  # (PennyLane's program wants an integer)
    self.outcomes[id(outcome)] = (outcome, value)  # for qml.probs/qml.counts of it
    return outcome


@_rule(adjoint_transform_prim)
def _adjoint(self: PlxprCompiler, *invals: Any, jaxpr: Any, lazy: bool, n_consts: int) -> list[Any]:
    qml.adjoint(self.subprogram(jaxpr, invals[:n_consts]), lazy=lazy)(*invals[n_consts:])
    return []


@_rule(ctrl_transform_prim)
def _ctrl(
    self: PlxprCompiler, *invals: Any, n_control: int, jaxpr: Any, control_values: Any, work_wires: Any,
    n_consts: int,
) -> list[Any]:
    consts, args, control = invals[:n_consts], invals[n_consts:-n_control], invals[-n_control:]
    function = self.subprogram(jaxpr, consts)
    qml.ctrl(function, control=list(control), control_values=control_values, work_wires=work_wires)(*args)
    return []


@_rule(allocate_prim)
def _allocate(self: PlxprCompiler, *, num_wires: int, state: Any = "zero", restored: bool = False) -> list:
    """Queued as without capture; the program's wire values are the ``DynamicWire`` labels."""
    with qml.QueuingManager.stop_recording():
        op = Allocate.from_num_wires(num_wires, state=state, restored=restored)
    qml.apply(op)
    return list(op.wires)


@_rule(deallocate_prim)
def _deallocate(self: PlxprCompiler, *wires: Any) -> list[Any]:
    with qml.QueuingManager.stop_recording():
        op = Deallocate(list(wires))
    qml.apply(op)
    return []


# --- control flow --------------------------------------------------------------------------------
# PennyLane's loops carry their arrays' dynamic sizes as leading values, ours the arrays only: each
# rule recomputes the size inputs of the body from the arrays and returns PennyLane's results (the
# final sizes, then the values). A loop whose body returns other sizes than it received runs with
# ``allow_array_resizing=True``.


def _resizes(jaxpr: Any, n_sizes: int, loop: str) -> bool:
    """Whether a loop body returns other sizes than it received (carried values: its last inputs);
    a static size that changes is a ``DimensionError`` (PennyLane captured the body with it fixed)."""
    n_carried = len(jaxpr.outvars) - n_sizes
    for inp, out in zip(jaxpr.invars[len(jaxpr.invars) - n_carried :], jaxpr.outvars[n_sizes:]):
        before, after = getattr(inp.aval, "shape", ()), getattr(out.aval, "shape", ())
        if any(isinstance(b, (int, np.integer)) and b != a for b, a in zip(before, after)):
            raise DimensionError(
                f"qml.{loop} (captured by PennyLane): the body receives {inp.aval.str_short()} and "
                f"returns {out.aval.str_short()}. PennyLane's program capture fixes the sizes of a "
                "carried array that starts with a static size, even with allow_array_resizing=True; "
                "start from an array of a traced size (e.g. an argument with abstracted_axes), or "
                "compile with capture=False."
            )
    return any(out is not inp for out, inp in zip(jaxpr.outvars[:n_sizes], jaxpr.invars[:n_sizes]))


@_rule(for_loop_prim)
def _for_loop(
    self: PlxprCompiler, start: Any, stop: Any, step: Any, *invals: Any,
    jaxpr_body_fn: Any, consts_slice: tuple, args_slice: tuple, abstract_shapes_slice: tuple,
) -> list[Any]:
    n_sizes = len(invals[slice(*abstract_shapes_slice)])
    sizes = SizeLocations.of(jaxpr_body_fn.invars)  # body inputs: *sizes, i, *carried
    body = self.subprogram(jaxpr_body_fn, invals[slice(*consts_slice)])

    @for_loop(start, stop, step, allow_array_resizing=_resizes(jaxpr_body_fn, n_sizes, "for_loop"))
    def loop(i: Any, carried: tuple) -> tuple:
        return tuple(body(*sizes.fill([None] * n_sizes + [i, *carried]))[n_sizes:])

    final = loop(tuple(invals[slice(*args_slice)]))
    return [*sizes.fill([None] * (n_sizes + 1) + list(final))[:n_sizes], *final]


@_rule(while_loop_prim)
def _while_loop(
    self: PlxprCompiler, *invals: Any,
    jaxpr_body_fn: Any, jaxpr_cond_fn: Any, body_slice: tuple, cond_slice: tuple, args_slice: tuple,
) -> list[Any]:
    sizes = SizeLocations.of(jaxpr_body_fn.invars)  # body and condition inputs: *sizes, *carried
    n_sizes = sizes.leading()
    body = self.subprogram(jaxpr_body_fn, invals[slice(*body_slice)])
    predicate = self.subprogram(jaxpr_cond_fn, invals[slice(*cond_slice)])

    def inputs(carried: tuple) -> list[Any]:
        return sizes.fill([None] * n_sizes + list(carried))

    @while_loop(lambda carried: predicate(*inputs(carried))[0],
                allow_array_resizing=_resizes(jaxpr_body_fn, n_sizes, "while_loop"))
    def loop(carried: tuple) -> tuple:
        return tuple(body(*inputs(carried))[n_sizes:])

    final = loop(tuple(invals[slice(*args_slice)][n_sizes:]))
    return inputs(final)


@_rule(cond_prim)
def _cond(
    self: PlxprCompiler, *invals: Any, jaxpr_branches: Sequence[Any], consts_slices: Sequence[tuple],
    args_slice: tuple,
) -> list[Any]:
    preds = invals[: len(jaxpr_branches)]
    args = invals[slice(*args_slice)]
    # Each branch returns one size per dynamic axis of its results, in order, then the results.
    outvars = jaxpr_branches[0].outvars
    dynamic_axes = [
        (k, axis) for k, v in enumerate(outvars) for axis, d in enumerate(getattr(v.aval, "shape", ()))
        if not isinstance(d, (int, np.integer))
    ]
    n_sizes = len(dynamic_axes)
    # A branch may also return the operators it applies (`lambda: qml.RY(x, 0)`): they are queued
    # where the branch runs, and are not values of the conditional.
    arrays = [k for k, v in enumerate(outvars) if k >= n_sizes and hasattr(v.aval, "dtype")]

    def branch(jaxpr: Any, consts_slice: tuple):
        run = self.subprogram(jaxpr, invals[slice(*consts_slice)])
        return lambda: tuple(map(run(*args).__getitem__, arrays))

    branches = [branch(j, s) for j, s in zip(jaxpr_branches, consts_slices)]
    # PennyLane adds the `else` branch with the constant predicate True (empty without one).
    has_otherwise = len(preds) > 1 and not isinstance(preds[-1], Tracer) and bool(preds[-1])
    conditional = cond(preds[0])(branches[0])
    for pred, fn in zip(preds[1 : len(preds) - has_otherwise], branches[1 : len(branches) - has_otherwise]):
        conditional.else_if(pred)(fn)
    if has_otherwise:
        conditional.otherwise(branches[-1])
    results: list[Any] = [None] * len(outvars)
    for k, value in zip(arrays, conditional() or ()):
        results[k] = value
    return SizeLocations(dict(enumerate(dynamic_axes))).fill(results)


# --- derivatives ---------------------------------------------------------------------------------
# PennyLane's primitives take the function's flat inputs (its constants and array sizes among them)
# and flat ``argnums`` into them, and return flat results (for ``jacobian``, one block per result
# and differentiated input, result-major, as ours flatten too).


def _function(self: PlxprCompiler, jaxpr: Any, consts: Sequence[Any], first: bool = False) -> Callable:
    """The captured function of its flat inputs (``first``: its first result), sizes read from the
    arrays it receives (the transform traces it with arguments of its own)."""
    run = self.subprogram(jaxpr, consts)
    sizes = SizeLocations.of(jaxpr.invars)
    return lambda *inputs: run(*sizes.fill(inputs))[0] if first else run(*sizes.fill(inputs))


def _options(method: str, h: float, argnums: Sequence[int]) -> dict[str, Any]:
    # PennyLane always passes a step; catalyst_lite takes one with method="fd" only.
    return {"method": method, "h": h if method == "fd" else None, "argnums": tuple(argnums)}


@_rule(jacobian_prim)
def _jacobian(
    self: PlxprCompiler, *invals: Any, jaxpr: Any, n_consts: int, argnums: Sequence[int], method: str,
    h: float, scalar_out: bool, fn: Callable,
) -> list[Any]:
    derivatives = (grad if scalar_out else jacobian)(  # scalar_out: qml.grad
        _function(self, jaxpr, invals[:n_consts], first=scalar_out), **_options(method, h, argnums)
    )
    return tree_leaves(derivatives(*invals[n_consts:]))


@_rule(value_and_grad_prim)
def _value_and_grad(
    self: PlxprCompiler, *invals: Any, jaxpr: Any, argnums: Sequence[int], method: str, h: float,
    fn: Callable,
) -> list[Any]:
    function = _function(self, jaxpr, (), first=True)
    value, gradient = value_and_grad(function, **_options(method, h, argnums))(*invals)
    return [value, *tree_leaves(gradient)]


def _product_rule(transform: Callable) -> Callable:
    """The rule of ``jvp_prim``/``vjp_prim``: the function's inputs, then (co)tangents; its results,
    then the derivative's."""

    def product_rule(
        self: PlxprCompiler, *invals: Any, jaxpr: Any, fn: Callable, method: str, h: float,
        argnums: Sequence[int],
    ) -> list[Any]:
        n = len(jaxpr.invars)
        function = _function(self, jaxpr, ())
        results, derivatives = transform(function, invals[:n], invals[n:], **_options(method, h, argnums))
        return [*tree_leaves(results), *tree_leaves(derivatives)]

    return product_rule


_rule(jvp_prim)(_product_rule(jvp))
_rule(vjp_prim)(_product_rule(vjp))
