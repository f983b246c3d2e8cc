"""``x[i] = v`` and ``x[i] += v`` in converted code: the variable gets a new value, ``x.at[i].set(v)``.

The conversion rewrites an item assignment to a variable of the function (or an attribute) as an
assignment of the variable, ``x = ag__.set_item(x, i, v)`` (nested for ``x[i][j] = v``), so it
flows through loops and branches like any other. :func:`set_item` updates an array with
``.at[...].set`` and anything else in place, as Python does (a list or dict given a traced value is
copied first: compiled blocks run once while tracing). ``x[i] += v`` is NumPy's
``x[i] = x[i] + v``, for repeated indices too. ``g[i] = v`` on a global keeps mutating the global.

>>> import jax.numpy as jnp
>>> set_item(jnp.zeros(3), 1, 5.0).tolist()
[0.0, 5.0, 0.0]
>>> update_item([1, 2], 0, 10, "add")
[11, 2]
"""

from __future__ import annotations

import ast
import copy
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from malt.core import converter
from malt.pyct import anno, ast_util, origin_info

from ..jax_extras import Tracer

__all__ = ["ItemAssignmentTransformer", "transform", "has_item_assignment", "set_item", "update_item"]

_IN_PLACE = {
    "add": operator.iadd, "sub": operator.isub, "mul": operator.imul, "matmul": operator.imatmul,
    "truediv": operator.itruediv, "floordiv": operator.ifloordiv, "mod": operator.imod,
    "pow": operator.ipow, "lshift": operator.ilshift, "rshift": operator.irshift,
    "or": operator.ior, "xor": operator.ixor, "and": operator.iand,
}
_OPERATOR_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.MatMult: "matmul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
    ast.RShift: "rshift", ast.BitOr: "or", ast.BitXor: "xor", ast.BitAnd: "and",
}


# --- at run time ---------------------------------------------------------------------------------


def set_item(target: Any, key: Any, value: Any) -> Any:
    """``target[key] = value``, returning the updated ``target`` (a new array for JAX arrays)."""
    if isinstance(target, (Tracer, jax.Array)):
        return target.at[key].set(value)
    if any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves((value, key))):
        if isinstance(target, np.ndarray):
            return jnp.asarray(target).at[key].set(value)
        if isinstance(target, (list, dict)):
            # A traced value belongs to a branch or an iteration being traced: a copy, assigned
            # to the variable, flows out of the compiled block (the original is its start value).
            target = copy.copy(target)
    target[key] = value
    return target


def update_item(target: Any, key: Any, value: Any, op: str) -> Any:
    """``target[key] op= value``, returning the updated ``target``. ``/=`` on an integer array
    gives a float array, as JAX's ``x.at[key].divide(value)`` does (Catalyst's meaning of it)."""
    new = _IN_PLACE[op](target[key], value)
    if op == "truediv" and isinstance(target, (Tracer, jax.Array)):
        target = target.astype(jnp.result_type(target, new))
    return set_item(target, key, new)


# --- the source transformation -------------------------------------------------------------------


def has_item_assignment(node: ast.AST) -> bool:
    """Whether a function's AST assigns to an item (``x[i] = v``, ``x[i] += v``)."""
    return any(
        isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) for n in ast.walk(node)
    )


class ItemAssignmentTransformer(converter.Base):
    """Rewrites item assignments as assignments of the variable that holds the item."""

    def __init__(self, ctx: Any):
        super().__init__(ctx)
        self._locals: list[set[str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self._locals.append(_local_names(node))
        try:
            return self.generic_visit(node)
        finally:
            self._locals.pop()

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # a lambda cannot contain an assignment statement

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        node = self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            return self._assignment(node.targets[0], node.value, node) or node
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.target, ast.Subscript):
            base, key = node.target.value, _as_value(node.target.slice)
            op = ast.Constant(_OPERATOR_NAMES[type(node.op)])
            updated = _call("update_item", _load(base), key, node.value, op)
            return self._store(base, updated, node) or node
        return node

    def _assignment(self, target: ast.Subscript, value: ast.expr, original: ast.stmt) -> ast.stmt | None:
        updated = _call("set_item", _load(target.value), _as_value(target.slice), value)
        return self._store(target.value, updated, original)

    def _store(self, base: ast.expr, value: ast.expr, original: ast.stmt) -> ast.stmt | None:
        """``base = value``, recursively for a subscripted base; ``None`` when ``base`` is not a
        variable of this function or an attribute (then Python's item assignment stays)."""
        if isinstance(base, ast.Subscript):
            return self._assignment(base, value, original)
        if isinstance(base, ast.Name) and self._locals and base.id not in self._locals[-1]:
            return None
        if not isinstance(base, (ast.Name, ast.Attribute)):
            return None
        target = ast_util.copy_clean(base, preserve_annos={anno.Basic.ORIGIN})
        target.ctx = ast.Store()
        statement = ast.Assign(targets=[target], value=value)
        origin_info.copy_origin(original, statement)
        return statement


def _local_names(node: ast.FunctionDef) -> set[str]:
    """Names local to a function (parameters, assigned names, ``global``/``nonlocal`` ones):
    those an item assignment may assign."""
    args = node.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    stack = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
        stack.extend(ast.iter_child_nodes(n))
    return names


def _load(node: ast.expr) -> ast.expr:
    copy = ast_util.copy_clean(node, preserve_annos={anno.Basic.ORIGIN})
    for n in ast.walk(copy):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return copy


def _as_value(key: ast.expr) -> ast.expr:
    """An index as an expression: ``a:b`` is only syntax inside ``[]``, so it becomes ``slice(a, b)``."""
    if isinstance(key, ast.Slice):
        parts = [part or ast.Constant(None) for part in (key.lower, key.upper, key.step)]
        return ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])
    if isinstance(key, ast.Tuple):
        return ast.Tuple(elts=[_as_value(e) for e in key.elts], ctx=ast.Load())
    return key


def _call(name: str, *args: ast.expr) -> ast.Call:
    func = ast.Attribute(value=ast.Name("ag__", ast.Load()), attr=name, ctx=ast.Load())
    return ast.Call(func=func, args=list(args), keywords=[])


def transform(node: ast.AST, ctx: Any) -> ast.AST:
    """The pass, in malt's converter signature."""
    return ItemAssignmentTransformer(ctx).visit(node)
