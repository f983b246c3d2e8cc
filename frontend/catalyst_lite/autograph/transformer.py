"""Converting one function: diastatic-malt's source transformation, compiled at the user's lines.

malt (the maintained fork of TensorFlow's AutoGraph Catalyst builds on) rewrites control flow into
calls of operators whose meaning is ours (:mod:`.conditionals`, :mod:`.loops`...). Unlike malt,
every node of the result keeps the user's file and line (so tracebacks, JAX's source information
and our errors name the user's line; no file is written), and only the passes a function needs
run (conversion is most of what ``autograph=True`` costs). Conversions are cached per code object;
:func:`converted_function` binds one to a function object.
"""

from __future__ import annotations

import __future__
import ast
import linecache
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from malt.converters import (
    break_statements,
    call_trees,
    conditional_expressions,
    continue_statements,
    control_flow,
    functions,
    logical_expressions,
    return_statements,
)
from malt.core import converter, unsupported_features_checker
from malt.pyct import anno, cfg, errors, parser, qual_names, transpiler
from malt.pyct.static_analysis import activity, liveness, reaching_definitions, reaching_fndefs

from ..errors import AutoGraphError
from . import item_assignment

__all__ = [
    "ConvertedCode",
    "ConversionFailed",
    "UnsupportedConstructError",
    "convert_code",
    "cached_conversion",
    "converted_function",
    "source_of",
    "TRANSFORMER",
]

_FACTORY = "__catalyst_lite_autograph_factory"
_INNER = "__catalyst_lite_autograph_inner"


@dataclass
class ConvertedCode:
    """A function's converted code, ready to be bound to any function object with the original
    code: ``factory`` takes the operators' namespace ``ag__`` and returns the converted function,
    closing over the original function's free variables."""

    factory: types.CodeType
    tree: ast.AST  # the converted function, for autograph_source
    name: str  # of the converted function inside the factory
    always_returns: dict[str, bool]  # per function scope: every path ends in `return`
    changed: bool  # False: nothing to convert, the original function serves as it is


class ConversionFailed(AutoGraphError):
    """malt cannot convert a function (no source code, a construct it does not support)."""


class UnsupportedConstructError(ConversionFailed, NotImplementedError):
    """The function uses a construct autograph does not convert (a private ``self.__name``, a
    generator): also a ``NotImplementedError``, as Catalyst raises it."""


# --- the passes ----------------------------------------------------------------------------------


class _Transpiler(transpiler.GenericTranspiler):
    """malt's parse-transform driver with our selection of passes (``transform_ast``)."""

    def get_transformed_name(self, node: ast.AST) -> str:
        return "ag__" + super().get_transformed_name(node)

    def transform_ast(self, node: ast.AST, ctx: Any) -> tuple[ast.AST, dict[str, bool], bool]:
        if any(isinstance(n, (ast.For, ast.While)) and n.orelse for n in ast.walk(node)):
            node = _loops_without_else(node)
        unsupported_features_checker.verify(node)
        found = _Constructs(node)
        if not found.anything:
            return node, {}, False
        if found.lambda_decorators:
            node = _hoist_lambda_decorators(node)
        flow = found.control_flow or found.early_exits
        node = functions.transform(node, ctx)
        always_returns = {
            anno.getanno(f, "function_context_name"): _always_returns(f.body)
            for f in ast.walk(node)
            if isinstance(f, ast.FunctionDef) and anno.hasanno(f, "function_context_name")
        }
        if found.breaks:
            node = break_statements.transform(node, ctx)
        if found.continues or found.breaks:  # the break pass leaves `continue` statements
            node = continue_statements.transform(node, ctx)
        if found.early_returns:
            node = return_statements.transform(node, ctx)
        if found.item_assignments:
            node = item_assignment.transform(node, ctx)
        if found.asserts:
            node = _AssertCalls().visit(node)
        if found.calls:
            node = call_trees.transform(node, ctx)
        if flow:
            node = _control_flow(node, ctx)
        if found.conditional_expressions:
            node = conditional_expressions.transform(node, ctx)
        if found.logic or found.early_exits:
            node = logical_expressions.transform(node, ctx)
        # (malt's `variables` pass, which wraps every read in `ag__.ld` to catch variables without
        # a value, is not needed: our `ag__.Undefined` raises on any use, see state.Unassigned.)
        return node, always_returns, True


