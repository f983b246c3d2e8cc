"""The JAX rules of catalyst_lite's nested primitives (for_loop, while_loop, cond, differentiate).

- abstract evaluation gives the output type the equation was traced with;
- the type checker (run on every traced program by conftest.py) rejects corrupted equations;
- JVP and batching rules, on symbolic sizes (inside a qjit program: the rules rebind the primitive
  with a transformed body) and on known sizes (the jaxpr evaluated by JAX: its specialization is
  transformed), against finite differences and per-example loops.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import cond, dynamic_jaxprs, for_loop, grad, qjit, while_loop
from catalyst_lite.jax_extras import DShapedArray, InDBIdx, OutDBIdx, Var
from catalyst_lite.jax_extras.typecheck import JaxprTypeError, check_jaxpr, same_type

NESTED = {"for_loop", "while_loop", "cond", "differentiate"}
H = 1e-6  # finite-difference step


def body_for(x, s):
    @for_loop(0, 4, 1)
    def loop(i, a):
        return jnp.sin(a) * x + a * s

    return loop(x)


def body_while(x, s):
    @while_loop(lambda a, k: k < 4)
    def loop(a, k):
        return jnp.sin(a) * x + a * s, k + 1

    return loop(x, 0)[0]


def body_cond(x, s):
    @cond(s > 0)
    def c():
        return jnp.sin(x) * s

    @c.otherwise
    def c():
        return x * x * s

    return c()


BODIES = {"for_loop": body_for, "while_loop": body_while, "cond": body_cond}
X = np.array([0.3, -1.2, 2.0])


def central_difference(f, x, t):
    return (f(x + H * t) - f(x - H * t)) / (2 * H)


# --- abstract evaluation and type checking -------------------------------------------------------


@qjit
def resizing(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def loop(i, a):
        return jnp.ones([i + 1]) * (jnp.sum(a) + 1.0)

    @while_loop(lambda b: b.shape[0] < n + 3, allow_array_resizing=True)
    def grow(b):
        return jnp.concatenate([b, b[:1]])

    @cond(n > 2)
    def pick():
        return jnp.ones([n])

    @pick.otherwise
    def pick():
        return jnp.zeros([2 * n])

    return grow(loop(jnp.zeros([0]))), pick(), grad(lambda y: jnp.sum(jnp.sin(y)))(jnp.ones([n]))


@qjit(abstracted_axes={0: "n"})
def preserving(x, s):
    return body_for(x, s), body_while(x, s), body_cond(x, s)


def nested_equations(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in NESTED:
            yield eqn
        for sub in jax.core.jaxprs_in_params(eqn.params):
            yield from nested_equations(sub)


def substituted(aval, eqn):
    """A result type with its de Bruijn indices replaced by the equation's atoms."""
    if type(aval) is not DShapedArray:
        return aval
    shape = [eqn.invars[d.val] if type(d) is InDBIdx else eqn.outvars[d.val] if type(d) is OutDBIdx else d
             for d in aval.shape]
    shape = [d.val if hasattr(d, "val") and not isinstance(d, Var) else d for d in shape]
    return aval.update(shape=tuple(shape))


@pytest.mark.parametrize("program", [resizing, preserving], ids=["resizing", "preserving"])
def test_abstract_eval_gives_the_traced_output_types(program):
    if program.jaxpr is None:
        program(X, 2.0)
    eqns = list(nested_equations(program.jaxpr.jaxpr))
    assert {e.primitive.name for e in eqns} == ({"for_loop", "while_loop", "cond", "differentiate"}
                                                 if program is resizing else {"for_loop", "while_loop", "cond"})
    for eqn in eqns:
        avals, _ = eqn.primitive.abstract_eval(*[v.aval for v in eqn.invars], **eqn.params)
        assert len(avals) == len(eqn.outvars)
        for aval, var in zip(avals, eqn.outvars):
            assert same_type(substituted(aval, eqn), var.aval), (eqn.primitive, aval, var.aval)


def test_resizing_program_results():
    for n, last in ((4, 16.0), (2, 2.0)):  # sizes 1, 2, ..., n with values 1, 2, 5, 16, ...
        grown, picked, g = resizing(n)
        np.testing.assert_array_equal(grown, np.full(n + 3, last))
        np.testing.assert_array_equal(picked, np.ones(n) if n > 2 else np.zeros(2 * n))
        np.testing.assert_allclose(g, np.cos(np.ones(n)))


