"""Catalyst's ``catalyst.api_extensions`` path for the names users import from it: :mod:`.callbacks`
and :mod:`.control_flow`, loaded with the package as Catalyst's are.

>>> from catalyst_lite import api_extensions
>>> api_extensions.control_flow.for_loop is api_extensions.for_loop
True
"""

from . import callbacks, control_flow
from .callbacks import accelerate, pure_callback
from .control_flow import Cond, ForLoop, Switch, WhileLoop, cond, for_loop, switch, while_loop

__all__ = ["callbacks", "control_flow", "accelerate", "pure_callback", "cond", "for_loop", "while_loop",
           "switch", "Cond", "ForLoop", "WhileLoop", "Switch"]
