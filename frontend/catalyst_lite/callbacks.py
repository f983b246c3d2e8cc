"""Host callbacks: Python functions called by a compiled program while it runs, each one
``host_callback`` equation (:class:`HostCall`) bound at specialization as JAX's callbacks; an
exception a callback raises reaches the caller as itself (:func:`callback_exception`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NoReturn, Sequence

import jax
import numpy as np
from jax.custom_derivatives import CustomVJPPrimal, SymbolicZero
from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from .signature import PYTHON_SCALARS, resolved_annotation
from .trace_context import current as current_context, thread_collector
from .control_flow.common import flatten_values
from .errors import CallbackError, ControlFlowError, DifferentiableCompileError, function_name
from .jax_extras import EvalTrace, Primitive, ShapedArray, current_trace, is_tracing
from .jax_extras.host_callbacks import kept_callback
from .jax_extras.lowering import opaque_call
from .jax_extras.rules import PrimitiveSpec, register_primitive

__all__ = ["pure_callback", "base_callback", "accelerate", "HostCall", "call_for_effect", "host_callback_p",
           "callback_exception", "run_eagerly", "running_program"]


def run_eagerly() -> bool:
    """Neither a catalyst_lite trace nor another JAX transformation is running: call directly."""
    return not is_tracing() and isinstance(current_trace(), EvalTrace)


def _remembering_exceptions(fn: Callable) -> Callable:
    """``fn``, recording what it raises for :func:`callback_exception` (XLA's error only quotes it)."""

    @functools.wraps(fn)
    def host(*args: Any) -> Any:
        try:
            return fn(*args)
        except BaseException as err:
            err._catalyst_lite_callback = True
            slot = current_context().callback_errors
            if slot is None:  # an XLA worker thread: the slot of the one thread running a program
                running = list(_RUNNING.values())
                slot = running[0] if len(running) == 1 else None
            (thread_collector("callback_errors") if slot is None else slot).append(err)
            raise

    return host


_RUNNING: dict[int, list] = {}  # the callback-error slot of each thread running a program now


@contextlib.contextmanager
def running_program() -> Iterator[None]:
    """This thread runs a program in the block: a callback failing on XLA's threads records here."""
    ident = threading.get_ident()
    previous = _RUNNING.get(ident)
    _RUNNING[ident] = thread_collector("callback_errors")  # the context's list, made if it has none
    try:
        yield
    finally:
        if previous is None:
            _RUNNING.pop(ident, None)
        else:
            _RUNNING[ident] = previous


def callback_exception(err: BaseException) -> BaseException:
    """The exception to raise for ``err`` of a program run: the first a callback raised, else ``err``."""
    slot = current_context().callback_errors
    if not slot or not isinstance(err, jax.errors.JaxRuntimeError):
        return err
    original = slot[0]  # the first to fail: XLA stops the program there
    slot.clear()
    original.__suppress_context__ = True  # XLA's report of it only quotes its traceback
    return original


def _not_raised_by_callbacks(record: logging.LogRecord) -> bool:
    """JAX logs every exception of a callback before XLA fails; ours reach the caller anyway."""
    exc = record.exc_info[1] if record.exc_info else None
    return not getattr(exc, "_catalyst_lite_callback", False)


for _logger in ("jax._src.callback", "jax._src.debugging"):
    logging.getLogger(_logger).addFilter(_not_raised_by_callbacks)


def _result_leaf(t: Any, name: str) -> jax.ShapeDtypeStruct:
    if not isinstance(t, type) and hasattr(t, "shape") and hasattr(t, "dtype"):
        # ShapeDtypeStruct, ShapedArray, or an array standing for its own type (as in Catalyst)
        return jax.ShapeDtypeStruct(tuple(t.shape), np.dtype(t.dtype))
    kind = t if isinstance(t, type) else type(t)  # a Python number stands for its type (0.5: float)
    if kind in PYTHON_SCALARS:
        return jax.ShapeDtypeStruct((), PYTHON_SCALARS[kind])
    try:
        return jax.ShapeDtypeStruct((), np.dtype(t))  # np.float32, jnp.int32, "float64"
    except TypeError:
        raise CallbackError(
            f"callback {name}: result type {t!r} is not a Python scalar type, a dtype, a "
            "jax.ShapeDtypeStruct or a value of the result's type."
        ) from None


def _declared_return(fn: Callable) -> Any:
    """``fn``'s return annotation, or ``None``."""
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):
        return None
    return None if annotation is inspect.Signature.empty else resolved_annotation(annotation, fn)


