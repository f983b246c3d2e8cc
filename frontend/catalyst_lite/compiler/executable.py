"""A traced program made callable: :class:`Executable`, :class:`FastCall` (repeated calls) and
:func:`call_from_transformation` (calls from inside JAX transformations)."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import tree_flatten, tree_map, tree_unflatten, treedef_is_leaf

from ..jax_extras import Tracer, is_tracing, x64_scope
from ..jax_extras.autodiff import is_reverse_mode_value
from ..jax_extras.executables import dispatch_data
from ..tracing import Program
from .capacity import compiled_loops
from .inspection import ProgramInfo, SizeGenericInfo
from .options import RunnerOptions
from .size_generic import SizeGenericTier
from .runner import JaxprRunner, Speculation
from .compilation import Specialization

__all__ = ["Executable", "FastCall", "call_from_transformation", "register_function_compiler",
           "compile_function", "uncompiled", "is_compiled_function"]


class Executable:
    """A traced program compiled with ``options``, lazily, per size signature."""

    def __init__(self, program: Program, options: RunnerOptions, donated: frozenset[int] = frozenset()):
        self.program = program
        extra = program.contribution
        self.options = dataclasses.replace(options, xla={**options.xla, **extra.compile_options})
        self.runner = JaxprRunner(program.jaxpr, options.report.name or "jaxpr", self.options)
        self.runner.donated = donated  # jaxpr inputs whose buffers calls may reuse (donate_argnums)
        self.runner.size_generic = SizeGenericTier.attach(self.runner, options.size_generic)
        self.fresh_consts: Mapping[int, Callable[[], Any]] = dict(extra.fresh_consts)  # drawn at every call

    def describe(self) -> ProgramInfo:
        runner, tier, program = self.runner, self.runner.size_generic, self.program
        return ProgramInfo(
            jaxpr=program.closed_jaxpr, facts=program.facts, loops=tuple(compiled_loops(runner.kept())),
            size_generic=None if tier is None else SizeGenericInfo(tier.status, tier.reason, tier.from_cache),
            fresh_consts=len(self.fresh_consts), **runner.describe(),
        )

    def consts(self) -> list[Any]:
        """The jaxpr's constants for one call: :attr:`fresh_consts` drawn anew, unless traced."""
        consts = list(self.program.closed_jaxpr.consts)
        if self.fresh_consts and not is_tracing():
            for i, draw in self.fresh_consts.items():
                consts[i] = draw()
        return consts

    def arguments(self, implicit: Sequence[int], leaves: Sequence[Any]) -> list[Any]:
        """The jaxpr's flat arguments for a call: ``[consts, implicit sizes, leaves]``."""
        return [*self.consts(), *implicit, *leaves]

    def size_leaves(self, implicit: Sequence[int]) -> list[int]:
        """Which argument leaves (by index) set sizes."""
        first_leaf = len(self.program.closed_jaxpr.consts) + len(implicit)
        return [p - first_leaf for p in self.runner.static_positions if p >= first_leaf]

    def run(self, implicit: Sequence[int], leaves: Sequence[Any]) -> Any:
        """The function's result for a call (in the caller's x64 scope)."""
        return self.program.results(self.runner(*self.arguments(implicit, leaves)))

    def prepare(self, implicit: Sequence[int], leaves: Sequence[Any]) -> None:
        """Compile the specialization of a call's sizes without running it."""
        args = self.arguments(implicit, leaves)
        key = self.runner.signature(args) if self.runner.static_positions else ()
        self.runner.prepare(key, [args[i] for i in self.runner.dynamic_positions])

    def lower(self, implicit: Sequence[int], leaves: Sequence[Any]) -> Any:
        """``jax.stages.Lowered`` of the specialization at these sizes (or :class:`NeedsHost`)."""
        return self.runner.lower(*self.arguments(implicit, leaves))


