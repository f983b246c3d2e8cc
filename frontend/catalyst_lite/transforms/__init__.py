"""Transformations of functions, usable inside and outside ``@qjit``.

- :mod:`.differentiation`: ``grad``, ``value_and_grad``, ``jacobian``, ``jvp``, ``vjp``.
- :mod:`.vmap`: ``vmap``, Catalyst's vectorizing map (a loop over the batch).
- :mod:`.boundary`: calling a qjit program from inside JAX's own transformations.
"""

from .differentiation import grad, jacobian, jvp, value_and_grad, vjp
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "jacobian", "jvp", "vjp", "vmap"]
