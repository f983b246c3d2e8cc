"""``cond``: choose one of several branches by the first predicate that holds.

The equation::

    outs = cond[branch_jaxprs, branch_nconsts, nimplicit_outputs] *preds *consts_0 *consts_1 ...

Branch ``b`` takes its constants ``consts_b`` and returns ``*implicit *results``; the last branch
is the ``otherwise`` one (it runs when no predicate holds). When the branches return arrays of
different sizes, the size is a new dimension: one of the ``nimplicit_outputs`` (Catalyst refuses
this; here the result size is simply known once the branch has run).

``switch``, Catalyst's index switch, is a ``cond`` on ``index == case`` for each case (unlike
``jax.lax.switch`` the index is not clamped); with a known index the chosen branch is called.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import PyTreeDef, tree_unflatten

from ..compiler.capacity import Checks, Unmaskable, buffer_shape, conformed, masked_eval
from ..compiler.runner import runner_for
from ..compiler.specialize import Mode, NeedsHost, eval_jaxpr
from ..trace_context import refuse_under_capture
from ..errors import ArgumentValueError, ControlFlowError, SizeAssumptionError, UnsupportedOperationError
from ..errors import function_name
from ..jax_extras import ClosedJaxpr, Literal, ShapedArray, Tracer, Var, get_aval, lowering
from ..jax_extras.dynshape import DIM_AVAL, JaxprTypeError, input_type_of, join_output_types
from ..jax_extras.nested import Body, DynshapePrimitive, Equation, NestedBody, NestedSpec, bind_nested
from ..jax_extras.nested import interleave, promote_results, retrace
from ..jax_extras.rules import PrimitiveSpec, Zero, batch_call, bind_known, instantiate_zeros, jvp_call
from ..jax_extras.rules import move_batch_axis, not_mapped, register_nested_primitive, result_avals
from ..jax_extras.rules import same_atoms, unknown_results, zero_tangent
from ..jax_extras.tracing import forward_dependence, prune_jaxpr
from ..jax_extras.typecheck import check_nested
from ..jax_extras.size_facts import describe_aval, runs_only_if_chosen
from ..compiler.loop_body import split_groups, with_batch_axis
from .common import Cond, Switch, WithOperation, active_control_flow_handler, ambient_carries
from .common import checked_function, refuse_function_as_operand
from .common import as_predicate, fed_dimension_operands, flatten_values, tracing_mode
from .loop_common import is_inexact, jvp_results

__all__ = ["cond", "cond_p", "CondCallable", "switch", "SwitchCallable"]

cond_p = DynshapePrimitive("cond")


class CondCallable(WithOperation):
    """A conditional being assembled: ``@cond(pred)``, then ``.else_if(pred)``/``.otherwise``;
    called (with the arguments every branch takes), it runs the first branch whose predicate holds."""

    operation_kind, operation_type = "cond", Cond

    def __init__(self, pred: Any, fn: Callable):
        checked_function(fn, "cond(pred)", "the branch function", _COND_USAGE)
        self.preds: list[Any] = [pred]
        self.branches: list[Callable] = [fn]
        self.otherwise_fn: Callable | None = None
        self.__name__ = function_name(fn)
        self.__doc__ = getattr(fn, "__doc__", None)

    def else_if(self, pred: Any) -> Callable[[Callable], "CondCallable"]:
        """Add a branch taken when ``pred`` holds and no earlier predicate does."""

        def decorator(fn: Callable) -> CondCallable:
            self.preds.append(pred)
            usage = "@<branch>.else_if(pred) above a def"
            self.branches.append(checked_function(fn, "else_if(pred)", "a branch function", usage))
            return self

        return decorator

    def otherwise(self, fn: Callable) -> "CondCallable":
        """Add the branch taken when no predicate holds."""
        usage = "@<branch>.otherwise above a def"
        self.otherwise_fn = checked_function(fn, "otherwise", "a branch function", usage)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._note_call(functools.partial(self, *args, **kwargs))
        first = self.branches[0]
        preds = [as_predicate(p, "cond", first) for p in self.preds]
        branches = [_bound(fn, args, kwargs) for fn in self.branches]
        otherwise = _bound(self.otherwise_fn, args, kwargs) if self.otherwise_fn else None
        # Inside a program every branch is traced, even for Python predicates (as Catalyst does): a
        # branch that does not fit the others is an error whichever one the predicate picks.
        if tracing_mode("cond", first) == "eager":
            return next((b for p, b in zip(preds, branches) if p), otherwise or _returns_none)()
        bind = functools.partial(_bind, first=first)
        handler = active_control_flow_handler()  # e.g. inside qml.adjoint, applied adjointed
        if handler is None:
            return bind(preds, branches, otherwise)
        return handler.cond(preds, branches, otherwise, bind)


_COND_USAGE = "@cond(x > 0) above the branch's def, then call the branch"


def cond(pred: Any) -> Callable[[Callable], CondCallable]:
    """Decorator making ``fn`` the branch taken when ``pred`` holds.

    Add branches with ``.else_if(pred)`` and a default with ``.otherwise``; without ``otherwise``
    the branches must return nothing.

    >>> from catalyst_lite import qjit, cond
    >>> @qjit
    ... def relu(x: float):
    ...     @cond(x > 0.0)
    ...     def positive():
    ...         return x
    ...     return positive.otherwise(lambda: 0.0)()
    >>> float(relu(3.0)), float(relu(-2.0))
    (3.0, 0.0)
    """
    refuse_under_capture("cond")  # as Catalyst does: captured programs use qml.cond
    refuse_function_as_operand(pred, "cond", "the predicate", _COND_USAGE)
    return functools.partial(CondCallable, pred)


class SwitchCallable(WithOperation):
    """A switch being assembled: ``@switch(i)`` (the default branch), then ``.branch(k)``."""

    operation_kind, operation_type = "switch", Switch

    def __init__(self, index: Any, default: Callable):
        if not callable(default):  # Catalyst's phrase first, then ours
            raise ArgumentValueError(
                "Switch requires a default branch. catalyst_lite: the default branch (the function "
                f"decorated by @switch(i)) must be callable, got {type(default).__name__}."
            )
        self.index, self.default = index, default
        self.cases: dict[int, Callable] = {}
        self.__name__ = function_name(default)
        self.__doc__ = getattr(default, "__doc__", None)

    def branch(self, case: int) -> Callable[[Callable], "SwitchCallable"]:
        """Add the branch taken when the index equals ``case`` (replacing an earlier one for it)."""
        if isinstance(case, (bool, np.bool_)) or not isinstance(case, (int, np.integer)):
            raise ControlFlowError(
                f"switch ({self.__name__}): a case must be a Python int, got {type(case).__name__} {case!r}."
            )

        def decorator(fn: Callable) -> SwitchCallable:
            self.cases[int(case)] = fn
            return self

        return decorator

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._note_call(functools.partial(self, *args, **kwargs))
        index = _checked_index(self.index, self.__name__)
        if not isinstance(index, Tracer):
            return self.cases.get(int(index), self.default)(*args, **kwargs)
        if not self.cases:
            return self.default(*args, **kwargs)
        (first_case, first_fn), *others = self.cases.items()
        branches = cond(index == first_case)(first_fn)
        for case, fn in others:
            branches.else_if(index == case)(fn)
        branches.otherwise(self.default)
        branches.implements_another = True
        return branches(*args, **kwargs)


def _checked_index(index: Any, name: str) -> Any:
    """An integer scalar: a Python or NumPy int, or a traced integer (a boolean counts as 0/1)."""
    if isinstance(index, (bool, np.bool_, int, np.integer)):
        return int(index)
    aval = get_aval(index)
    if aval.shape != () or not (np.issubdtype(aval.dtype, np.integer) or aval.dtype == np.bool_):
        raise ControlFlowError(
            f"switch ({name}) needs an integer scalar index, got {describe_aval(aval)}. Convert "
            "it, e.g. with x.astype(int)."
        )
    return index


def switch(index_var: Any) -> Callable[[Callable], SwitchCallable]:
    """Decorator making ``fn`` the default branch of a switch on the integer ``index_var`` (not
    clamped); add cases with ``.branch(k)`` and call the switch with the branches' operands.

    >>> from catalyst_lite import qjit, switch
    >>> @qjit
    ... def pick(k: int, x: float):
    ...     @switch(index_var=k)
    ...     def apply(y):
    ...         return -y
    ...     @apply.branch(0)
    ...     def _(y):
    ...         return y * 10.0
    ...     return apply(x)
    >>> float(pick(0, 2.0)), float(pick(5, 2.0))
    (20.0, -2.0)
    """
    refuse_under_capture("switch")  # as Catalyst does: captured programs use qml.cond
    refuse_function_as_operand(index_var, "switch", "the index", "@switch(i) above the default branch's def")
    return functools.partial(SwitchCallable, index_var)


def _bound(fn: Callable, args: tuple, kwargs: dict) -> Callable[[], Any]:
    def branch() -> Any:
        return fn(*args, **kwargs)

    branch.__name__ = branch.__qualname__ = function_name(fn)
    return branch


def _returns_none() -> None:
    return None


def _bind(preds: list, branches: list, otherwise: Callable | None, first: Callable) -> Any:
    """The design documents' ``bindNested`` for ``cond``: branches traced without arguments, types joined."""
    trees: dict[int, PyTreeDef] = {}
    has_otherwise, otherwise = otherwise is not None, otherwise or _returns_none

    def flat(k: int, branch: Callable) -> Callable[[], list[Any]]:
        def flat_branch() -> list[Any]:
            with runs_only_if_chosen(preds, k):  # `x[i]` under `if i < len(x)`, for an empty `x`
                leaves, trees[k] = flatten_values(branch())
            return leaves

        return flat_branch

    all_branches = [*branches, otherwise]
    bodies = [Body(flat(k, b), f"cond branch {function_name(b)}", "free") for k, b in enumerate(all_branches)]

    def equation(traced: list[NestedBody], implicit: list, explicit: list) -> Equation:
        _check_same_structure(traced, [trees[k] for k in range(len(traced))], has_otherwise, first)
        return _equation(list(preds), promote_results(traced, "cond branch (promoted results)"))

    spec = NestedSpec(cond_p, equation, threaded=ambient_carries())
    results = bind_nested(spec, bodies, [])
    return tree_unflatten(trees[0], results) if has_otherwise else None


