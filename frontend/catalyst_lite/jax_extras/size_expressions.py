"""Expressions over a program's size inputs, facts about them, and the one evaluator of both.

A :class:`SizeExpr` is an integer (or boolean) scalar computed by scalar operations from a
program's *size inputs* (its abstracted axes' lengths and integer arguments, by position) and,
during a trace, *free leaves* (a loop's index): ``max(n - 1, 0)``. A :class:`Fact` compares two
expressions without free leaves (``n - 1 >= 0``, see :mod:`.size_facts`). Expressions are
simplified as built, printed with the inputs' names, evaluated (:func:`evaluate`) and compiled into
a check a call runs without JAX (:func:`compile_facts`); both share one table of what each
operation computes (:func:`_template`).

>>> n, one = SizeExpr.input(0), SizeExpr.literal(1)
>>> fact = Fact(SizeExpr.apply_op("sub", n, one), SizeExpr.literal(0), ">=", "f.py:3")
>>> fact.statement(["n"]), compile_facts([fact])([3]), compile_facts([fact])([0])
('n - 1 >= 0', -1, 0)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from jax._src import core

from .patches import suspended

# comparison -> the comparison that holds when it does not
NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", "<=": ">", ">": "<="}
# comparison primitive's name -> its Python spelling
COMPARISON_NAMES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


# --- Expressions over the size inputs -------------------------------------------------------------


class SizeExpr:
    """An ``input`` (by position), a ``literal``, a free ``leaf`` (never in facts) or a primitive applied
    to expressions; built once per variable of a trace and shared (a DAG, compared by identity)."""

    __slots__ = ("op", "args", "value", "primitive", "params", "is_bool", "is_float", "free")

    def __init__(self, op: str, args: tuple = (), value: Any = None, primitive: Any = None,
                 params: dict | None = None, is_bool: bool = False, is_float: bool = False):
        self.op = op
        self.args: tuple[SizeExpr, ...] = args
        self.value = value  # input position, literal value, or result index of a primitive
        self.primitive = primitive
        self.params = params or {}
        self.is_bool = is_bool
        self.is_float = is_float  # a floating-point intermediate (`n / 2` in `ceil(n / 2)`)
        self.free = op == "leaf" or any(a.free for a in args)

    @classmethod
    def input(cls, position: int) -> SizeExpr:
        return cls("input", value=position)

    @classmethod
    def literal(cls, value: Any) -> SizeExpr:
        value = np.asarray(value).item()
        return cls("literal", value=value, is_bool=isinstance(value, bool), is_float=isinstance(value, float))

    @classmethod
    def apply_op(cls, op: str, *args: SizeExpr) -> SizeExpr:
        """An operation of the Python table below (``add``, ``max``, ``ge``...)."""
        return cls(op, tuple(args), is_bool=op in COMPARISON_NAMES)

    def inputs(self) -> frozenset[int]:
        """Positions of the size inputs this expression reads."""
        return frozenset(node.value for node in _nodes([self]) if node.op == "input")

    def render(self, names: Sequence[str]) -> str:
        """``max(n - 1, 0)``: the expression with its inputs named."""
        return _render(self, names, {})[0]


def _nodes(roots: Sequence[SizeExpr], known: Any = ()) -> list[SizeExpr]:
    """The nodes reachable from ``roots`` (not through ``known``), each once, operands first."""
    order: list[SizeExpr] = []
    seen: set[int] = set()
    stack: list[tuple[SizeExpr, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen or node in known:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if id(a) not in seen)
    return order


# op -> (precedence, format): how an expression prints (precedence: higher binds tighter)
_INFIX = {
    "add": (70, "{} + {}"), "sub": (70, "{} - {}"), "mul": (80, "{} * {}"),
    "div": (80, "{} // {}"), "truediv": (80, "{} / {}"), "rem": (80, "{} % {}"),
    "and": (40, "{} and {}"), "or": (30, "{} or {}"),
    **{op: (60, "{} " + c + " {}") for op, c in COMPARISON_NAMES.items()},
}
_TRANSPARENT = {"convert_element_type", "copy", "copy_p"}


def _render(node: SizeExpr, names: Sequence[str], memo: dict) -> tuple[str, int]:
    if id(node) in memo:
        return memo[id(node)]
    args = [_render(a, names, memo) for a in node.args]
    if node.op == "input":
        out = (names[node.value] if node.value < len(names) else f"size{node.value}", 100)
    elif node.op == "leaf":
        out = ("?", 100)
    elif node.op == "literal":
        out = (str(node.value), 100)
    elif node.op in _TRANSPARENT and len(args) == 1:
        out = args[0]
    elif node.op == "neg":
        out = (f"-{_paren(args[0], 90)}", 90)
    elif node.op == "not":
        out = (f"not {_paren(args[0], 50)}", 50)
    elif node.op in _INFIX and len(args) == 2:
        prec, fmt = _INFIX["truediv" if node.op == "div" and node.is_float else node.op]
        # left-associative: the right operand of `a - (b + c)` keeps its parentheses
        out = (fmt.format(_paren(args[0], prec), _paren(args[1], prec + 1)), prec)
    elif node.op == "select_n" and len(args) == 3:
        out = (f"{_paren(args[2], 21)} if {_paren(args[0], 21)} else {_paren(args[1], 21)}", 20)
    else:
        out = (f"{node.op}({', '.join(text for text, _ in args)})", 100)
    memo[id(node)] = out
    return out


def _paren(arg: tuple[str, int], precedence: int) -> str:
    text, own = arg
    return text if own >= precedence else f"({text})"


class Fact:
    """``lhs comparison rhs`` holds for every call the program runs for (``where``: the line that decided
    it), or only where ``guard`` holds (code that runs only then: a ``for_loop`` body)."""

    __slots__ = ("lhs", "rhs", "comparison", "where", "guard")

    def __init__(self, lhs: SizeExpr, rhs: SizeExpr, comparison: str, where: str, guard: Any = None):
        self.lhs, self.rhs, self.comparison, self.where, self.guard = lhs, rhs, comparison, where, guard

    def inputs(self) -> frozenset[int]:
        guarded = self.guard.inputs() if self.guard is not None else frozenset()
        return self.lhs.inputs() | self.rhs.inputs() | guarded

    def statement(self, names: Sequence[str]) -> str:
        stated = f"{self.lhs.render(names)} {self.comparison} {self.rhs.render(names)}"
        return stated if self.guard is None else f"{stated} (when {self.guard.render(names)})"


# --- Simplification ------------------------------------------------------------------------------
# jax.numpy computes sizes with general formulas (`arange(n)` has `(max(0, n - 0 + 1 - 1) // 1`
# rounded up); folded, they read as the user wrote them (`max(0, n)`) and cost less to check.


def _is(e: SizeExpr, value: Any) -> bool:
    return e.op == "literal" and e.value == value and isinstance(e.value, bool) == isinstance(value, bool)


def _offset(e: SizeExpr) -> tuple[SizeExpr, int]:
    """``e`` as ``base + c`` (``c`` an int literal)."""
    if e.op in ("add", "sub") and len(e.args) == 2 and e.args[1].op == "literal":
        c = int(e.args[1].value)
        return e.args[0], c if e.op == "add" else -c
    return e, 0


def simplified(e: SizeExpr) -> SizeExpr:
    """``e`` with constant parts folded and trivial operations removed (same value everywhere)."""
    args = e.args
    same_kind = len(args) == 1 and (args[0].is_bool, args[0].is_float) == (e.is_bool, e.is_float)
    if e.op in _TRANSPARENT and same_kind:
        return args[0]
    if args and all(a.op == "literal" for a in args):
        try:
            return SizeExpr.literal(_apply(e, [a.value for a in args]))
        except Exception:
            return e
    if len(args) == 2:
        a, b = args
        if (e.op in ("add", "sub") and _is(b, 0)) or (e.op in ("mul", "div") and _is(b, 1)):
            return a
        if (e.op == "add" and _is(a, 0)) or (e.op == "mul" and _is(a, 1)):
            return b
        if e.op == "rem" and _is(b, 1) and not e.is_float:
            return SizeExpr.literal(0)
        if e.op in ("max", "min") and a is b:
            return a
        if e.op in ("add", "sub") and not (e.is_bool or e.is_float) and b.op == "literal":
            base, c = _offset(a)
            if base is not a:  # (x + c1) +/- c2 = x + (c1 +/- c2)
                total = c + (int(b.value) if e.op == "add" else -int(b.value))
                if total == 0:
                    return base
                return SizeExpr.apply_op("add" if total > 0 else "sub", base, SizeExpr.literal(abs(total)))
        if e.op in ("and", "or") and e.is_bool:
            absorbing = e.op == "or"  # `x or True` is True, `x and False` is False
            if _is(a, absorbing) or _is(b, absorbing):
                return SizeExpr.literal(absorbing)
            if _is(a, not absorbing) or _is(b, not absorbing):
                return b if _is(a, not absorbing) else a
    if e.op == "select_n" and args and args[0].op == "literal":
        return args[1 + int(args[0].value)]
    if e.op == "select_n" and len(args) == 3 and args[1] is args[2]:
        return args[1]
    return e


def same_expression(a: SizeExpr, b: SizeExpr) -> bool:
    """The two expressions compute the same thing (written the same way)."""
    positional = [f"size{k}" for k in range(max(a.inputs() | b.inputs() | {-1}) + 1)]
    return a is b or a.render(positional) == b.render(positional)


# --- Evaluating expressions -----------------------------------------------------------------------


class UnknownSize(Exception):
    """A fact reads the size input ``position``, unknown to the call (an outer tracer)."""

    def __init__(self, position: int):
        super().__init__(position)
        self.position = position


def _div(a: int, b: int) -> int:
    """XLA's signed integer division: rounds toward zero; ``x / 0`` is ``-1``."""
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _rem(a: int, b: int) -> int:
    """XLA's remainder: the sign of the dividend; ``x % 0`` is ``x``."""
    return a if b == 0 else a - b * _div(a, b)


