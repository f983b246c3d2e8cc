"""Transformations of functions, usable inside and outside ``@qjit``: differentiation and ``vmap``."""

from .differentiation import grad, jacobian, jvp, value_and_grad, vjp
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "jacobian", "jvp", "vjp", "vmap"]
