"""``QJIT.mlir``: the StableHLO of a traced program, with symbolic sizes as ``?`` dimensions.

Implicit dimensions are ``tensor<i64>`` arguments of ``@main``. XLA on the CPU cannot run this
module; it runs :meth:`~catalyst_lite.QJIT.specialized_mlir`.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(sz: int):
...     return jnp.ones((sz + 1,), dtype=float)
>>> print(f.mlir.splitlines()[1].strip())
func.func public @main(%arg0: tensor<i64>) -> (tensor<i64>, tensor<?xf64>) {
"""

from __future__ import annotations

from ..jax_extras.lowering import lower_jaxpr_to_stablehlo
from ..tracing import Program

__all__ = ["program_to_mlir"]


def program_to_mlir(program: Program, name: str) -> str:
    """StableHLO text (a module ``name`` with a public ``@main``) of a traced program; ``TypeError``
    for anything else, ``ValueError`` when it cannot be shown (e.g. it has side effects)."""
    if not isinstance(program, Program):
        raise TypeError(f"program_to_mlir expects a Program, got {type(program).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"program_to_mlir expects a non-empty module name, got {name!r}")
    return lower_jaxpr_to_stablehlo(program.closed_jaxpr, name)
