"""catalyst_lite's exceptions. Each subclasses the built-in exception a Python user expects
(``TypeError`` for a value of the wrong kind, ``ValueError`` for one out of range) and
:class:`CatalystLiteError`; Catalyst's exported exceptions have the same names here
(:class:`CompileError`, :class:`DifferentiableCompileError`, ...) and ours subclass them where the
error is a special case.

>>> issubclass(DifferentiationError, DifferentiableCompileError), issubclass(DifferentiationError, TypeError)
(True, True)
"""

from __future__ import annotations


class CatalystLiteError(Exception):
    """Base class of every error raised by catalyst_lite itself."""


class ArgumentTypeError(CatalystLiteError, TypeError):
    """An argument of a compiled function has the wrong type, structure or count."""


class ArgumentValueError(CatalystLiteError, ValueError):
    """An argument has the right type but an unusable value (a negative size, an axis beyond its rank)."""


class ArgumentIndexError(ArgumentValueError, IndexError):
    """An index names an argument the call does not have (``argnums``: Catalyst's ``IndexError``)."""


class ArgumentOverflowError(ArgumentValueError, OverflowError):
    """An integer argument does not fit in 64 bits (``jax.jit``'s ``OverflowError``)."""


class IncompatibleSizesError(ArgumentValueError, TypeError):
    """Sizes that must fit together do not at a call (broadcast axes, a reshape...); JAX raises
    either error for such shapes."""


class ResultTypeError(CatalystLiteError, TypeError):
    """A compiled function returns a value that is not an array, a number or a pytree of them."""


class DimensionError(CatalystLiteError, TypeError):
    """A nested body changes a dimension, dtype, rank or structure it must keep."""


class ControlFlowError(CatalystLiteError, TypeError):
    """Control flow used in a way it cannot be compiled (a non-scalar predicate, branches with
    different structures, Python control flow on a traced value)."""


class AutoGraphError(ControlFlowError):
    """``qjit(autograph=True)`` cannot compile a Python ``if``/``for``/``while`` as written, or
    cannot convert a function. The message names the user's line."""

    _catalyst_lite_located = True  # diagnostics need not add the line: the message has it


class UninitializedVariableError(AutoGraphError, UnboundLocalError):
    """Converted code reads a variable that has no value (assigned in a loop or in some branches)."""


class AutoGraphWarning(UserWarning):
    """A Python loop ``qjit(autograph=True)`` could not compile runs as a Python loop instead."""


class CacheWarning(UserWarning):
    """The persistent cache was not used as configured (see docs/troubleshooting.md)."""


class CompileError(CatalystLiteError, ValueError):
    """A program cannot be compiled (Catalyst's), or specialized for the given sizes."""


class DifferentiableCompileError(CompileError):
    """A function cannot be differentiated as asked (Catalyst's)."""


class StaticArgnumsError(CompileError, ArgumentValueError):
    """``static_argnums`` names a position the call does not have (Catalyst's ``CompileError``)."""


class UnhashableStaticArgumentError(ArgumentTypeError, ValueError):
    """A static argument that is not hashable (a ``ValueError`` as in Catalyst and ``jax.jit``)."""


def function_name(fn: object) -> str:
    """A short, human-readable name of a user function for error messages."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class ArrayTooLargeError(CompileError, MemoryError):
    """A specialized program would allocate an array larger than the memory available."""


class UnsupportedOperationError(CatalystLiteError, NotImplementedError):
    """A JAX operation that the dynamic-shape tracing path cannot handle (named in the message)."""


class SymbolicShapeError(CatalystLiteError, TypeError):
    """A result shape that cannot be symbolic: its rank or size would depend on which sizes are 1
    or on the data (``jnp.squeeze`` without ``axis``, boolean-mask indexing)."""


class DataDependentSliceError(CatalystLiteError, IndexError):
    """``x[:k]`` with ``k`` computed from array data: the result's length would depend on the data
    (``jax.jit``'s ``IndexError``)."""


class SizeAssumptionError(CompileError):
    """A program traced with symbolic sizes assumed something false about a size computed inside
    a loop (assumptions about the arguments' sizes never raise: the call is traced again)."""


class DifferentiationError(DifferentiableCompileError, TypeError):
    """Differentiation with respect to an integer argument, or ``grad`` of a non-scalar result."""


class CallbackError(CatalystLiteError, TypeError, ValueError):
    """A host callback is declared or behaves wrongly (Catalyst raises either error)."""


class DebugAssertionError(CatalystLiteError, RuntimeError):
    """A ``debug_assert`` condition is false when the program runs (Catalyst's ``RuntimeError``)."""


class QuantumOperationError(CompileError, TypeError):
    """A quantum circuit uses an operation or measurement that catalyst_lite cannot compile."""


class WireError(CatalystLiteError, ValueError, RuntimeError):
    """An operation on a wire the device does not have, or a device's number of wires that is not
    a fixed Python integer (Catalyst's runtime raises a ``RuntimeError``)."""


class CaptureUnavailableError(CatalystLiteError, ImportError):
    """``qjit(capture=True)`` where PennyLane refuses to switch its program capture on."""


class PlxprCaptureCFCompatibilityError(ControlFlowError):
    """catalyst_lite's ``for_loop``/``while_loop``/``cond`` used while PennyLane's program capture
    is on, as Catalyst refuses it: write ``qml.for_loop``, ``qml.while_loop``, ``qml.cond``."""

    def __init__(self, control_flow_type: str):
        self.control_flow_type = control_flow_type
        captured = "qml.cond with .else_if for the cases" if control_flow_type == "switch" else None
        super().__init__(
            # Catalyst's phrase first (its users' tests look for it), then ours
            f"catalyst.{control_flow_type} is not supported with PennyLane's capture enabled, and "
            f"neither is catalyst_lite.{control_flow_type} (qjit(capture=True), or capture='global' "
            f"after qml.capture.enable()): write "
            f"{captured or 'qml.' + control_flow_type} instead, or "
            "compile with qjit(capture=False)."
        )


class QuantumRegionError(CatalystLiteError, ValueError):
    """A measurement inside ``qml.adjoint``/``qml.ctrl`` of a quantum function (Catalyst's)."""


class ShotsError(CatalystLiteError, ValueError):
    """A QNode's shots, ``mcm_method`` or ``postselect_mode`` cannot be used together."""


class RetrySignal(Exception):
    """Not an error of the program: what raises it is run again with what it learned (a circuit
    with the wires its trace found). Code recovering from errors (autograph's fallback to a
    Python loop) lets it pass."""


def pennylane_error(ours: type, name: str) -> type:
    """``ours`` that is also PennyLane's ``qml.exceptions.<name>`` (call it where PennyLane is
    imported).

    >>> import pennylane as qml
    >>> error = pennylane_error(WireError, "WireError")
    >>> issubclass(error, qml.exceptions.WireError) and issubclass(error, WireError)
    True
    """
    import pennylane as qml

    return type(name, (ours, getattr(qml.exceptions, name)), {"__module__": __name__})
