"""Catalyst's control flow at Catalyst's import path, ``catalyst.api_extensions.control_flow``.

``Cond``, ``ForLoop``, ``WhileLoop`` and ``Switch`` are the types of ``.operation``, the record of
control flow called inside a QNode compiled by ``qjit`` (it names the control flow and its
function). Called anywhere else, the object has no operation: ``.operation`` raises an
``AttributeError``, with Catalyst's words.

>>> from catalyst_lite.api_extensions.control_flow import Switch, switch
>>> s = switch(0)(lambda: 1)
>>> try:
...     s.operation
... except AttributeError as e:
...     print("no associated quantum operation" in str(e))
True
"""

from ..control_flow import cond, for_loop, switch, while_loop
from ..control_flow.common import Cond, ForLoop, ForLoopCallable, Switch, WhileLoop, WhileLoopCallable
from ..control_flow.cond import CondCallable, SwitchCallable

__all__ = ["cond", "for_loop", "while_loop", "switch", "CondCallable", "ForLoopCallable", "WhileLoopCallable",
           "SwitchCallable", "Cond", "ForLoop", "WhileLoop", "Switch"]