def _sign(a: int) -> int:
    return (a > 0) - (a < 0)


def _shl(a: int, b: int) -> int:
    """XLA's 64-bit shift left: a shift that is negative or of 64 bits or more gives 0 (Python's
    ``<<`` raises for a negative one)."""
    return a << b if 0 <= b < 64 else 0


def _shr(a: int, b: int) -> int:
    """XLA's arithmetic shift right: a shift that is negative or of 64 bits or more fills with the sign."""
    return a >> b if 0 <= b < 64 else -(a < 0)


def _bind(primitive: Any, params: dict, index: int, *args: Any) -> Any:
    """A primitive without a Python spelling, evaluated by JAX on numbers."""
    with core.eval_context(), suspended():
        out = primitive.bind(*(np.asarray(a) for a in args), **params)
    return np.asarray(out[index] if primitive.multiple_results else out).item()


# op -> Python source of the operation on its operands' local names
_PYTHON = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "neg": "-{0}",
    "div": "_div({0}, {1})", "rem": "_rem({0}, {1})", "sign": "_sign({0})", "abs": "abs({0})",
    "max": "max({0}, {1})", "min": "min({0}, {1})",
    "clamp": "min(max({1}, {0}), {2})", "square": "{0} * {0}",
    **{op: "{0} " + c + " {1}" for op, c in COMPARISON_NAMES.items()},
    "shift_left": "_shl({0}, {1})", "shift_right_arithmetic": "_shr({0}, {1})",
    "copy": "{0}", "copy_p": "{0}",
}
_BOOLEAN = {"and": "{0} and {1}", "or": "{0} or {1}", "xor": "{0} != {1}", "not": "not {0}"}
_BITWISE = {"and": "{0} & {1}", "or": "{0} | {1}", "xor": "{0} ^ {1}", "not": "~{0}"}


