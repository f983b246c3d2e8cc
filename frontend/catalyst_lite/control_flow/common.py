"""What ``for_loop``, ``while_loop`` and ``cond`` share: options, tracing checks, error messages,
the ``.operation`` records, handlers, and *ambient carries* (values every loop and branch threads
implicitly, such as a compiled circuit's state vector; see ``jax_extras.nested.bind_nested``)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterator, Sequence

import jax.numpy as jnp
import numpy as np
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure, treedef_is_leaf

from ..compiler.specialize import dimension_inputs
from ..trace_context import current as current_context, scope as context_scope
from ..diagnostics import ShapeBroadcastError
from ..errors import ControlFlowError, DimensionError, function_name
from ..jax_extras import EvalTrace, Tracer, current_trace, get_aval, is_tracing
from ..jax_extras.tracing import inside_program_trace, register_stand_in
from ..jax_extras.dynshape import DimensionMismatch, ExpansionStrategy
from ..jax_extras.nested import Threaded
from ..jax_extras.size_facts import describe_aval


def expansion_strategy(allow_array_resizing: bool,
                       experimental_preserve_dimensions: bool | None) -> ExpansionStrategy:
    """Catalyst's ``allow_array_resizing`` and the design documents' opposite option, as one."""
    if experimental_preserve_dimensions is not None:
        if allow_array_resizing and experimental_preserve_dimensions:
            raise ValueError(
                "allow_array_resizing=True and experimental_preserve_dimensions=True contradict "
                "each other; pass only one of them."
            )
        return ExpansionStrategy(bool(experimental_preserve_dimensions))
    return ExpansionStrategy(not allow_array_resizing)


def checked_function(fn: Any, api: str, what: str, usage: str) -> Any:
    """``fn``, which ``api`` takes as ``what``: a function, else the error naming the usage."""
    if not callable(fn):
        raise ControlFlowError(
            f"{api} takes {what}, but got {fn!r:.60} ({type(fn).__name__}). Write {usage}."
        )
    return fn


def refuse_function_as_operand(operand: Any, api: str, what: str, usage: str) -> None:
    """A function where ``api`` takes ``what`` first (``@cond`` without its predicate)."""
    if inspect.isfunction(operand) or inspect.ismethod(operand):
        raise ControlFlowError(
            f"{api} takes {what} first, but got the function {function_name(operand)}. Write {usage}."
        )


def tracing_mode(api: str, fn: Callable) -> str:
    """``"trace"`` in a catalyst_lite trace (even under a JAX transformation), ``"eager"`` outside any."""
    if is_tracing() or inside_program_trace():
        return "trace"
    if isinstance(current_trace(), EvalTrace):
        return "eager"
    raise ControlFlowError(
        f"{api} ({function_name(fn)}) is used inside a JAX transformation that is not a "
        "catalyst_lite qjit; call it inside @qjit, or use jax.lax control flow with jax.jit."
    )


@contextlib.contextmanager
def loop_errors(strategy: ExpansionStrategy, api: str, fn: Callable) -> Iterator[None]:
    """A loop body's type errors in the user's words; a resizing loop's carried sizes are unrelated to
    captured arrays' (design documents, reference program line [1]), which JAX's error would hide."""
    try:
        yield
    except DimensionMismatch as err:
        raise _dimension_error(err, api, fn) from None
    except ShapeBroadcastError:
        if strategy.preserve_dimensions:
            raise
        raise DimensionError(
            f"{api} body {function_name(fn)} combines arrays whose sizes cannot be known equal: "
            "with allow_array_resizing=True (or experimental_preserve_dimensions=False) each "
            "carried array has a new size of its own, unrelated to the sizes of arrays captured "
            "from outside the loop. If the body keeps the carried sizes, drop that option "
            "(dimensions are then preserved); otherwise pass the outer array as a carried value too."
        ) from None


def _dimension_error(err: DimensionMismatch, api: str, fn: Callable) -> DimensionError:
    name = function_name(fn)
    arg, res = err.arg_description, err.result_description
    if err.reason == "dimension":
        return DimensionError(
            f"{api} body {name} changes a dimension of argument {err.position}: it receives "
            f"{arg} but returns {res}. Pass allow_array_resizing=True to {api} to let the loop "
            "change array sizes."
        )
    hint = ""
    if err.reason == "dtype" and {err.arg_aval.dtype.name, err.result_aval.dtype.name} == {"float32", "float64"}:
        hint = (
            " (qjit computes with 64-bit types: with jax_enable_x64 off, jax.numpy arrays passed "
            "in are float32; pass float64 NumPy arrays or cast with .astype)"
        )
    return DimensionError(
        f"{api} body {name} changes the {err.reason} of argument {err.position}: it receives "
        f"{arg} but returns {res}; a loop must return values of the types it receives{hint}."
    )


def normalize_results(results: Any, n_args: int, in_tree: PyTreeDef, api: str, fn: Callable) -> list[Any]:
    """A loop body's return value, flattened in the structure of its arguments."""
    if n_args == 1:
        results = (results,)
    elif n_args == 0:
        if results is not None and results != ():
            raise ControlFlowError(
                f"{api} body {function_name(fn)} takes no loop values but returns {results!r}."
            )
        results = ()
    elif isinstance(results, list):
        results = tuple(results)
    flat, tree = flatten_values(results)
    if tree != in_tree:
        raise ControlFlowError(
            f"{api} body {function_name(fn)} must return values with the structure of its "
            f"arguments: expected {in_tree}, got {tree}."
        )
    return flat


