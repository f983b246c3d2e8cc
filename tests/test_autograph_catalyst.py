"""qjit(autograph=True) against Catalyst 0.15's own (where pennylane-catalyst is installed):
the same programs give the same results, and the error cases raise errors of the classes Catalyst
raises (its AutoGraphError is our AutoGraphError; where Catalyst raises a TypeError, ours is one).
Where Catalyst fails on a valid program or with an internal error, that is noted per case."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autograph_error_programs as error_programs
import catalyst_lite
from catalyst_lite import AutoGraphError


@pytest.fixture
def catalyst():
    return pytest.importorskip("catalyst")


def if_else(api):
    @api.qjit(autograph=True)
    def f(x: float):
        if x > 1.0:
            y = x * 2
        elif x > 0:
            y = 1  # promoted to float, as in Catalyst
        else:
            y = -x
        return y

    return f, [(3.0,), (0.5,), (-2.0,)]


def loops(api):
    @api.qjit(autograph=True)
    def f(n: int):
        x = jnp.zeros(6)
        s = 0
        for i in range(n):
            x[i] = i * 2.0
            if i % 2 == 0:
                continue
            s += i
        j = 0
        while j < n and s < 100:
            s = s * 2
            j += 1
        return x, s

    return f, [(0,), (4,), (6,)]


def over_arrays(api):
    @api.qjit(autograph=True)
    def f(x):
        s = 0.0
        for i, v in enumerate(x):
            s = s + i * v
        for v in x:
            s = s - v
        return s

    return f, [(jnp.arange(4.0),)]


def early_return(api):
    @api.qjit(autograph=True)
    def f(x: float):
        if x > 0:
            return x * 3
        return x

    return f, [(2.0,), (-2.0,)]


@pytest.mark.parametrize("program", [if_else, loops, over_arrays, early_return])
def test_same_results_as_catalyst(program, catalyst):
    ours, arguments = program(catalyst_lite)
    theirs, _ = program(catalyst)
    for args in arguments:
        for a, b in zip(jax.tree_util.tree_leaves(ours(*args)), jax.tree_util.tree_leaves(theirs(*args)), strict=True):
            np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


@pytest.mark.parametrize(
    "program",
    [
        error_programs.undefined_in_a_branch,
        error_programs.rank_mismatch,
        error_programs.structure_mismatch,
        error_programs.python_if_in_disabled_function,
    ],
)
def test_error_classes_as_catalyst(program, catalyst):
    with pytest.raises(Exception) as theirs:
        program(catalyst)
    expected = AutoGraphError if isinstance(theirs.value, catalyst.AutoGraphError) else TypeError
    assert isinstance(theirs.value, TypeError) or expected is AutoGraphError
    with pytest.raises(expected):
        program(catalyst_lite)


def break_in_a_for_loop(api):
    @api.qjit(autograph=True)
    def f(n: int):
        s = 0
        for i in range(n):
            if i > 3:
                break
            s += i
        return s

    return f, [(2,), (8,)], [1, 6]


def return_in_a_for_loop(api):
    @api.qjit(autograph=True)
    def f(x):
        for i in range(x.shape[0]):
            if x[i] < 0:
                return i
        return -1

    return f, [(jnp.array([1.0, -1.0]),), (jnp.array([1.0, 2.0]),)], [1, -1]


@pytest.mark.parametrize("program", [break_in_a_for_loop, return_in_a_for_loop])
def test_where_catalyst_fails_internally_we_compile(program, catalyst):
    with pytest.raises(AssertionError):  # Catalyst 0.15: a bare assertion inside its converter
        theirs, arguments, _ = program(catalyst)
        theirs(*arguments[0])
    ours, arguments, expected = program(catalyst_lite)
    assert [int(ours(*args)) for args in arguments] == expected
