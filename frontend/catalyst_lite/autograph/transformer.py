"""Converting one function: diastatic-malt's source transformation, compiled at the user's lines.

malt (the maintained fork of TensorFlow's AutoGraph) rewrites control flow into calls of operators
whose meaning is ours (:mod:`.conditionals`, :mod:`.loops`...). Unlike malt, every node of the
result keeps the user's file and line (tracebacks and our errors name it; no file is written), and
only the passes a function needs run. Conversions are cached per code object.
"""

from __future__ import annotations

import __future__
import ast
import copy
import functools
import linecache
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from malt.converters import (
    break_statements, call_trees, conditional_expressions, continue_statements, control_flow, functions,
    logical_expressions, return_statements,
)
from malt.core import converter, unsupported_features_checker
from malt.pyct import anno, ast_util, cfg, errors, origin_info, parser, qual_names, transpiler
from malt.pyct.static_analysis import activity, liveness, reaching_definitions, reaching_fndefs

from ..errors import AutoGraphError

_FACTORY = "__catalyst_lite_autograph_factory"
_INNER = "__catalyst_lite_autograph_inner"


@dataclass
class ConvertedCode:
    """A function's converted code: ``factory`` takes the operators' namespace ``ag__`` and returns the
    converted function, closing over the original's free variables (``None``: the original serves)."""

    factory: types.CodeType | None
    tree: ast.AST  # the converted function, for autograph_source
    name: str  # of the converted function inside the factory
    always_returns: dict[str, bool]  # per function scope: every path ends in `return`


class ConversionFailed(AutoGraphError):
    """malt cannot convert a function (no source code, a construct it does not support)."""


class UnsupportedConstructError(ConversionFailed, NotImplementedError):
    """A construct autograph does not convert (``self.__name``, a generator): a ``NotImplementedError``
    too, as Catalyst raises it."""


class _Transpiler(transpiler.GenericTranspiler):
    """malt's driver with the passes a function needs (not malt's ``variables`` pass, which wraps
    every read in ``ag__.ld``: our ``ag__.Undefined`` raises on any use)."""

    def get_transformed_name(self, node: ast.AST) -> str:
        return "ag__" + super().get_transformed_name(node)

    def transform_ast(self, node: ast.AST, ctx: Any) -> tuple[ast.AST, dict[str, bool], bool]:
        if any(isinstance(n, ast.Match) for n in ast.walk(node)):
            node = _MatchAsIf().visit(node)
        if any(isinstance(n, ast.NamedExpr) for n in ast.walk(node)):
            node = _NamedExpressions().visit(node)
        if any(isinstance(n, (ast.For, ast.While)) and n.orelse for n in ast.walk(node)):
            node = _loops_without_else(node)
        unsupported_features_checker.verify(node)
        kinds = _node_kinds(node)
        early_return = ast.Return in kinds and _returns_inside_blocks(node)
        early_exits = bool(kinds & {ast.Break, ast.Continue}) or early_return
        passes = [
            (ast.Break in kinds, break_statements.transform),
            # (the break pass leaves `continue` statements)
            (bool(kinds & {ast.Break, ast.Continue}), continue_statements.transform),
            (early_return, return_statements.transform),
            (ast.Store in kinds, lambda node, ctx: _ItemAssignments(ctx).visit(node)),
            (ast.Assert in kinds, lambda node, ctx: _AssertCalls().visit(node)),
            (ast.Raise in kinds, lambda node, ctx: _RaisedErrors().visit(node)),
            (ast.Call in kinds, call_trees.transform),
            (early_exits or bool(kinds & {ast.If, ast.For, ast.While}), _control_flow),
            (ast.IfExp in kinds, lambda node, ctx: _ConditionalExpressions(ctx).visit(node)),
            (early_exits or bool(kinds & {ast.BoolOp, ast.Not}), logical_expressions.transform),
            # (after the logical pass, which splits chained comparisons such as `0 < i in x`)
            (bool(kinds & {ast.In, ast.NotIn}), lambda node, ctx: _Membership().visit(node)),
        ]
        if not any(needed for needed, _ in passes) and not kinds & {ast.ExceptHandler, ast.With}:
            return node, {}, False
        # (before malt's analyses, which cannot read `except T as e`: see _ExceptHandlers)
        node = _ExceptHandlers().visit(node)
        if _LAMBDA_DECORATOR in kinds:
            node = _hoist_lambda_decorators(node)
        node = functions.transform(node, ctx)
        always_returns = {
            anno.getanno(f, "function_context_name"): _always_returns(f.body)
            for f in ast.walk(node)
            if isinstance(f, ast.FunctionDef) and anno.hasanno(f, "function_context_name")
        }
        for needed, transform in passes:
            if needed:
                node = transform(node, ctx)
        return _ExceptHandlers.restore_names(node), always_returns, True