def _check_same_structure(traced: list[NestedBody], trees: list[PyTreeDef], has_otherwise: bool, first: Callable) -> None:
    """Catalyst's conventions: one structure (a tuple is not a list), one rank, and a size that is a
    number in one branch is that number in all (symbolic ones may differ); dtypes are promoted."""
    name = function_name(first)
    if not has_otherwise and trees[0].num_leaves:
        raise ControlFlowError(
            "Control flow requires a consistent return structure across all branches! "
            f"cond ({name}) returns values but has no `otherwise` branch; add one with "
            "@<cond>.otherwise so that the result is defined when no predicate holds."
        )
    for i, (t, tree) in enumerate(zip(traced[1:], trees[1:]), start=1):
        if tree != trees[0]:
            kinds = {str(tree)[10:11], str(trees[0])[10:11]}  # "PyTreeDef((" or "PyTreeDef(["
            hint = " (a tuple and a list differ)" if kinds == {"(", "["} else ""
            raise ControlFlowError(
                "Control flow requires a consistent return structure across all branches! "
                f"cond ({name}): branch {i} returns {tree} but branch 0 returns "
                f"{trees[0]}; every branch must return the same structure{hint}."
            )
        for k, (a, b) in enumerate(zip(traced[0].out_avals, t.out_avals)):
            sizes = list(zip(a.shape, b.shape))
            kinds_differ = any((type(x) is int) != (type(y) is int) for x, y in sizes)
            same_rank = len(a.shape) == len(b.shape)
            if not same_rank or kinds_differ or any(type(x) is int and x != y for x, y in sizes):
                # (Catalyst's words: a size symbolic in one branch only is one more result there)
                what = "number of results" if same_rank and kinds_differ else "array shape per result"
                raise ControlFlowError(
                    f"Control flow requires a consistent {what} across all branches! "
                    f"cond ({name}): result {k} is {describe_aval(a)} in branch 0 but "
                    f"{describe_aval(b)} in branch {i}; branches must return arrays of the same "
                    "rank, and a size that is a number in one branch must be that number in every "
                    "branch (sizes that are symbolic in every branch may differ)."
                )


