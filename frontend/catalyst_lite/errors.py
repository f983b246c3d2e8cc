"""catalyst_lite's exceptions.

Each is a subclass of the built-in exception a Python user expects (``TypeError`` for a value of
the wrong kind, ``ValueError`` for a value out of range), so ``except TypeError`` keeps working, and
of :class:`CatalystLiteError`, so that all of ours can be caught at once.

Catalyst's exported exceptions have the same names here (:class:`CompileError`,
:class:`DifferentiableCompileError`, ...) and are raised where Catalyst raises them, so a Catalyst
program's ``except catalyst.CompileError`` works with ``catalyst_lite.CompileError``. Ours
subclass them where the error is a special case (:class:`DifferentiationError` is a
:class:`DifferentiableCompileError`).

>>> issubclass(DifferentiationError, DifferentiableCompileError), issubclass(DifferentiationError, TypeError)
(True, True)
"""

from __future__ import annotations


class CatalystLiteError(Exception):
    """Base class of every error raised by catalyst_lite itself."""


class ArgumentTypeError(CatalystLiteError, TypeError):
    """An argument of a compiled function has the wrong type, structure or count."""


class ArgumentValueError(CatalystLiteError, ValueError):
    """An argument has the right type but an unusable value (a negative size, mismatched lengths of
    a shared dimension, an axis beyond the argument's rank)."""


class ArgumentIndexError(ArgumentValueError, IndexError):
    """An index names an argument the call does not have (``argnums`` beyond the arguments: an
    ``IndexError`` in Catalyst)."""


class ArgumentOverflowError(ArgumentValueError, OverflowError):
    """An integer argument does not fit in 64 bits (the type of integer arguments), as
    ``jax.jit`` refuses it with an ``OverflowError``."""


class IncompatibleSizesError(ArgumentValueError, TypeError):
    """Sizes that must fit together do not at a call: two broadcast axes, a matrix product's
    contracted axes, concatenated arrays' other axes (JAX needs them equal), a reshape that
    changes the number of elements. Both a ``ValueError`` and a ``TypeError``, as JAX raises
    either for such shapes."""


class DimensionError(CatalystLiteError, TypeError):
    """A nested body changes a dimension, dtype, rank or structure it must keep."""


class ControlFlowError(CatalystLiteError, TypeError):
    """Control flow is used in a way it cannot be compiled (a non-scalar predicate, branches with
    different structures, Python control flow on a traced value)."""


class AutoGraphError(ControlFlowError):
    """``qjit(autograph=True)`` cannot compile a Python ``if``/``for``/``while`` as written (a
    variable left undefined by a branch, a loop that changes a variable's type, ``break`` in a
    compiled ``for``), or cannot convert a function. The message names the user's line."""

    _catalyst_lite_located = True  # diagnostics need not add the line: the message has it


class UninitializedVariableError(AutoGraphError, UnboundLocalError):
    """Converted code reads a variable that has no value (first assigned inside a loop or in only
    some branches of an ``if``): Python's ``UnboundLocalError``, and Catalyst's ``AutoGraphError``."""


class AutoGraphWarning(UserWarning):
    """A Python loop that ``qjit(autograph=True)`` could not compile runs as a Python loop instead
    (unrolled while tracing). ``warnings.filterwarnings("error", category=AutoGraphWarning)``
    makes that an error."""


class CacheWarning(UserWarning):
    """The persistent cache was not used as configured: its directory is not private to the user
    (memory only), or an entry failed its checks or its load (removed; the program is compiled
    again). See docs/troubleshooting.md."""


class CompileError(CatalystLiteError, ValueError):
    """A program cannot be compiled: Catalyst's ``CompileError``. Here also a traced program that
    cannot be specialized for the given sizes."""


class DifferentiableCompileError(CompileError):
    """A function cannot be differentiated as asked: Catalyst's ``DifferentiableCompileError``
    (an integer argument or result, ``grad`` of a result that is not a scalar)."""


class StaticArgnumsError(CompileError, ArgumentValueError):
    """``static_argnums`` names a position the call does not have (or a negative one): Catalyst's
    ``CompileError``, reported when the function is called, as Catalyst does."""


class UnhashableStaticArgumentError(ArgumentTypeError, ValueError):
    """A static argument that is not hashable: a ``ValueError`` as in Catalyst and ``jax.jit``
    (and a ``TypeError``: the argument's type is the problem)."""