class _ControlFlow(control_flow.ControlFlowTransformer):
    """malt's control-flow pass; a ``for`` also says which variables are read after it (``live_after``,
    see :func:`.loops.for_stmt`) but those a function defined in the body reads (never refused then)."""

    def _create_loop_options(self, node: ast.AST) -> ast.Dict:
        options = super()._create_loop_options(node)
        if isinstance(node, ast.For):
            function_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            closures = [f for f in ast.walk(node) if isinstance(f, function_types)]
            closure_reads = {n.id for f in closures for n in ast.walk(f) if isinstance(n, ast.Name)}
            live = sorted(
                str(s) for s in anno.getanno(node, anno.Static.LIVE_VARS_OUT)
                if not s.is_composite() and str(s) not in closure_reads
            )
            options.keys.append(ast.Constant("live_after"))
            options.values.append(ast.Constant(" ".join(live)))
        return options


class _ConditionalExpressions(conditional_expressions.ConditionalExpressionTransformer):
    """malt's pass, which leaves the conditional expressions inside one as they are: nested ones
    (``a if c else (b if d else e)``) are converted too."""

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        return super().visit_IfExp(self.generic_visit(node))


def _control_flow(node: ast.AST, ctx: Any) -> ast.AST:
    """malt's ``control_flow.transform`` (the analyses it needs, then the pass) with our pass."""
    graphs = cfg.build(node)
    node = activity.resolve(qual_names.resolve(node), ctx, None)
    for analysis in (reaching_definitions, reaching_fndefs, liveness):
        node = analysis.resolve(node, ctx, graphs)
    return _ControlFlow(ctx).visit(node)


_LAMBDA_DECORATOR = "a decorator holding a lambda"


def _node_kinds(node: ast.AST) -> set[Any]:
    """The node types of a function's tree (one walk), with ``ast.Not`` for ``not``, ``ast.BoolOp``
    for a chained comparison, ``ast.Store`` for an item assignment and :data:`_LAMBDA_DECORATOR`."""
    kinds: set[Any] = set()
    for n in ast.walk(node):
        kinds.add(type(n))
        if n is not node and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if _has_lambda_decorator(n):
                kinds.add(_LAMBDA_DECORATOR)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            kinds.add(ast.Not)
        elif isinstance(n, ast.Compare) and len(n.ops) > 1:
            kinds.add(ast.BoolOp)
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            kinds.add(ast.Store)
    return kinds


def _has_lambda_decorator(n: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    return any(isinstance(x, ast.Lambda) for d in n.decorator_list for x in ast.walk(d))


def _hoist_lambda_decorators(node: ast.AST) -> ast.AST:
    """``@while_loop(lambda i: i < n)``: malt's analyses (and Catalyst's conversion) fail on a lambda
    in a decorator, so such decorators are evaluated into variables just before the ``def``."""
    count = 0

    class Hoist(ast.NodeTransformer):
        def visit_FunctionDef(self, n: ast.FunctionDef) -> Any:
            nonlocal count
            self.generic_visit(n)
            if n is node or not _has_lambda_decorator(n):
                return n
            hoisted = []
            for k, decorator in enumerate(n.decorator_list):
                name = f"decorator__ag_{count}"
                count += 1
                assign = ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None))
                hoisted.append(_located(assign, decorator))
                assign.value = decorator
                n.decorator_list[k] = ast.Name(name, ast.Load())
            return [*hoisted, n]

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_ClassDef = visit_FunctionDef

    return Hoist().visit(node)


