"""The variables that flow through a converted ``if``, ``for`` or ``while``, and where it is.

malt hands each control-flow operator the statement's *state*: ``get_state()`` returns the values
of the variables the statement may change, ``set_state(values)`` assigns them, ``symbol_names``
names them. A :class:`Snapshot` splits each variable into its *dynamic* leaves (arrays and numbers,
which compiled control flow carries) and its *static* rest (pytree structure, ``None``, other
Python objects, which must come out of every branch or iteration unchanged), so that a mismatch
names the variable, not a flattened position.
"""

from __future__ import annotations

import copy
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import PyTreeDef, tree_unflatten
from malt.operators.variables import Undefined, UndefinedReturnValue

from ..control_flow.common import flatten_values
from ..errors import AutoGraphError, UninitializedVariableError
from ..jax_extras import Tracer
from ..jax_extras.frames import Location, user_line as innermost_user_line
from ..quantum.regions import recorder_class
from ..trace_context import current as current_context

_CARRIED = (Tracer, jax.Array, np.ndarray, bool, int, float, complex, np.generic)  # compiled control flow's

LIBRARY_PACKAGES = frozenset(
    {"jax", "jaxlib", "numpy", "scipy", "pennylane", "catalyst", "catalyst_lite", "malt", "builtins"}
)
"""Top-level packages whose functions are called as they are (with Python's standard library)."""


def is_library(module: str) -> bool:
    """Whether code of ``module`` is a library's (not converted, unless ``autograph_include`` names it)."""
    if any(module == name or module.startswith(name + ".") for name in current_context().autograph_include):
        return False
    top = module.partition(".")[0]
    return top in LIBRARY_PACKAGES or top in sys.stdlib_module_names


GetState = Callable[[], tuple]  # malt's get_state: the current values of the state variables
SetState = Callable[[tuple], None]  # malt's set_state: assigns them


def at(where: Location | None) -> str:
    """`` at file:line`` for messages (empty when unknown)."""
    return f" at {where}" if where is not None else ""


_MALT_VARIABLES = {
    "retval_": "the return value",
    "do_return": "whether the function has returned",
    "break_": "the `break` flag",
}


def display_name(name: str) -> str:
    """How messages refer to a state variable (malt's own variables by what they mean)."""
    meanings = (text for prefix, text in _MALT_VARIABLES.items() if name.startswith(prefix))
    return next(meanings, f"variable {name!r}")


def predicate(value: Any, construct: str, where: Location | None) -> Any:
    """A traced condition as a boolean scalar, ``n != 0`` for a number; an array's truth is ambiguous."""
    shape = np.shape(value)
    if shape != ():
        raise AutoGraphError(
            "Array with multiple elements is not a valid predicate: "
            f"the condition of the {construct}{at(where)} is an array of shape {shape}, whose truth "
            "value is ambiguous; reduce it to one boolean, e.g. with jnp.all or jnp.any."
        )
    return value if value.dtype == np.dtype(bool) else value != 0


def recording_operators() -> bool:
    """True inside ``qml.adjoint(f)``/``qml.ctrl(f)`` in a compiled QNode: PennyLane records ``f``'s
    operations in a queue of its own, which compiled control flow would bypass."""
    qml = sys.modules.get("pennylane")
    active = qml.QueuingManager.active_context() if qml is not None else None
    return active is not None and not isinstance(active, recorder_class())


def check_not_recording(construct: str, where: Location | None) -> None:
    """Compiled control flow is refused where PennyLane records operations to transform them."""
    if recording_operators():
        raise AutoGraphError(
            f"The {construct}{at(where)} depends on a traced value inside qml.adjoint or qml.ctrl: "
            "catalyst_lite applies the adjoint or controlled version of operations it knows while "
            "tracing, not of compiled control flow. Use values known while tracing there, or put "
            "the control flow around the qml.adjoint/qml.ctrl call."
        )


def _unassigned(value: "Unassigned", *args: Any, **kwargs: Any) -> Any:
    name = object.__getattribute__(value, "symbol_name")
    raise UninitializedVariableError(
        f"The variable {name!r} is potentially uninitialized: cannot access local variable {name!r} "
        f"where it is not associated with a value{at(innermost_user_line())}. "
        "Under qjit(autograph=True) a variable first assigned inside a "
        "loop that runs no iteration, inside a compiled loop (but for the loop's own variable), or "
        "in only some branches of an `if`, has no value after it: assign it before the loop or `if`."
    )


