"""``switch``, Catalyst 0.15's index switch: a default branch and integer cases, a traced or known
index, branches with operands, inside QNodes; results as Catalyst's documentation gives them
(checked by hand against Catalyst 0.15 with the same programs)."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest

from catalyst_lite import grad, qjit, switch
from catalyst_lite.errors import ControlFlowError
from test_capture import needs_capture


def scaled(i, x):
    @switch(i)
    def s(x):
        return x / 4

    @s.branch(-3)
    def s(x):
        return x * 10

    @s.branch(0)
    def s(x):
        return 0 * x

    return s(x)


COMPILED_SCALED = qjit(scaled)


@pytest.mark.parametrize("i, expected", [(-3, 120.0), (0, 0.0), (7, 3.0), (-1, 3.0)])
def test_cases_and_default_with_traced_index(i, expected):
    assert float(COMPILED_SCALED(i, 12.0)) == expected
    assert scaled(i, 12.0) == expected  # outside qjit: the chosen branch is simply called


def test_traced_index_is_one_conditional():
    jaxpr = str(COMPILED_SCALED.jaxpr)
    assert jaxpr.count("cond[") == 1 and "eq" in jaxpr  # index == case predicates, one equation


def test_outside_qjit_branches_keep_their_own_types():
    def foo(i, x):
        @switch(i)
        def s(x):
            return x / 4

        @s.branch(-3)
        def s(x):
            return str(x)

        return s(x)

    assert foo(-3, 12) == "12" and foo(1, 12) == 3.0


def test_known_index_inside_qjit_and_later_case_replaces_earlier():
    @qjit
    def f(x):
        @switch(1)
        def s():
            return x

        @s.branch(1)
        def s():
            return x * 2

        @s.branch(1)
        def s():
            return x * 3

        return s()

    assert float(f(2.0)) == 6.0


def test_no_cases_runs_the_default_and_branches_may_return_nothing():
    @qjit
    def f(i, x):
        @switch(i)
        def s():
            pass

        @s.branch(1)
        def s():
            pass

        s()
        return switch(i)(lambda: x + 1)()

    assert float(f(1, 2.0)) == 3.0


def test_differentiated_through_the_switch():
    def f(i, x):
        @switch(i)
        def s():
            return x**3

        @s.branch(1)
        def s():
            return x**2

        return s()

    df = qjit(lambda i, x: grad(lambda y: f(i, y))(x))
    assert float(df(1, 2.0)) == 4.0 and float(df(0, 2.0)) == 12.0


def test_inside_a_qnode_matches_default_qubit():
    """Catalyst's documented example: gates chosen by a traced index."""
    dev = qml.device("default.qubit", wires=1)

    def body(i):
        @switch(i)
        def gates():
            qml.Z(0)

        @gates.branch(3)
        def gates():
            qml.H(0)

        @gates.branch(0)
        def gates():
            qml.X(0)

        gates()
        return qml.probs()

    compiled = qjit(qml.qnode(dev)(body))
    for i in (0, 3, 4):
        np.testing.assert_allclose(compiled(i), qml.qnode(dev)(body)(i), atol=1e-12)
    np.testing.assert_allclose(compiled(3), [0.5, 0.5], atol=1e-12)


def test_operands_and_results_inside_a_qnode():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(i, x):
        @switch(i)
        def rotate(x):
            qml.RX(x, 0)
            return x

        @rotate.branch(1)
        def rotate(x):
            qml.RY(x, 0)
            return 2 * x

        r = rotate(x)
        return qml.expval(qml.PauliZ(0)), r

    compiled = qjit(circuit)
    for i, r in ((0, 0.3), (1, 0.6)):
        z, got_r = compiled(i, 0.3)
        np.testing.assert_allclose(z, np.cos(0.3), rtol=1e-12)
        assert float(got_r) == pytest.approx(r)