class _ControlFlow(control_flow.ControlFlowTransformer):
    """malt's control-flow pass; a ``for`` statement also says which variables are read after it
    (option ``live_after``): a loop whose trip count is traced must then check, when it runs, that
    its target got a value (see :func:`.loops.for_stmt`). malt counts a variable that a function
    defined in the body reads as read after the loop too (the function might be called there);
    those are left out, so that a loop that runs no iteration is never refused where Python
    runs it."""

    def _create_loop_options(self, node: ast.AST) -> ast.Dict:
        options = super()._create_loop_options(node)
        if isinstance(node, ast.For):
            closures = [f for f in ast.walk(node) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
            closure_reads = {n.id for f in closures for n in ast.walk(f) if isinstance(n, ast.Name)}
            live = sorted(
                str(s) for s in anno.getanno(node, anno.Static.LIVE_VARS_OUT)
                if not s.is_composite() and str(s) not in closure_reads
            )
            options.keys.append(ast.Constant("live_after"))
            options.values.append(ast.Constant(" ".join(live)))
        return options


def _control_flow(node: ast.AST, ctx: Any) -> ast.AST:
    """malt's ``control_flow.transform`` (the analyses it needs, then the pass) with
    :class:`_ControlFlow`."""
    graphs = cfg.build(node)
    node = qual_names.resolve(node)
    node = activity.resolve(node, ctx, None)
    node = reaching_definitions.resolve(node, ctx, graphs)
    node = reaching_fndefs.resolve(node, ctx, graphs)
    node = liveness.resolve(node, ctx, graphs)
    return _ControlFlow(ctx).visit(node)


class _Constructs:
    """Which convertible constructs a function's tree contains (one walk)."""

    def __init__(self, node: ast.AST):
        kinds = set()
        self.lambda_decorators = False
        for n in ast.walk(node):
            kinds.add(type(n))
            if n is not node and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.lambda_decorators |= _has_lambda_decorator(n)
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
                kinds.add(ast.Not)
            elif isinstance(n, ast.Compare) and len(n.ops) > 1:
                kinds.add(ast.BoolOp)
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                kinds.add(ast.Store)
        self.control_flow = bool(kinds & {ast.If, ast.For, ast.While})
        self.breaks = ast.Break in kinds
        self.continues = ast.Continue in kinds
        self.early_returns = ast.Return in kinds and _returns_inside_blocks(node)
        self.early_exits = self.breaks or self.continues or self.early_returns
        self.item_assignments = ast.Store in kinds
        self.asserts = ast.Assert in kinds
        self.calls = ast.Call in kinds
        self.conditional_expressions = ast.IfExp in kinds
        self.logic = bool(kinds & {ast.BoolOp, ast.Not})
        self.anything = (
            self.control_flow or self.early_exits or self.item_assignments or self.asserts or self.calls
            or self.conditional_expressions or self.logic
        )


def _has_lambda_decorator(n: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """Whether a decorator of ``n`` holds a ``lambda`` (see :func:`_hoist_lambda_decorators`)."""
    return any(isinstance(x, ast.Lambda) for d in n.decorator_list for x in ast.walk(d))


def _hoist_lambda_decorators(node: ast.AST) -> ast.AST:
    """``@while_loop(lambda i: i < n)`` / ``def body(...)``: malt's control-flow analyses build no
    graph for a lambda in a decorator and fail on it (Catalyst's conversion too), so a nested
    function whose decorators hold a lambda gets them evaluated into variables just before its
    ``def``, in order: what Python does with decorators anyway."""
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
                assign = ast.Assign(targets=[ast.Name(name, ast.Store())], value=decorator)
                origin = anno.getanno(decorator, anno.Basic.ORIGIN, default=None)
                if origin is not None:
                    for m in (assign, *assign.targets):
                        anno.setanno(m, anno.Basic.ORIGIN, origin)
                hoisted.append(assign)
                n.decorator_list[k] = ast.Name(name, ast.Load())
            return [*hoisted, n]

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_ClassDef = visit_FunctionDef

    return Hoist().visit(node)


def _loops_without_else(node: ast.AST) -> ast.AST:
    """``for``/``while`` loops with an ``else`` block (which malt does not convert) as Python
    defines them: the block runs after the loop unless a ``break`` of that loop ran, which a flag
    set before each such ``break`` records (``if not flag: <else block>`` after the loop)."""
    count = 0

    def located(new: ast.AST, like: ast.AST) -> ast.AST:
        origin = anno.getanno(like, anno.Basic.ORIGIN, default=None)
        for n in ast.walk(new):
            ast.copy_location(n, like)
            if origin is not None:
                anno.setanno(n, anno.Basic.ORIGIN, origin)
        return new

    class FlagBreaks(ast.NodeTransformer):
        """Sets ``flag`` before the breaks of one loop (not those of loops or functions nested in it)."""

        def __init__(self, flag: str):
            self.flag = flag

        def visit_Break(self, n: ast.Break) -> Any:
            return [located(ast.Assign([ast.Name(self.flag, ast.Store())], ast.Constant(True)), n), n]

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
            if not any(isinstance(b, ast.Break) for s in n.body for b in _own_statements(s)):
                return [n, *orelse]
            flag = f"loop_broke__ag_{count}"
            count += 1
            breaker = FlagBreaks(flag)
            n.body = [t for s in n.body for t in _as_list(breaker.visit(s))]
            start = located(ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(False)), n)
            after = located(ast.If(ast.UnaryOp(ast.Not(), ast.Name(flag, ast.Load())), [], []), orelse[0])
            after.body = orelse
            return [start, n, after]

        visit_For = visit_While = visit_loop

    return ast.fix_missing_locations(Rewrite().visit(node))


def _own_statements(statement: ast.stmt) -> list[ast.AST]:
    """The nodes of ``statement`` that belong to the loop around it (not to loops or functions
    nested in it)."""
    if isinstance(statement, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    found = [statement]
    for child in ast.iter_child_nodes(statement):
        if isinstance(child, ast.stmt):
            found += _own_statements(child)
    return found


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


class _AssertCalls(ast.NodeTransformer):
    """``assert test, msg`` -> ``ag__.assert_stmt(test, lambda: msg)``, so that a traced ``test``
    is checked when the program runs. (malt's own pass accepts constant messages only.)"""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        message = ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=node.msg if node.msg is not None else ast.Constant(None),
        )
        function = ast.Attribute(value=ast.Name("ag__", ast.Load()), attr="assert_stmt", ctx=ast.Load())
        statement = ast.Expr(ast.Call(func=function, args=[node.test, message], keywords=[]))
        origin = anno.getanno(node, anno.Basic.ORIGIN, default=None)
        if origin is not None:
            for n in (statement, statement.value, function, function.value, message):
                anno.setanno(n, anno.Basic.ORIGIN, origin)
        return statement


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
    if isinstance(s, ast.Try):
        handled = all(_always_returns(h.body) for h in s.handlers)
        return _always_returns(s.finalbody) or (
            (_always_returns(s.body) or _always_returns(s.orelse)) and handled
        )
    return False


# --- compiling at the user's lines ---------------------------------------------------------------


def _place_at_user_lines(tree: ast.AST, filename: str, default_line: int) -> None:
    """Give every node the position of the user's code it came from. A node malt generated gets
    its parent's position, and a generated statement that of the next statement of the same block
    that has one (``def if_body(): ...`` gets the line of the ``if`` it implements). Also make the
    tree compilable: malt writes some node lists as tuples, which only its unparser accepts."""
    widths: dict[int, int] = {}

    def width(line: int) -> int:
        if line not in widths:
            widths[line] = len(linecache.getline(filename, line).rstrip("\n").encode())
        return widths[line]

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


def _factory_module(function: ast.stmt, name: str, freevars: tuple[str, ...]) -> ast.Module:
    """``def factory(): <freevars> = None; def inner(ag__): <function>; return name; return inner``:
    the free variables are declared so that the converted function closes over them (``inner``
    is later rebuilt with the original function's cells)."""
    declarations = [ast.Assign(targets=[ast.Name(v, ast.Store())], value=ast.Constant(None)) for v in freevars]
    inner = ast.FunctionDef(
        name=_INNER,
        args=ast.arguments(posonlyargs=[], args=[ast.arg("ag__")], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[function, ast.Return(ast.Name(name, ast.Load()))],
        decorator_list=[],
    )
    outer = ast.FunctionDef(
        name=_FACTORY,
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[*declarations, inner, ast.Return(ast.Name(_INNER, ast.Load()))],
        decorator_list=[],
    )
    return ast.Module(body=[outer], type_ignores=[])


def _compile(fn: Callable, tree: ast.AST, name: str, future_features: tuple[str, ...]) -> types.CodeType:
    code = fn.__code__
    if isinstance(tree, ast.Lambda):
        function = ast.Assign(targets=[ast.Name(name, ast.Store())], value=tree)
    else:
        function, tree.name = tree, name
    module = _factory_module(function, name, code.co_freevars)
    _place_at_user_lines(module, code.co_filename, code.co_firstlineno)
    flags = 0
    for feature in future_features:
        flags |= getattr(__future__, feature).compiler_flag
    namespace: dict[str, Any] = {}
    exec(compile(module, code.co_filename, "exec", flags=flags, dont_inherit=True), namespace)
    return namespace[_FACTORY]().__code__


# --- the cache and the entry points --------------------------------------------------------------

_TRANSPILER = _Transpiler()
_OPTIONS = converter.ProgramContext(
    options=converter.ConversionOptions(recursive=True, user_requested=True, optional_features=None)
)
_by_code: "weakref.WeakKeyDictionary[types.CodeType, ConvertedCode]" = weakref.WeakKeyDictionary()
_lock = threading.RLock()


def convert_code(fn: Callable) -> ConvertedCode:
    """The converted code of a plain function or lambda (cached per code object); raises
    :class:`ConversionFailed` when malt cannot convert it."""
    code = fn.__code__
    converted = _by_code.get(code)
    if converted is not None:
        return converted
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
                reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
                failure = (
                    UnsupportedConstructError if isinstance(err, errors.UnsupportedLanguageElementError)
                    else ConversionFailed
                )
                raise failure(
                    f"Cannot convert {fn.__qualname__!r} for autograph ({type(err).__name__}: {reason})."
                ) from err
            converted = _by_code[code] = ConvertedCode(factory, tree, name, always_returns, changed)
    return converted


def cached_conversion(code: types.CodeType) -> ConvertedCode | None:
    """The conversion of this code object, if it was converted."""
    return _by_code.get(code)


class ConversionCache:
    """Which functions autograph has converted: ``TRANSFORMER.has_cache(fn)``, as Catalyst's
    tests ask it of a function compiled with ``autograph=True``.

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
    if not converted.changed:
        return fn
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[v] for v in converted.factory.co_freevars)
    factory = types.FunctionType(converted.factory, fn.__globals__, _INNER, None, closure)
    new = factory(namespace)
    new.__code__ = new.__code__.replace(co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname)
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__name__, new.__qualname__, new.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    new.__module__ = fn.__module__
    return new


def source_of(converted: ConvertedCode) -> str:
    """The converted source code (as ``autograph_source`` shows it)."""
    return parser.unparse(converted.tree, include_encoding_marker=False).strip() + "\n"