def _loops_without_else(node: ast.AST) -> ast.AST:
    """Loops with an ``else`` block (malt does not convert them) as ``if not flag: <else block>``
    after the loop, ``flag`` set before each ``break`` of that loop, as Python defines them."""
    count = 0

    class FlagBreaks(ast.NodeTransformer):
        """Sets ``flag`` before the breaks of one loop (not those of loops or functions nested in it)."""

        def __init__(self, flag: str):
            self.flag, self.found = flag, False

        def visit_Break(self, n: ast.Break) -> Any:
            self.found = True
            return [_located(ast.Assign([ast.Name(self.flag, ast.Store())], ast.Constant(True)), n), n]

        def skip(self, n: ast.AST) -> ast.AST:
            return n

        visit_For = visit_While = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = skip
        visit_Lambda = skip

    class Rewrite(ast.NodeTransformer):
        def visit_loop(self, n: ast.For | ast.While) -> Any:
            nonlocal count
            self.generic_visit(n)  # (inner loops first: their else blocks join this loop's body)
            if not n.orelse:
                return n
            orelse, n.orelse = n.orelse, []
            breaker = FlagBreaks(f"loop_broke__ag_{count}")
            body = breaker.generic_visit(ast.Module(list(n.body), [])).body  # (lists returned: spliced)
            if not breaker.found:
                return [n, *orelse]
            flag, n.body = breaker.flag, body
            count += 1
            start = _located(ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(False)), n)
            after = _located(ast.If(ast.UnaryOp(ast.Not(), ast.Name(flag, ast.Load())), [], []), orelse[0])
            after.body = orelse
            return [start, n, after]

        visit_For = visit_While = visit_loop

    return ast.fix_missing_locations(Rewrite().visit(node))