def _as_declared(name: str, short_name: str, results: Any, types: Sequence[jax.ShapeDtypeStruct]) -> list[np.ndarray]:
    """A callback's results as NumPy arrays of the declared types (Python scalars converted)."""
    leaves = tree_flatten(results)[0]
    if len(leaves) != len(types):
        raise CallbackError(f"callback {name} returned {len(leaves)} value(s), but {len(types)} are declared.")
    arrays = []
    for value, t in zip(leaves, types):
        array = np.asarray(value)
        if type(value) in PYTHON_SCALARS and np.can_cast(array.dtype, t.dtype, "same_kind"):
            array = array.astype(t.dtype)
        if array.shape != t.shape or array.dtype != t.dtype:
            raise CallbackError(
                f"Callback {short_name} expected type {t.dtype}{list(t.shape)} but observed "
                f"{array.dtype}{list(array.shape)} in its return value: callback {name} is declared "
                "to return that type."
            )
        arrays.append(array)
    return arrays


@dataclass(frozen=True, eq=False)
class HostCall:
    """One call site of a callback: the function, its arguments' structure, declared results, derivative."""

    fn: Callable
    name: str
    in_tree: PyTreeDef
    types: tuple[jax.ShapeDtypeStruct, ...]
    debug: bool = False
    out_tree: PyTreeDef | None = None
    fwd: Callable | None = None
    bwd: Callable | None = None

    def host(self, *flat: Any) -> Any:
        """What XLA calls: the user's function on NumPy arrays (0-d ones as scalars)."""
        args, kwargs = tree_unflatten(self.in_tree, [np.asarray(x)[()] if np.ndim(x) == 0 else np.asarray(x) for x in flat])
        results = self.fn(*args, **kwargs)
        if self.debug:
            if results is not None:
                raise CallbackError(
                    f"debug.callback is expected to return None: {self.name} returned {results!r}."
                )
            return None
        return _as_declared(self.name, getattr(self.fn, "__name__", self.name), results, self.types)

    def jax_call(self, flat: Sequence[Any]) -> list[Any]:
        """The call in JAX's own terms (bound at specialization)."""
        host = _remembering_exceptions(self.host)
        if self.debug:
            # In program order, as Catalyst's (one may set the state the next one reads).
            jax.debug.callback(host, *flat, ordered=True)
            return []

        def call(*xs: Any) -> list[Any]:
            # Runs whenever the program runs, even if only its derivative is used (as Catalyst's).
            return kept_callback(host, self.types, *xs)

        if self.fwd is None:
            differentiable = jax.custom_jvp(call)
            differentiable.defjvp(self._no_derivative)
        else:
            differentiable = jax.custom_vjp(call)
            # The flat arguments the latest forward pass differentiates: a .bwd may return those only.
            perturbed: list[bool] = []
            differentiable.defvjp(
                functools.partial(self._flat_fwd, perturbed), functools.partial(self._flat_bwd, perturbed),
                symbolic_zeros=True,
            )
        return list(differentiable(*flat))

    @property
    def underived(self) -> bool:
        return self.fwd is None and not self.debug

    def no_derivative_error(self) -> DifferentiableCompileError:
        return DifferentiableCompileError(
            f"Compilation failed: pure_callback {self.name} is differentiated but has no derivative: "
            "define its forward and backward passes with @<callback>.fwd and @<callback>.bwd."
        )

    def _no_derivative(self, primals: Any, tangents: Any) -> NoReturn:
        raise self.no_derivative_error()

    def _flat_fwd(self, perturbed: list[bool], *primals: CustomVJPPrimal) -> tuple[list[Any], Any]:
        perturbed[:] = [p.perturbed for p in primals]
        args, kwargs = tree_unflatten(self.in_tree, [p.value for p in primals])
        results, residuals = self.fwd(*args, **kwargs)
        return list(tree_flatten(results)[0]), residuals

    def _flat_bwd(self, perturbed: list[bool], residuals: Any, cotangents: list[Any]) -> tuple[Any, ...]:
        """Catalyst's ``bwd(residuals, dy)`` returns one cotangent per (differentiated) argument."""
        # Symbolic zeros as arrays, as Catalyst's ``dy`` holds them.
        dense = [(np.zeros if c.dtype == jax.dtypes.float0 else jax.numpy.zeros)(c.shape, c.dtype)
                 if isinstance(c, SymbolicZero) else c for c in cotangents]
        per_argument = self.bwd(residuals, tree_unflatten(self.out_tree, dense))
        if not isinstance(per_argument, tuple):
            per_argument = (per_argument,)
        flat = tree_flatten(per_argument)[0]
        if len(flat) == self.in_tree.num_leaves:
            return tuple(flat)
        if perturbed and len(flat) == sum(perturbed):  # the differentiated arguments' only
            given = iter(flat)
            return tuple(next(given) if p else None for p in perturbed)
        raise CallbackError(
            f"the .bwd of pure_callback {self.name} returned {len(flat)} cotangent(s) for "
            f"{self.in_tree.num_leaves} argument array(s) ({sum(perturbed)} differentiated); return "
            "a tuple with one per argument, or one per differentiated argument."
        )


