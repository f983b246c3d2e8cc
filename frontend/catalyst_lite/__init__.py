"""catalyst_lite: a Catalyst-compatible ``@qjit`` with dynamic shapes, compiled by XLA.

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit
>>> @qjit
... def f(n: int):
...     return jnp.arange(n) * 2
>>> f(3).tolist()
[0, 2, 4]
"""

import importlib

from .versions import check_jax

check_jax()  # before anything imports JAX's internals: an unsupported JAX is one clear ImportError

from .errors import (
    AutoGraphError,
    CatalystLiteError,
    CompileError,
    DifferentiableCompileError,
    PlxprCaptureCFCompatibilityError,
)
from .compiled import QJIT, qjit
from .compile_options import CompileOptions
from .control_flow import cond, for_loop, switch, while_loop
from .autograph import autograph_source, disable_autograph, run_autograph
from .jax_extras import dynamic_jaxprs
from .quantum import adjoint, ctrl, measure, mitigate_with_zne
from .transforms import grad, jacobian, jvp, value_and_grad, vjp, vmap
from .callbacks import accelerate, pure_callback
from . import debug
from .debug import debug_assert, draw_graph
from .settings import apply_import_defaults

__version__ = "0.1.0"

__all__ = ["qjit", "QJIT", "for_loop", "while_loop", "cond", "grad", "value_and_grad", "jacobian", "jvp", "vjp",
           "vmap", "switch", "pure_callback", "accelerate", "debug", "debug_assert", "passes",
           "measure", "adjoint", "ctrl",
           "autograph_source", "disable_autograph", "run_autograph", "AutoGraphError",
           "dynamic_jaxprs", "CatalystLiteError", "CompileError", "DifferentiableCompileError", "PlxprCaptureCFCompatibilityError",
           "CompileOptions", "autograph_ignore_fallbacks", "autograph_strict_conversion", "pipeline", "draw_graph", "mitigate_with_zne",
           "__version__"]

# Catalyst's module flags for autograph's loops that cannot be compiled and run as Python loops:
# strict conversion raises their error instead, ignoring fallbacks drops the AutoGraphWarning.
autograph_ignore_fallbacks = False
autograph_strict_conversion = False

apply_import_defaults()  # jax_enable_x64 on, as `import catalyst` does (see settings.py)


def __getattr__(name: str):
    # `catalyst_lite.passes` imports PennyLane: only programs that use it pay for that import.
    if name in ("passes", "pipeline"):
        passes = importlib.import_module(".passes", __name__)
        return passes if name == "passes" else passes.pipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
