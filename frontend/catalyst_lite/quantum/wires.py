"""A device's wires as state-vector indices: **labels** (``wires=3`` or ``["a", "b"]``), **a traced
number** (``wires=n``: ``0 .. n - 1``, a state of symbolic length) or **unspecified**
(``wires=None``: allocated as the circuit uses them, an integer bringing every wire below it, each
new wire least significant: ``on_grow``). Wires of ``qml.allocate`` get *slots* after the device's
wires, kept between runs (:meth:`WireMap.begin_run` frees them); a freed slot is reused as it is if
promised restored, else only where :meth:`WireMap.allocate` may ``reuse`` it (a loop or branch:
the circuit then resets it). A traced wire (a loop index) is an index, seen by ``on_traced`` so
that one outside the device raises ``WireError`` when the program runs (:class:`OutsideWires`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np

from ..debug import callback
from ..errors import CompileError, WireError, pennylane_error
from ..jax_extras import Tracer
from .mcm import ValueCarry

__all__ = ["WireMap", "OutsideWires"]


def _is_traced(wire: Any) -> bool:
    return isinstance(wire, Tracer) or (hasattr(wire, "shape") and not isinstance(wire, np.ndarray))


def _is_index(label: Any) -> bool:
    return isinstance(label, (int, np.integer)) and not isinstance(label, bool) and label >= 0


class WireMap:
    """Device wire labels to state-vector indices (see the module docstring)."""

    def __init__(self, labels: Sequence[Any] | None = (), n_wires: Any = None, growing: bool = False):
        self.labels = None if labels is None else list(labels)
        self.n_wires = len(self.labels) if n_wires is None else n_wires
        self.growing = growing
        self.on_grow: Callable[[int], None] = lambda added: None
        self.on_traced: Callable[[Any], None] = lambda index: None
        self.on_coinciding: Callable[[Any, str], None] = lambda coincide, op_name: None
        self.checked = False  # the circuit checks its traced wires (see OutsideWires)
        self.slots: list = []  # the wires added for dynamically allocated ones (qml.allocate)
        self.begin_run()

    def begin_run(self) -> None:
        """A run of the circuit begins: every slot is free and in ``|0>``."""
        self.dynamic: dict = {}  # DynamicWire -> (its slot, restored when deallocated)
        self.free: list = [(slot, False) for slot in self.slots]  # (slot, used since the run began)

    def allocate(self, dynamic_wires: Sequence[Any], restored: bool = False, reuse: bool = False) -> list:
        """A free slot (in ``|0>``, or with ``reuse`` any) for each of ``dynamic_wires``, added as
        needed: ``(index, used)`` per wire, ``used`` when it may not be in ``|0>``."""
        if self.labels is None:
            raise WireError("qml.allocate on a device with a traced number of wires is not supported: "
                            "give the device a fixed number of wires.")
        given = []
        for wire in dynamic_wires:
            usable = [k for k, (_, used) in enumerate(self.free) if reuse or not used]
            if usable:
                slot, used = self.free.pop(usable[0])
            else:
                slot, used = _Slot(len(self.slots)), False
                self.slots.append(slot)
                self.labels.append(slot)
                self.n_wires = len(self.labels)
                self.on_grow(1)
            self.dynamic[wire] = (slot, restored)
            given.append((self.labels.index(slot), used))
        return given

    def deallocate(self, dynamic_wires: Sequence[Any]) -> None:
        """Free the slots of ``dynamic_wires`` (``qml.deallocate``)."""
        for wire in dynamic_wires:
            slot, restored = self.dynamic.pop(wire, (None, False))
            if slot is not None:
                self.free.append((slot, not restored))

    @property
    def traced(self) -> bool:
        """The number of wires is a traced value."""
        return self.labels is None

    def index(self, wire: Any, op_name: str) -> Any:
        if _is_traced(wire):
            if self.growing:
                raise WireError(
                    f"{op_name} acts on a traced wire on a device without a number of wires "
                    "(wires=None), whose wires are allocated as the circuit names them: give the "
                    "device a number of wires (wires=n, n may be an argument of the compiled function)."
                )
            device = [label for label in self.labels or () if not isinstance(label, _Slot)]
            if device != list(range(len(device))):  # a traced wire needs labels that are indices
                raise WireError(
                    f"{op_name} acts on a traced wire, but the device's wires are labelled "
                    f"{self.labels}; traced wires need a device with wires=<int>."
                )
            index = jnp.asarray(wire, jnp.int64)
            self.on_traced(index)
            return index
        label = wire.item() if isinstance(wire, np.ndarray) else wire
        if type(label).__name__ == "DynamicWire":
            if label not in self.dynamic:  # Catalyst's class and phrase
                raise CompileError(f"Deallocated qubits cannot be used, but used in {op_name}: "
                                   "a wire of qml.allocate is usable until it is deallocated.")
            return self.labels.index(self.dynamic[label][0])
        if self.labels is None:
            if not _is_index(label):
                raise WireError(f"{op_name} acts on wire {label!r}; the wires of a device with a traced "
                                "number of wires are the integers 0 .. n - 1.")
            return int(label)
        if label not in self.labels:
            if not self.growing:
                raise WireError(
                    f"{op_name} acts on wire {label!r}, which the device does not have (its wires "
                    f"are {self.labels})."
                )
            self._allocate(label)
        return self.labels.index(label)

    def indices(self, wires: Sequence[Any], op_name: str) -> tuple:
        return tuple(self.index(w, op_name) for w in wires)

    def check_distinct(self, wires: Sequence[Any], op_name: str) -> None:
        """An operator's traced wires, seen by ``on_coinciding`` if they coincide with its others
        (PennyLane refuses such wires when they are Python values)."""
        if len(wires) > 1 and any(map(_is_traced, wires)):
            labels = jnp.stack([jnp.asarray(w, jnp.int64) for w in wires])
            self.on_coinciding(jnp.any(jnp.triu(labels[:, None] == labels[None, :], 1)), op_name)

    def _allocate(self, label: Any) -> None:
        """Add ``label`` (an integer brings every smaller one with it) as the last wires."""
        added = [w for w in range(label + 1) if w not in self.labels] if _is_index(label) else [label]
        self.labels += added
        self.n_wires = len(self.labels)
        self.on_grow(len(added))


@dataclass(eq=False)
class _Slot:
    """The label of the ``k``-th wire added for dynamically allocated wires."""

    k: int

    def __repr__(self) -> str:
        return f"<allocated wire {self.k}>"


class OutsideWires:
    """The first traced wire of a circuit run outside the device, and the first operator whose
    traced wires coincide (in ambient ``carries``), for :meth:`check` to raise ``WireError`` when
    the program runs. A circuit runs again with the check (``retry``) at its first traced wire, so
    others carry nothing more."""

    def __init__(self, wires: WireMap, retry: Callable[[], Exception]):
        self.wires, self.retry = wires, retry
        self.carries: tuple = ()
        if wires.checked:
            self.carries = (ValueCarry(jnp.asarray(False)), ValueCarry(jnp.zeros((), jnp.int64)),
                            ValueCarry(jnp.full((), -1, jnp.int64)))
        self.operators: list[str] = []  # the operators with traced wires that may coincide
        wires.on_traced, wires.on_coinciding = self.see, self.see_coinciding

    def see(self, index: Any) -> None:
        if not self.carries:
            self.wires.checked = True
            raise self.retry()
        found, first, _ = self.carries
        outside = (index < 0) | (index >= self.wires.n_wires)
        first.value = jnp.where(found.value | ~outside, first.value, index)
        found.value = found.value | outside

    def see_coinciding(self, coincide: Any, op_name: str) -> None:
        if self.carries:  # (its traced wire was seen)
            clash = self.carries[2]
            clash.value = jnp.where((clash.value < 0) & coincide, len(self.operators), clash.value)
            self.operators.append(op_name)

    def check(self, device: str, qnode: str) -> None:
        self.wires.on_traced = lambda index: None  # the terminal measurements' wires were seen
        if not self.carries:
            return

        def raise_outside(found: Any, first: Any, clash: Any) -> None:
            if bool(found):
                raise pennylane_error(WireError, "WireError")(
                    f"Cannot run circuit(s) on {device} as they contain wires not found on the device: "
                    f"{{{int(first)}}} (a traced wire of the QNode {qnode}; the device's wires are "
                    "0 .. n - 1)."
                )
            if int(clash) >= 0:  # PennyLane's phrase first (for Python wires), then ours
                raise pennylane_error(WireError, "WireError")(
                    f"Wires must be unique: {self.operators[int(clash)]} in the QNode {qnode} acts on "
                    "traced wires that coincide when the program runs; give each operator and measurement "
                    "distinct wires."
                )

        callback(raise_outside)(*(carry.value for carry in self.carries))