def unwrapped(carry: Sequence[Any], n_args: int) -> Any:
    """Catalyst's convention: one value comes back unwrapped, several as a tuple, none as None."""
    return None if n_args == 0 else carry[0] if n_args == 1 else carry


def _aval_or_none(x: Any) -> Any:
    try:
        return get_aval(x)
    except TypeError:  # not a JAX value at all (a tuple, a string)
        return None


def check_predicate(pred: Any, api: str, fn: Callable) -> Any:
    """A predicate must be a boolean scalar (Python bool or a traced ``bool[]``)."""
    pred = traced_value(pred)
    if isinstance(pred, (bool, np.bool_)):
        return bool(pred)
    aval = _aval_or_none(pred)
    if aval is None or aval.shape != () or aval.dtype != np.dtype(bool):
        got = describe_aval(aval) if aval is not None else type(pred).__name__
        treedef = tree_structure(pred)
        value = (f"of tree-shape: {treedef}" if not treedef_is_leaf(treedef)
                 else f"{aval.dtype}{list(aval.shape)}" if isinstance(pred, Tracer) else repr(pred))
        raise ControlFlowError(  # Catalyst's phrase first (its users' match= strings), then ours
            f"A single boolean scalar was expected, got the value {value}: {api} ({function_name(fn)}) "
            f"needs a boolean scalar predicate, got {got}. Compare explicitly, e.g. `x > 0` or "
            "`(n % 2) == 0`."
        )
    return pred


def as_predicate(pred: Any, api: str, fn: Callable) -> Any:
    """A ``cond`` predicate as a boolean, converted as Python's ``if`` would (Catalyst's
    convention): a number is true when it is not zero; an array must hold one element."""
    pred = traced_value(pred)
    if isinstance(pred, (bool, int, float, complex, np.bool_, np.number)):
        return bool(pred)
    aval = _aval_or_none(pred)
    if aval is None or not hasattr(aval, "dtype") or aval.dtype.kind not in "biufc":
        raise ControlFlowError(
            f"{api} ({function_name(fn)}): a predicate must be a boolean, integer or floating-point "
            f"value, got {type(pred).__name__}."
        )
    if len(aval.shape) > 1 or aval.shape and not (type(aval.shape[0]) is int and aval.shape[0] == 1):
        raise ControlFlowError(
            f"Array with multiple elements is not a valid predicate: {api} ({function_name(fn)}): "
            "a predicate must hold one element, got "
            f"{describe_aval(aval)}, not a boolean scalar predicate; reduce it first, e.g. with "
            "jnp.any or jnp.all."
        )
    if not isinstance(pred, Tracer):
        return bool(np.asarray(pred).reshape(()))
    pred = jnp.reshape(pred, ())
    return pred if aval.dtype == np.dtype(bool) else pred != 0


class StandsForValue:
    """A value that stands for a traced one, converted by ``__jax_array__`` (a compiled circuit's
    ``MeasurementValue``): control flow carries, returns and reads the traced value."""


register_stand_in(StandsForValue)


def traced_value(x: Any) -> Any:
    """``x``, or the traced value it stands for (a :class:`StandsForValue`)."""
    return x.__jax_array__() if isinstance(x, StandsForValue) else x


def flatten_values(tree: Any) -> tuple[list[Any], PyTreeDef]:
    """``tree_flatten(tree)``, with the traced values that measurement values stand for."""
    leaves, treedef = tree_flatten(tree)
    return [traced_value(x) for x in leaves], treedef


def ambient_carries() -> list[Threaded]:
    """The ambient carries active in this thread, outermost first."""
    return list(current_context().ambient_carries)


def ambient_carry(carry: Threaded) -> contextlib.AbstractContextManager:
    """Make ``carry`` ambient in the block."""
    return context_scope(ambient_carries=(*current_context().ambient_carries, carry))


def fed_dimension_operands(feeds: Sequence[tuple[Any, list[int]]], nfixed: Sequence[int] | None = None) -> set[int]:
    """The operands a nested primitive's specialization keys on: those feeding a binder that sizes
    its body (of body ``b``, only among the ``nfixed[b]`` leading ones: a loop's fixed binders)."""
    needed = set()
    for b, (jaxpr, feed) in enumerate(feeds):
        needed |= {feed[k] for k in dimension_inputs(jaxpr) if nfixed is None or k < nfixed[b]}
    return needed