class FastCall:
    """What a call with already-validated argument types runs: the executable of its sizes, directly,
    where ``facts_hold(args)`` (``None``: no fact reads an argument; axis lengths are in the call's key)."""

    def __init__(self, executable: Executable, implicit: Sequence[int], leaves: Sequence[Any],
                 axis_lengths: Sequence[int] = ()):
        self.executable = executable
        facts, lengths = executable.program.facts, tuple(axis_lengths)
        self.reads = frozenset(k - len(lengths) for k in facts.inputs if k >= len(lengths))  # argument leaves
        self.facts_hold = (lambda args: facts.first_broken((*lengths, *args) if lengths else args) < 0
                           ) if self.reads else None
        self.implicit = list(implicit)
        self.runner = executable.runner
        self.prefix = (*executable.program.closed_jaxpr.consts, *implicit)
        self.fresh_prefix = bool(executable.fresh_consts)  # then built anew on every call
        positions = self.runner.dynamic_positions
        self.positions = None if positions == tuple(range(len(self.prefix) + len(leaves))) else positions
        full = (*self.prefix, *leaves)
        # jax.Arrays keep their dtype whatever the x64 mode; NumPy arrays and numbers do not.
        self.needs_x64 = not all(isinstance(full[i], jax.Array) for i in positions)
        # A speculation takes Python ints as static values.
        self.speculation_needs_x64 = not all(isinstance(full[i], jax.Array) or type(full[i]) is int
                                             for i in positions)
        # program.results, or for the most common result, one array, a cheaper equivalent.
        explicit = [i for i, (_, is_explicit) in enumerate(executable.program.out_type) if is_explicit]
        one_array = len(explicit) == 1 and treedef_is_leaf(executable.program.out_tree)
        self.results = operator.itemgetter(explicit[0]) if one_array else executable.program.results
        # What the executable takes before the leaves if it takes them as they are and returns the results.
        leaf_positions = range(len(self.prefix), len(full))
        direct = (
            not self.fresh_prefix
            and all(explicit for _, explicit in executable.program.out_type)
            and set(leaf_positions) <= set(positions)
            and all(i < len(executable.program.closed_jaxpr.consts) or i in leaf_positions for i in positions)
        )
        self.direct_consts = [full[i] for i in positions if i < len(self.prefix)] if direct else None

    def dispatch_data(self, leaves: Sequence[Any], result: Any) -> Any | None:
        """What lets the function's dispatcher run this call's executable without Python, or ``None``."""
        spec = None if self.direct_consts is None else self.runner.compiled((*self.prefix, *leaves))
        if not isinstance(spec, Specialization) or spec.final is None:
            return None
        return dispatch_data(spec.final, self.direct_consts, leaves, result)

    def static_dispatch_data(self, leaves: Sequence[Any], static: Sequence[int], result: Any) -> Any | None:
        """:meth:`dispatch_data` for a dispatcher taking the leaves at ``static`` (Python ints) by value."""
        if self.fresh_prefix:
            return None
        full = (*self.prefix, *leaves)
        spec = self.runner.compiled(full)
        if isinstance(spec, Speculation):
            direct = spec.direct()
            if direct is None:
                return None
            final, kept, fixed = direct
        elif isinstance(spec, Specialization) and spec.final is not None:
            final, kept, fixed = spec.final, None, frozenset()
        else:
            return None
        positions = self.runner.dynamic_positions
        inputs = positions if kept is None else [positions[j] for j in kept]
        nconsts, nprefix = len(self.executable.program.closed_jaxpr.consts), len(self.prefix)
        dynamic = [k for k in range(len(leaves)) if k not in set(static)]
        implicit_outputs = {k for k, (_, explicit) in enumerate(self.executable.program.out_type) if not explicit}
        if ([i - nprefix for i in inputs if i >= nprefix] != dynamic
                or any(nconsts <= i < nprefix for i in inputs) or implicit_outputs != fixed):
            return None
        consts = [full[i] for i in inputs if i < nconsts]
        return dispatch_data(final, consts, [leaves[k] for k in dynamic], result)

    def __call__(self, args: tuple) -> Any:
        if not self.speculation_needs_x64:
            prefix = (*self.executable.consts(), *self.implicit) if self.fresh_prefix else self.prefix
            full = (*prefix, *args) if prefix else args
            spec = self.runner.compiled(full)
            if spec is not None and (not self.needs_x64 or isinstance(spec, Speculation)):
                return self.results(spec.run(full if self.positions is None else [full[i] for i in self.positions]))
        with x64_scope():
            return self.executable.run(self.implicit, args)