def _equation(preds: list[Any], traced: list[NestedBody]) -> Equation:
    """The ``cond`` equation: each size that differs between branches is an implicit result of all."""
    operands = [*preds, *(c for t in traced for c in t.consts)]
    offsets = np.cumsum([len(preds)] + [t.nconsts for t in traced]).tolist()
    alternatives = [
        ([v.aval for v in t.jaxpr.outvars], [], {v: offset + j for j, v in enumerate(t.jaxpr.invars)})
        for t, offset in zip(traced, offsets)
    ]
    _, new = join_output_types(alternatives, same_atoms(operands), allow_new_implicit=True)
    jaxprs = []
    for t, dims in zip(traced, new):
        added = [d if isinstance(d, Var) else Literal(int(d), DIM_AVAL) for d in dims]
        jaxprs.append(t.jaxpr.replace(outvars=[*added, *t.jaxpr.outvars]))
    params = _params(jaxprs, [t.nconsts for t in traced], len(new[0]))
    return Equation(operands, params, params["nimplicit_outputs"])


def _params(jaxprs: Sequence[Any], nconsts: Sequence[int], nimplicit: int) -> dict[str, Any]:
    jaxprs = tuple(ClosedJaxpr(j, ()) for j in jaxprs)
    return dict(branch_jaxprs=jaxprs, branch_nconsts=tuple(nconsts), nimplicit_outputs=nimplicit)