host_callback_p = Primitive("host_callback")
host_callback_p.multiple_results = True
host_callback_p.def_abstract_eval(lambda *avals, call: [ShapedArray(t.shape, t.dtype) for t in call.types])


def _specialized(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    return params["call"].jax_call(invals)


def _lower(ctx: Any, *operands: Any, call: HostCall) -> list[Any]:
    """``.mlir``: an opaque custom call naming the callback."""
    name = "debug_callback" if call.debug else "pure_callback"
    return opaque_call(ctx, name, operands, call.name, has_side_effect=call.debug)


register_primitive(host_callback_p, PrimitiveSpec(
    staged=_specialized, host=_specialized, dimension_operands=lambda _: set(), lowering=_lower,
    compiled_lowering=lambda *operands, call: call.jax_call(operands),
    kept_when_unused=True,  # the callback runs whenever the program does
))


def call_on_host(call: HostCall, args: tuple, kwargs: dict) -> list[Any]:
    """The flat results of ``call``: an equation inside qjit, JAX's callback otherwise. A
    mid-circuit measurement value among the arguments is passed as its traced outcome."""
    flat = flatten_values((args, kwargs))[0]
    if is_tracing():
        return host_callback_p.bind(*flat, call=call)
    return call.jax_call(flat)


class PureCallback:
    """``pure_callback(fn, result_type)``, called like ``fn``; ``.fwd``/``.bwd`` decorate its
    forward pass (``-> (results, residuals)``) and vector-Jacobian product."""

    def __init__(self, fn: Callable, result_type: Any = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.result_type = result_type
        self._fwd: Callable | None = None
        self._bwd: Callable | None = None

    def fwd(self, fn: Callable) -> Callable:
        self._fwd = fn
        return fn

    def bwd(self, fn: Callable) -> Callable:
        self._bwd = fn
        return fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if run_eagerly():
            return self.fn(*args, **kwargs)
        name = function_name(self.fn)
        if (self._fwd is None) != (self._bwd is None):
            missing = "forward (.fwd)" if self._fwd is None else "backward (.bwd)"
            raise DifferentiableCompileError(
                f"Pure callback {name} is missing {'forward' if self._fwd is None else 'reverse'} pass: it "
                f"has a derivative without its {missing} pass."
            )
        declared = self.result_type if self.result_type is not None else _declared_return(self.fn)
        if declared is None:
            raise CallbackError(
                "A function using pure_callback requires return types to be passed in as a "
                f"parameter or type annotation: pure_callback {name} needs its result type "
                "(annotate its return, -> float, -> jax.ShapeDtypeStruct(shape, dtype), or pass "
                "result_type)."
            )
        leaves, out_tree = tree_flatten(declared)
        types = tuple(_result_leaf(t, name) for t in leaves)
        call = HostCall(
            self.fn, name, tree_flatten((args, kwargs))[1], types, out_tree=out_tree, fwd=self._fwd, bwd=self._bwd
        )
        return tree_unflatten(out_tree, call_on_host(call, args, kwargs))


def pure_callback(callback_fn: Callable, result_type: Any = None) -> PureCallback:
    """Call the pure Python function ``callback_fn`` from a compiled program, at run time, on NumPy
    arrays; ``result_type`` or its return annotation declares its results (``float``, a dtype, a
    ``jax.ShapeDtypeStruct``, a pytree of these). Differentiable with ``.fwd`` and ``.bwd``.

    >>> from catalyst_lite import pure_callback, qjit
    >>> int(qjit(lambda x: pure_callback(lambda v: v + 1, int)(x))(2))
    3
    """
    usage = "pure_callback(fn, result_type)(*args), or @pure_callback above an annotated def"
    _function(callback_fn, "pure_callback", usage)
    return PureCallback(callback_fn, result_type)


def _function(fn: Any, api: str, usage: str) -> None:
    """``fn``, which ``api`` calls, is a function: else the error showing the ``usage``."""
    if not callable(fn):
        raise CallbackError(f"{api} calls a Python function, got {fn!r:.60}: {usage}.")


def call_for_effect(fn: Callable, args: tuple, kwargs: dict, name: str | None = None) -> None:
    """``fn(*args, **kwargs)`` (returning ``None``) each time the program runs, in program order."""
    call = HostCall(fn, name or function_name(fn), tree_flatten((args, kwargs))[1], (), debug=True)
    call_on_host(call, args, kwargs)


def base_callback(func: Callable) -> Callable:
    """Catalyst's ``base_callback``: call ``func`` from a compiled program each time it runs. A
    return annotation declares its results as for :func:`pure_callback`; without one it is
    called for its effects, in program order, its result dropped.

    >>> from catalyst_lite import qjit
    >>> from catalyst_lite.api_extensions.callbacks import base_callback
    >>> seen = []
    >>> @base_callback
    ... def record(x):
    ...     seen.append(float(x))
    >>> @base_callback
    ... def halve(x) -> float:
    ...     return x / 2
    >>> float(qjit(lambda x: (record(x), halve(x))[1])(3.0)), seen
    (1.5, [3.0])
    """
    declared = _declared_return(func)
    if declared is not None:
        return PureCallback(func, declared)
    name = function_name(func)

    def dropping_result(*args: Any, **kwargs: Any) -> None:
        func(*args, **kwargs)

    @functools.wraps(func)
    def for_effect(*args: Any, **kwargs: Any) -> Any:
        if run_eagerly():
            return func(*args, **kwargs)
        return call_for_effect(dropping_result, args, kwargs, name)

    return for_effect


def accelerate(func: Callable | None = None, *, dev: jax.Device | None = None) -> Any:
    """Catalyst's ``accelerate``: run a JAX function as part of the program. The whole program is
    XLA's already, so ``func`` is traced into it; ``dev`` must be a ``jax.Device`` (else unused).

    >>> import jax.numpy as jnp
    >>> from catalyst_lite import accelerate, qjit
    >>> square = accelerate(lambda x: jnp.sin(x) ** 2)
    >>> round(float(qjit(lambda x: jnp.cos(square(x)))(1.0)), 6)
    0.759616
    """
    if dev is not None and not isinstance(dev, jax.Device):
        raise CallbackError(f"accelerate: dev must be a jax.Device (see jax.devices()), got {dev!r}.")
    if func is None:
        return functools.partial(accelerate, dev=dev)
    _function(func, "accelerate", "accelerate(fn)(*args), or @accelerate above a def")

    @functools.wraps(func)
    def accelerated(*args: Any, **kwargs: Any) -> Any:
        if run_eagerly():
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except _NOT_JITTABLE as err:
            # Python control flow on a traced value: jax.jit (which Catalyst applies) refuses it.
            raise CallbackError(
                f"Function {getattr(func, '__name__', function_name(func))} must be jax.jit-able: "
                f"accelerate traces it into the program, and it needs a value only known when the "
                f"program runs ({type(err).__name__})."
            ) from err

    return accelerated


# What tracing a function that jax.jit cannot compile raises.
_NOT_JITTABLE = (
    jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError, ControlFlowError,
)
