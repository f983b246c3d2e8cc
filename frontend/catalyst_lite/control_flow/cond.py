"""``cond``: choose one of several branches by the first predicate that holds.

The equation::

    outs = cond[branch_jaxprs, branch_nconsts, nimplicit_outputs] *preds *consts_0 *consts_1 ...

Branch ``b`` takes its constants ``consts_b`` and returns ``*implicit *results``; the last branch
is the ``otherwise`` one (it runs when no predicate holds). When the branches return arrays of
different sizes, the size is a new dimension: one of the ``nimplicit_outputs`` (Catalyst refuses
this; here the result size is simply known once the branch has run).

>>> import jax.numpy as jnp
>>> from catalyst_lite import qjit, cond
>>> @qjit
... def sign(x: float):
...     @cond(x > 0)
...     def s():
...         return 1.0
...     @s.else_if(x < 0)
...     def s():
...         return -1.0
...     @s.otherwise
...     def s():
...         return 0.0
...     return s()
>>> float(sign(-2.0)), float(sign(0.0))
(-1.0, 0.0)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

from ..compiler.specialize import (
    Mode,
    NeedsHost,
    dimension_inputs,
    eval_jaxpr,
    register_specialization,
    runner_for,
)
from ..capture.switch import refuse_under_capture
from ..errors import ControlFlowError, function_name
from ..jax_extras import ClosedJaxpr, Literal, Tracer, Var, collapse, get_aval
from ..jax_extras.dynshape import DIM_AVAL, DynshapePrimitive, NestedBody, expand_results, same_dim, trace_nested
from ..jax_extras.tracing import DShapedArray, InDBIdx, OutDBIdx
from .common import (
    active_control_flow_handler,
    check_predicate,
    describe_aval,
    get_ambient_values,
    set_ambient_values,
    split_groups,
    tracing_mode,
)

__all__ = ["cond", "cond_p", "CondCallable"]


class Cond(DynshapePrimitive):
    pass


cond_p = Cond("cond")


# --- user API ------------------------------------------------------------------------------------


class CondCallable:
    """A conditional being assembled: ``@cond(pred)``, then ``.else_if(pred)``/``.otherwise``.

    Calling it (with the arguments every branch takes, if any) runs the first branch whose
    predicate holds, or the ``otherwise`` branch.
    """

    def __init__(self, pred: Any, fn: Callable):
        self.preds: list[Any] = [pred]
        self.branches: list[Callable] = [fn]
        self.otherwise_fn: Callable | None = None
        self.__name__ = function_name(fn)
        self.__doc__ = getattr(fn, "__doc__", None)

    def else_if(self, pred: Any) -> Callable[[Callable], "CondCallable"]:
        """Add a branch taken when ``pred`` holds and no earlier predicate does."""

        def decorator(fn: Callable) -> CondCallable:
            self.preds.append(pred)
            self.branches.append(fn)
            return self

        return decorator

    def otherwise(self, fn: Callable) -> "CondCallable":
        """Add the branch taken when no predicate holds."""
        self.otherwise_fn = fn
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        first = self.branches[0]
        preds = [check_predicate(p, "cond", first) for p in self.preds]
        branches = [_bound(fn, args, kwargs) for fn in self.branches]
        otherwise = _bound(self.otherwise_fn, args, kwargs) if self.otherwise_fn else _returns_none
        if all(isinstance(p, bool) for p in preds) or tracing_mode("cond", first) == "eager":
            return _run_eagerly(preds, branches, otherwise)
        handler = active_control_flow_handler()
        if handler is not None:  # e.g. a conditional inside qml.adjoint, applied adjointed

            def bind(preds: list, branches: list, otherwise: Callable | None) -> Any:
                return _bind(preds, branches, otherwise or _returns_none, otherwise is not None, first)

            return handler.cond(preds, branches, otherwise if self.otherwise_fn else None, bind)
        return _bind(preds, branches, otherwise, self.otherwise_fn is not None, first)


def cond(pred: Any) -> Callable[[Callable], CondCallable]:
    """Decorator making ``fn`` the branch taken when ``pred`` holds.

    Add branches with ``.else_if(pred)`` and a default with ``.otherwise``; without ``otherwise``
    the branches must return nothing.
    """
    refuse_under_capture("cond")  # as Catalyst does: captured programs use qml.cond

    def decorator(fn: Callable) -> CondCallable:
        return CondCallable(pred, fn)

    return decorator


def _bound(fn: Callable, args: tuple, kwargs: dict) -> Callable[[], Any]:
    def branch() -> Any:
        return fn(*args, **kwargs)

    branch.__name__ = branch.__qualname__ = function_name(fn)
    return branch


def _returns_none() -> None:
    return None


def _run_eagerly(preds: Sequence[Any], branches: Sequence[Callable], otherwise: Callable) -> Any:
    for pred, branch in zip(preds, branches):
        if bool(pred):
            return branch()
    return otherwise()


# --- binding -------------------------------------------------------------------------------------


def _trace_branch(branch: Callable) -> tuple[NestedBody, list[Any]]:
    """Trace one branch (no arguments: what it uses is captured as constants)."""
    outer_ambient = get_ambient_values()

    def flat_branch() -> list[Any]:
        flat, tree = tree_flatten(branch())
        trees.append(tree)
        return [*flat, *get_ambient_values()]

    trees: list[PyTreeDef] = []
    try:
        nested = trace_nested(
            flat_branch, (), None, f"cond branch {function_name(branch)}",
            lambda args, results: expand_results(None, results, None),
        )
    finally:
        set_ambient_values(outer_ambient)
    nested.out_tree = trees[-1]
    return nested, nested.consts


def _bind(preds, branches, otherwise, has_otherwise: bool, first: Callable) -> Any:
    """The design documents' ``bindNested`` for ``cond``: trace every branch, unify their output
    types (a size that differs between branches becomes an implicit result), emit one equation."""
    traced = [_trace_branch(b)[0] for b in [*branches, otherwise]]
    _check_same_structure(traced, has_otherwise, first)
    out_type, implicit_dims = _unify_output_types(traced, len(preds))
    jaxprs = [_with_outputs(t, dims) for t, dims in zip(traced, implicit_dims)]
    operands = [*preds, *(c for t in traced for c in t.consts)]
    outs = cond_p.bind_nested(
        operands,
        out_type,
        branch_jaxprs=tuple(ClosedJaxpr(j, ()) for j in jaxprs),
        branch_nconsts=tuple(t.nconsts for t in traced),
        nimplicit_outputs=len(implicit_dims[0]),
    )
    explicit = collapse(out_type, outs)
    n_ambient = len(get_ambient_values())
    user, ambient = explicit[: len(explicit) - n_ambient], explicit[len(explicit) - n_ambient :]
    set_ambient_values(ambient)
    result = tree_unflatten(traced[0].out_tree, user)
    return None if not has_otherwise else result


def _check_same_structure(traced: list[NestedBody], has_otherwise: bool, first: Callable) -> None:
    name = function_name(first)
    if not has_otherwise and traced[0].out_tree.num_leaves:
        raise ControlFlowError(
            f"cond ({name}) returns values but has no `otherwise` branch; add one with "
            "@<cond>.otherwise so that the result is defined when no predicate holds."
        )
    ref = traced[0]
    for i, t in enumerate(traced[1:], start=1):
        if t.out_tree != ref.out_tree:
            raise ControlFlowError(
                f"cond ({name}): branch {i} returns {t.out_tree} but branch 0 returns "
                f"{ref.out_tree}; every branch must return the same structure."
            )
        for k, (a, b) in enumerate(zip(ref.out_avals, t.out_avals)):
            if a.dtype != b.dtype or len(a.shape) != len(b.shape):
                raise ControlFlowError(
                    f"cond ({name}): result {k} is {describe_aval(a)} in branch 0 but "
                    f"{describe_aval(b)} in branch {i}; branches must agree on dtypes and ranks."
                )


def _dim_of(nested: NestedBody, dim: Any) -> Any:
    """A result dimension of a branch, in the enclosing trace: a number, the enclosing tracer it
    was captured from, or ``None`` when the branch computes it."""
    if isinstance(dim, int):
        return dim
    if isinstance(dim, Literal):
        return int(dim.val)
    invars = nested.jaxpr.invars
    if dim in invars and invars.index(dim) < nested.nconsts:
        return nested.consts[invars.index(dim)]
    return None


def _unify_output_types(traced: list[NestedBody], npreds: int):
    """The equation's output type, and for each branch the dimensions it returns implicitly."""
    explicit_vars = [t.jaxpr.outvars[t.nimplicit_out :] for t in traced]
    const_offsets = np.cumsum([npreds] + [t.nconsts for t in traced]).tolist()
    implicit_dims: list[list[Any]] = [[] for _ in traced]
    out_avals = []
    for k, ref_var in enumerate(explicit_vars[0]):
        aval = ref_var.aval
        if type(aval) is not DShapedArray:
            if all(v.aval.shape == aval.shape for vs in explicit_vars for v in [vs[k]]):
                out_avals.append(aval)
                continue
            aval = DShapedArray(aval.shape, aval.dtype, aval.weak_type)
        shape = []
        for j in range(len(aval.shape)):
            dims = [vs[k].aval.shape[j] for vs in explicit_vars]
            outer = [_dim_of(t, d) for t, d in zip(traced, dims)]
            if all(isinstance(o, int) for o in outer) and len(set(outer)) == 1:
                shape.append(outer[0])
            elif all(isinstance(o, Tracer) for o in outer) and all(same_dim(outer[0], o) for o in outer):
                pos = traced[0].jaxpr.invars.index(dims[0])
                shape.append(InDBIdx(const_offsets[0] + pos))
            else:
                shape.append(OutDBIdx(len(implicit_dims[0])))
                for b, d in enumerate(dims):
                    implicit_dims[b].append(d)
        out_avals.append(aval.update(shape=tuple(shape)))
    nimpl = len(implicit_dims[0])
    out_type = tuple([(DIM_AVAL, False)] * nimpl + [(a, True) for a in out_avals])
    return out_type, implicit_dims