def _rebound(preds: list[Any], jaxprs: list[Any], operands: list[list[Any]], nimplicit: int) -> list[Any]:
    """The ``cond`` of other branches, each on its operands."""
    params = _params(jaxprs, [len(ops) for ops in operands], nimplicit)
    return cond_p.bind(*preds, *(x for ops in operands for x in ops), **params)


def _split(invals: list[Any], params: dict[str, Any]):
    """``(preds, [consts of each branch])``."""
    npreds = len(params["branch_jaxprs"]) - 1
    preds, *consts, _ = split_groups(invals, [npreds, *params["branch_nconsts"]])
    return preds, consts


def _feeds(params: dict[str, Any]) -> list[tuple[Any, list[int]]]:
    starts = np.cumsum([len(params["branch_jaxprs"]) - 1, *params["branch_nconsts"]]).tolist()
    return [(cj.jaxpr, list(range(a, b))) for cj, a, b in zip(params["branch_jaxprs"], starts, starts[1:])]


def _output_type(params: dict[str, Any], same_operand: Callable[[int, int], bool]) -> tuple:
    """The branches' output types joined (a size: one number, operand or implicit result)."""
    n = params["nimplicit_outputs"]
    alternatives = [
        ([v.aval for v in jaxpr.outvars[n:]], jaxpr.outvars[:n], dict(zip(jaxpr.invars, feed)))
        for jaxpr, feed in _feeds(params)
    ]
    return join_output_types(alternatives, same_operand)[0]


def _check(atoms: list[Any], params: dict[str, Any]) -> None:
    """Boolean scalar predicates; each branch takes its constants; the output types join."""
    preds, _ = _split(atoms, params)
    if not all(p.aval.shape == () and p.aval.dtype == np.dtype(bool) for p in preds):
        raise JaxprTypeError(f"cond predicates must be bool[], got {[p.aval for p in preds]}")
    nouts = {len(cj.jaxpr.outvars) for cj in params["branch_jaxprs"]}
    if len(nouts) != 1:
        raise JaxprTypeError(f"cond branches return different numbers of results: {sorted(nouts)}")
    for b, (jaxpr, feed) in enumerate(_feeds(params)):
        check_nested(jaxpr, [atoms[k] for k in feed], f"cond branch {b}")