def corrupted(program, name, change):
    """``program``'s jaxpr with the first equation of primitive ``name`` changed."""
    jaxpr = program.jaxpr.jaxpr
    k = next(i for i, e in enumerate(jaxpr.eqns) if e.primitive.name == name)
    eqns = list(jaxpr.eqns)
    eqns[k] = change(eqns[k])
    return jaxpr.replace(eqns=eqns)


def with_param(eqn, **params):
    return eqn.replace(params=dict(eqn.params, **params))


def retyped_result(eqn, dtype=np.float32):
    aval = eqn.outvars[-1].aval
    return eqn.replace(outvars=[*eqn.outvars[:-1], Var(aval.update(dtype=np.dtype(dtype)))])


def first_branch_returning(eqn, index):
    b0 = eqn.params["branch_jaxprs"][0]
    bad = b0.replace(jaxpr=b0.jaxpr.replace(outvars=[b0.jaxpr.invars[index]]))
    return with_param(eqn, branch_jaxprs=(bad, *eqn.params["branch_jaxprs"][1:]))


CORRUPTIONS = {
    "for_loop result type": ("for_loop", retyped_result),
    "for_loop constants": ("for_loop", lambda e: with_param(e, body_nconsts=e.params["body_nconsts"] - 1)),
    "while_loop result type": ("while_loop", retyped_result),
    "while_loop carried sizes": ("while_loop", lambda e: with_param(e, num_implicit_inputs=0)),
    "for_loop carried sizes": ("for_loop", lambda e: with_param(e, num_implicit_inputs=0)),
    "cond result type": ("cond", retyped_result),
    "cond branch result": ("cond", lambda e: first_branch_returning(e, 0)),
}


def test_traced_programs_type_check():
    preserving(X, 2.0)
    for program in (resizing, preserving):
        check_jaxpr(program.jaxpr.jaxpr)


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_typecheck_rejects_a_corrupted_equation(corruption):
    preserving(X, 2.0)
    name, change = CORRUPTIONS[corruption]
    program = resizing if "sizes" in corruption or "branch" in corruption else preserving
    resizing(2)
    with pytest.raises(JaxprTypeError):
        check_jaxpr(corrupted(program, name, change))


def test_typecheck_rejects_a_differentiate_without_its_cotangent():
    jaxpr = corrupted(resizing, "differentiate", lambda e: e.replace(invars=e.invars[:-1]))
    with pytest.raises(JaxprTypeError, match="extra operands"):
        check_jaxpr(jaxpr)


# --- rules on symbolic sizes: the primitive is rebound with a transformed body ------------------


def qjit_of(fn):
    return qjit(fn, abstracted_axes=({0: "n"}, {}, {0: "n"}))