class Unassigned(Undefined):
    """``ag__.Undefined``: what converted code holds in a variable without a value yet. Any use of
    it is an :class:`~catalyst_lite.errors.UninitializedVariableError` (an ``UnboundLocalError``).

    >>> y = Unassigned("y")
    >>> try:
    ...     y + 1
    ... except UnboundLocalError as error:
    ...     print(str(error).split(":")[0])
    The variable 'y' is potentially uninitialized
    """

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:  # (malt's ``read()`` too)
        if name in ("symbol_name", "__class__", "__repr__"):
            return object.__getattribute__(self, name)
        _unassigned(self)

    __bool__ = __len__ = __iter__ = __contains__ = __getitem__ = __setitem__ = __call__ = _unassigned
    __index__ = __int__ = __float__ = __complex__ = __str__ = __format__ = _unassigned
    __array__ = __jax_array__ = __neg__ = __pos__ = __abs__ = __invert__ = _unassigned
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __matmul__ = __rmatmul__ = _unassigned
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _unassigned
    __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _unassigned
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _unassigned
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _unassigned
    __hash__ = object.__hash__


def load_or_unassigned(load: Callable[[], Any], name: str) -> Any:
    """``ag__.ldu``: an attribute or item that a statement may assign, or :class:`Unassigned`."""
    try:
        return load()
    except (KeyError, AttributeError, NameError):
        return Unassigned(name)


@dataclass(frozen=True)
class LeafRecord:
    """One leaf of a variable: an array's dtype, shape (``None`` for a size known only at run
    time) and weak type, or a static Python value."""

    dynamic: bool
    dtype: np.dtype | None = None
    shape: tuple[int | None, ...] = ()
    weak_type: bool = False
    python_number: bool = False
    value: Any = None

    @staticmethod
    def of(leaf: Any) -> "LeafRecord":
        if not isinstance(leaf, _CARRIED):
            return LeafRecord(False, value=leaf)
        if isinstance(leaf, (bool, int, float, complex)):
            return LeafRecord(True, jnp.asarray(leaf).dtype, (), True, True)
        shape = tuple(d if isinstance(d, (int, np.integer)) else None for d in np.shape(leaf))
        return LeafRecord(True, np.dtype(leaf.dtype), shape, bool(getattr(leaf, "weak_type", False)))

    def zeros(self) -> Any:
        """A stand-in value of this leaf's type (an unknown size becomes 0), or the static value."""
        if not self.dynamic:
            return self.value
        return jnp.zeros(tuple(0 if d is None else d for d in self.shape), self.dtype)

    def promotion_type(self) -> Any:
        """What JAX promotes this leaf as: a weakly-typed value as the Python type it stands for."""
        if self.weak_type:
            return {"b": bool, "i": int, "u": int, "f": float, "c": complex}[self.dtype.kind]
        return self.dtype

    def describe(self) -> str:
        if not self.dynamic:
            return type(self.value).__name__
        return f"{self.dtype.name}[{','.join('?' if d is None else str(d) for d in self.shape)}]"

    def same_static(self, other: "LeafRecord") -> bool:
        if self.value is other.value:
            return True
        try:
            return bool(self.value == other.value)
        except Exception:  # an object whose == is not a truth value
            return False


@dataclass(frozen=True)
class VariableRecord:
    """One state variable: ``kind`` is ``"value"``, ``"undefined"`` (no value yet) or ``"no_return"``."""

    name: str
    kind: str
    tree: PyTreeDef | None = None
    leaves: tuple[LeafRecord, ...] = ()

    @staticmethod
    def of(name: str, value: Any) -> "VariableRecord":
        if isinstance(value, Undefined):
            return VariableRecord(name, "undefined")
        if isinstance(value, UndefinedReturnValue):
            return VariableRecord(name, "no_return")
        leaves, tree = flatten_values(value)  # (a mid-circuit measurement value: its traced bool)
        return VariableRecord(name, "value", tree, tuple(LeafRecord.of(l) for l in leaves))

    def difference(self, other: "VariableRecord") -> tuple[str, LeafRecord | None, LeafRecord | None] | None:
        """What compiled control flow cannot let differ from ``other``: ``"structure"``, a static ``"value"``
        or an array's ``"rank"`` (with the two leaves); ``None`` if nothing does."""
        if other.kind != "value" or other.tree != self.tree or [l.dynamic for l in other.leaves] != [
            l.dynamic for l in self.leaves
        ]:
            return "structure", None, None
        for a, b in zip(self.leaves, other.leaves):
            if not a.dynamic and not a.same_static(b):
                return "value", a, b
            if a.dynamic and len(a.shape) != len(b.shape):
                return "rank", a, b
        return None

    def stand_in(self) -> Any:
        """A value of this variable's structure and types, every array zeros."""
        return tree_unflatten(self.tree, [leaf.zeros() for leaf in self.leaves])

    def describe(self) -> str:
        if self.kind != "value":
            return "no value"
        if not self.leaves:
            return repr(tree_unflatten(self.tree, []))
        if jax.tree_util.treedef_is_leaf(self.tree):
            return self.leaves[0].describe()
        return f"{self.tree} of {', '.join(l.describe() for l in self.leaves)}"