def _jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    """Each branch computes its results' tangents too (zeros where another branch has some)."""
    preds, consts = _split(primals, params)
    _, consts_dot = _split(tangents, params)
    n = params["nimplicit_outputs"]
    jaxprs = [cj.jaxpr for cj in params["branch_jaxprs"]]
    consts_nz = [[type(t) is not Zero for t in dots] for dots in consts_dot]
    out_nz = [is_inexact(v.aval) for v in jaxprs[0].outvars[n:]]
    depends = [forward_dependence(j, nz)[n:] for j, nz in zip(jaxprs, consts_nz)]
    out_nz = [inexact and any(d[k] for d in depends) for k, inexact in enumerate(out_nz)]
    if not any(out_nz):
        outs = cond_p.bind(*primals, **params)
        return outs, [zero_tangent(o) for o in outs]
    traced, operands = [], []
    for jaxpr, c, c_dot, nz in zip(jaxprs, consts, consts_dot, consts_nz):
        traced.append(_jvp_branch(jaxpr, nz, out_nz, n))
        operands.append([*traced[-1].consts, *c, *(t for t, z in zip(c_dot, nz) if z)])
    return jvp_results(_rebound(preds, [t.jaxpr for t in traced], operands, n), n, out_nz)


def _jvp_branch(jaxpr: Any, consts_nz: list[bool], out_nz: list[bool], nimplicit: int) -> NestedBody:
    in_type = input_type_of([*jaxpr.invars, *(v for v, nz in zip(jaxpr.invars, consts_nz) if nz)])
    nconsts = len(jaxpr.invars)

    def jvp_branch(*args: Any) -> list[Any]:
        c, c_dot = args[:nconsts], args[nconsts:]
        zeros = [zero_tangent(x) for x, nz in zip(c, consts_nz) if not nz]
        outs, dots = jvp_call(jaxpr, c, interleave(consts_nz, c_dot, zeros))
        return [*outs, *(instantiate_zeros(d) for d, nz in zip(dots[nimplicit:], out_nz) if nz)]

    return retrace(jvp_branch, in_type, "cond branch (JVP)", nimplicit)


