"""The seam between catalyst_lite and JAX's private internals.

Every import of ``jax._src`` and every use of JAX's dynamic-shape types lives in this subpackage,
so a JAX upgrade touches these modules only (docs/architecture.md, "The JAX-internals seam"):

- tracing: :mod:`.patches`, :mod:`.tracing`, :mod:`.dynshape`, :mod:`.nested`, :mod:`.rules`,
  :mod:`.typecheck`;
- sizes in JAX's shape logic: :mod:`.dimensions`, :mod:`.size_facts`, :mod:`.size_expressions`,
  :mod:`.requirements`, :mod:`.shapes`, :mod:`.numpy_functions`;
- lowering: :mod:`.lowering`, :mod:`.iree_lowering`, :mod:`.literals`;
- :mod:`.autodiff`, :mod:`.provenance`, :mod:`.executables`, :mod:`.frames`: reverse-mode tracers, ``x[i, j]``
  reads, JAX's C++ dispatcher, the user's line for messages;
- :mod:`.host_callbacks`: host callbacks that run although their results are unused.
"""

import contextlib
from typing import Any

from jax._src import config, mesh
from jax._src import core as core
from jax._src.core import EvalTrace, Primitive, eval_context
from jax._src.interpreters import partial_eval as pe
from jax._src.interpreters import mlir as mlir
from jax._src.lax import lax as _lax
from jax._src.lax import control_flow as _lax_control_flow
from jax._src import pjit as _pjit

from . import dimensions as dimensions  # registers the symbolic-size patches
from . import numpy_functions as numpy_functions  # registers the jax.numpy and jax.random patches
from . import requirements as requirements  # registers the reshape patches
from .tracing import (
    ClosedJaxpr, DropVar, DShapedArray, InDBIdx, InputType, Jaxpr, Literal, OutDBIdx, OutputType, ShapedArray,
    Tracer, Var, collapse, current_trace, dynamic_jaxprs, dynamic_tracing, get_aval, hosted_capture,
    inside_program_trace, is_tracing, make_input_type, trace_to_jaxpr, under_jax_transformation,
)

jit_p = _pjit.jit_p  # the primitive of a nested jax.jit call
jax_while_p = _lax_control_flow.while_p  # jax.lax.while_loop's (and fori_loop's of traced bounds)
jax_scan_p = _lax_control_flow.scan_p  # jax.lax.scan's (and fori_loop's of static bounds)


def weakly_typed(x: Any) -> Any:
    """``x`` typed as JAX types a Python scalar's results (``weak_type``): it then takes the other
    operand's precision in arithmetic, as the same result of a ``jax.jit`` function would."""
    return _lax._convert_element_type(x, x.dtype, weak_type=True)


def x64_scope():
    """64-bit types for the calling thread (no scope entered when on already: it costs microseconds)."""
    if config.enable_x64.value:
        return contextlib.nullcontext()
    return config.enable_x64(True)


# jax.sharding.use_abstract_mesh (public from JAX 0.7.2 on, only internal in 0.7.1): the abstract
# mesh in effect inside the block.
use_abstract_mesh = mesh.use_abstract_mesh


def context_mesh() -> Any:
    """The concrete ``Mesh`` of ``jax.sharding.set_mesh``/``use_mesh`` in effect, or ``None``."""
    concrete = mesh.get_concrete_mesh()
    return None if concrete is None or concrete.empty else concrete