def _with_outputs(nested: NestedBody, dims: list[Any]):
    """The branch jaxpr returning exactly ``*dims *explicit results``."""
    explicit = nested.jaxpr.outvars[nested.nimplicit_out :]
    outvars = [d if isinstance(d, Var) else Literal(int(d), DIM_AVAL) for d in dims]
    return nested.jaxpr.replace(outvars=[*outvars, *explicit])


# --- specialization rules ------------------------------------------------------------------------


def _split(invals: list[Any], params: dict[str, Any]):
    npreds = len(params["branch_jaxprs"]) - 1
    preds, *consts, _ = split_groups(invals, [npreds, *params["branch_nconsts"]])
    return preds, consts


def _branch_index(preds: Sequence[Any]) -> Any:
    """Index of the first predicate that holds, else the last branch (``otherwise``)."""
    index = jnp.int32(len(preds))
    for i in reversed(range(len(preds))):
        index = jnp.where(preds[i], jnp.int32(i), index)
    return index


def _static_implicit_dims(jaxpr: Any, consts: Sequence[Any], nimplicit: int) -> list[int] | None:
    """The implicit result sizes of a branch if they are known before it runs."""
    out = []
    for v in jaxpr.outvars[:nimplicit]:
        if isinstance(v, Literal):
            out.append(int(v.val))
        elif v in jaxpr.invars and not isinstance(consts[jaxpr.invars.index(v)], Tracer):
            out.append(int(consts[jaxpr.invars.index(v)]))
        else:
            return None
    return out


