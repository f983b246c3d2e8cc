"""Transformations of functions, usable inside and outside ``@qjit``.

- :mod:`.differentiation`: ``grad``, ``value_and_grad``, ``jacobian``, ``jvp``, ``vjp``.
- :mod:`.boundary`: calling a qjit program from inside JAX's own transformations.
"""

from .differentiation import grad, jacobian, jvp, value_and_grad, vjp

__all__ = ["grad", "value_and_grad", "jacobian", "jvp", "vjp"]