class _MatchAsIf(ast.NodeTransformer):
    """A ``match`` whose cases compare values (``case 1:``, ``case "a" | "b":``, ``case None:``, ``case
    _:``, a last ``case name:``, with guards) as the ``if``/``elif`` chain it means, so that a traced
    subject becomes a ``cond``; other patterns (sequences, classes, mappings) stay Python's."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Match(self, node: ast.Match) -> Any:
        self.generic_visit(node)
        cases = node.cases
        if not all(_value_pattern(c.pattern) or _capture(c.pattern) for c in cases) or any(
            _capture(c.pattern) and (c is not cases[-1] or c.guard is not None) for c in cases
        ):
            return node
        subject = f"match_subject__ag_{self.count}"
        self.count += 1
        chain: list[ast.stmt] = []
        for case in reversed(cases):
            if _capture(case.pattern):  # (the last case: no guard)
                target, value = ast.Name(case.pattern.name, ast.Store()), ast.Name(subject, ast.Load())
                chain = [_located(ast.Assign([target], value), case.pattern), *case.body]
                continue
            test = _pattern_test(case.pattern, subject)
            if case.guard is not None:
                test = _located(ast.BoolOp(ast.And(), [ast.Constant(None), ast.Constant(None)]), case.pattern)
                test.values = [_pattern_test(case.pattern, subject), case.guard]
            branch = _located(ast.If(ast.Constant(None), [], []), case.pattern)
            branch.test, branch.body, branch.orelse = test, case.body, chain
            chain = [branch]
        start = _located(ast.Assign([ast.Name(subject, ast.Store())], ast.Constant(None)), node)
        start.value = node.subject
        return [start, *chain]


def _value_pattern(p: ast.pattern) -> bool:
    if isinstance(p, ast.MatchOr):
        return all(_value_pattern(q) for q in p.patterns)
    return isinstance(p, (ast.MatchValue, ast.MatchSingleton)) or (
        isinstance(p, ast.MatchAs) and p.pattern is None and p.name is None
    )


def _capture(p: ast.pattern) -> bool:
    return isinstance(p, ast.MatchAs) and p.pattern is None and p.name is not None


def _pattern_test(p: ast.pattern, subject: str) -> ast.expr:
    """Whether ``subject`` matches the value pattern ``p``: ``==`` a value, ``is`` a singleton."""
    if isinstance(p, ast.MatchOr):
        test = _located(ast.BoolOp(ast.Or(), []), p)
        test.values = [_pattern_test(q, subject) for q in p.patterns]
        return test
    if isinstance(p, ast.MatchAs):  # `_`
        return _located(ast.Constant(True), p)
    singleton = isinstance(p, ast.MatchSingleton)
    test = _located(ast.Compare(ast.Name(subject, ast.Load()), [ast.Is() if singleton else ast.Eq()], []), p)
    test.comparators = [_located(ast.Constant(p.value), p) if singleton else p.value]
    return test


class _NamedExpressions(ast.NodeTransformer):
    """Assignment expressions (``:=``), which malt's analyses do not see (and which its lambdas and
    loop tests would bind locally), as assignment statements: ``if (y := f(x)) > 1:`` assigns
    ``y = f(x)`` just before the ``if``; ``while (n := n - 1) > 0: body else: block`` becomes
    ``while True: n = n - 1; if not n > 0: block; break; body``. One evaluated only sometimes
    (right of ``and``/``or``, in a branch of a conditional expression) cannot convert."""

    def visit(self, node: ast.AST) -> Any:
        if not isinstance(node, ast.stmt):
            return super().visit(node)
        node = self.generic_visit(node)  # (the statements inside it first)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node
        hoist = _HoistedAssignments()
        if isinstance(node, ast.While):
            test = hoist.visit(node.test)
            if not hoist.assignments:
                return node
            if any(isinstance(n, (ast.Break, ast.Continue)) for s in node.orelse for n in ast.walk(s)):
                raise errors.UnsupportedLanguageElementError(
                    f"a `while` loop{_line(node)} whose condition assigns with `:=` and whose `else` "
                    "block has a `break` or `continue`"
                )
            check = _located(ast.If(ast.UnaryOp(ast.Not(), ast.Constant(None)), [], []), node)
            check.test.operand, check.body = test, [*node.orelse, _located(ast.Break(), node)]
            loop = _located(ast.While(ast.Constant(True), [], []), node)
            loop.body = [*hoist.assignments, check, *node.body]
            return loop
        for field, value in ast.iter_fields(node):
            if field not in ("body", "orelse", "finalbody", "handlers", "cases"):
                setattr(node, field, hoist.visit(value) if isinstance(value, ast.AST) else
                        [hoist.visit(v) if isinstance(v, ast.AST) else v for v in value]
                        if isinstance(value, list) else value)
        return [*hoist.assignments, node]


class _HoistedAssignments(ast.NodeTransformer):
    """The assignment expressions of a statement's own expressions, as statements (in evaluation
    order), each replaced by its variable."""

    def __init__(self) -> None:
        self.assignments: list[ast.stmt] = []
        self.conditional = 0

    def visit_NamedExpr(self, node: ast.NamedExpr) -> ast.expr:
        self.generic_visit(node)
        if self.conditional:
            raise errors.UnsupportedLanguageElementError(
                f"the assignment expression `{ast.unparse(node)}`{_line(node)} is evaluated only "
                f"sometimes (right of `and`/`or` or in a branch of a conditional expression): assign "
                f"{node.target.id!r} in a statement before"
            )
        assign = _located(ast.Assign([ast.Name(node.target.id, ast.Store())], ast.Constant(None)), node)
        assign.value = node.value
        self.assignments.append(assign)
        return _located(ast.Name(node.target.id, ast.Load()), node)

    def sometimes(self, nodes: list[ast.expr]) -> list[ast.expr]:
        self.conditional += 1
        try:
            return [self.visit(n) for n in nodes]
        finally:
            self.conditional -= 1

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        node.values = [self.visit(node.values[0]), *self.sometimes(node.values[1:])]
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        node.test = self.visit(node.test)
        node.body, node.orelse = self.sometimes([node.body, node.orelse])
        return node

    def skip(self, node: ast.AST) -> ast.AST:
        return node  # (a scope of its own, or an expression evaluated per item)

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = skip


def _line(node: ast.AST) -> str:
    origin = anno.getanno(node, anno.Basic.ORIGIN, default=None)
    return f" at {origin.loc.filename}:{origin.loc.lineno}" if origin is not None else ""


def _located(new: ast.AST, like: ast.AST) -> ast.AST:
    """A generated tree ``new`` at ``like``'s position and origin in the user's code."""
    origin = anno.getanno(like, anno.Basic.ORIGIN, default=None)
    for n in ast.walk(new):
        ast.copy_location(n, like)
        if origin is not None:
            anno.setanno(n, anno.Basic.ORIGIN, origin)
    return new


class _AssertCalls(ast.NodeTransformer):
    """``assert test, msg`` -> ``ag__.assert_stmt(test, lambda: msg)``, so that a traced ``test``
    is checked when the program runs. (malt's own pass accepts constant messages only.)"""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        statement = _located(ast.parse("ag__.assert_stmt(None, lambda: None)").body[0], node)
        statement.value.args[0] = node.test
        if node.msg is not None:
            statement.value.args[1].body = node.msg
        return statement


class _RaisedErrors(ast.NodeTransformer):
    """``raise error`` -> ``raise ag__.raised(error)``: raised while the branches of a traced ``if``
    are traced, the error is explained (:func:`.loops.raised`)."""

    def visit_Raise(self, node: ast.Raise) -> ast.Raise:
        self.generic_visit(node)
        if node.exc is not None:
            node.exc = _call("raised", node.exc)
        return node


class _ExceptHandlers(ast.NodeTransformer):
    """``except T as e: body`` -> ``except T: ag__.except_handler(T, "e"); body``, ``with cm:`` ->
    ``with ag__.with_context(cm):``: errors a traced value raises where Python's value gives none are
    neither caught by a broader handler nor suppressed. The name returns after malt's passes
    (:meth:`restore_names`): malt's analysis expects a node there, Python's ``ast`` has a string."""

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.ExceptHandler:
        self.generic_visit(node)
        check = _located(ast.parse("ag__.except_handler(None, None)").body[0], node)
        if node.type is not None:
            check.value.args[0] = copy.deepcopy(node.type)
        check.value.args[1].value, node.name = node.name, None
        node.body.insert(0, check)
        return node

    def visit_With(self, node: ast.With) -> ast.With:
        self.generic_visit(node)
        for item in node.items:
            wrapped = _located(ast.parse("ag__.with_context(None)", mode="eval").body, item.context_expr)
            wrapped.args[0] = item.context_expr
            item.context_expr = wrapped
        return node

    @staticmethod
    def restore_names(tree: ast.AST) -> ast.AST:
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.body and isinstance(node.body[0], ast.Expr):
                call = node.body[0].value
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "ag__.except_handler":
                    node.name = call.args[1].value
        return tree


_OPERATOR_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.MatMult: "matmul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
    ast.RShift: "rshift", ast.BitOr: "or", ast.BitXor: "xor", ast.BitAnd: "and",
}