def function_name(fn: object) -> str:
    """A short, human-readable name of a user function for error messages."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class ArrayTooLargeError(CompileError, MemoryError):
    """A specialized program would allocate an array larger than the memory available; raised
    before XLA tries (and fails, or makes the machine swap) to allocate it."""


class UnsupportedOperationError(CatalystLiteError, NotImplementedError):
    """A JAX operation that the dynamic-shape tracing path cannot handle (named in the message)."""


class SymbolicShapeError(CatalystLiteError, TypeError):
    """A call whose result shape cannot be symbolic: its rank or size would depend on which sizes
    are 1 or on the data (``jnp.squeeze`` without ``axis``, boolean-mask indexing)."""


class SizeAssumptionError(CompileError):
    """A program traced with symbolic sizes assumed something about a size computed inside a loop
    (its index, or an array it resizes) that is false when the loop runs. (Assumptions about the
    arguments' sizes never raise: a call that breaks one gets a program traced for its sizes.)"""


class DifferentiationError(DifferentiableCompileError, TypeError):
    """A function cannot be differentiated as asked: with respect to an integer argument, or
    ``grad`` of a result that is not a real scalar. (Bad options, such as ``argnums`` beyond the
    arguments or an unknown ``method``, are :class:`ArgumentValueError`.)"""


class CallbackError(CatalystLiteError, TypeError, ValueError):
    """A host callback (``pure_callback``, ``debug.callback``, ``accelerate``) is declared or
    behaves wrongly: no result type, results of other types or shapes than declared, a debug
    callback that returns a value. (Catalyst raises ``TypeError`` for some, ``ValueError`` for
    others: this is both.)"""


class DebugAssertionError(CatalystLiteError, RuntimeError):
    """A ``debug_assert`` condition is false when the program runs (Catalyst raises a
    ``RuntimeError`` with the assertion's message)."""


class QuantumOperationError(CompileError, TypeError):
    """A quantum circuit uses an operation or measurement that catalyst_lite cannot compile
    (Catalyst's ``CompileError`` for an unsupported measurement or mid-circuit measurement use;
    also a ``TypeError``)."""


class WireError(CatalystLiteError, ValueError, RuntimeError):
    """A quantum operation acts on a wire the device does not have, or a device's number of
    wires is not a fixed Python integer. (Catalyst's runtime raises a ``RuntimeError`` for a wire
    beyond the device's: this is both.)"""


class CaptureUnavailableError(CatalystLiteError, ImportError):
    """``qjit(capture=True)`` needs PennyLane's program capture, which PennyLane refuses to switch
    on in this environment (it supports only the JAX version it pins)."""


# What a captured program writes instead of catalyst_lite's control flow (default: qml.<same name>).
_CAPTURED_FORM = {"switch": "qml.cond with .else_if for the cases"}


class PlxprCaptureCFCompatibilityError(ControlFlowError):
    """catalyst_lite's ``for_loop``/``while_loop``/``cond`` used while PennyLane's program capture
    is on (``qjit(capture=True)``, or ``qml.capture.enable()``), as Catalyst refuses it: the
    program is captured by PennyLane, so its control flow must be ``qml.for_loop``,
    ``qml.while_loop`` and ``qml.cond``."""

    def __init__(self, control_flow_type: str):
        self.control_flow_type = control_flow_type
        super().__init__(
            # Catalyst's phrase first (its users' tests look for it), then ours
            f"catalyst.{control_flow_type} is not supported with PennyLane's capture enabled, and "
            f"neither is catalyst_lite.{control_flow_type} (qjit(capture=True), or capture='global' "
            f"after qml.capture.enable()): write "
            f"{_CAPTURED_FORM.get(control_flow_type, 'qml.' + control_flow_type)} instead, or "
            "compile with qjit(capture=False)."
        )


class QuantumRegionError(CatalystLiteError, ValueError):
    """A measurement inside ``qml.adjoint``/``qml.ctrl`` of a quantum function (Catalyst's
    ``ValueError``)."""


class ShotsError(CatalystLiteError, ValueError):
    """A QNode's shots, ``mcm_method`` or ``postselect_mode`` cannot be used together (Catalyst's
    and PennyLane's ``ValueError``)."""


def pennylane_error(ours: type, name: str) -> type:
    """``ours`` that is also PennyLane's exception ``qml.exceptions.<name>``, for a program that
    PennyLane rejects too (``except qml.wires.WireError`` works as on ``default.qubit``). Call it
    only where PennyLane is imported.

    >>> import pennylane as qml
    >>> error = pennylane_error(WireError, "WireError")
    >>> issubclass(error, qml.exceptions.WireError) and issubclass(error, WireError)
    True
    """
    import pennylane as qml

    return type(name, (ours, getattr(qml.exceptions, name)), {"__module__": __name__})
