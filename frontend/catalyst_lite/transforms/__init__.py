"""Transformations of functions, usable inside and outside ``@qjit``.

- :mod:`.differentiation`: ``grad``, ``value_and_grad``, ``jacobian``, ``jvp``, ``vjp``.
- :mod:`.vmap`: ``vmap``, Catalyst's vectorizing map (a loop over the batch).
"""

from .differentiation import grad, jacobian, jvp, value_and_grad, vjp
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "jacobian", "jvp", "vjp", "vmap"]
