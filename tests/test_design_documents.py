"""The example programs of the design documents (shared/seeds 000 and 001) as acceptance tests.

Each program runs under catalyst_lite with the result the documents show, and its jaxpr has the
structure they print (equations, ``body_nconsts``, implicit counts, body argument lists, and which
variables size which arrays). Inputs are float64, as under Catalyst, which enables 64-bit types.
"""

import numpy as np
import jax.numpy as jnp
import pytest

from catalyst_lite import for_loop, qjit, while_loop
from catalyst_lite.errors import DimensionError


def eqns_named(jaxpr, name):
    return [e for e in jaxpr.eqns if e.primitive.name == name]


def the_loop(closed_jaxpr):
    (eqn,) = eqns_named(closed_jaxpr.jaxpr, "for_loop")
    return eqn


def shape_vars(var):
    return [d for d in var.aval.shape if not isinstance(d, int)]


# --- 000, "Overview of the tracing problem" -------------------------------------------------------


@qjit
def overview(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a + a0

    a2 = loop(a0)
    return a0 + a2


def overview_reference(sz):
    a0 = np.ones(sz)
    a = a0
    for _ in range(10):
        a = a + a0
    return a0 + a


@pytest.mark.parametrize("sz", [0, 1, 3, 17])
def test_overview_result(sz):
    np.testing.assert_array_equal(overview(sz), overview_reference(sz))


def test_overview_jaxpr_structure():
    jaxpr = overview.jaxpr.jaxpr
    (a,) = jaxpr.invars
    assert [e.primitive.name for e in jaxpr.eqns] == ["broadcast_in_dim", "for_loop", "add"]
    b = jaxpr.eqns[0].outvars[0]
    assert shape_vars(b) == [a]
    loop = the_loop(overview.jaxpr)
    assert loop.params["body_nconsts"] == 2
    assert loop.params["num_implicit_inputs"] == 0
    assert loop.params["preserve_dimensions"] is True
    assert loop.params["apply_reverse_transform"] is False
    # `a b 0 10 1 0 b`: constants (the size and the captured a0), bounds, start, carried a0.
    ops = loop.invars
    assert ops[0] is a and ops[1] is b and ops[6] is b
    assert [o.val for o in ops[2:6]] == [0, 10, 1, 0]
    # body `{ lambda ; d:i64[] e:f64[d] f:i64[] g:f64[d]. let h:f64[d] = add g e in (h,) }`
    body = loop.params["body_jaxpr"].jaxpr
    d, e, f, g = body.invars
    assert shape_vars(e) == [d] and shape_vars(g) == [d] and f.aval.shape == ()
    (h,) = body.outvars
    assert [x.primitive.name for x in body.eqns] == ["add"] and shape_vars(h) == [d]
    # The loop result has the enclosing size variable.
    (c,) = loop.outvars
    assert shape_vars(c) == [a]


def test_traced_once_for_many_sizes():
    calls = []

    @qjit
    def f(sz: int):
        calls.append(sz)
        return overview.original_function(sz)

    for sz in (2, 5, 9, 1, 30):
        np.testing.assert_array_equal(f(sz), overview_reference(sz))
    assert len(calls) == 1


# --- 000, "Input type deduction in loops": examples 1 and 2 -----------------------------------------


def make_g(preserve):
    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        @for_loop(0, 10, 1, experimental_preserve_dimensions=preserve)
        def loop(_, a):
            if preserve:
                return a * x
            return jnp.ones([a.shape[0] + 1], dtype=float)

        return jnp.sum(loop(y))

    return g


def test_example1_preserved_dimensions():
    g = make_g(True)
    assert float(g(np.ones(3), np.ones(3))) == 3.0
    x, y = np.arange(1.0, 5.0), np.full(4, 0.5)
    np.testing.assert_allclose(g(x, y), np.sum(y * x**10))
    jaxpr = g.jaxpr.jaxpr
    a, b, c = jaxpr.invars
    assert shape_vars(b) == [a] and shape_vars(c) == [a]
    loop = the_loop(g.jaxpr)
    assert (loop.params["body_nconsts"], loop.params["num_implicit_inputs"]) == (2, 0)
    assert loop.params["preserve_dimensions"] is True
    assert loop.invars[0] is a and loop.invars[1] is b and loop.invars[6] is c
    e, f, g_, h = loop.params["body_jaxpr"].jaxpr.invars
    assert shape_vars(f) == [e] and shape_vars(h) == [e]
    assert [x.primitive.name for x in loop.params["body_jaxpr"].jaxpr.eqns] == ["mul"]
    (d,) = loop.outvars
    assert shape_vars(d) == [a]
    assert eqns_named(jaxpr, "reduce_sum")


def test_example2_resizable_dimensions():
    g = make_g(False)
    assert float(g(np.ones(3), np.ones(3))) == 13.0
    assert float(g(np.ones(7), np.ones(7))) == 17.0
    jaxpr = g.jaxpr.jaxpr
    a, b, c = jaxpr.invars
    loop = the_loop(g.jaxpr)
    assert (loop.params["body_nconsts"], loop.params["num_implicit_inputs"]) == (0, 1)
    assert loop.params["preserve_dimensions"] is False
    # `a 0 10 1 0 c`: the carried size, bounds, start, the carried array.
    assert loop.invars[0] is a and loop.invars[5] is c and len(loop.invars) == 6
    # body `{ lambda ; f:i64[] g:i64[] h:f64[f]. ... in (i, j) }` with j:f64[i]
    body = loop.params["body_jaxpr"].jaxpr
    f, g_, h = body.invars
    assert shape_vars(h) == [f]
    i, j = body.outvars
    assert shape_vars(j) == [i]
    assert [x.primitive.name for x in body.eqns] == ["add", "broadcast_in_dim"]
    # `d:i64[] e:f64[d] = for_loop[...]`: 2 results, 1 implicit.
    d, e = loop.outvars
    assert shape_vars(e) == [d]


def test_reference_program_line1_needs_preserved_dimensions():
    """The documents' reference program: line [1] (mixing with a capture) needs preserved sizes."""

    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        @for_loop(0, 10, 1, experimental_preserve_dimensions=False)
        def loop(_, a):
            return a * x

        return jnp.sum(loop(y))

    # The carried array's size is a new symbolic size, which the captured x's size n cannot be
    # known to equal: an error naming the option (not a fallback to per-size tracing).
    with pytest.raises(DimensionError, match="sizes cannot be known equal.*captured from outside"):
        g(np.ones(3), np.ones(3))


def test_a_resizing_while_loop_mixing_its_carry_with_a_capture_is_refused():
    """Line [1]'s mistake under Catalyst's name for the mode (``allow_array_resizing=True``)."""

    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        @while_loop(lambda i, a: i < 3, allow_array_resizing=True)
        def loop(i, a):
            return i + 1, a * x

        return jnp.sum(loop(0, y)[1])

    with pytest.raises(DimensionError, match="while_loop body .*allow_array_resizing=True"):
        g(np.ones(3), np.ones(3))


def test_reference_program_line2_needs_resizing():
    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        @for_loop(0, 10, 1, experimental_preserve_dimensions=True)
        def loop(_, a):
            return jnp.ones([a.shape[0] + 1], dtype=float)

        return jnp.sum(loop(y))

    with pytest.raises(DimensionError, match="allow_array_resizing=True"):
        g(np.ones(3), np.ones(3))


# --- 001, "Tracing problem overview" and the loop expansion examples --------------------------------


@qjit
def circuit_001(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a * sz

    a2 = loop(a0)
    return a0 + a2


@pytest.mark.parametrize("sz", [1, 3, 4])
def test_001_overview(sz):
    np.testing.assert_allclose(circuit_001(sz), np.ones(sz) + np.ones(sz) * float(sz) ** 10)
    loop = the_loop(circuit_001.jaxpr)
    body = loop.params["body_jaxpr"].jaxpr
    # The captured `sz` is the body's constant and also the size of the carried array.
    (sz_const,) = body.invars[: loop.params["body_nconsts"]]
    assert shape_vars(body.invars[-1]) == [sz_const]
    assert "convert_element_type" in [e.primitive.name for e in body.eqns]


def test_001_loop_index_sizes_an_array():
    """`b = jnp.ones([i])`: the loop index sizes the result (an OutDBIdx in the output type)."""

    @qjit
    def f(n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.ones([i], dtype=float)

        return loop(jnp.ones([0]))

    for n in (1, 4, 6):
        np.testing.assert_array_equal(f(n), np.ones(n - 1))
    loop = the_loop(f.jaxpr)
    body = loop.params["body_jaxpr"].jaxpr
    index = body.invars[loop.params["body_nconsts"] + loop.params["num_implicit_inputs"]]
    assert body.outvars[0] is index  # the new size is the loop index itself
    d, e = loop.outvars
    assert shape_vars(e) == [d]


def test_001_shared_dimension_patterns():
    @qjit
    def same(sz: int):
        a0 = jnp.ones([sz]) * 2.0

        @for_loop(0, 10, 1)
        def loop(i, a, a_):
            return a, a_

        return loop(a0, a0)

    r1, r2 = same(3)
    np.testing.assert_array_equal(r1, np.full(3, 2.0))
    np.testing.assert_array_equal(r2, np.full(3, 2.0))

    @qjit
    def both_new(sz: int):
        a0 = jnp.ones([sz])

        @for_loop(0, 10, 1, allow_array_resizing=True)
        def loop(i, a, a_):
            b = jnp.ones([sz + 1], dtype=float)
            return b, b

        return loop(a0, a0)

    r1, r2 = both_new(3)
    assert r1.shape == r2.shape == (4,)

    with pytest.raises(DimensionError, match=r"argument 1: it receives f64\[sz\] but returns f64\[sz \+ 1\].*allow_array_resizing=True"):

        @qjit  # annotated: traced (and rejected) at decoration time
        def one_new(sz: int):
            a0 = jnp.ones([sz])

            @for_loop(0, 10, 1)
            def loop(i, a, a_):
                b = jnp.ones([sz + 1], dtype=float)
                return a, b

            return loop(a0, a0)


def test_001_unshared_dimensions():
    @qjit
    def f(sz: int):
        a0 = jnp.ones([sz])
        b0 = jnp.ones([sz + 1], dtype=float)

        @for_loop(0, 10, 1, experimental_preserve_dimensions=False)
        def loop(i, a, b, b_):
            return a, b, b_

        return loop(a0, b0, b0)

    a, b, b_ = f(2)
    assert a.shape == (2,) and b.shape == b_.shape == (3,)
    loop = the_loop(f.jaxpr)
    assert loop.params["num_implicit_inputs"] == 3  # one carried size per argument, not per shared size