@pytest.mark.parametrize("name", sorted(BODIES))
def test_jvp_inside_qjit_rebinds_the_primitive(name):
    body = BODIES[name]
    program = qjit_of(lambda x, s, t: jax.jvp(lambda x: body(x, s), (x,), (t,)))
    t = np.array([1.0, 0.5, -2.0])
    for s in (0.7, -0.4):
        value, tangent = program(X, s, t)
        f = qjit_of(lambda x, s, _: body(x, s))
        np.testing.assert_allclose(value, f(X, s, t), rtol=1e-12)
        np.testing.assert_allclose(tangent, central_difference(lambda x: f(x, s, t), X, t), rtol=1e-6, atol=1e-8)
    (eqn,) = [e for e in program.jaxpr.jaxpr.eqns if e.primitive.name == name]
    # the values, their tangents (and while_loop's integer counter, which has none)
    assert len(eqn.outvars) == (3 if name == "while_loop" else 2)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_linearize_inside_qjit(name):
    body = BODIES[name]

    @qjit_of
    def program(x, s, t):
        value, linear = jax.linearize(lambda x: body(x, s), x)
        return value, linear(t), linear(2 * t)

    t = np.array([0.2, 1.0, -1.0])
    value, tangent, tangent2 = program(X, 0.7, t)
    f = qjit_of(lambda x, s, _: body(x, s))
    np.testing.assert_allclose(value, f(X, 0.7, t), rtol=1e-12)
    np.testing.assert_allclose(tangent, central_difference(lambda x: f(x, 0.7, t), X, t), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tangent2, 2 * tangent, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_vmap_inside_qjit_rebinds_the_primitive(name):
    body = BODIES[name]
    xs = np.stack([X, X + 1.0, -X])

    @qjit(abstracted_axes=({1: "n"}, {}))
    def program(xs, s):
        return jax.vmap(lambda x: body(x, s))(xs)

    f = qjit_of(lambda x, s, _: body(x, s))
    for s in (0.7, -0.4):
        np.testing.assert_allclose(program(xs, s), [f(x, s, x) for x in xs], rtol=1e-12)
    assert [e.primitive.name for e in program.jaxpr.jaxpr.eqns if e.primitive.name in NESTED] == [name]


def test_vmap_inside_qjit_of_a_while_loop_whose_trip_count_differs():
    @qjit
    def program(xs):
        @jax.vmap
        def steps(x):
            @while_loop(lambda a, k: jnp.sum(a) < 20.0)
            def loop(a, k):
                return a * 1.5, k + 1

            return loop(x, 0)

        return steps(xs)

    xs = np.stack([X + 2.0, X + 3.0, X * 5.0])
    values, counts = program(xs)
    for x, v, k in zip(xs, values, counts):
        a, n = x, 0
        while a.sum() < 20.0:
            a, n = a * 1.5, n + 1
        np.testing.assert_allclose(v, a)
        assert k == n


# --- rules on known sizes: JAX transforms the specialization ------------------------------------


@pytest.fixture(scope="module")
def programs():
    """Each body traced as a qjit program of (x, s), with its jaxpr as a function of known sizes."""
    out = {}
    for name, body in BODIES.items():
        program = qjit(body, abstracted_axes=({0: "n"}, {}))
        program(X, 1.0)
        closed = program.jaxpr
        out[name] = (program, lambda x, s, c=closed: jax.core.eval_jaxpr(c.jaxpr, c.consts, x.shape[0], x, s)[0])
    return out


@pytest.mark.parametrize("name", sorted(BODIES))
def test_jvp_and_grad_of_the_jaxpr(programs, name):
    program, f = programs[name]
    t = np.array([1.0, -0.5, 0.25])
    for s in (0.7, -0.4):
        with dynamic_jaxprs():
            value, tangent = jax.jvp(lambda x: f(x, s), (X,), (t,))
            ds = jax.jvp(lambda s: f(X, s), (s,), (1.0,))[1]
            gradient = None if name == "while_loop" else jax.grad(lambda x: jnp.sum(f(x, s) ** 2))(X)
        np.testing.assert_allclose(value, program(X, s), rtol=1e-12)
        np.testing.assert_allclose(tangent, central_difference(lambda x: program(x, s), X, t), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ds, (program(X, s + H) - program(X, s - H)) / (2 * H), rtol=1e-6, atol=1e-8)
        if gradient is not None:
            np.testing.assert_allclose(gradient, jax.grad(lambda x: jnp.sum(program(x, s) ** 2))(X), rtol=1e-10)


def test_grad_of_a_while_loop_jaxpr_is_refused_as_by_jax(programs):
    _, f = programs["while_loop"]
    with dynamic_jaxprs(), pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(lambda x: jnp.sum(f(x, 0.5)))(X)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_vmap_of_the_jaxpr(programs, name):
    program, f = programs[name]
    xs, ss = np.stack([X, X + 1.0, -X]), np.array([0.7, -0.4, 1.5])
    with dynamic_jaxprs():
        batched = jax.vmap(f)(xs, ss)
        jitted = jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, 0.3)
    np.testing.assert_allclose(batched, [program(x, s) for x, s in zip(xs, ss)], rtol=1e-12)
    np.testing.assert_allclose(jitted, [program(x, 0.3) for x in xs], rtol=1e-12)


@qjit(abstracted_axes=({0: "n"},))
def gradient_program(x):
    return grad(lambda y: jnp.sum(jnp.sin(y) * y))(x)


def test_differentiate_jaxpr_jvp_and_vmap():
    gradient_program(X)
    closed = gradient_program.jaxpr
    f = lambda x: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x.shape[0], x)[0]
    t = np.array([0.5, 1.0, -1.0])
    with dynamic_jaxprs():
        value, tangent = jax.jvp(f, (X,), (t,))
        batched = jax.vmap(f)(np.stack([X, 2 * X]))
    np.testing.assert_allclose(value, np.cos(X) * X + np.sin(X), rtol=1e-12)
    np.testing.assert_allclose(tangent, (2 * np.cos(X) - X * np.sin(X)) * t, rtol=1e-12)
    np.testing.assert_allclose(batched, [gradient_program(X), gradient_program(2 * X)], rtol=1e-12)