class _ItemAssignments(converter.Base):
    """``x[i] = v`` -> ``x = ag__.set_item(x, i, v)`` (``x[i] += v``: ``ag__.update_item``) when ``x`` is
    a local variable or an attribute, so that it flows through loops and branches; a global's stays."""

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
            return self._store(node.targets[0], node.value, node) or node
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.target, ast.Subscript):
            base, key = node.target.value, _as_value(node.target.slice)
            op = ast.Constant(_OPERATOR_NAMES[type(node.op)])
            updated = _call("update_item", _load(base), key, node.value, op)
            return self._store(base, updated, node) or node
        return node

    def _store(self, base: ast.expr, value: ast.expr, original: ast.stmt) -> ast.stmt | None:
        """``base = value``; for ``x[i] = value``, ``x = ag__.set_item(x, i, value)`` (recursively);
        ``None`` when the variable is not this function's nor an attribute (Python's assignment stays)."""
        if isinstance(base, ast.Subscript):
            value = _call("set_item", _load(base.value), _as_value(base.slice), value)
            return self._store(base.value, value, original)
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
    """Names local to a function (parameters, assigned names, ``global``/``nonlocal`` ones)."""
    args = node.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    stack = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)  # (and not the names local to it)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
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
    return ast.Call(func=ast.parse(f"ag__.{name}", mode="eval").body, args=list(args), keywords=[])