# What compiles a Python function (``QJIT``, registered by ``catalyst_lite.compiled``): the layers
# below the user API (``grad(f)(x)`` outside qjit) compile through it instead of importing ``QJIT``.
_compilers: list[type] = []


def register_function_compiler(compiler: type) -> type:
    """A class decorator: ``compiler(fn)`` is what :func:`compile_function` uses."""
    _compilers[:] = [compiler]
    return compiler


def compile_function(fn: Callable) -> Any:
    """``fn`` compiled by the registered compiler (``qjit(fn)``), to be called outside any trace."""
    return _compilers[0](fn)


def uncompiled(fn: Callable) -> Callable:
    """The Python function a compiled function (``qjit(f)``) was made from; any other ``fn`` as it is."""
    return fn.original_function if is_compiled_function(fn) else fn


def is_compiled_function(fn: Any) -> bool:
    """Whether ``fn`` is a function compiled by the registered compiler (a ``QJIT``)."""
    return bool(_compilers) and isinstance(fn, _compilers[0])


_32_BIT = {np.dtype(wide): np.dtype(narrow) for wide, narrow in
           [("float64", "float32"), ("int64", "int32"), ("uint64", "uint32"), ("complex128", "complex64")]}


def call_from_transformation(run: Callable[..., Any], leaves: Sequence[Any]) -> Any:
    """``run(*leaves)`` on tracers of an outer JAX transformation: computed in 64 bits (in reverse mode
    too), the results cast to the caller's types.

    >>> import jax
    >>> import jax.numpy as jnp
    >>> from catalyst_lite import qjit
    >>> f = qjit(lambda x: jnp.sum(x ** 3))
    >>> jax.grad(f)(jnp.arange(3.0)).tolist()
    [0.0, 3.0, 12.0]
    """
    if jax.config.jax_enable_x64:
        with x64_scope():
            return run(*leaves)
    # Each leaf computed in its own (32-bit) type: ``jax.grad(f)(numpy_float64)`` with x64 off hands over
    # a ``float32`` tracer holding the float64 array; multiplying by one (exact) materializes it.
    leaves = [x * np.ones((), x.dtype) if isinstance(x, Tracer) and jnp.issubdtype(x.dtype, jnp.number) else x
              for x in leaves]
    if any(is_reverse_mode_value(x) for x in leaves):
        return _with_backward_pass_in_64_bits(run, leaves)
    with x64_scope():
        return _to_caller_types(run(*leaves))


def _to_caller_types(tree: Any) -> Any:
    """Each array of ``tree`` cast to the caller's (32-bit) type."""
    return tree_map(lambda x: x.astype(_32_BIT[x.dtype]) if x.dtype in _32_BIT else x, tree)


def _with_backward_pass_in_64_bits(run: Callable[..., Any], leaves: Sequence[Any]) -> Any:
    """``run(*leaves)`` as a ``jax.custom_vjp`` whose forward and backward passes run in 64 bits."""
    result_types: list[Any] = []  # the 64-bit results' tree and dtypes, set by the forward pass

    @jax.custom_vjp
    def call(*xs: Any) -> Any:
        with x64_scope():
            return _to_caller_types(run(*xs))

    def forward(*xs: Any) -> tuple[Any, Any]:
        with x64_scope():
            results, pullback = jax.vjp(run, *xs)
            flat, tree = tree_flatten(results)
            result_types[:] = [tree, [r.dtype for r in flat]]
            return _to_caller_types(results), pullback

    def backward(pullback: Any, cotangents: Any) -> tuple[Any, ...]:
        tree, dtypes = result_types
        with x64_scope():
            # Each cotangent in its result's 64-bit type (float0 ones stay).
            flat = [c if jnp.result_type(c) == jax.dtypes.float0 else jnp.asarray(c, d)
                    for c, d in zip(tree.flatten_up_to(cotangents), dtypes)]
            return tuple(_to_caller_types(pullback(tree_unflatten(tree, flat))))

    call.defvjp(forward, backward)
    return call(*leaves)