_HELPERS = {"_div": _div, "_rem": _rem, "_sign": _sign, "_shl": _shl, "_shr": _shr}


def _template(node: SizeExpr) -> str | None:
    """What ``node`` computes: Python source over its operands ``{0}``, ``{1}``... (``None``: JAX's)."""
    if node.is_float or any(a.is_float for a in node.args):
        return _float_template(node)
    if node.op in _PYTHON:
        return _PYTHON[node.op]
    if node.op in _BOOLEAN:
        return (_BOOLEAN if node.is_bool else _BITWISE)[node.op]
    if node.op == "integer_pow":
        return "{0} ** %d" % int(node.params["y"])
    if node.op == "select_n":
        return "(%s,)[int({0})]" % ", ".join("{%d}" % k for k in range(1, len(node.args)))
    if node.op == "convert_element_type":
        return "bool({0})" if node.is_bool else "int({0})"
    return None


# Operations whose Python spelling computes on floats what XLA does (IEEE double arithmetic);
# others of floats (division, ceil, remainder...) are evaluated by JAX.
_FLOAT_EXACT = ("add", "sub", "mul", "neg", "abs", "max", "min", *COMPARISON_NAMES)


def _float_template(node: SizeExpr) -> str | None:
    """:func:`_template` of an operation on or to floating-point numbers."""
    if node.op == "convert_element_type":
        # to float; to an integer truncating toward zero, as XLA converts
        return "bool({0})" if node.is_bool else "float({0})" if node.is_float else "int({0})"
    return _PYTHON[node.op] if node.op in _FLOAT_EXACT else None


_FUNCTIONS: dict[str, Callable[..., Any]] = {}  # template -> the function it spells