class _Membership(ast.NodeTransformer):
    """``a in b`` -> ``ag__.contains(b, a)`` (``not in``: ``ag__.not_`` of it): Python's ``in`` asks
    each comparison for its truth, which a traced value cannot give."""

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return node
        test = _call("contains", node.comparators[0], node.left)
        return _call("not_", test) if isinstance(node.ops[0], ast.NotIn) else test


_BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.Match)


def _returns_inside_blocks(node: ast.AST) -> bool:
    """A ``return`` nested in a compound statement (malt then rewrites returns into a flag)."""

    def visit(n: ast.AST, nested: bool) -> bool:
        if isinstance(n, ast.Return):
            return nested
        if isinstance(n, (ast.FunctionDef, ast.Lambda)):
            nested = False
        elif isinstance(n, _BLOCKS):
            nested = True
        return any(visit(child, nested) for child in ast.iter_child_nodes(n))

    return visit(node, False)


def _always_returns(body: list[ast.stmt]) -> bool:
    """Whether every path through ``body`` ends in ``return`` or ``raise`` (Python semantics)."""
    return any(_terminates(statement) for statement in body)


def _terminates(s: ast.stmt) -> bool:
    if isinstance(s, (ast.Return, ast.Raise)):
        return True
    if isinstance(s, ast.If):
        return _always_returns(s.body) and _always_returns(s.orelse)
    if isinstance(s, ast.With):
        return _always_returns(s.body)
    if isinstance(s, ast.While):  # `while True:` ends only by a `return` or a `break` of its own
        return isinstance(s.test, ast.Constant) and bool(s.test.value) and not _breaks(s.body)
    if isinstance(s, ast.Try):
        handled = all(_always_returns(h.body) for h in s.handlers)
        return _always_returns(s.finalbody) or (
            (_always_returns(s.body) or _always_returns(s.orelse)) and handled
        )
    return False


def _breaks(body: list[ast.stmt]) -> bool:
    """Whether a loop's ``body`` has a ``break`` of that loop (not of a loop or function inside it)."""
    stack: list[ast.AST] = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Break):
            return True
        if not isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))
        elif isinstance(n, (ast.For, ast.While)):
            stack.extend(n.orelse)  # (a loop's `else` block belongs to the enclosing loop)
    return False


def _place_at_user_lines(tree: ast.AST, filename: str, default_line: int) -> None:
    """Every node at the user's code it came from; a node malt generated at its parent's, a generated
    statement at the next one of its block (``def if_body(): ...`` at the ``if`` it implements)."""

    @functools.cache
    def width(line: int) -> int:
        return len(linecache.getline(filename, line).rstrip("\n").encode())

    def position(node: ast.AST, inherited: tuple[int, int]) -> tuple[int, int]:
        origin = anno.getanno(node, anno.Basic.ORIGIN, default=None)
        return (origin.loc.lineno, origin.loc.col_offset) if origin is not None else inherited

    stack: list[tuple[ast.AST, tuple[int, int]]] = [(tree, (default_line, 0))]
    while stack:
        node, inherited = stack.pop()
        line, col = here = position(node, inherited)
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line
            node.col_offset = col
            node.end_col_offset = max(col, width(line))
        for name, value in ast.iter_fields(node):
            if isinstance(value, tuple):  # malt builds some node lists as tuples; compile() wants lists
                value = list(value)
                setattr(node, name, value)
            if isinstance(value, ast.AST):
                stack.append((value, here))
            elif isinstance(value, list):
                following = here
                for child in reversed(value):
                    if isinstance(child, ast.AST):
                        if isinstance(child, ast.stmt):
                            following = position(child, following)
                            stack.append((child, following))
                        else:
                            stack.append((child, here))


