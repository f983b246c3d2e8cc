"""Structured control flow with dynamically-shaped values: one primitive family per module
(README.md's module map lists them)."""

from .for_loop import for_loop, for_loop_p
from .while_loop import while_loop, while_loop_p
from .cond import cond, cond_p, switch

__all__ = ["for_loop", "for_loop_p", "while_loop", "while_loop_p", "cond", "cond_p", "switch"]