def _batching(axis_data: Any, args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    """Batched predicates: every branch runs on the batch and each example takes its branch's
    results (so the branches must agree on sizes). Otherwise each branch is batched."""
    preds, consts = _split(args, params)
    preds_d, consts_d = _split(dims, params)
    size, n = axis_data.size, params["nimplicit_outputs"]
    jaxprs = [cj.jaxpr for cj in params["branch_jaxprs"]]
    consts_b = [[d is not not_mapped for d in ds] for ds in consts_d]
    consts = [[move_batch_axis(x, d, size, b) for x, d, b in zip(*group)] for group in zip(consts, consts_d, consts_b)]
    if any(d is not not_mapped for d in preds_d):
        return _select_branches(jaxprs, [move_batch_axis(p, d, size, True) for p, d in zip(preds, preds_d)],
                                consts, consts_b, size, n)
    depends = [forward_dependence(j, b) for j, b in zip(jaxprs, consts_b)]
    if any(any(d[:n]) for d in depends):
        raise ControlFlowError("jax.vmap of a cond whose result sizes depend on the batched values")
    out_b = [any(d[k] for d in depends) for k in range(n, len(jaxprs[0].outvars))]
    traced, out_batched = [], [*[False] * n, *out_b]
    for jaxpr, b in zip(jaxprs, consts_b):  # (each traced at once: the lambda's names are this iteration's)
        in_type = with_batch_axis(input_type_of(jaxpr.invars), b, size)
        batched_branch = lambda *args: batch_call(jaxpr, args, b, size, out_batched)  # noqa: E731
        traced.append(retrace(batched_branch, in_type, "cond branch (batched)", n))
    outs = _rebound(preds, [t.jaxpr for t in traced], [[*t.consts, *c] for t, c in zip(traced, consts)], n)
    return outs, [*[not_mapped] * n, *[0 if b else not_mapped for b in out_b]]


def _select_branches(jaxprs, preds, consts, consts_b, size: int, nimplicit: int):
    """One branch running every branch on the batch, each example taking its first true one's results."""
    if nimplicit:
        raise ControlFlowError(
            "jax.vmap of a cond whose predicates differ between examples needs branches that "
            "return arrays of the same sizes."
        )
    binders = [*(Var(ShapedArray((), np.dtype(bool))) for _ in preds), *(v for j in jaxprs for v in j.invars)]
    batched = [*[True] * len(preds), *(b for bs in consts_b for b in bs)]
    in_type = with_batch_axis(input_type_of(binders), batched, size)
    nouts = len(jaxprs[0].outvars)

    def select(*args: Any) -> list[Any]:
        p, *groups = split_groups(args, [len(preds), *(len(j.invars) for j in jaxprs)])
        results = [batch_call(j, c, b, size, [True] * nouts) for j, c, b in zip(jaxprs, groups, consts_b)]
        index = _branch_index(p)
        return [_pick(index, [r[k] for r in results]) for k in range(nouts)]

    traced = retrace(select, in_type, "cond (batched predicates)", 0)
    operands = [*traced.consts, *preds, *(x for c in consts for x in c)]
    return _rebound([], [traced.jaxpr], [operands], 0), [0] * nouts


def _pick(index: Any, values: list[Any]) -> Any:
    """``values[index[e]][e]`` for each example ``e`` (batch axis first)."""
    index = index.reshape(index.shape + (1,) * (values[0].ndim - 1))
    return lax.select_n(jnp.broadcast_to(index, values[0].shape), *values)


def _partial_eval(trace: Any, *tracers: Any, **params: Any) -> list[Any]:
    """With known predicates, the results of known values only are computed now, the ``cond`` staged."""
    known = [t.pval.is_known() for t in tracers]
    values = [t.pval.get_known() for t in tracers]
    preds_k, consts_k = _split(known, params)
    n = params["nimplicit_outputs"]
    jaxprs = [cj.jaxpr for cj in params["branch_jaxprs"]]
    depends = [forward_dependence(j, [not k for k in ks]) for j, ks in zip(jaxprs, consts_k)]
    out_uk = [any(d[k] for d in depends) for k in range(len(jaxprs[0].outvars))]
    if not all(preds_k) or any(out_uk[:n]) or all(out_uk[n:]):
        return unknown_results(trace, cond_p, tracers, params, result_avals(_output_type, params, tracers, _feeds))
    preds_v, consts_v = _split(values, params)
    used = [not u for u in out_uk]
    pruned = [prune_jaxpr(j, used, [False] * len(j.invars)) for j in jaxprs]
    known_consts = [[c for c, t in zip(cs, taken) if t] for cs, (_, taken) in zip(consts_v, pruned)]
    known_params = _params([j for j, _ in pruned], [len(c) for c in known_consts], n)
    outs_known = bind_known(trace, cond_p, [*preds_v, *(c for cs in known_consts for c in cs)], known_params)
    implicit_out = outs_known[:n]
    avals = result_avals(_output_type, params, tracers, _feeds, implicit_out)
    outs_unknown = unknown_results(trace, cond_p, tracers, params, avals)
    unknown = [o for o, u in zip(outs_unknown[n:], out_uk[n:]) if u]
    return [*implicit_out, *interleave(used[n:], outs_known[n:], unknown)]


def _branch_index(preds: Sequence[Any]) -> Any:
    """Index of the first predicate that holds, else the last branch (``otherwise``)."""
    index = jnp.int32(len(preds))
    for i in reversed(range(len(preds))):
        index = jnp.where(preds[i], jnp.int32(i), index)
    return index


def _static_implicit_dims(jaxpr: Any, consts: Sequence[Any], nimplicit: int) -> list[int] | None:
    """The implicit result sizes of a branch if they are known before it runs."""
    known = {v: c for v, c in zip(jaxpr.invars, consts) if not isinstance(c, Tracer)}
    dims = [v.val if isinstance(v, Literal) else known.get(v) for v in jaxpr.outvars[:nimplicit]]
    return None if any(d is None for d in dims) else [int(d) for d in dims]


def _staged(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Inside one XLA program: ``lax.switch``; branches must agree on sizes."""
    preds, consts = _split(invals, params)
    nimpl = params["nimplicit_outputs"]
    jaxprs = [cj.jaxpr for cj in params["branch_jaxprs"]]
    dims = [_static_implicit_dims(j, c, nimpl) for j, c in zip(jaxprs, consts)]
    if any(d is None or d != dims[0] for d in dims):  # (no implicit results: all are [])
        raise NeedsHost("cond branches return different sizes")
    implicit = dims[0]

    def as_branch(jaxpr, c):
        return lambda: eval_jaxpr(jaxpr, list(c), Mode.STAGED)[nimpl:]

    branches = [as_branch(j, c) for j, c in zip(jaxprs, consts)]
    if all(not isinstance(p, Tracer) for p in preds):
        return [*implicit, *branches[_first_true(preds)]()]
    try:
        return [*implicit, *lax.switch(_branch_index(preds), branches)]
    except (UnsupportedOperationError, SizeAssumptionError) as err:
        # A branch may hold only when it is taken (`x[i]` under `if i < len(x)`, for an empty `x`):
        # the host knows the predicates, and runs the branch taken (reporting this error if it is).
        raise NeedsHost("a cond branch that cannot run at these sizes, taken or not at run time") from err


def _first_true(preds: Sequence[Any]) -> int:
    return next((i for i, p in enumerate(preds) if bool(p)), len(preds))


def _host(invals: list[Any], params: dict[str, Any]) -> list[Any]:
    """Driven from Python: run the chosen branch, compiled for its sizes."""
    preds, consts = _split(invals, params)
    index = _first_true(preds)
    outs = runner_for(params["branch_jaxprs"][index].jaxpr, f"cond branch {index}")(*consts[index])
    nimpl = params["nimplicit_outputs"]
    return [*(int(d) for d in outs[:nimpl]), *outs[nimpl:]]


def _masked(eqn: Any, invals: list[Any], env: dict, checks: Checks) -> list[Any]:
    """In a loop on capacity buffers (``compiler/capacity.py``), a ``cond`` of no new sizes: every branch
    runs and the taken one's results are selected (its size checks count only when taken)."""
    params = eqn.params
    branches = params["branch_jaxprs"]
    if params["nimplicit_outputs"] or any(b.jaxpr.effects for b in branches):
        raise Unmaskable("a cond with results of new sizes, or side effects, on resizable arrays")
    preds, consts = _split(invals, params)
    index = _branch_index([jnp.asarray(p).astype(bool) for p in preds])
    shapes = [buffer_shape(v.aval, env, checks) for v in eqn.outvars]
    results = None
    for k, (branch, branch_consts) in enumerate(zip(branches, consts)):
        sub = Checks(checks.capacity, checks.caps)
        outs = masked_eval(branch.jaxpr, [*branch.consts, *branch_consts], sub)
        taken = index == k
        for mine, theirs in ((checks.fits, sub.fits), (checks.valid, sub.valid),
                             (checks.fits_learned, sub.fits_learned)):
            mine.extend(f | jnp.logical_not(taken) for f in theirs)
        checks.seen.update((v, jnp.where(taken, x, 0)) for v, x in sub.seen.items())
        outs = [conformed(x, shape) for x, shape in zip(outs, shapes)]
        results = outs if results is None else [jnp.where(taken, x, r) for x, r in zip(outs, results)]
    return results


def _lower(ctx: Any, *operands: Any, **params: Any) -> list[Any]:
    """StableHLO (in ``.mlir``): one ``stablehlo.case`` on the first true predicate, branches inlined."""
    preds, consts = _split(list(operands), params)
    branches = zip(params["branch_jaxprs"], consts)
    regions = [functools.partial(lowering.lower_nested_jaxpr, ctx, j, c) for j, c in branches]
    return lowering.case_op(lowering.first_true_index(preds), lowering.ir_types(ctx.avals_out), regions)


register_nested_primitive(cond_p, PrimitiveSpec(
    output_type=_output_type, feeds=_feeds, check=_check, jvp=_jvp, batching=_batching, partial_eval=_partial_eval,
    staged=_staged, host=_host, dimension_operands=lambda params: fed_dimension_operands(_feeds(params)),
    masked=_masked, lowering=_lower,
))