@dataclass
class Snapshot:
    """The state variables at one point: their records and their values.

    >>> snap = Snapshot.of((1.5, None, "label"), ("x", "y", "z"))
    >>> [v.kind for v in snap.variables], len(snap.dynamic_leaves())
    (['value', 'value', 'value'], 1)
    """

    variables: Sequence[VariableRecord]
    values: Sequence[Any]

    @staticmethod
    def of(values: Sequence[Any], names: Sequence[str]) -> "Snapshot":
        return Snapshot([VariableRecord.of(n, v) for n, v in zip(names, values)], values)

    def dynamic_leaves(self) -> list[Any]:
        """The array leaves, flattened in variable order (what compiled control flow carries)."""
        return [leaf for record, value in zip(self.variables, self.values) if record.kind == "value"
                for leaf, r in zip(flatten_values(value)[0], record.leaves) if r.dynamic]

    def rebuild(self, dynamic: Sequence[Any]) -> tuple:
        """The variables' values with these dynamic leaves and this snapshot's static parts."""
        dynamic = iter(dynamic)
        values = []
        for record in self.variables:
            if record.kind == "undefined":
                values.append(Unassigned(record.name))
            elif record.kind == "no_return":
                values.append(UndefinedReturnValue())
            else:
                leaves = [next(dynamic) if r.dynamic else r.value for r in record.leaves]
                values.append(tree_unflatten(record.tree, leaves))
        return tuple(values)


class ContainerCheckpoint:
    """The Python lists, dicts and sets that a compiled block's functions close over, and the
    variables of enclosing functions that the functions they call close over, as they were: a
    block runs once while tracing, so a ``results.append(x)`` or a ``nonlocal count; count += 1``
    in it is an error, found (by name) and undone here.

    >>> def block():
    ...     out = []
    ...     def body():
    ...         out.append(1)
    ...     return out, body
    >>> out, body = block()
    >>> checkpoint = ContainerCheckpoint(body)
    >>> body(); checkpoint.changed()
    ['out']
    >>> checkpoint.restore(); out
    []
    """

    def __init__(self, *functions: Callable, carried: Sequence[str] = ()):
        self.saved: list[tuple[str, Any, Any]] = []
        self.cells: list[tuple[str, Any, Any]] = []  # (name, cell, contents) of called functions
        self.objects: list[tuple[str, Any, dict]] = []  # (name, object, attributes) of user classes
        self.carried = carried
        # the block's own variables, and those the statement carries, may change
        own = {id(c) for fn in functions for c in fn.__closure__ or ()}
        seen: set[int] = set()
        stack = list(functions)
        while stack:  # (and those of the functions they close over: a block run through a helper)
            fn = stack.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                value = _contents(cell)
                known = id(cell) in own or name in carried or any(cell is c for _, c, _ in self.cells)
                if not known:
                    self.cells.append((name, cell, value))
                if type(value) in (list, dict, set) and all(value is not v for _, v, _ in self.saved):
                    self.saved.append((name, value, copy.copy(value)))
                elif _user_object(value) and all(value is not o for _, o, _ in self.objects):
                    self.objects.append((name, value, dict(vars(value))))
                elif isinstance(value, types.FunctionType):
                    stack.append(value)

    def changed(self) -> list[str]:
        """The containers changed in place."""
        return [name for name, value, saved in self.saved if _differs(value, saved)]

    def rebound(self) -> list[str]:
        """The variables of enclosing functions that a called function assigned (``nonlocal``)."""
        return [name for name, cell, value in self.cells if _contents(cell) is not value]

    def assigned_attributes(self) -> list[tuple[Any, str, str]]:
        """(object, attribute, name) of the attributes of objects of user classes that the block
        assigned other than by its own statements (which carry them: ``self.x = v``): in a method
        it calls, say."""
        return [
            (obj, attr, f"{name}.{attr}") for name, obj, saved in self.objects
            for attr in _reassigned(obj, saved) if f"{name}.{attr}" not in self.carried
        ]

    def carry_attributes(self) -> None:
        """When assigning attributes is the block's only side effect, undo it and raise
        :class:`AttributesAssigned`: the statement runs again carrying them (:func:`carrying_attributes`)."""
        attributes = self.assigned_attributes()
        if attributes and not self.changed() and not self.rebound():
            self.restore()
            raise AttributesAssigned(attributes)

    def side_effects(self) -> str:
        """What the block changed outside its own variables, for an error message ('' if nothing)."""
        changed, rebound = (", ".join(map(repr, names)) for names in (self.changed(), self.rebound()))
        attributes = ", ".join(repr(name) for _, _, name in self.assigned_attributes())
        parts = [f"changes the Python container {changed} in place (append, ...)"] if changed else []
        if rebound:
            enclosing = "of an enclosing function (through `nonlocal`, in a function it calls)"
            parts.append(f"assigns {rebound} {enclosing}")
        if attributes:
            parts.append(f"assigns the attribute {attributes} in a method or function it calls")
        return " and ".join(parts)

    def restore(self) -> None:
        for _, value, saved in self.saved:
            if _differs(value, saved):
                value.clear()
                value.update(saved) if not isinstance(value, list) else value.extend(saved)
        for _, cell, value in self.cells:
            if _contents(cell) is not value:
                if value is _EMPTY:
                    del cell.cell_contents
                else:
                    cell.cell_contents = value
        for _, obj, saved in self.objects:
            for attr in _reassigned(obj, saved):
                if attr in saved:
                    setattr(obj, attr, saved[attr])
                else:
                    delattr(obj, attr)


