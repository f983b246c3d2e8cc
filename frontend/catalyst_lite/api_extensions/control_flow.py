"""Catalyst's control flow at Catalyst's import path, ``catalyst.api_extensions.control_flow``
(the functions and callable classes are :mod:`catalyst_lite.control_flow`'s).

``Cond``, ``ForLoop``, ``WhileLoop`` and ``Switch`` are the types of Catalyst's ``.operation`` (the
quantum operation recorded for control flow called in a circuit). catalyst_lite traces control
flow into the program instead of recording an operation, so they are provided for imports and
``isinstance`` checks only: no object is an instance of them, and ``.operation`` raises an
``AttributeError``.

>>> from catalyst_lite.api_extensions.control_flow import Switch, switch
>>> import catalyst_lite
>>> switch is catalyst_lite.switch
True
>>> s = switch(0)(lambda: 1)
>>> try:
...     s.operation
... except AttributeError as e:
...     print("no associated quantum operation" in str(e))
True
"""

from ..control_flow import cond, for_loop, switch, while_loop
from ..control_flow.common import ForLoopCallable, WhileLoopCallable
from ..control_flow.cond import CondCallable
from ..control_flow.switch import SwitchCallable

__all__ = ["cond", "for_loop", "while_loop", "switch", "CondCallable", "ForLoopCallable",
           "WhileLoopCallable", "SwitchCallable",
           "Cond", "ForLoop", "WhileLoop", "Switch"]


class _ControlFlowOperation:
    """Base of the operation types: never instantiated (see the module docstring)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError(
            f"{cls.__name__} is the type of Catalyst's recorded control-flow operation; catalyst_lite "
            "traces control flow into the program and records no such operation."
        )


class Cond(_ControlFlowOperation):
    """The type of Catalyst's ``cond(...).operation`` (see the module docstring)."""


class ForLoop(_ControlFlowOperation):
    """The type of Catalyst's ``for_loop(...).operation`` (see the module docstring)."""


class WhileLoop(_ControlFlowOperation):
    """The type of Catalyst's ``while_loop(...).operation`` (see the module docstring)."""


class Switch(_ControlFlowOperation):
    """The type of Catalyst's ``switch(...).operation`` (see the module docstring)."""