class ControlFlowOperation:
    """Catalyst's ``.operation`` of control flow called in a compiled quantum circuit: the record of
    that ``cond``/``switch``/``for_loop``/``while_loop`` (by its function's name), without regions.
    Called in a QNode's transform, it can go on the transform's tape (as Catalyst's operation does):
    ``replay`` calls the control flow again when the circuit reaches it, its gates applied there.

    >>> from catalyst_lite.control_flow.common import ForLoop
    >>> ForLoop("body")
    ForLoop('body')
    """

    wires, data = (), ()  # what a PennyLane tape reads of its operations (its gates carry their own)

    def __init__(self, function_name: str, replay: Callable[[], Any] | None = None):
        self.function_name = function_name
        self.replay = replay

    @property
    def name(self) -> str:
        """The operation's kind, as Catalyst names it: ``"ForLoop"``, ``"Cond"``..."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}({self.function_name!r})"


class Cond(ControlFlowOperation):
    """The ``.operation`` of a ``cond`` called in a compiled quantum circuit."""


class Switch(ControlFlowOperation):
    """The ``.operation`` of a ``switch`` called in a compiled quantum circuit."""


class ForLoop(ControlFlowOperation):
    """The ``.operation`` of a ``for_loop`` called in a compiled quantum circuit."""


class WhileLoop(ControlFlowOperation):
    """The ``.operation`` of a ``while_loop`` called in a compiled quantum circuit."""


class WithOperation:
    """Catalyst's ``.operation`` of a control-flow object: once called in a compiled quantum circuit,
    a :class:`ControlFlowOperation` of its kind; otherwise an ``AttributeError`` in Catalyst's words
    (example: :mod:`catalyst_lite.api_extensions.control_flow`)."""

    __name__: str
    operation_kind: str = ""  # the public function's name: "cond", "for_loop"...
    operation_type: type[ControlFlowOperation] = ControlFlowOperation
    _operation: ControlFlowOperation | None = None
    implements_another = False  # (a switch's cond: the switch is the operation)

    def _note_call(self, replay: Callable[[], Any]) -> None:
        """Called in a compiled circuit (whose control flow goes to a handler): its operation, which
        ``replay`` (this call again) applies."""
        handler = active_control_flow_handler()
        if handler is not None and not self.implements_another:
            self._operation = self.operation_type(self.__name__, replay)
            getattr(handler, "noted", lambda operation: None)(self._operation)  # a handler may queue it

    @property
    def operation(self) -> ControlFlowOperation:
        if self._operation is not None:
            return self._operation
        kind = self.operation_kind
        # Catalyst's phrase first, as Catalyst lays it out (its users' `match=` patterns follow
        # the layout: one line for switch, indented lines for the others), then ours.
        indent = "" if kind == "switch" else "\n" + " " * 16
        phrase = (f"{indent}The {kind}() was not called (or has not been called) in a quantum context,"
                  f"{indent or ' '}and thus has no associated quantum operation.{indent}")
        raise AttributeError(
            f"{phrase} catalyst_lite: the {kind}() {self.__name__!r} has an operation once it is "
            "called inside a QNode compiled by qjit."
        )


class LoopCallable(WithOperation):
    """A decorated loop: called with the initial carried values, it returns the final ones."""

    def __init__(self, run: Callable, body: Callable):
        functools.update_wrapper(self, body)
        self._run = run

    def __call__(self, *init: Any) -> Any:
        self._note_call(functools.partial(self._run, *init))
        return self._run(*init)


class ForLoopCallable(LoopCallable):
    """What ``for_loop(...)(body)`` returns (see :class:`LoopCallable`)."""

    operation_kind, operation_type = "for_loop", ForLoop


class WhileLoopCallable(LoopCallable):
    """What ``while_loop(...)(body)`` returns (see :class:`LoopCallable`)."""

    operation_kind, operation_type = "while_loop", WhileLoop


# A handler sees the control flow traced in a quantum circuit before it is bound (inside qml.adjoint a
# loop is recorded, to be applied reversed): ``for_loop(body, bounds, init, bind)``, ``while_loop(cond_fn,
# body, init, bind)`` or ``cond(preds, branches, otherwise, bind)`` (``otherwise``: ``None`` if not given),
# with ``bind`` (the same arguments but ``bounds``) the usual implementation. A handler's optional
# ``noted(operation)`` is first given the call's ``.operation`` (a decomposition's tape records it).


def control_flow_handler(handler: Any) -> contextlib.AbstractContextManager:
    """Hand this thread's traced control flow to ``handler`` in the block (``None``: bind it as usual)."""
    return context_scope(control_flow_handler=handler)


def active_control_flow_handler() -> Any:
    return current_context().control_flow_handler
