"""Structured control flow with dynamically-shaped values: one primitive family per module.

- :mod:`.for_loop`: ``for_loop`` and ``for_loop_p``.
- :mod:`.while_loop`: ``while_loop`` and ``while_loop_p``.
- :mod:`.cond`: ``cond`` (with ``else_if``/``otherwise``), ``cond_p`` and ``switch``, Catalyst's
  index switch (a ``cond`` on ``index == case``).
- :mod:`.common`, :mod:`.loop_common`: options, checks and the loop expansion they share.
"""

from .for_loop import for_loop, for_loop_p
from .while_loop import while_loop, while_loop_p
from .cond import cond, cond_p, switch

__all__ = ["for_loop", "for_loop_p", "while_loop", "while_loop_p", "cond", "cond_p", "switch"]
