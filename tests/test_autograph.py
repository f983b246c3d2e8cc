"""qjit(autograph=True) on classical programs.

Each pattern is compared with the same program written with explicit ``cond``/``for_loop``/
``while_loop``: the jaxprs have the same structure (primitives and their nesting) and the results
agree, with each other and with plain Python/NumPy. Then what stays Python, what is converted
(callees, not libraries), the public helpers, and the errors, which name the user's line."""

import contextlib
import functools
import importlib.util
import inspect
import traceback
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import (
    AutoGraphError,
    autograph_source,
    cond,
    disable_autograph,
    for_loop,
    grad,
    qjit,
    run_autograph,
    vmap,
    while_loop,
)
from catalyst_lite.errors import AutoGraphWarning, CatalystLiteError, ControlFlowError

import autograph_error_programs as error_programs
import catalyst_lite
from jaxpr_structure import control_flow_of, skeleton

HERE = __file__


def line_of(fn, text: str) -> int:
    """The line number in this file of the first line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


# --- if ------------------------------------------------------------------------------------------


@qjit(autograph=True)
def piecewise(x: float):
    if x > 1.0:
        y = x * 2.0
        z = 1.0
    elif x > 0.0:
        y = x + 1.0
        z = 2.0
    else:
        y = -x
        z = 3.0
    return y * z


@qjit
def piecewise_explicit(x: float):
    @cond(x > 1.0)
    def outer():
        return x * 2.0, 1.0

    @outer.otherwise
    def outer():
        @cond(x > 0.0)
        def inner():
            return x + 1.0, 2.0

        @inner.otherwise
        def inner():
            return -x, 3.0

        return inner()

    y, z = outer()
    return y * z


def test_if_elif_else_defines_variables_in_branches():
    for x in (3.0, 0.5, -2.0):
        y, z = (x * 2, 1) if x > 1 else (x + 1, 2) if x > 0 else (-x, 3)
        assert float(piecewise(x)) == float(piecewise_explicit(x)) == y * z
    assert skeleton(piecewise.jaxpr) == skeleton(piecewise_explicit.jaxpr)


def test_if_on_concrete_values_stays_python():
    scale = 3

    @qjit(autograph=True, static_argnums=1)
    def f(x, flag):
        if flag and scale > 2:
            y = x * scale
        else:
            y = x
        if not flag:
            y = y - 1
        return y if scale > 5 else y + 0.5

    assert float(f(2.0, True)) == 6.5 and float(f(2.0, False)) == 1.5
    assert control_flow_of(f.jaxpr) == []


def _pad_or_cut_to_two(x):
    if x.shape[0] > 2 and not x.shape[0] == 7:
        y = x[:2]
    else:
        y = jnp.pad(x[:2], (0, 2 - min(x.shape[0], 2)))  # a negative width were it traced at n > 2
    return y if x.shape[0] else y - 1


def test_if_on_sizes_of_abstracted_axes_stays_python_as_without_autograph():
    """Under jax.jit the sizes are numbers and only the branch taken is traced; a cond would trace
    the other branch too (here at sizes it refuses)."""
    converted = qjit(_pad_or_cut_to_two, autograph=True, abstracted_axes={0: "n"})
    for n in (3, 0, 1, 2, 7, 5):
        x = jnp.arange(1.0, n + 1)
        np.testing.assert_array_equal(converted(x), jax.jit(_pad_or_cut_to_two)(x))
    assert control_flow_of(converted.jaxpr) == []


def test_branches_promote_types_and_may_differ_in_size():
    @qjit(autograph=True)
    def f(x: float, n: int):
        if x > 0:
            y = 1  # a Python int in one branch, f64 in the other: promoted as JAX does
            a = jnp.ones([n])
        else:
            y = x
            a = jnp.zeros([n + 1])
        return y, a

    y, a = f(2.0, 3)
    assert y.dtype == jnp.float64 and float(y) == 1.0 and a.tolist() == [1.0, 1.0, 1.0]
    y, a = f(-2.0, 3)
    assert float(y) == -2.0 and a.tolist() == [0.0] * 4


def test_branches_returning_a_constant_and_a_traced_value():
    def sign_or_value(x):
        if x > 0:
            return 1
        return x

    @qjit
    def explicit(x: float):
        return cond(x > 0)(lambda: 1).otherwise(lambda: x)()

    ours = qjit(autograph=True)(sign_or_value)
    for x in (2.0, -3.0):
        result = ours(x)
        assert result.dtype == jnp.float64 and float(result) == float(explicit(x)) == sign_or_value(x)


def test_return_in_branches():
    @qjit(autograph=True)
    def early(x: float):
        if x > 0:
            return x
        return -x

    @qjit(autograph=True)
    def nested(x: float, y: float):
        if x > 0:
            if y > 0:
                return 1.0
        return 2.0

    @qjit(autograph=True)
    def chain(x: float):
        if x > 1:
            return x
        elif x < -1:
            return -x
        return 0.0

    assert [float(early(v)) for v in (2.0, -3.0)] == [2.0, 3.0]
    assert [float(nested(a, b)) for a, b in [(1, 1), (1, -1), (-1, 1)]] == [1.0, 2.0, 2.0]
    assert [float(chain(v)) for v in (2.0, -3.0, 0.5)] == [2.0, 3.0, 0.0]


def test_conditional_expression_and_logical_operators():
    @qjit(autograph=True)
    def f(x: float, y: float):
        inside = x > 0 and y > 0 or not x > -1
        s = x if inside else -x
        return s, inside

    @qjit
    def explicit(x: float, y: float):
        inside = jnp.logical_or(jnp.logical_and(x > 0, y > 0), jnp.logical_not(x > -1))

        @cond(inside)
        def s():
            return x

        @s.otherwise
        def s():
            return -x

        return s(), inside

    for x, y in [(1.0, 1.0), (1.0, -1.0), (-2.0, 1.0), (-0.5, 1.0)]:
        inside = x > 0 and y > 0 or not x > -1
        s, b = f(x, y)
        assert (float(s), bool(b)) == (x if inside else -x, inside)
        assert [float(v) for v in explicit(x, y)] == [float(s), float(b)]
    assert skeleton(f.jaxpr) == skeleton(explicit.jaxpr)


def _sign(n):
    return 1 if n > 0 else (0 if n == 0 else -1)


def _bucket(x):
    return ((2.0 if x > 10 else 1.0) if x > 1 else 0.5) * (x if x < 0 or x > 5 else -x)


def _clamped(x):
    return (lambda t: t if t > 0 else (-t if t > -1 else 1.0))(x - 1)


@pytest.mark.parametrize("fn, args", [(_sign, [3, 0, -2]), (_bucket, [20.0, 3.0, 0.5, -2.0]),
                                      (_clamped, [3.0, 0.5, -4.0])])
def test_nested_conditional_expressions_on_traced_conditions(fn, args):
    compiled = qjit(fn, autograph=True)
    for a in args:
        assert float(compiled(a)) == fn(a)


def _first_square_at_least(n):
    i = 0
    while True:
        if i * i >= n:
            return i
        i += 1


def _doubled_past(x, limit):
    while 1:
        x = x * 2
        for k in range(3):
            if k > limit:
                break  # (of the inner loop: the `while` still ends only by returning)
        if x > limit:
            return x


def _while_true_with_break(n):
    i = 0
    while True:
        i += 1
        if i > n:
            break
    return i * 2


@pytest.mark.parametrize(
    "fn, args", [(_first_square_at_least, [(5,), (0,), (16,)]), (_doubled_past, [(1.5, 10.0), (20.0, 3.0)]),
                 (_while_true_with_break, [(3,), (0,)])],
)
def test_a_function_returning_from_a_while_true_loop(fn, args):
    compiled = qjit(fn, autograph=True)
    for a in args:
        assert float(compiled(*a)) == fn(*a)


def _memberships(x, n):
    found = [n in x, n not in x, n in [1, 2, 3], n in (2.0, 4.5), n in range(2, 9, 3), n in range(8, 0, -3)]
    found += [n not in {4: "a", 7: "b"}, 0 < n in {3, 4}, 3 in x, -1 in x, 5 in [n, x[1]], n in (x[0], 2)]
    count = 0
    for i in range(n):  # a traced range, and a traced item in it
        if i in range(1, n, 2) or 3 in range(i):
            count += 1
    return found, count


def test_in_on_traced_values_is_pythons_membership():
    compiled = qjit(_memberships, autograph=True)
    x = np.array([0, 3, 5])
    for n in [-1, 0, 1, 2, 3, 4, 5, 7, 8]:
        found, count = compiled(x, n)
        expected, expected_count = _memberships(x, n)
        assert [bool(f) for f in found] == expected and int(count) == expected_count
    sized = qjit(lambda x, v: (v in x, v * 1.5 in x), autograph=True, abstracted_axes={0: "n"})
    for x in (np.arange(4.0), np.zeros(0)):
        assert [bool(b) for b in sized(x, 2)] == [2 in list(x), 3.0 in list(x)]


def _generators_and_sorted(x, n):
    visited = []
    decided = any(visited.append(k) or k > 1 for k in range(5))  # Python stops at k = 2
    found = [any(v > 1 for v in x), all(v != 0 for v in x), any(v > 9 for v in x), all(v > -9 for v in x)]
    found += [any(i == n for i in range(4)), all(x[i] < 5 for i in range(3))]
    extremes = [min(v * v for v in x), max(abs(v) for v in x)]
    ordered = sorted(x)
    return found, extremes, [ordered[0], ordered[-1], sorted(x, reverse=True)[0]], (decided, len(visited))


def test_reductions_of_generators_and_sorted_of_traced_values_equal_pythons():
    compiled = qjit(_generators_and_sorted, autograph=True)
    for x, n in [(np.array([1.0, -1.0, 2.0]), 2), (np.array([0.5, 0.0, -3.0]), 7)]:
        ours, expected = compiled(x, n), _generators_and_sorted(x, n)
        assert jax.tree.map(lambda v: float(v), ours) == jax.tree.map(float, expected)


def _positive_at(x, i):
    return i < x.shape[0] and x[i] > 0


def _outside_or_not_positive(x, i):
    return i >= x.shape[0] or x[i] <= 0


def _scaled_if_inside(x, i):
    r = 0.0
    if i < x.shape[0] and x[i] > 0:
        r = x[i] * 2.0
    return r


def _count_positive_from(x, i):
    n = 0
    if i < x.shape[0] and x[i] > 0:
        n = 1
    if i + 1 < x.shape[0] and x[i + 1] > 0:
        n = n + 1
    return n


@pytest.mark.parametrize("fn", [_positive_at, _outside_or_not_positive, _scaled_if_inside, _count_positive_from])
def test_and_or_on_a_size_condition_evaluate_their_right_operand_only_when_python_does(fn):
    # `i < len(x) and x[i] > 0`: for an empty x (or i past its end) Python never reads x[i], which
    # JAX refuses to trace for an empty x; a compiled `and`/`or` must give Python's value.
    f = qjit(fn, autograph=True, abstracted_axes={0: "n"})
    for values in ([], [2.0], [1.0, -1.0, 3.0]):
        x = np.array(values)
        for i in range(len(values) + 2):
            assert float(f(x, i)) == float(fn(x, i)), (values, i)


def test_while_condition_with_and_reads_the_array_only_inside_it():
    def first_not_positive(x):
        i = 0
        while i < x.shape[0] and x[i] > 0:
            i += 1
        return i

    f = qjit(first_not_positive, autograph=True, abstracted_axes={0: "n"})
    for values in ([], [5.0], [-1.0], [1.0, 2.0, 3.0], [1.0, -1.0, 2.0]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", AutoGraphWarning)  # the empty x too: a compiled loop
            assert int(f(np.array(values))) == first_not_positive(np.array(values)), values


def _first_not_positive_from(x, i):
    while i < len(x) and x[i] > 0:
        i += 1
    return i


def _sum_of_the_positive_run_from(x, i):
    total = 0.0
    while i < x.shape[0] and x[i] > 0:
        total += x[i]
        i += 1
    return total


def _first_not_positive_by_or(x, i):
    while not (i >= len(x) or x[i] <= 0):
        i += 1
    return i


def _first_not_positive_explicit(x, i):
    def positive_inside(j):
        @cond(j < x.shape[0])
        def inside():
            return x[j] > 0

        @inside.otherwise
        def outside():
            return False

        return inside()

    return while_loop(positive_inside)(lambda j: j + 1)(i)


@pytest.mark.parametrize("fn, reference", [
    (_first_not_positive_from, _first_not_positive_from),
    (_sum_of_the_positive_run_from, _sum_of_the_positive_run_from),
    (_first_not_positive_by_or, _first_not_positive_by_or),
    (_first_not_positive_explicit, _first_not_positive_from),
])
def test_while_condition_with_and_from_a_traced_start_reads_the_array_only_as_python(fn, reference):
    """``while i < len(x) and x[i] > 0`` from an argument ``i``: Python never reads ``x[i]`` of an
    empty ``x``, in the condition or the body; compiled, it was JAX's IndexError (the explicit
    while_loop with a cond) or a Python loop unrolled (with a warning)."""
    f = qjit(fn, autograph=True, abstracted_axes={0: "n"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoGraphWarning)
        for values in ([2.0], [], [1.0, -1.0, 3.0], [], [4.0, 5.0]):
            x = np.array(values)
            for i in range(len(values) + 2):
                assert float(f(x, i)) == float(reference(x, i)), (values, i)


# --- for and while -------------------------------------------------------------------------------


@qjit(autograph=True)
def strided(lower: int, upper: int, step: int):
    total = 0
    for i in range(lower, upper, step):
        total = total + i * i
    return total


@qjit
def strided_explicit(lower: int, upper: int, step: int):
    @for_loop(lower, upper, step)
    def body(i, total):
        return total + i * i

    return body(0)


@pytest.mark.parametrize("bounds", [(0, 10, 1), (3, 20, 4), (10, 0, -2), (5, 5, 1)])
def test_for_range_with_traced_bounds(bounds):
    assert int(strided(*bounds)) == int(strided_explicit(*bounds)) == sum(i * i for i in range(*bounds))
    assert skeleton(strided.jaxpr) == skeleton(strided_explicit.jaxpr)


def test_for_over_array_rows_and_enumerate():
    @qjit(autograph=True, abstracted_axes={0: "n"})
    def f(x):
        s = jnp.zeros(x.shape[1:])
        for row in x:
            s = s + row
        t = 0.0
        for i, row in enumerate(x):
            t = t + i * jnp.sum(row)
        return s, t

    @qjit(abstracted_axes={0: "n"})
    def explicit(x):
        @for_loop(0, x.shape[0], 1)
        def rows(i, s):
            return s + x[i]

        @for_loop(0, x.shape[0], 1)
        def counted(i, t):
            return t + i * jnp.sum(x[i])

        return rows(jnp.zeros(x.shape[1:])), counted(0.0)

    for n in (3, 5):
        x = np.arange(2.0 * n).reshape(n, 2)
        s, t = f(x)
        np.testing.assert_allclose(s, x.sum(0))
        assert float(t) == sum(i * x[i].sum() for i in range(n))
        assert [float(v) for v in explicit(x)[1:]] == [float(t)]
    assert skeleton(f.jaxpr) == skeleton(explicit.jaxpr)


def test_for_over_a_python_list_is_unrolled():
    @qjit(autograph=True)
    def f(x: float):
        s = 0.0
        for scale, shift in [(1.0, 0.0), (2.0, 1.0), (3.0, -1.0)]:
            if scale > 1.5:  # concrete: stays Python
                s = s + scale * x + shift
        return s

    assert float(f(2.0)) == (2 * 2 + 1) + (3 * 2 - 1)
    assert control_flow_of(f.jaxpr) == []


@qjit(autograph=True)
def halvings(x: float):
    n = 0
    while x > 1.0 and n < 100:
        x = x / 2
        n += 1
    return n, x


@qjit
def halvings_explicit(x: float):
    @while_loop(lambda n, x: jnp.logical_and(x > 1.0, n < 100))
    def loop(n, x):
        x = x / 2
        return n + 1, x

    return loop(0, x)


def test_while_with_a_traced_condition():
    for x in (0.5, 10.0, 1000.0):
        n, y = halvings(x)
        ref_n = int(np.ceil(np.log2(x))) if x > 1 else 0
        assert (int(n), float(y)) == (ref_n, x / 2**ref_n)
        assert [float(v) for v in halvings_explicit(x)] == [float(n), float(y)]
    assert skeleton(halvings.jaxpr) == skeleton(halvings_explicit.jaxpr)


def test_nested_loops_and_conditionals():
    @qjit(autograph=True)
    def f(n: int, m: int):
        s = 0
        for i in range(n):
            j = 0
            while j < m:
                if (i + j) % 2 == 0:
                    s = s + i * j
                j += 1
        return s

    @qjit
    def explicit(n: int, m: int):
        @for_loop(0, n, 1)
        def outer(i, s):
            @while_loop(lambda j, s: j < m)
            def inner(j, s):
                @cond((i + j) % 2 == 0)
                def add():
                    return s + i * j

                @add.otherwise
                def add():
                    return s

                return j + 1, add()

            return inner(0, s)[1]

        return outer(0)

    reference = sum(i * j for i in range(4) for j in range(5) if (i + j) % 2 == 0)
    assert int(f(4, 5)) == int(explicit(4, 5)) == reference
    assert control_flow_of(f.jaxpr) == control_flow_of(explicit.jaxpr) == [
        ("for_loop", [[("while_loop", [[], [("cond", [[], []])]])]])
    ]


def test_break_and_continue_in_while_continue_in_for():
    @qjit(autograph=True)
    def f(n: int):
        i, found = 0, -1
        while True:
            if i * i > n:
                found = i
                break
            i += 1
        odd = 0
        for k in range(n):
            if k % 2 == 0:
                continue
            odd += k
        return found, odd

    for n in (0, 10, 50):
        found = next(i for i in range(100) if i * i > n)
        assert [int(v) for v in f(n)] == [found, sum(k for k in range(n) if k % 2)]


def first_above(x, t):
    for i, v in enumerate(x):
        if v > t:
            return i
    return -1


def partial_sums(lower, upper, step, limit):
    s = 0
    for i in range(lower, upper, step):
        if s > limit:
            break
        s = s + i
    return s


def first_square_above(n, t):
    i = 0
    while i < n:
        if i * i > t:
            return i * 1.5
        i += 1
    return -1.0


def test_break_and_return_in_compiled_for_and_while_loops():
    # Catalyst 0.15 fails on break/return in a for loop (AssertionError) and on return in a while
    ours = qjit(autograph=True, abstracted_axes={0: "n"})(first_above)
    for x in ([1.0, 3.0, 5.0], [0.0, 0.5], [4.0]):
        assert int(ours(np.array(x), 2.0)) == first_above(x, 2.0)
    # the loop, then `return -1` for a function that did not return inside it
    assert [name for name, _ in control_flow_of(ours.jaxpr)] == ["while_loop", "cond"]

    @qjit
    def partial_sums_explicit(lower: int, upper: int, step: int, limit: int):
        @while_loop(lambda i, s: jnp.logical_and(jnp.where(step > 0, i < upper, i > upper), s <= limit))
        def loop(i, s):
            return i + step, s + i

        return loop(lower, 0)[1]

    ours = qjit(autograph=True)(partial_sums)
    for bounds in [(0, 10, 1, 10), (10, 0, -2, 15), (0, 10, 3, 100), (5, 5, 1, 0), (0, 20, 1, 1000)]:
        assert int(ours(*bounds)) == int(partial_sums_explicit(*bounds)) == partial_sums(*bounds)
    assert [name for name, _ in control_flow_of(ours.jaxpr)] == ["while_loop"]

    ours = qjit(autograph=True)(first_square_above)
    for n, t in [(10, 10), (2, 10), (0, 0)]:
        result = ours(n, t)
        assert result.dtype == jnp.float64 and float(result) == first_square_above(n, t)


class Finder:
    def __init__(self, threshold):
        self.threshold = threshold

    def index(self, x):
        for i, v in enumerate(x):
            if v > self.threshold:
                return i
        return -1


def first_multiple(k, n):
    for i in range(1, n):
        if i % k == 0:
            return i
    return n


def pair_with_product(n, target):
    j = 0
    while j < n:
        for i in range(j):
            if i * j == target:
                return i + 100 * j
        j += 1
    return -1


def test_returns_from_loops_in_called_functions_methods_and_nested_loops():
    @qjit(autograph=True)
    def f(x, n: int, target: int):
        total = 0
        for k in range(2, 5):
            total = total + first_multiple(k, n)
        return total, Finder(2.0).index(x), pair_with_product(n, target)

    for x, n, target in [([1.0, 3.0], 10, 6), ([0.0, 1.0], 3, 6), ([5.0], 6, 12)]:
        expected = (sum(first_multiple(k, n) for k in range(2, 5)), Finder(2.0).index(x), pair_with_product(n, target))
        assert tuple(int(v) for v in f(np.array(x), n, target)) == expected


def test_break_in_loops_unrolled_in_python():
    # a Python list: unrolled, every iteration after a traced `break` test runs under a cond
    def until_above(x):
        s = 0.0
        for c in [1.0, 2.0, 3.0]:
            if s > x:
                break
            s = s + c
        return s

    ours = qjit(autograph=True)(until_above)
    assert [float(ours(x)) for x in (-1.0, 0.5, 1.5, 10.0)] == [until_above(x) for x in (-1.0, 0.5, 1.5, 10.0)]
    assert {name for name, _ in control_flow_of(ours.jaxpr)} == {"cond"}  # unrolled: no loop

    # a known range whose body indexes a Python list: runs in Python, and still stops at `break`
    def head(x):
        coeffs = [1.0, 2.0, 3.0, 4.0]
        for i in range(4):
            if i == 2:
                break
            x = x + coeffs[i]
        return x

    with pytest.warns(AutoGraphWarning, match="runs as a Python loop"):
        ours = qjit(autograph=True)(head)
        assert float(ours(1.0)) == head(1.0) == 4.0


def test_nested_functions_decorated_with_lambdas():
    # (malt's analyses, and Catalyst 0.15, fail on a lambda in a decorator: KeyError)
    @qjit(autograph=True)
    def f(n: int):
        @while_loop(lambda i, s: i < n)
        def loop(i, s):
            if i % 2 == 0:
                s = s + i
            return i + 1, s

        return loop(0, 0)

    for n in (0, 5, 8):
        assert [int(v) for v in f(n)] == [n, sum(i for i in range(n) if i % 2 == 0)]


def test_builtins_on_traced_values():
    @qjit(autograph=True, abstracted_axes={0: "n"})
    def f(x, y: float):
        return max(x), min(x), max(y, 0.0, -y), min(y, 1), any(x > 2), all(x > 0), sum(x), any([y]), all([y, 1])

    @qjit(autograph=True)
    def downwards(n: int, k: int, x):
        digits = 0
        for i in reversed(range(1, n, k)):
            digits = digits * 10 + i
        rows = 0.0
        for v in reversed(x):
            rows = rows * 10 + v
        return digits, rows

    for x, y in [([0.5, 2.0, 3.0], -2.0), ([1.0, 1.5], 0.5), ([-1.0], 3.0)]:
        expected = (
            max(x), min(x), max(y, 0.0, -y), min(y, 1), any(v > 2 for v in x), all(v > 0 for v in x), sum(x),
            any([y]), all([y, 1]),
        )
        assert [v.item() for v in f(np.array(x), y)] == list(expected)
    for n, k in [(8, 3), (1, 2), (0, -2), (9, -2), (5, 1)]:
        x = np.arange(1.0, 4.0)
        digits = 0
        for i in reversed(range(1, n, k)):
            digits = digits * 10 + i
        assert [v.item() for v in downwards(n, k, x)] == [digits, 321.0]


def test_nonlocal_variables_assigned_by_called_functions():
    # a compiled block runs once while tracing: `count` would end at 1 (silently, as in Catalyst)
    def counted(n):
        count = 0

        def tick():
            nonlocal count
            count = count + 1

        for _ in range(3):
            tick()
        return count + n

    with pytest.warns(AutoGraphWarning, match="assigns 'count' of an enclosing function"):
        ours = qjit(autograph=True)(counted)
        assert int(ours(10)) == counted(10) == 13  # a known range: runs in Python

    def program():
        @qjit(autograph=True)
        def f(n: int, x: float):
            count = 0

            def tick():
                nonlocal count
                count = count + 1

            if x > 0:
                tick()
            return count

    check_error(program, AutoGraphError, "assigns 'count' of an enclosing function", "if x > 0")


def test_assert_on_traced_values_is_checked_at_run_time():
    from catalyst_lite import debug_assert
    from catalyst_lite.errors import DebugAssertionError

    @qjit(autograph=True)
    def f(x: float, n: int):
        assert n >= 0, f"n={n} must not be negative"  # (malt's own pass refuses such messages)
        if x > 1:
            assert x < 10
        return x * 2

    @qjit
    def explicit(x: float, n: int):
        debug_assert(n >= 0, "n must not be negative")
        cond(x > 1)(lambda: debug_assert(x < 10, "x < 10"))()
        return x * 2

    assert float(f(2.0, 1)) == float(explicit(2.0, 1)) == 4.0
    for args in [(20.0, 1), (2.0, -1)]:
        for program in (f, explicit):
            with pytest.raises(DebugAssertionError):
                program(*args)
    with pytest.raises(DebugAssertionError, match=f"`assert` failed at {HERE}:{line_of(f, 'assert x < 10')}"):
        f(20.0, 1)

    @qjit(autograph=True, static_argnums=1)
    def g(x: float, n: int):
        assert n > 2, "n too small"  # a static value: Python's assert, while tracing
        return x * n

    assert float(g(2.0, 3)) == 6.0
    with pytest.raises(AssertionError, match="n too small"):
        g(2.0, 1)


def test_len_of_a_traced_range():
    @qjit(autograph=True)
    def f(a: int, b: int, k: int):
        return len(range(a, b, k)), len(range(b))

    for args in [(2, 7, 1), (7, 2, 1), (0, 10, 3), (10, -1, -4), (3, 3, 2)]:
        assert [int(v) for v in f(*args)] == [len(range(*args)), len(range(args[1]))]


def test_reductions_of_a_traced_range_equal_pythons():
    def reductions(a: int, b: int, k: int):
        return (
            sum(range(a, b, k)), sum(range(b), 0.5), min(range(a, b + 20, 3)), max(range(b, a - 20, -3)),
            any(range(a, b, k)), all(range(a, b, k)), any(range(b, a, -1)),
        )

    compiled = qjit(autograph=True)(reductions)
    for args in [(2, 7, 1), (7, 2, 1), (0, 10, 3), (10, -1, -4), (3, 3, 2), (-3, 4, 2)]:
        assert [float(v) for v in compiled(*args)] == [float(v) for v in reductions(*args)]


def test_item_assignment_becomes_at_set():
    @qjit(autograph=True)
    def f(n: int):
        x = jnp.zeros(6)
        m = jnp.zeros((3, 3))
        for i in range(n):
            x[i] = i * 2.0
            m[i % 3, i % 3] += 1.0
        x[4:] = -1.0
        return x, m

    @qjit
    def explicit(n: int):
        @for_loop(0, n, 1)
        def body(i, x, m):
            x = x.at[i].set(i * 2.0)
            k = (i % 3, i % 3)
            return x, m.at[k].set(m[k] + 1.0)

        x, m = body(jnp.zeros(6), jnp.zeros((3, 3)))
        return x.at[4:].set(-1.0), m

    x, m = f(4)
    assert x.tolist() == [0.0, 2.0, 4.0, 6.0, -1.0, -1.0]
    np.testing.assert_array_equal(m, np.diag([2.0, 1.0, 1.0]))
    assert skeleton(f.jaxpr) == skeleton(explicit.jaxpr)


class Tally:
    def __init__(self):
        self.total = 0.0
        self.buffer = jnp.zeros(4)

    def run(self, x, n):
        for i in range(n):
            self.total = self.total + i
            self.buffer[i] = i * 2.0
        if x > 0:
            self.total = self.total * x
        return self.total, self.buffer


def test_attributes_as_loop_and_branch_variables():
    # (malt reads them with `ag__.ldu`, which catalyst_lite lacked: an AttributeError)
    @qjit(autograph=True)
    def f(x: float, n: int):
        return Tally().run(x, n)

    @qjit
    def explicit(x: float, n: int):
        @for_loop(0, n, 1)
        def loop(i, carry):
            total, buffer = carry
            return total + i, buffer.at[i].set(i * 2.0)

        total, buffer = loop((0.0, jnp.zeros(4)))
        return cond(x > 0)(lambda: total * x).otherwise(lambda: total)(), buffer

    for x, n in [(2.0, 3), (-1.0, 4), (1.5, 0)]:
        expected = [0.0, 0.0, 0.0, 0.0]
        for i in range(n):
            expected[i] = i * 2.0
        total = sum(range(n)) * (x if x > 0 else 1.0)
        for ours in (f(x, n), explicit(x, n)):
            assert float(ours[0]) == total and ours[1].tolist() == expected
    assert control_flow_of(f.jaxpr) == control_flow_of(explicit.jaxpr)


class _Running:
    """State updated by methods: compiled control flow calling them carries what they assign."""

    def __init__(self):
        self.total, self.calls = 0.0, 0

    def add(self, v):
        self.total = self.total + v
        self.calls += 1

    def add_positive(self, v):
        if v > 0:
            self.add(v)

    def run(self, xs):
        for v in xs:
            self.add_positive(v)
        return self.total


def _state_through_methods(x, n):
    r = _Running()
    for i in range(n):  # a traced range
        r.add(i * 1.0)
    for i in range(3):  # a known range (it ran as a Python loop, with a warning)
        r.add(i * x[0])
    k = 0
    while r.calls < 2 * n + 3:
        r.add_positive(x[k % len(x)])
        k += 1
    if x[0] > 1:
        r.add(100.0)
    bonus = r.add(-1.0) if x[0] > 2 else None
    return r.total, r.calls, _Running().run(x)


def test_attributes_assigned_by_called_methods_flow_through_loops_and_branches():
    compiled = qjit(_state_through_methods, autograph=True, abstracted_axes={0: "m"})
    for x, n in [(np.array([1.5, -2.0, 3.0]), 3), (np.array([3.0]), 0), (np.array([-1.0, 0.5]), 2)]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", AutoGraphWarning)
            ours = compiled(x, n)
        assert [float(v) for v in ours] == pytest.approx(list(_state_through_methods(x, n)))


def test_an_attribute_a_called_method_assigns_is_checked_as_a_variable():
    class History:
        def __init__(self):
            self.items = []

        def push(self, v):
            self.items = self.items + [v]

    def program():
        @qjit(autograph=True)
        def f(n: int):
            h = History()
            for i in range(n):
                h.push(i)
            return len(h.items)

    check_error(program, AutoGraphError, "Variable 'h.items' is \\[\\] before the `for`", "for i in range(n)")


def _validated(n, checked):
    if checked and n < 0:
        raise ValueError("n must not be negative")
    if n > 100:
        try:
            raise KeyError("caught in the branch")
        except KeyError:
            n = n - 1
    return n


def test_a_raise_in_a_branch_of_a_traced_if_is_explained():
    unchecked = qjit(functools.partial(_validated, checked=False), autograph=True)
    assert [int(unchecked(n)) for n in (3, 101, -2)] == [_validated(n, False) for n in (3, 101, -2)]

    with pytest.raises(ValueError, match="n must not be negative") as info:
        qjit(_validated, autograph=True, static_argnums=1)(3, True)  # Python raises nothing for 3
    error = str(info.value)
    assert isinstance(info.value, AutoGraphError) and "use `assert`" in error
    for statement, text in [("raise", "raise ValueError"), ("if", "if checked")]:
        assert f"`{statement}` at {HERE}:{line_of(_validated, text)}" in error
    with pytest.raises(ValueError, match="^n must not be negative$"):  # a Python condition: Python's error
        qjit(lambda n: _validated(-1, True) + n, autograph=True)(1)


def _countdown(n):
    s = 0
    while (n := n - 1) > 0:
        if n == 7:
            break
        s += n
        if n == 3:
            continue
        s += 100
    else:
        s = -s
    return s, n


def _doubled_in_range(x):
    if (y := x * 2) > 1 and y < 5:
        r = y
    elif (z := (w := x + 1) * 3) < 0:
        r = z + w
    else:
        r = 0.0
    t = 0.0
    for i in range(3):
        r = r + (t := i * x)
    return r, t


@pytest.mark.parametrize("fn, args", [(_countdown, [5, 9, 0]), (_doubled_in_range, [1.0, 0.1, -3.0, 4.0])])
def test_assignment_expressions_in_conditions_and_loops(fn, args):
    compiled = qjit(fn, autograph=True)
    for a in args:
        assert [float(v) for v in compiled(a)] == list(fn(a))


def test_an_assignment_expression_evaluated_only_sometimes_cannot_convert():
    def f(x: float):
        if x > 0 and (y := x * 2) < 5:
            return y
        return 0.0

    with pytest.raises(AutoGraphError, match="evaluated only sometimes .* assign 'y' in a statement before"):
        qjit(f, autograph=True)


def _matched(n, mode):
    match n:
        case 1:
            r = 10.0
        case 2 | 3:
            r = 20.0
        case 4 if n > 100:
            r = 0.0
        case None:
            r = -2.0
        case _:
            r = -1.0
    for i in range(n):
        match mode:  # a static subject: Python's choice
            case "double":
                r = r + 2 * i
            case "square":
                r = r + i * i
    match n * 2:
        case 4:
            return r
        case other:
            return r + other


def test_match_on_a_traced_subject_compares_values():
    for mode in ("double", "square"):
        compiled = qjit(_matched, autograph=True, static_argnums=1)
        for n in (1, 2, 3, 4, 9):
            assert float(compiled(n, mode)) == _matched(n, mode)


def test_zip_of_arrays_and_traced_ranges_is_one_compiled_loop():
    @qjit(autograph=True, abstracted_axes={0: "n"})
    def f(x, y, k: int):
        s = 0.0
        for a, b in zip(x, y):
            s = s + a * b
        for j, (i, a) in enumerate(zip(range(k), x)):
            s = s + i * a * (j + 1)
        return s

    for n, k in [(3, 2), (5, 9), (1, 0)]:
        x, y = np.arange(1.0, n + 1), np.linspace(0.0, 1.0, n)
        expected = sum(a * b for a, b in zip(x, y)) + sum(i * a * (j + 1) for j, (i, a) in enumerate(zip(range(k), x)))
        assert float(f(x, y, k)) == pytest.approx(expected)
    assert [name for name, _ in control_flow_of(f.jaxpr)] == ["for_loop", "for_loop"]


def test_item_assignment_of_python_containers_and_globals_stays_python():
    @qjit(autograph=True)
    def f(x: float):
        d = {"a": x}
        d["b"] = x * 2
        values = [x, x]
        values[1] += 1.0
        return d["b"] + values[1]

    assert float(f(1.0)) == 4.0

    @qjit(autograph=True)
    def g(x: float, n: int):
        d = {"a": 0.0, "b": 0.0}
        if x > 0:
            d["a"] = x  # a traced value: the dict is copied, and flows out of the cond
        for i in range(n):
            d["b"] += i
        return d["a"], d["b"]

    assert [float(v) for v in g(2.0, 4)] == [2.0, 6.0]
    assert [float(v) for v in g(-1.0, 3)] == [0.0, 3.0]


def test_arrays_that_change_size_in_a_loop():
    @qjit(autograph=True)
    def f(n: int):
        a = jnp.zeros(0)
        for i in range(n):
            a = jnp.append(a, i * 1.0)
        return a

    @qjit
    def explicit(n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def body(i, a):
            return jnp.append(a, i * 1.0)

        return body(jnp.zeros(0))

    assert f(4).tolist() == explicit(4).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert skeleton(f.jaxpr) == skeleton(explicit.jaxpr)


def test_a_python_number_takes_the_type_the_loop_gives_it():
    @qjit(autograph=True)
    def f(n: int):
        s = 0
        for i in range(n):
            s = s + 0.5
        return s

    assert f(3).dtype == jnp.float64 and float(f(3)) == 1.5


def test_a_loop_that_cannot_be_compiled_runs_in_python_with_a_warning():
    weights = [1.0, 2.0, 3.0]

    def f(x: float):
        s = 0.0
        for i in range(3):
            s = s + weights[i] * x  # a Python list indexed by the loop index
        return s

    with pytest.warns(AutoGraphWarning, match="Python loop") as record:
        g = qjit(autograph=True)(f)
    loop_line = line_of(test_a_loop_that_cannot_be_compiled_runs_in_python_with_a_warning, "for i in range(3)")
    assert (record[0].filename, record[0].lineno) == (HERE, loop_line)
    assert float(g(2.0)) == 12.0
    assert control_flow_of(g.jaxpr) == []


def test_a_loop_whose_body_raises_while_traced_runs_in_python_with_a_warning():
    def python_int(v):
        if not isinstance(v, int):  # a library that takes Python ints only, say
            raise TypeError(f"a Python int please, not {type(v).__name__}")
        return v

    def counting(x: float):
        for i in range(3):
            x = x * 2 + python_int(i)
        return x

    def stepping(x: float):
        k = 0
        while k < 3:
            x = x * 2
            k = python_int(k) + 1
        return x

    for f in (counting, stepping):
        with pytest.warns(AutoGraphWarning, match=r"TypeError: +a Python int please(?s:.*)runs as a Python loop"):
            g = qjit(autograph=True)(f)
        assert float(g(1.5)) == f(1.5)
        assert control_flow_of(g.jaxpr) == []  # unrolled


def test_a_loop_over_a_traced_array_of_known_length_can_run_in_python():
    def weighted(params):
        labels = ["1", "2", "3"]  # a Python list indexed by the loop index: not compilable
        s = 0.0
        for i, x in enumerate(params):
            s = s + x * int(labels[i])
        return s

    params = np.array([0.5, 1.0, 2.0])
    with pytest.warns(AutoGraphWarning, match="runs as a Python loop"):
        assert float(qjit(autograph=True)(weighted)(params)) == weighted(params)


def _sum_of_list(x):
    s = 0.0
    for v in [1.0, 2.5, 4.0]:
        s = s + v * x
    for i, v in enumerate([3, 5]):
        s = s + i * v
    return s


def _loop_over_labels(x):
    for label in ["a", "b"]:
        x = x + len(label)
    return x


def test_strict_conversion_compiles_loops_over_python_lists(monkeypatch):
    """Without strict conversion a list is iterated by Python; with it (Catalyst's meaning: no
    loop runs in Python while tracing) a list of numbers is an array looped over by compiled
    loops, as Catalyst converts it, and any other list is an error."""
    unrolled = qjit(autograph=True)(_sum_of_list)
    assert float(unrolled(2.0)) == _sum_of_list(2.0) and control_flow_of(unrolled.jaxpr) == []
    monkeypatch.setattr(catalyst_lite, "autograph_strict_conversion", True)
    compiled = qjit(autograph=True)(_sum_of_list)
    assert float(compiled(2.0)) == _sum_of_list(2.0)
    assert [name for name, _ in control_flow_of(compiled.jaxpr)] == ["for_loop", "for_loop"]
    with pytest.raises(AutoGraphError, match=r"Could not convert the iteration target \['a', 'b'\]"):
        qjit(autograph=True)(_loop_over_labels)(1.0)


def test_a_while_whose_condition_ignores_the_loop_variables_is_python():
    @qjit(autograph=True)
    def f(x: float):
        queue = [1.0, 2.0, 3.0]
        s = x
        while queue:  # the body empties a Python list: a Python loop, run while tracing
            s = s * queue.pop()
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(f(2.0)) == 12.0
    assert control_flow_of(f.jaxpr) == []


def test_a_traced_index_used_as_a_python_int_in_a_compiled_loop():
    def program():
        @qjit(autograph=True)
        def f(n: int):
            params = [1.0, 2.0]
            s = 0.0
            for i in range(n):
                s = s + params[i]
            return s

    # Catalyst warns that the loop falls back to Python, then fails with JAX's error: so do we,
    # with an error that is both JAX's (jax.jit fails on this program with it) and AutoGraphError
    with pytest.warns(AutoGraphWarning, match=r"(?s)TracerIntegerConversionError:.*cannot run as a Python loop"):
        err = check_error(program, AutoGraphError, "loop index .* traced .* needs a concrete value", "for i in range(n)")
    assert f"{HERE}:{line_of(program, 'params[i]')}" in str(err)
    assert isinstance(err, jax.errors.TracerIntegerConversionError)
    assert str(err).startswith("The __index__() method was called on traced array")

    def counted(n: int):
        params, s, k = [1.0, 2.0], 0.0, 0
        while k < n:
            s, k = s + params[k], k + 1
        return s

    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(counted)(2)
    with pytest.warns(AutoGraphWarning, match="its condition is traced"):
        with pytest.raises(jax.errors.TracerBoolConversionError, match="the `while` loop .* is compiled") as info:
            qjit(autograph=True)(counted)  # (annotated: compiled at decoration)
    assert isinstance(info.value, jax.errors.TracerIntegerConversionError)  # what params[k] raised


def squares_list(n, x):
    out = []
    for i in range(n):
        out.append(x * i)
    return out


def test_loops_and_branches_that_append_to_python_lists():
    with pytest.warns(AutoGraphWarning, match="changes the Python container 'out'"):
        known = qjit(autograph=True)(lambda x: sum(squares_list(3, x)))  # a known range: Python
        assert float(known(2.0)) == 6.0
    with pytest.raises(AutoGraphError, match="`for` loop .* changes the Python container 'out'"):
        qjit(autograph=True)(lambda x, n: sum(squares_list(n, x)))(2.0, 3)

    def branch(x: float):
        found = []
        if x > 0:
            found.append(x)
        return len(found)

    with pytest.raises(AutoGraphError, match="branch of the `if` .* changes the Python container 'found'"):
        qjit(autograph=True)(branch)


# --- what is converted ---------------------------------------------------------------------------


def absolute(x):
    if x > 0:
        return x
    return -x


class Scaled:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        if x > 0:
            return self.k * x
        return x

    def shifted(self, x):
        for _ in range(3):
            x = x + self.k
        return x


def test_called_user_functions_methods_and_objects_are_converted():
    @qjit(autograph=True)
    def f(x: float):
        s = Scaled(2.0)
        clip = lambda v: v if v < 5 else 5.0  # noqa: E731
        return absolute(x) + s(x) + s.shifted(x) + functools.partial(absolute, x=x)() + clip(x)

    for x in (1.0, -1.0, 4.0):
        s = Scaled(2.0)
        ref = abs(x) + (2 * x if x > 0 else x) + x + 6 + abs(x) + min(x, 5.0)
        assert float(f(x)) == ref
    assert "ag__.if_stmt" in autograph_source(absolute)
    assert "ag__.for_stmt" in autograph_source(Scaled.shifted)


def square_or_negate(x):
    if x > 0:
        return x * x
    return -x


def add_even(i, acc):
    if i % 2 == 0:
        acc = acc + i
    return acc


def test_functions_given_to_catalyst_lite_and_pennylane_are_converted():
    @qjit(autograph=True)
    def f(x: float, n: int):
        return grad(square_or_negate)(x), for_loop(0, n, 1)(add_even)(0), qml.grad(square_or_negate)(x)

    for x, n in [(3.0, 5), (-2.0, 4)]:
        d = 2 * x if x > 0 else -1.0
        assert [float(v) for v in f(x, n)] == [d, sum(i for i in range(n) if i % 2 == 0), d]


def test_disable_autograph_as_decorator_and_context_manager():
    @disable_autograph
    def python_only(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ControlFlowError, match="traced value"):
        qjit(autograph=True)(lambda x: python_only(x))(1.0)

    def f(x: float):
        with disable_autograph:
            y = absolute(x)  # not converted: Python `if` on a traced value
        return y

    with pytest.raises(TypeError, match="traced value"):
        qjit(autograph=True)(f)

    @qjit(autograph=True)
    def g(x: float):
        with disable_autograph:
            if x > 0:  # the block's own statements are still converted
                y = x
            else:
                y = -x
            z = python_only(3.0)  # a concrete value: fine
        return y + z

    assert float(g(-2.0)) == 5.0


def test_library_code_is_not_converted_unless_included(tmp_path):
    source = tmp_path / "helper.py"
    source.write_text("def magnitude(x):\n    if x > 0:\n        return x\n    return -x\n")
    spec = importlib.util.spec_from_file_location("numpy.catalyst_lite_test_helper", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def f(x):
        return module.magnitude(x)

    with pytest.raises(ControlFlowError, match="traced value"):
        qjit(autograph=True)(f)(1.0)
    assert float(qjit(autograph=True, autograph_include=["numpy.catalyst_lite_test_helper"])(f)(-3.0)) == 3.0
    through_pennylane = qml.qjit(f, compiler="catalyst_lite", autograph=True,
                                 autograph_include=["numpy.catalyst_lite_test_helper"])
    assert float(through_pennylane(-4.0)) == 4.0


def test_autograph_source_and_run_autograph():
    def count(n):
        steps = 0
        while n > 1:
            n = n // 2
            steps += 1
        return steps

    converted = run_autograph(count)
    assert converted(40) == 5  # outside qjit: Python semantics, Python values
    compiled = qjit(converted)
    assert int(compiled(40)) == 5 and control_flow_of(compiled.jaxpr) == [("while_loop", [[], []])]
    assert "ag__.while_stmt" in autograph_source(count)
    assert "def ag__piecewise" in autograph_source(piecewise)

    def never(x):
        return x

    with pytest.raises(AutoGraphError, match="not converted"):
        autograph_source(never)


# --- errors --------------------------------------------------------------------------------------


def check_error(program, error: type, match: str, text: str):
    """``program`` raises ``error`` naming its file and the line containing ``text``; ``program``
    may be one of autograph_error_programs (then built with catalyst_lite)."""
    source = inspect.getsourcefile(program)
    run = functools.partial(program, catalyst_lite) if program.__module__ == error_programs.__name__ else program
    with pytest.raises(error, match=match) as info:
        run()
    assert f"{source}:{line_of(program, text)}" in str(info.value), str(info.value)
    return info.value


def _int_or_minus_one(n: int):
    try:
        v = int(n)
    except TypeError:
        v = -1
    return v


def _float_or_default(x: float):
    try:
        v = float(x) * 2
    except Exception:  # noqa: BLE001
        v = -1.0
    return v


def _truth_or_false(n: int):
    try:
        positive = bool(n > 0)
    except:  # noqa: E722
        positive = False
    return positive


def _suppressed_or_minus_one(n: int):
    v = -1
    with contextlib.suppress(TypeError):
        v = int(n)
    return v


def test_except_does_not_catch_errors_python_does_not_raise():
    # Python runs the `try` body; under tracing, int()/float()/bool() of a traced value raise JAX's
    # error, which these handlers would catch (a wrong result): it is raised, naming both lines
    for program, text in [(_int_or_minus_one, "v = int(n)"), (_float_or_default, "v = float(x) * 2"),
                          (_truth_or_false, "positive = bool(n > 0)"), (_suppressed_or_minus_one, "v = int(n)")]:
        with pytest.raises(AutoGraphError, match="would catch it, but Python raises no error") as info:
            qjit(autograph=True)(program)(3)
        for line in (text, "except" if program is not _suppressed_or_minus_one else "with "):
            assert f"{HERE}:{line_of(program, line)}" in str(info.value), str(info.value)
        assert isinstance(info.value, jax.errors.JAXTypeError)  # (as Catalyst raises JAX's error)


def test_except_catches_what_it_names_and_python_errors():
    def deliberate(x: int):  # detects tracing on purpose, as under jax.jit
        try:
            v = int(x)
        except (ValueError, jax.errors.ConcretizationTypeError):
            v = -1
        return v

    def named(x: float):  # `as e`, and an `if` on a traced value in the handler
        try:
            v = {"a": x}["b"]
        except KeyError as e:
            v = x * len(str(e)) if x > 0 else -x
        return v

    def in_a_loop(x: float):  # a known range runs in Python (with a warning) where int() needs it
        s = 0
        for i in range(3):
            try:
                s = s + int(i)
            except TypeError:
                s = -100
        return s * x

    assert int(qjit(autograph=True)(deliberate)(3)) == int(jax.jit(deliberate)(3))
    ours = qjit(autograph=True)(named)
    assert [float(ours(x)) for x in (2.0, -3.0)] == [named(x) for x in (2.0, -3.0)]
    with pytest.warns(AutoGraphWarning):
        assert float(qjit(autograph=True)(in_a_loop)(2.0)) == in_a_loop(2.0)


def test_a_variable_defined_in_only_one_branch():
    # Catalyst 0.15 raises its AutoGraphError here too (test_autograph_catalyst.py)
    check_error(
        error_programs.undefined_in_a_branch, AutoGraphError, "'y' is assigned in only some branches", "if x > 0"
    )


def test_branches_of_different_rank_or_structure():
    # Catalyst 0.15 raises TypeError for both (AutoGraphError is a TypeError)
    err = check_error(error_programs.rank_mismatch, AutoGraphError, r"'y' is float64\[2,2\] in one branch", "if x > 0")
    assert isinstance(err, TypeError) and isinstance(err, CatalystLiteError)
    check_error(error_programs.structure_mismatch, TypeError, "'y' is .* in one branch", "if x > 0")

    def two_functions():
        @qjit(autograph=True)
        def f(x: float):
            if x > 0:
                g = lambda v: v + 1  # noqa: E731
            else:
                g = lambda v: v - 1  # noqa: E731
            return g(x)

    check_error(two_functions, AutoGraphError, "'g' is a function in one branch .* and another function in", "if x > 0")


def test_branches_giving_an_array_different_known_sizes_name_the_variable():
    # cond alone can only say "result 1"; the error names the variable (or the return value)
    def assigned():
        @qjit(autograph=True)
        def f(x: float):
            if x > 0:
                y = jnp.ones(3)
            else:
                y = jnp.zeros(4)
            return y

    def returned():
        @qjit(autograph=True)
        def f(x: float):
            if x > 0:
                return jnp.ones((2, 3))
            return jnp.zeros((2, 5))

    def in_a_tuple_in_an_elif():
        @qjit(autograph=True)
        def f(x: float):
            pair = (x, jnp.ones(2))
            if x > 1:
                pair = (x * 2, jnp.ones(2))
            elif x > 0:
                pair = (x, jnp.zeros(6))
            return pair

    sizes = "array shape per result"
    check_error(assigned, AutoGraphError, rf"{sizes}.*'y' is float64\[3\] in one branch.*float64\[4\]", "if x > 0")
    check_error(returned, AutoGraphError, rf"{sizes}.*return value is float64\[2,3\]", "if x > 0")
    check_error(in_a_tuple_in_an_elif, AutoGraphError, rf"{sizes}.*'pair' is .*float64\[6\]", "elif x > 0")

    def symbolic(x: float, n: int):  # sizes known only at run time may differ
        y = jnp.ones(n) if x > 0 else jnp.zeros(n + 1)
        return jnp.sum(y) + y.shape[0]

    ours = qjit(autograph=True)(symbolic)
    assert [float(ours(x, 3)) for x in (1.0, -1.0)] == [float(symbolic(x, 3)) for x in (1.0, -1.0)]


def _clipped_or_default(x: float):
    if x > 1.0:
        y = x - 1.0
    elif x < -1.0:
        y = -x * 2.0
    else:
        return 0.5  # y has no value on this path, which returns
    return y * 3.0


def test_a_variable_unassigned_only_on_a_path_that_returns():
    ours = qjit(autograph=True)(_clipped_or_default)
    assert [float(ours(x)) for x in (2.5, -3.0, 0.2)] == [_clipped_or_default(x) for x in (2.5, -3.0, 0.2)]


def test_returning_on_some_paths_only():
    def program():
        @qjit(autograph=True)
        def f(x: float):
            if x > 0:
                return x

    check_error(program, AutoGraphError, "returns a value in some branches", "if x > 0")


def test_a_function_returning_from_a_loop_on_some_paths_only():
    def program():
        @qjit(autograph=True)
        def f(n: int):
            for i in range(n):
                if i == 3:
                    return i

    check_error(program, AutoGraphError, "returns a value in some branches", "if i == 3")


def test_loop_variables_must_start_defined_and_keep_their_type():
    def undefined():
        @qjit(autograph=True)
        def f(n: int):
            for i in range(n):
                last = i
            return last

    def retyped():
        @qjit(autograph=True)
        def f(n: int):
            s = jnp.zeros(3, dtype=int)
            for i in range(n):
                s = s + 0.5
            return s

    check_error(undefined, AutoGraphError, "'last' is first assigned inside the `for` loop", "for i in range(n)")
    check_error(retyped, AutoGraphError, r"'s' is int64\[3\] before .* float64\[3\]", "for i in range(n)")


def test_an_error_in_converted_code_points_at_the_users_line():
    def program():
        @qjit(autograph=True)
        def f(x: float):
            if x > 0:
                y = jnp.dot(jnp.ones(3), jnp.ones(4))
            else:
                y = x
            return y

    with pytest.raises(TypeError, match="dot_general") as info:
        program()
    line = line_of(program, "jnp.dot")
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(f.filename == HERE and f.lineno == line and "jnp.dot" in f.line for f in frames)
    assert not any("autograph_generated" in f.filename for f in frames)


def test_functions_without_source_code():
    namespace: dict = {}
    exec("def no_source(x):\n    return x * 2.0\n", namespace)  # exec'd code has no source to read
    with pytest.raises(AutoGraphError, match="'no_source' .* source code is not available"):
        qjit(autograph=True)(namespace["no_source"])

    def calls_it(x):
        return namespace["no_source"](x) + 1.0

    with pytest.warns(AutoGraphWarning, match="runs unconverted"):
        assert float(qjit(autograph=True)(calls_it)(1.0)) == 3.0


def test_an_array_condition_is_ambiguous():
    def program():
        @qjit(autograph=True)
        def f(x: jax.ShapeDtypeStruct((3,), jnp.float64)):
            if x > 0:
                x = -x
            return x

    check_error(program, AutoGraphError, r"array of shape \(3,\)", "if x > 0")


# --- what autograph=True accepts -------------------------------------------------------------------


def _sign_flip(x):
    if x > 0:
        return x * 2.0
    return -x


def test_callables_and_what_vmap_and_loops_make_compile_with_autograph():
    class Scaled:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            if x > 1.0:
                return x * self.k
            return x

    assert float(qjit(Scaled(3.0), autograph=True)(2.0)) == 6.0
    assert float(qjit(Scaled(3.0), autograph=True)(0.5)) == 0.5
    x = np.array([1.5, -2.0, 0.0])
    np.testing.assert_array_equal(qjit(vmap(_sign_flip), autograph=True)(x), np.where(x > 0, 2 * x, -x))

    @while_loop(lambda a, k: k < 4)
    def doubling(a, k):
        return a * 2.0, k + 1

    @for_loop(0, 5, 1)
    def counting(i, a):
        return a + i

    assert [float(v) for v in qjit(doubling, autograph=True)(1.5, 0)] == [24.0, 4.0]
    assert float(qjit(counting, autograph=True)(1.0)) == 11.0
    k = 3.0

    @cond(k > 2.0)
    def picked():
        return k**2

    @picked.otherwise
    def picked():
        return k

    assert float(qjit(picked, autograph=True)()) == k**2
    assert float(qjit(counting)(1.0)) == 11.0  # the loop takes the carried values, not the index


def test_and_or_of_arrays_are_elementwise():
    @qjit(autograph=True)
    def f(x):
        return (x > 1) and (x < 3), (x < 0) or (x > 2), (x > 0) and True

    x = np.array([-1.0, 0.5, 2.0, 4.0])
    for got, expected in zip(f(x), ((x > 1) & (x < 3), (x < 0) | (x > 2), x > 0)):
        np.testing.assert_array_equal(got, expected)


def test_a_qjit_function_called_from_converted_code_is_converted():
    @qjit
    def inner(x):
        if x > 0:
            return x * 2.0
        return -x

    @qjit(autograph=True)
    def outer(x):
        return inner(x)

    assert [float(outer(v)) for v in (3.0, -4.0)] == [6.0, 4.0]
    assert "ag__.if_stmt" in autograph_source(inner)
    assert outer.user_function.ag_unconverted is outer.original_function


# --- documentation -------------------------------------------------------------------------------


def test_docs_examples_run():
    """docs/autograph.md's Python blocks are real code: run them (with their source known, as
    conversion needs) and check what their comments claim."""
    import linecache
    import pathlib
    import re

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "autograph.md").read_text()
    namespace: dict = {"__name__": "docs_autograph"}
    for k, block in enumerate(re.findall(r"```python\n(.*?)```", doc, re.S)):
        filename = f"docs/autograph.md (block {k})"
        linecache.cache[filename] = (len(block), None, block.splitlines(True), filename)
        exec(compile(block, filename, "exec"), namespace)
    assert [int(namespace["collatz_steps"](n)) for n in (6, 27)] == [8, 111]
    assert -1.0 <= float(namespace["ladder"](0.4, 5)) <= 1.0
    assert [int(namespace["lookup"](i)) for i in (3, 7)] == [9, -1]
    smooth = namespace["smooth"]
    np.testing.assert_allclose(smooth(jnp.arange(3.0), "square"), [0.0, 1.0, 4.0])
    assert control_flow_of(smooth.jaxpr) == []


def test_an_unsupported_construct_is_a_not_implemented_error():
    """Catalyst raises malt's ``UnsupportedLanguageElementError`` (a ``NotImplementedError``) for
    what malt cannot convert (a private ``self.__name``); ours is an ``AutoGraphError`` that is
    also one, naming the function."""

    class Scaled:
        def __init__(self):
            self.__k = 2.0

        def apply(self, x):
            for _ in range(2):
                x = x * self.__k
            return x

    with pytest.raises(NotImplementedError, match="Cannot convert '.*Scaled.apply' .*mangled names"):
        qjit(autograph=True)(Scaled().apply)
    assert float(qjit(Scaled().apply)(1.5)) == 6.0  # without autograph: a Python loop, as written


def _first_above(x, n, limit):
    found = -1
    for i in range(n):
        if x[i] > limit:
            found = i
            break
    else:  # no break: nothing above the limit
        found = n * 10
    k = 0
    while k < n:
        k += 2
    else:
        k = -k
    return found, k


def test_loops_with_an_else_block_run_it_unless_they_break():
    ours = qjit(autograph=True)(_first_above)
    x = np.array([0.5, 3.0, 1.0, 4.0])
    for n, limit in ((4, 2.0), (4, 5.0), (3, 0.0), (0, 0.0)):
        assert [int(v) for v in ours(x, n, limit)] == list(_first_above(x, n, limit))
    assert {"while_loop"} <= {name for name, _ in control_flow_of(ours.jaxpr)}  # compiled loops


# --- Catalyst's conventions and phrases (issue #28) ------------------------------------------------


def test_logical_operators_on_arrays_are_elementwise():
    def both(a, b):
        return a and b

    def either(a, b):
        return a or b

    def negated(a):
        return not a

    a, b = np.array([0, 1, 2, 0]), np.array([1, 1, 0, 0])
    assert np.array_equal(qjit(autograph=True)(both)(a, b), np.logical_and(a, b))
    assert np.array_equal(qjit(autograph=True)(either)(a, b), np.logical_or(a, b))
    assert np.array_equal(qjit(autograph=True)(negated)(a), np.logical_not(a))
    assert bool(qjit(autograph=True)(negated)(0.0)) is (not 0.0)  # a scalar: Python's truth


def _both(a, b):
    return a and b


def _either(a, b):
    return a or b


def _either_half(a):
    return a or 2.5


def test_and_or_of_traced_numbers_give_pythons_value():
    both, either, either_half = (qjit(autograph=True)(f) for f in (_both, _either, _either_half))
    for a, b in ((2.0, 3.0), (0.0, 3.0), (2.0, 0.0), (-1.5, 0.0)):
        assert float(both(a, b)) == _both(a, b) and float(either(a, b)) == _either(a, b)
    assert [float(either_half(a)) for a in (0.0, 4.0)] == [_either_half(a) for a in (0.0, 4.0)]
    flags = [(True, False), (False, True), (True, True)]
    assert [bool(both(p, q)) for p, q in flags] == [_both(p, q) for p, q in flags]  # booleans stay
    # A Python object on the right counts by its truth, on a size condition (an int argument) too.
    listed = qjit(lambda n: 1.0 if (n < 3 and [1]) else 0.0, autograph=True)
    unlisted = qjit(lambda n: 1.0 if (n < 3 and []) else 0.0, autograph=True)
    assert [float(listed(n)) for n in (2, 4)] == [1.0, 0.0] and float(unlisted(2)) == 0.0


def test_true_division_in_place_of_an_integer_array_gives_floats():
    def halve_each(x):
        for i in range(x.shape[0]):
            x[i] /= 2
        return x

    x = np.array([5, 3, 4])
    expected = x.astype(float)
    for i in range(3):
        expected[i] /= 2  # NumPy on floats (JAX's x.at[i].divide(2) of ints gives these too)
    with pytest.warns(AutoGraphWarning):  # the compiled loop would change the array's dtype
        ours = qjit(autograph=True)(halve_each)
        result = ours(x)
    assert result.dtype == np.float64 and np.array_equal(result, expected)
    assert np.array_equal(jnp.array(x).at[0].divide(2)[:1], expected[:1])


def test_fallback_warning_names_the_loop_as_a_traceback_does():
    def f():
        total = 0
        names = ["a", "bb", "ccc"]
        for i in range(3):
            total = total + len(names[i])
        return total

    line = inspect.getsourcelines(f)[1] + 3
    with pytest.warns(AutoGraphWarning) as record:
        ours = qjit(autograph=True)(f)
    assert int(ours()) == f() == 6
    text = str(record[0].message)
    assert text.startswith("Tracing of an AutoGraph converted for loop failed with an exception:")
    assert "TracerIntegerConversionError:    The __index__() method was called" in text
    assert f'  File "{HERE}", line {line}, in f\n    for i in range(3):\n' in text


def test_reading_an_unassigned_variable_is_unbound_local_and_autograph_error():
    def f():
        for x in [0, 4, 5]:
            acc = acc + x  # noqa: F821 (read before any assignment)
        return acc

    with pytest.raises(UnboundLocalError):  # plain Python
        f()
    with pytest.raises(AutoGraphError, match="'acc' is potentially uninitialized") as info:
        qjit(autograph=True)(f)
    assert isinstance(info.value, UnboundLocalError)


def test_errors_start_with_catalysts_phrases():
    with pytest.raises(AutoGraphError, match="^Unsupported object for transformation"):
        run_autograph(42)

    def square(x):
        return x**2

    with pytest.raises(AutoGraphError, match="function was not converted by AutoGraph"):
        autograph_source(qjit(square))
    with pytest.raises(
        catalyst_lite.CompileError, match="In order for 'autograph_include' to work, 'autograph' must be set to True"
    ):
        qjit(autograph_include=["numpy"])(square)

    def starts_as_text(pred: bool):
        x = ""
        while pred:
            x = 3
        return x

    with pytest.raises(AutoGraphError, match="'x' was initialized with type <class 'str'>"):
        qjit(autograph=True)(starts_as_text)

    def first_assigned_in_loop(pred: bool):
        while pred:
            y = 3
        return y

    with pytest.raises(AutoGraphError, match="'y' is potentially uninitialized"):
        qjit(autograph=True)(first_assigned_in_loop)

    @qml.qnode(qml.device("default.qubit", wires=1))
    def measured(switch: bool):
        if switch:
            return qml.expval(qml.PauliY(0))
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(TypeError, match="requires a consistent return structure"):
        qjit(autograph=True)(measured)


def test_function_defined_in_a_compiled_loop_reads_the_loop_index():
    def doubled_indices(n, weights):
        total = 0.0
        for i, w in enumerate(weights[:n]):
            def term():
                return i * 2.0 * w
            total = total + term()
        for k in range(n):
            def other():
                return k + 1.0
            total = total + other()
        return total

    weights = np.array([1.0, 0.5, 2.0, 3.0])
    ours = qjit(autograph=True)(doubled_indices)
    for n in (4, 2):
        assert float(ours(n, weights)) == doubled_indices(n, weights)
    # compiled loops (n is traced), not Python loops unrolled with a warning
    assert [name for name, _ in control_flow_of(ours.jaxpr)] == ["for_loop", "for_loop"]


def test_conversion_cache_names_each_function_converted():
    """``TRANSFORMER.has_cache`` (Catalyst's way to ask) is true for the compiled function and the
    functions it calls once converted, false for what was never converted; results as Python's."""
    from catalyst_lite.autograph.transformer import TRANSFORMER

    def helper(x):
        if x > 1:
            return x * 2
        return x

    def program(x: float):
        return helper(x) + 1

    def never_compiled(x):
        return x

    assert not TRANSFORMER.has_cache(helper) and not TRANSFORMER.has_cache(program)
    compiled = qjit(program, autograph=True)
    assert TRANSFORMER.has_cache(program) and TRANSFORMER.has_cache(helper)
    assert not TRANSFORMER.has_cache(never_compiled)
    for x in (3.0, 0.5):
        assert compiled(x) == program(x)


def test_the_target_of_a_compiled_loop_after_it():
    """After the loop its target has its last value, as in Python (a traced range, an array's
    rows of any length); a loop that runs no iteration leaves it unassigned, Python's
    UnboundLocalError (also Catalyst's AutoGraphError): while tracing when the trace knows it
    (known bounds, sizes, integer arguments)."""
    def last_index(n, x):
        for i in range(n):
            x = x + i
        return i, x

    compiled = qjit(autograph=True)(last_index)
    assert tuple(int(v) for v in compiled(3, 0)) == last_index(3, 0)
    assert [name for name, _ in control_flow_of(compiled.jaxpr)] == ["for_loop"]

    def last_row(x):
        for row in x:
            pass
        return row

    rows = np.arange(6.0).reshape(3, 2)
    any_length = qjit(autograph=True, abstracted_axes={0: "n"})(last_row)
    np.testing.assert_array_equal(any_length(rows), last_row(rows))

    def never_runs(x):
        for i in range(0):
            x = x + i
        return i

    for program, args in ((last_index, (0, 0)), (never_runs, (1.0,)), (last_row, (np.zeros((0, 2)),))):
        with pytest.raises(UnboundLocalError):
            program(*args)
        compiled = any_length if program is last_row else qjit(autograph=True)(program)
        with pytest.raises(AutoGraphError, match="potentially uninitialized") as raised:
            compiled(*args)
        assert isinstance(raised.value, UnboundLocalError)


def test_the_target_of_a_loop_that_may_run_no_iteration_checked_when_it_runs():
    """A trip count only the program knows: the target read after the loop is checked when it
    runs (Python's UnboundLocalError when the loop ran none); one read only by a function defined
    in the body needs no iteration, as in Python."""
    def last_positive_index(x):
        for i in range(jnp.sum(x > 0)):
            pass
        return i

    compiled = qjit(autograph=True)(last_positive_index)
    some = np.array([1.0, 2.0, -1.0])
    assert int(compiled(some)) == last_positive_index(some)
    with pytest.raises(AutoGraphError, match="'i' is potentially uninitialized") as raised:
        compiled(-np.abs(some))
    assert isinstance(raised.value, UnboundLocalError)

    def read_by_a_closure(n):
        total = 0
        for i in range(n):
            def term():
                return i + 1
            total = total + term()
        return total

    assert int(qjit(autograph=True)(read_by_a_closure)(0)) == read_by_a_closure(0)


class _Base:
    def scale(self, x):
        return x * 2.0


class _Child(_Base):
    def scale(self, x):
        total = super().scale(x)  # zero-argument super() inside converted code
        for i in range(3):
            total = total + eval("i") + len(locals()) * 0.0
        return total


def test_super_eval_and_locals_inside_converted_code_run_as_python():
    def f(x):
        y = _Child().scale(x)
        if x > 0:
            y = y + 1.0
        return y

    for x in (1.5, -2.0):
        assert float(qjit(autograph=True)(f)(x)) == pytest.approx(f(x))
