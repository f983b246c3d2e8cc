"""The seam between catalyst_lite and JAX's private internals.

Every import of ``jax._src`` or ``jax.interpreters`` in catalyst_lite, and every use of JAX's
dynamic-shape types (``DShapedArray``, de Bruijn indices), lives in this subpackage; the rest of the
package imports the names it needs from here, so a JAX upgrade touches these modules only (what
each does: docs/architecture.md, "The JAX-internals seam"):

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

from jax._src import core as core
from jax._src import source_info_util as source_info_util
from jax._src.interpreters import partial_eval as pe
from jax._src.interpreters import mlir as mlir
from jax._src.lax import lax as _lax
from jax._src import pjit as _pjit

from . import dimensions as dimensions  # registers the symbolic-size patches
from . import numpy_functions as numpy_functions  # registers the jax.numpy and jax.random patches
from . import requirements as requirements  # registers the reshape patches
from .tracing import (
    ClosedJaxpr,
    DBIdx,
    DropVar,
    DShapedArray,
    DynamicJaxprTrace,
    DynamicJaxprTracer,
    InDBIdx,
    InnerTrace,
    InputType,
    OutputType,
    Jaxpr,
    Literal,
    OutDBIdx,
    ShapedArray,
    Tracer,
    Var,
    collapse,
    current_trace,
    debug_info_for,
    dynamic_jaxprs,
    dynamic_tracing,
    emit_equation,
    get_aval,
    hosted_capture,
    input_type_to_tracers,
    inside_program_trace,
    under_jax_transformation,
    is_tracing,
    make_input_type,
    trace_to_jaxpr,
)

Primitive = core.Primitive
# The primitive of a nested jax.jit call (named "pjit" before JAX 0.7.2, "jit" since).
jit_p = getattr(_pjit, "jit_p", None) or _pjit.pjit_p
EvalTrace = core.EvalTrace
eval_context = core.eval_context
ConcretizationTypeError = core.ConcretizationTypeError
jaxpr_as_fun = core.jaxpr_as_fun


def weakly_typed(x: Any) -> Any:
    """``x`` typed as JAX types a Python scalar's results (``weak_type``): it then takes the other
    operand's precision in arithmetic, as the same result of a ``jax.jit`` function would."""
    return _lax._convert_element_type(x, x.dtype, weak_type=True)


def x64_scope():
    """64-bit types for the calling thread (what catalyst_lite compiles and runs with).

    When they are already on (``jax_enable_x64``, as Catalyst sets it) no scope is entered:
    reading the flag costs well under a microsecond, entering the scope several, on every call.
    """
    from jax._src import config

    if config.enable_x64.value:
        return contextlib.nullcontext()
    return config.enable_x64(True)


def use_abstract_mesh(abstract_mesh: Any) -> Any:
    """``jax.sharding.use_abstract_mesh`` (public from JAX 0.7.2 on, only internal in 0.7.1): the
    abstract mesh in effect inside the block.

    >>> import jax
    >>> mesh = jax.sharding.Mesh(jax.devices()[:1], ("s",))
    >>> with use_abstract_mesh(mesh.abstract_mesh):
    ...     jax.sharding.get_abstract_mesh().axis_names
    ('s',)
    """
    from jax._src import mesh

    return mesh.use_abstract_mesh(abstract_mesh)


def context_mesh() -> Any:
    """The concrete ``jax.sharding.Mesh`` of ``jax.sharding.set_mesh``/``use_mesh`` in effect, or
    ``None`` (JAX's public API gives only the abstract mesh).

    >>> context_mesh() is None
    True
    """
    from jax._src import mesh

    concrete = mesh.get_concrete_mesh()
    return None if concrete is None or concrete.empty else concrete