_EMPTY = object()  # the contents of a cell without a value


class AttributesAssigned(AutoGraphError):
    """A compiled block assigned attributes of objects in a function it calls (``attributes``:
    object, attribute, name): its statement runs again, carrying them."""

    def __init__(self, attributes: list[tuple[Any, str, str]]):
        names = ", ".join(repr(name) for _, _, name in attributes)
        super().__init__(f"compiled control flow cannot carry {names}, assigned in a function it calls")
        self.attributes = attributes


class QueuedOperations:
    """The operations queued on a compiled QNode's circuit from now on: :meth:`drop` removes them
    (a statement's tracing undone, to trace it again or run it otherwise)."""

    def __init__(self) -> None:
        qml = sys.modules.get("pennylane")
        self.queue = qml.QueuingManager.active_context() if qml is not None else None
        self.before = {id(o) for o in self.queue.queue} if self.queue is not None else set()

    def drop(self) -> None:
        for o in [o for o in self.queue.queue if id(o) not in self.before] if self.queue is not None else []:
            self.queue.remove(o)


def carrying_attributes(
    statement: Callable[[GetState, SetState, Sequence[str]], None], get_state: GetState,
    set_state: SetState, names: Sequence[str],
) -> None:
    """Runs a compiled ``if``, ``for`` or ``while`` (``statement`` of its state) with the state
    variables malt found and the attributes that a function it calls assigns (``self.total = ...``
    in a method): compiled control flow carries them as it carries ``self.total = ...`` written in
    the statement itself."""
    extra: list[tuple[Any, str, str]] = []
    while True:
        def get() -> tuple:
            return (*get_state(), *(vars(o).get(a, Unassigned(name)) for o, a, name in extra))

        def set_(values: tuple) -> None:
            set_state(tuple(values[: len(names)]))
            for (o, a, _), value in zip(extra, values[len(names) :]):
                if not isinstance(value, Undefined):
                    setattr(o, a, value)

        queued = QueuedOperations()
        try:
            return statement(get, set_, (*names, *(name for _, _, name in extra)))
        except AttributesAssigned as signal:
            queued.drop()  # (the gates of the tracing that found them)
            new = [x for x in signal.attributes if all(x[2] != name for _, _, name in extra)]
            if not new:
                raise
            extra += new


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def _user_object(value: Any) -> bool:
    """An instance of a class of user code (whose methods autograph converts), with attributes."""
    return not is_library(type(value).__module__) and hasattr(value, "__dict__")


def _reassigned(obj: Any, saved: dict) -> list[str]:
    """The attributes of ``obj`` assigned (or added, or deleted) since ``saved``."""
    now = vars(obj)
    return [a for a in {**saved, **now} if a not in now or a not in saved or now[a] is not saved[a]]


def _differs(value: Any, saved: Any) -> bool:
    if len(value) != len(saved):
        return True
    if isinstance(value, list):
        return any(a is not b for a, b in zip(value, saved))
    if isinstance(value, dict):
        return any(k not in saved or saved[k] is not v for k, v in value.items())
    return value != saved