def _apply(node: SizeExpr, values: Sequence[Any]) -> Any:
    """``node``'s operation on its operands' ``values``."""
    if node.op == "literal":
        return node.value
    template = _template(node)
    if template is None:
        return _bind(node.primitive, node.params, node.value, *values)
    function = _FUNCTIONS.get(template)
    if function is None:
        source = template.format(*(f"a[{k}]" for k in range(len(values))))
        function = _FUNCTIONS[template] = eval(f"lambda *a: {source}", dict(_HELPERS))
    return function(*values)


# An exponential (`1 << n`, `2 ** n`) at generic sizes exceeds 64 bits, and computing it would take
# time and memory for nothing: `evaluate` asks for a value of its own instead (see `oversized`).
_EXPONENTIALS = {
    "shift_left": lambda base, shift: float(base) * 2.0 ** min(float(shift), 2000.0),
    "pow": lambda base, exponent: abs(float(base)) ** min(float(exponent), 2000.0),
    "integer_pow": lambda base, *, y: abs(float(base)) ** min(float(y), 2000.0),
}


def _exceeds_int64(node: SizeExpr, values: Sequence[Any]) -> bool:
    estimate = _EXPONENTIALS.get(node.op)
    if estimate is None:
        return False
    try:
        return abs(estimate(*values, **node.params)) >= 2.0**62
    except OverflowError:
        return True


def evaluate(expr: SizeExpr, leaf: Callable[[Any], Any], memo: dict[SizeExpr, Any],
             oversized: Callable[[Any], Any] | None = None) -> Any:
    """The value of ``expr`` where ``leaf(key)`` gives the value of each input (key: its position)
    and free leaf (key: its variable); ``memo`` (node -> value) holds the values known and receives
    the new ones. With ``oversized``, an exponential too large for 64 bits is ``oversized(key)``.

    >>> n = SizeExpr.input(0)
    >>> evaluate(SizeExpr.apply_op("max", SizeExpr.apply_op("sub", n, SizeExpr.literal(1)), SizeExpr.literal(0)), [5].__getitem__, {})
    4
    """
    for node in _nodes([expr], memo):
        if node in memo:  # computed meanwhile (a leaf's value is computed from other sizes)
            continue
        if node.op in ("input", "leaf"):
            memo[node] = leaf(node.value)
            continue
        values = [memo[a] for a in node.args]
        if oversized is not None and _exceeds_int64(node, values):
            memo[node] = oversized((node.op, *values, *node.params.values()))
        else:
            memo[node] = _apply(node, values)
    return memo[expr]


def _python_source(node: SizeExpr, operands: list[str]) -> tuple[str, dict[str, Any]]:
    """Python source computing ``node`` from its operands, and the names it needs."""
    if node.op == "literal":
        return repr(node.value), {}
    template = _template(node)
    if template is not None:
        return template.format(*operands), {}
    name = f"prim{id(node)}"
    needs = {name: node.primitive, f"{name}_params": node.params}
    return f"_bind({name}, {name}_params, {node.value}, {', '.join(operands)})", needs


def compile_facts(facts: Sequence[Fact]) -> Callable[[Sequence[Any]], int]:
    """A function of a call's size inputs (by position) returning the index of the first fact false
    for them, or ``-1``; an input a fact reads that is ``None`` raises :class:`UnknownSize`.

    >>> n, m = SizeExpr.input(0), SizeExpr.input(1)
    >>> check = compile_facts([Fact(n, m, "==", "?"), Fact(SizeExpr.apply_op("max", n, m), n, ">=", "?")])
    >>> check([4, 4]), check([4, 5])
    (-1, 0)
    """
    if not facts:
        return lambda values: -1  # no fact is broken
    namespace: dict[str, Any] = {**_HELPERS, "_bind": _bind, "UnknownSize": UnknownSize}
    local: dict[int, str] = {}
    lines = ["def check(values):"]
    for i, fact in enumerate(facts):
        for node in _nodes([fact.lhs, fact.rhs] + ([fact.guard] if fact.guard is not None else [])):
            if id(node) in local:
                continue
            name = local[id(node)] = f"t{len(local)}"
            if node.op == "input":
                lines.append(f"    {name} = values[{node.value}]")
                lines.append(f"    if {name} is None: raise UnknownSize({node.value})")
                lines.append(f"    {name} = int({name})")
            else:
                source, needs = _python_source(node, [local[id(a)] for a in node.args])
                namespace.update(needs)
                lines.append(f"    {name} = {source}")
        lhs, rhs = local[id(fact.lhs)], local[id(fact.rhs)]
        guard = f"({local[id(fact.guard)]}) and " if fact.guard is not None else ""
        lines.append(f"    if {guard}not ({lhs} {fact.comparison} {rhs}): return {i}")
    lines.append("    return -1")
    exec(compile("\n".join(lines), "<size facts>", "exec"), namespace)
    return namespace["check"]