def _compile(fn: Callable, tree: ast.AST, name: str, future_features: tuple[str, ...]) -> types.CodeType:
    """The code of ``def factory(): <free variables> = None; def inner(ag__): <tree>; return name;
    return inner``, the free variables declared so that ``inner`` closes over the original's cells."""
    code = fn.__code__
    if isinstance(tree, ast.Lambda):
        function = ast.Assign(targets=[ast.Name(name, ast.Store())], value=tree)
    else:
        function, tree.name = tree, name
    declarations = "".join(f"    {v} = None\n" for v in code.co_freevars)
    inner = f"    def {_INNER}(ag__):\n        return {name}\n    return {_INNER}\n"
    module = ast.parse(f"def {_FACTORY}():\n{declarations}{inner}")
    module.body[0].body[-2].body.insert(0, function)
    _place_at_user_lines(module, code.co_filename, code.co_firstlineno)
    flags = sum({getattr(__future__, feature).compiler_flag for feature in future_features})
    namespace: dict[str, Any] = {}
    exec(compile(module, code.co_filename, "exec", flags=flags, dont_inherit=True), namespace)
    return namespace[_FACTORY]().__code__


_TRANSPILER = _Transpiler()
_OPTIONS = converter.ProgramContext(
    options=converter.ConversionOptions(recursive=True, user_requested=True, optional_features=None)
)
_by_code: "weakref.WeakKeyDictionary[types.CodeType, ConvertedCode]" = weakref.WeakKeyDictionary()
_lock = threading.RLock()


def convert_code(fn: Callable) -> ConvertedCode:
    """The converted code of a function or lambda (cached), or :class:`ConversionFailed`."""
    code = fn.__code__
    with _lock:
        converted = _by_code.get(code)
        if converted is None:
            try:
                (tree, always_returns, changed), ctx = _TRANSPILER.transform_function(fn, _OPTIONS)
                name = ctx.info.name
                factory = _compile(fn, tree, name, ctx.info.future_features) if changed else None
            except errors.InaccessibleSourceCodeError as err:
                raise ConversionFailed(
                    f"Cannot convert {fn.__qualname__!r} for autograph: its source code is not "
                    "available (a function built with exec or typed at a plain interactive prompt "
                    "has none). Define it in a file or a notebook cell."
                ) from err
            except Exception as err:
                reason = (str(err).strip().splitlines() or [""])[0]
                failure = (
                    UnsupportedConstructError if isinstance(err, errors.UnsupportedLanguageElementError)
                    else ConversionFailed
                )
                raise failure(
                    f"Cannot convert {fn.__qualname__!r} for autograph ({type(err).__name__}: {reason})."
                ) from err
            converted = _by_code[code] = ConvertedCode(factory, tree, name, always_returns)
    return converted


def cached_conversion(code: types.CodeType) -> ConvertedCode | None:
    """The conversion of this code object, if it was converted."""
    return _by_code.get(code)


class ConversionCache:
    """Which functions autograph has converted: ``TRANSFORMER.has_cache(fn)``, as in Catalyst.

    >>> from catalyst_lite import qjit
    >>> from catalyst_lite.autograph.transformer import TRANSFORMER
    >>> def f(x: float):
    ...     return x * 2 if x > 0 else -x
    >>> g = qjit(f, autograph=True)
    >>> TRANSFORMER.has_cache(f)
    True
    """

    def has_cache(self, fn: Callable) -> bool:
        """Whether ``fn``'s code has been converted (by any qjit function)."""
        code = getattr(fn, "__code__", None)
        return code is not None and cached_conversion(code) is not None


TRANSFORMER = ConversionCache()


def converted_function(fn: Callable, converted: ConvertedCode, namespace: Any) -> Callable:
    """``converted`` bound to ``fn``'s globals, closure, defaults and name."""
    if converted.factory is None:
        return fn
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[v] for v in converted.factory.co_freevars)
    factory = types.FunctionType(converted.factory, fn.__globals__, _INNER, None, closure)
    new = factory(namespace)
    new.__code__ = new.__code__.replace(co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname)
    for attr in ("__defaults__", "__kwdefaults__", "__name__", "__qualname__", "__doc__", "__module__"):
        setattr(new, attr, getattr(fn, attr))
    return new


def source_of(converted: ConvertedCode) -> str:
    """The converted source code (as ``autograph_source`` shows it)."""
    return parser.unparse(converted.tree, include_encoding_marker=False).strip() + "\n"
