"""Differential, property-based tests: random programs agree with NumPy and with eager JAX.

Hypothesis draws small programs from a grammar of elementwise operations, reductions, sized
constructors (``jnp.full``/``jnp.arange`` of a symbolic length) and ``for_loop``/``while_loop``/
``cond`` nests, with loop counts that are constants or a traced integer argument, and optionally a
final *resizing* loop that grows the result. One interpreter, :func:`evaluate`, runs a program on
two backends: NumPy with Python control flow (the reference, written independently of JAX) and
jax.numpy with catalyst_lite's control flow. The JAX program is compiled once with ``@qjit`` and
run at several sizes, and also run eagerly outside qjit; all three must agree.

Bounded for CI: ``MAX_EXAMPLES`` programs, each run at ``len(SIZES)`` sizes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.experimental import enable_x64

from catalyst_lite import cond, for_loop, qjit, while_loop

MAX_EXAMPLES = int(os.environ.get("CATALYST_LITE_DIFFERENTIAL_EXAMPLES", "25"))
# (vector length, integer argument k): empty, single and longer vectors; zero-trip loops.
SIZES = [(0, 2), (1, 3), (5, 0)]

# --- the grammar ------------------------------------------------------------------------------------
# A node is a tuple; every vector expression of a scope has that scope's length (the argument's,
# or a loop's carried value's), so elementwise operations always line up.

UNARY = ("sin", "cos", "tanh", "abs", "neg")
BINARY = ("add", "sub", "mul_tanh", "maximum")
COUNTS = st.one_of(st.just(("k",)), st.integers(0, 3).map(lambda c: ("const", c)))
CONSTANTS = st.sampled_from([-1.5, -0.5, 0.25, 1.0, 2.0])


def vector_exprs(depth: int) -> st.SearchStrategy:
    """Vector expressions of the current scope, at most ``depth`` levels deep."""
    leaves = st.one_of(
        st.just(("v",)),
        st.tuples(st.just("full"), CONSTANTS),
        st.just(("arange",)),
        st.just(("index",)),
    )
    if depth == 0:
        return leaves
    sub = body = vector_exprs(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.just("unary"), st.sampled_from(UNARY), sub),
        st.tuples(st.just("affine"), CONSTANTS, CONSTANTS, sub),
        st.tuples(st.just("binary"), st.sampled_from(BINARY), sub, sub),
        st.tuples(st.just("reduce"), sub, sub),
        st.tuples(st.just("for"), COUNTS, sub, body),
        st.tuples(st.just("while"), COUNTS, sub, body),
        st.tuples(st.just("cond"), sub, body, body),
    )


@dataclasses.dataclass(frozen=True)
class Program:
    """``body`` over the argument ``x``, then optionally a loop that grows the result."""

    body: tuple
    grow: tuple | None  # (count, per-iteration expression) or None

    def __str__(self) -> str:
        return f"Program(body={self.body!r}, grow={self.grow!r})"


programs = st.builds(
    Program,
    body=vector_exprs(3),
    grow=st.one_of(st.none(), st.tuples(COUNTS, vector_exprs(1))),
)

# --- two backends -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Backend:
    """The operations :func:`evaluate` needs, for one array library."""

    xp: Any
    for_loop: Callable[[Any, Callable, Any], Any]  # (count, body(i, v), init) -> v
    while_loop: Callable[[Any, Callable, Any], Any]  # (count, body(i, v), init) -> v
    cond: Callable[[Any, Callable, Callable], Any]  # (pred, then(), otherwise()) -> v
    grow_loop: Callable[[Any, Callable, Any], Any]  # (count, body(i, v), init) -> v, resizing


def _numpy_for(count, body, init):
    v = init
    for i in range(int(count)):
        v = body(np.int64(i), v)
    return v


def _numpy_while(count, body, init):
    i, v = 0, init
    while i < count:
        i, v = i + 1, body(np.int64(i), v)
    return v


NUMPY = Backend(
    xp=np,
    for_loop=_numpy_for,
    while_loop=_numpy_while,
    cond=lambda pred, then, otherwise: then() if pred else otherwise(),
    grow_loop=_numpy_for,
)


def _jax_for(count, body, init, resizing=False):
    return for_loop(0, count, 1, allow_array_resizing=resizing)(body)(init)


def _jax_while(count, body, init):
    @while_loop(lambda i, v: i < count)
    def loop(i, v):
        return i + 1, body(i, v)

    return loop(0, init)[1]


def _jax_cond(pred, then, otherwise):
    @cond(pred)
    def choose():
        return then()

    @choose.otherwise
    def choose():
        return otherwise()

    return choose()


JAX = Backend(
    xp=jnp,
    for_loop=_jax_for,
    while_loop=_jax_while,
    cond=_jax_cond,
    grow_loop=lambda count, body, init: _jax_for(count, body, init, resizing=True),
)

# --- the interpreter ----------------------------------------------------------------------------------


def _unary(xp, op: str, a):
    return {"sin": xp.sin, "cos": xp.cos, "tanh": xp.tanh, "abs": xp.abs, "neg": lambda t: -t}[op](a)


def _binary(xp, op: str, a, b):
    if op == "mul_tanh":  # bounded, so that nested loops do not overflow
        return a * xp.tanh(b)
    return {"add": lambda: a + b, "sub": lambda: a - b, "maximum": lambda: xp.maximum(a, b)}[op]()


def _count(node: tuple, k):
    return k if node[0] == "k" else node[1]


def evaluate(node: tuple, v, i, k, be: Backend):
    """Value of ``node`` in the scope of vector ``v``, loop index ``i`` and integer argument ``k``."""
    xp, kind = be.xp, node[0]

    def sub(child, scope=v, index=i):
        return evaluate(child, scope, index, k, be)

    if kind == "v":
        return v
    if kind == "full":
        return xp.full(v.shape[0], node[1])
    if kind == "arange":
        return xp.arange(v.shape[0]) * 0.5
    if kind == "index":
        return v + 0.25 * i
    if kind == "unary":
        return _unary(xp, node[1], sub(node[2]))
    if kind == "affine":
        return node[1] * sub(node[3]) + node[2]
    if kind == "binary":
        return _binary(xp, node[1], sub(node[2]), sub(node[3]))
    if kind == "reduce":
        return sub(node[2]) + 0.1 * xp.sum(sub(node[1]))
    if kind == "for":
        return be.for_loop(_count(node[1], k), lambda j, w: sub(node[3], w, j), sub(node[2]))
    if kind == "while":
        return be.while_loop(_count(node[1], k), lambda j, w: sub(node[3], w, j), sub(node[2]))
    if kind == "cond":
        return be.cond(xp.sum(sub(node[1])) > 0, lambda: sub(node[2]), lambda: sub(node[3]))
    raise AssertionError(f"unknown node {node!r}")


def run(program: Program, x, k, be: Backend):
    """The program's results: the body's vector, its sum, and the grown vector (if any)."""
    xp = be.xp
    body = evaluate(program.body, x, 0, k, be)
    results = [body, xp.sum(body)]
    if program.grow is not None:
        count, expr = program.grow

        def grow(j, w):
            return xp.concatenate([evaluate(expr, w, j, k, be), xp.sum(w).reshape(1)])

        results.append(be.grow_loop(_count(count, k), grow, body))
    return results


def _input(n: int):
    return np.linspace(-2.0, 2.0, n)


def _assert_close(actual, expected, what: str) -> None:
    assert len(actual) == len(expected), what
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
        np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-9, equal_nan=True, err_msg=what)


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs)
def test_random_programs_agree_with_numpy_and_eager_jax(program):
    compiled = qjit(lambda x, k: run(program, x, k, JAX), abstracted_axes=({0: "n"}, None))
    for n, k in SIZES:
        x = _input(n)
        expected = run(program, x, k, NUMPY)
        _assert_close(compiled(x, k), expected, f"qjit {program} at n={n}, k={k}")
    # The same program run eagerly (catalyst_lite's control flow outside qjit), at one size.
    n, k = SIZES[-1]
    with enable_x64():
        eager = run(program, jnp.asarray(_input(n)), k, JAX)
    _assert_close(eager, run(program, _input(n), k, NUMPY), f"eager {program} at n={n}, k={k}")


@pytest.mark.parametrize(
    "program",
    [
        Program(("for", ("k",), ("v",), ("binary", "add", ("v",), ("index",))), None),
        Program(("cond", ("v",), ("unary", "sin", ("v",)), ("full", 2.0)), (("k",), ("v",))),
        Program(("while", ("const", 2), ("arange",), ("reduce", ("v",), ("v",))), (("const", 2), ("full", 1.0))),
        # a predicate computed from sizes through arrays (the sum of `full(n, -1.5)`): data, not a size
        Program(("cond", ("full", -1.5), ("v",), ("arange",)), None),
        Program(("cond", ("arange",), ("arange",), ("v",)), None),
    ],
    ids=["for_index", "cond_then_grow", "while_reduce_grow", "cond_on_full", "cond_on_arange"],
)
def test_hand_picked_programs(program):
    """Fixed examples of the grammar (fast to debug when the random test finds a problem)."""
    compiled = qjit(lambda x, k: run(program, x, k, JAX), abstracted_axes=({0: "n"}, None))
    for n, k in SIZES:
        _assert_close(compiled(_input(n), k), run(program, _input(n), k, NUMPY), f"{program} n={n} k={k}")


def test_arange_of_the_carried_length_in_a_preserving_loop():
    """Regression (found by the random test): the length of ``jnp.arange(v.shape[0])`` is the
    carried dimension, which a preserving loop may return."""
    program = Program(("for", ("const", 2), ("v",), ("arange",)), None)
    compiled = qjit(lambda x, k: run(program, x, k, JAX), abstracted_axes=({0: "n"}, None))
    _assert_close(compiled(_input(3), 0), run(program, _input(3), 0, NUMPY), str(program))


def test_arange_of_the_scope_length_in_a_cond_branch():
    """Regression (found by the random test): branches returning ``v`` and
    ``jnp.arange(v.shape[0])`` agree on the dimension, so the result still broadcasts with ``v``."""
    program = Program(("binary", "add", ("v",), ("cond", ("v",), ("v",), ("arange",))), None)
    compiled = qjit(lambda x, k: run(program, x, k, JAX), abstracted_axes=({0: "n"}, None))
    _assert_close(compiled(_input(3), 0), run(program, _input(3), 0, NUMPY), str(program))