def _staged(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: ``lax.switch``; branches must agree on sizes."""
    preds, consts = _split(invals, params)
    nimpl = params["nimplicit_outputs"]
    jaxprs = [cj.jaxpr for cj in params["branch_jaxprs"]]
    dims = [_static_implicit_dims(j, c, nimpl) for j, c in zip(jaxprs, consts)]
    if nimpl and (any(d is None for d in dims) or any(d != dims[0] for d in dims)):
        raise NeedsHost("cond branches return different sizes")
    implicit = dims[0] if nimpl else []

    def as_branch(jaxpr, c):
        return lambda: eval_jaxpr(jaxpr, list(c), Mode.STAGED)[nimpl:]

    branches = [as_branch(j, c) for j, c in zip(jaxprs, consts)]
    if all(not isinstance(p, Tracer) for p in preds):
        return [*implicit, *branches[_first_true(preds)]()]
    return [*implicit, *lax.switch(_branch_index(preds), branches)]


def _first_true(preds: Sequence[Any]) -> int:
    return next((i for i, p in enumerate(preds) if bool(p)), len(preds))


def _host(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Driven from Python: run the chosen branch, compiled for its sizes."""
    preds, consts = _split(invals, params)
    index = _first_true(preds)
    jaxpr = params["branch_jaxprs"][index].jaxpr
    outs = runner_for(jaxpr, f"cond branch {index}")(*consts[index])
    nimpl = params["nimplicit_outputs"]
    return [*(int(d) for d in outs[:nimpl]), *outs[nimpl:]]


def _dimension_operands(params: dict[str, Any]) -> set[int]:
    npreds = len(params["branch_jaxprs"]) - 1
    needed, offset = set(), npreds
    for cj, n in zip(params["branch_jaxprs"], params["branch_nconsts"]):
        needed |= {offset + k for k in dimension_inputs(cj.jaxpr)}
        offset += n
    return needed


register_specialization(cond_p, staged=_staged, host=_host, dimension_operands=_dimension_operands)


# --- lowering ------------------------------------------------------------------------------------
# `.mlir` shows the dynamic program: one `stablehlo.case` on the index of the first predicate that
# holds (the last region is `otherwise`); each region lowers its branch on captured constants.

from ..jax_extras import lowering  # noqa: E402  (the helpers of this section)


def _lower(
    ctx: lowering.LoweringRuleContext,
    *operands: Any,
    branch_jaxprs: tuple[ClosedJaxpr, ...],
    branch_nconsts: tuple[int, ...],
    nimplicit_outputs: int,
) -> list[Any]:
    """StableHLO of ``cond``: ``case first_true(preds) { branch_0 } ... { otherwise }``."""
    del nimplicit_outputs  # the implicit sizes are the leading results of every branch
    params = {"branch_jaxprs": branch_jaxprs, "branch_nconsts": branch_nconsts}
    preds, consts = _split(list(operands), params)

    def as_region(jaxpr: ClosedJaxpr, branch_consts: list[Any]) -> Callable[[], list[Any]]:
        return lambda: lowering.lower_nested_jaxpr(ctx, jaxpr, branch_consts)

    regions = [as_region(j, c) for j, c in zip(branch_jaxprs, consts)]
    index = lowering.first_true_index(preds)
    return lowering.case_op(index, lowering.ir_types(ctx.avals_out), regions)


lowering.register_lowering(cond_p, _lower)


# --- differentiation -----------------------------------------------------------------------------
# No rule of ours is needed in either mode: the staged conditional is a `lax.switch` (or, with
# known predicates, just the chosen branch), which JAX differentiates forward and in reverse; the
# host-driven one runs the chosen branch as a compiled program, which JAX differentiates. Branches
# that return different sizes run host-driven, so their results' tangents have the chosen sizes.