@pytest.mark.parametrize("index", [1.0, jnp.array([1])])
def test_index_must_be_an_integer_scalar(index):
    with pytest.raises(ControlFlowError, match="integer scalar index"):
        qjit(lambda x, i: scaled(i, x))(12.0, index)


def test_case_must_be_an_int():
    with pytest.raises(ControlFlowError, match="a case must be a Python int"):
        switch(0)(lambda: 1.0).branch(1.5)


def test_branches_with_different_structures_are_refused():
    def f(i):
        @switch(i)
        def s():
            return (1.0, 2.0)

        @s.branch(1)
        def s():
            return 1.0

        return s()

    with pytest.raises(ControlFlowError, match="structure"):
        qjit(f)(1)
    assert jax.tree_util.tree_structure(f(0)) != jax.tree_util.tree_structure(f(1))  # Python is free


def test_default_branch_must_be_callable():
    # an API check (Catalyst raises a ValueError too): a switch without a default branch
    with pytest.raises(ValueError, match="Switch requires a default branch"):
        switch(0)(None)


@needs_capture
def test_refused_while_pennylane_capture_is_on():
    # as cond/for_loop/while_loop: a captured program uses PennyLane's control flow instead
    from catalyst_lite.errors import PlxprCaptureCFCompatibilityError

    qml.capture.enable()
    try:
        with pytest.raises(PlxprCaptureCFCompatibilityError, match="not supported .* qml.cond"):
            switch(0)
    finally:
        qml.capture.disable()


def test_control_flow_called_in_a_compiled_qnode_has_its_operation():
    # Catalyst's `.operation`: control flow called inside a QNode compiled by qjit has one, of
    # its kind; run by PennyLane without qjit (plain Python), it has none. The results are
    # default.qubit's either way.
    from catalyst_lite import cond, for_loop, while_loop
    from catalyst_lite.api_extensions.control_flow import Cond, ForLoop, Switch, WhileLoop

    called = {}

    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x, k):
        @for_loop(0, 2, 1)
        def layer(i):
            qml.RX(x * (i + 1), wires=0)

        @while_loop(lambda j: j < 2)
        def turn(j):
            qml.RY(x, wires=0)
            return j + 1

        @cond(k > 0)
        def flip():
            qml.X(0)

        @switch(k)
        def rotate():
            qml.RY(x, wires=0)

        @rotate.branch(1)
        def rotate_z():
            qml.RZ(x, wires=0)

        layer()
        turn(0)
        flip()
        rotate()
        called.update(layer=layer, turn=turn, flip=flip, rotate=rotate)
        return qml.probs(wires=0), qml.expval(qml.Y(0))

    kinds = {"layer": ForLoop, "turn": WhileLoop, "flip": Cond, "rotate": Switch}
    expected = [circuit(0.7, k) for k in (0, 1)]
    for obj in called.values():
        with pytest.raises(AttributeError, match="no associated quantum operation"):
            obj.operation
    compiled = qjit(circuit)
    for k in (0, 1):
        for got, want in zip(compiled(0.7, k), expected[k]):
            np.testing.assert_allclose(got, want, atol=1e-12)
    for name, kind in kinds.items():  # the objects of the compiled circuit's trace
        assert isinstance(called[name].operation, kind) and called[name].operation.name == kind.__name__


def test_catalysts_import_path_gives_the_same_control_flow():
    import catalyst_lite
    from catalyst_lite.api_extensions import control_flow

    for name in ("cond", "for_loop", "while_loop", "switch"):
        assert getattr(control_flow, name) is getattr(catalyst_lite, name)
    s = control_flow.switch(1)(lambda: 0.5)
    assert isinstance(s, control_flow.SwitchCallable)
    # the operation types exist for imports; nothing records such an operation here
    with pytest.raises(AttributeError, match="not called .* in a quantum context"):
        s.operation
    assert qjit(lambda k: s())(1) == 0.5
