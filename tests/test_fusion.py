"""Gate fusion and repetition planning (catalyst_lite/quantum/fusion.py), and the state-vector
kernels it uses, checked against PennyLane and against the order of the gates."""

import jax
import numpy as np
import pennylane as qml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.experimental import enable_x64

from circuits import layered

from catalyst_lite import qjit
from catalyst_lite.quantum.fusion import MAX_FUSED_WIRES, Shape, fuse, repeated_stretches
from catalyst_lite.quantum.statevector import AffineMap, Monomial, apply_block, apply_monomials

SHAPES = st.lists(
    st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), st.booleans()),
    min_size=1, max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(SHAPES)
def test_fusion_keeps_the_order_of_gates_that_share_a_wire(gates):
    shapes = [Shape(tuple(w), m) for w, m in gates]
    blocks = fuse(shapes)
    place = {}  # gate -> (block, position in block)
    for b, block in enumerate(blocks):
        assert block.wires == set().union(*(shapes[m].wires for m in block.members))
        for p, m in enumerate(block.members):
            place[m] = (b, p)
    assert sorted(place) == list(range(len(shapes)))
    for i in range(len(shapes)):
        for j in range(i + 1, len(shapes)):
            if set(shapes[i].wires) & set(shapes[j].wires):
                assert place[i] < place[j], (i, j, blocks)
    for block in blocks:
        if block.kind == "dense" and len(block.members) > 1:
            assert len(block.wires) <= max(MAX_FUSED_WIRES, max(len(shapes[m].wires) for m in block.members))
        if block.kind == "wide":
            assert len(block.members) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=40))
def test_repeated_stretches_really_repeat_and_do_not_overlap(keys):
    end = 0
    for start, period, count in repeated_stretches(keys):
        assert start >= end and count >= 2
        body = keys[start:start + period]
        assert all(keys[start + r * period:start + (r + 1) * period] == body for r in range(count))
        end = start + period * count


def test_a_layered_sequence_is_found_whole():
    layer = ["rx0", "rx1", "rx2", "cnot01", "cnot12"]
    assert repeated_stretches(["h0", "h1"] + layer * 7 + ["z"]) == [(2, 5, 7)]


def _reference(state, matrix, wires, n):
    k = len(wires)
    t = np.tensordot(matrix.reshape([2] * (2 * k)), state.reshape([2] * n), axes=(list(range(k, 2 * k)), wires))
    return np.moveaxis(t, list(range(k)), wires).reshape(-1)


@pytest.mark.parametrize("wires", [[0], [4], [1, 2], [0, 3], [1, 2, 3], [0, 2, 4]])
def test_apply_block_matches_a_tensor_contraction(wires):
    rng = np.random.default_rng(len(wires) * 10 + wires[0])
    n, k = 5, len(wires)
    state = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    matrix = rng.normal(size=(2**k, 2**k)) + 1j * rng.normal(size=(2**k, 2**k))
    assert np.allclose(apply_block(state, matrix, wires, n), _reference(state, matrix, wires, n), atol=1e-12)


def test_monomials_in_one_pass_match_their_product():
    n = 5
    ops = [qml.CNOT([0, 3]), qml.SWAP([1, 4]), qml.CZ([2, 0]), qml.Toffoli([4, 1, 2]), qml.S(3), qml.Y(1),
           qml.ctrl(qml.Y(2), control=[0], control_values=[0])]
    monomials = []
    for op in ops:
        base, controls, values = (op.base, op.control_wires, op.control_values) if isinstance(op, qml.ops.Controlled) else (op, [], [])
        monomials.append(Monomial.of(np.asarray(base.matrix()), tuple(base.wires), tuple(controls), tuple(int(v) for v in values)))
    state = np.random.default_rng(1).normal(size=2**n) + 0j
    expected = state
    for op in ops:
        expected = qml.matrix(op, wire_order=range(n)) @ expected
    assert np.allclose(apply_monomials(state, monomials, n), expected, atol=1e-12)


def _random_layer(rng, n_wires: int) -> list:
    kinds = ["RX", "RY", "RZ", "CNOT", "CZ", "SWAP", "CRX", "Hadamard", "IsingXX", "T"]
    layer = []
    for _ in range(rng.integers(2, 7)):
        kind = kinds[rng.integers(len(kinds))]
        wires = [int(w) for w in rng.choice(n_wires, 2, replace=False)]
        layer.append((kind, wires))
    return layer


def _layered_circuit(layer: list, repeats: int):
    def circuit(params):
        for r in range(repeats):
            for g, (kind, wires) in enumerate(layer):
                op = getattr(qml, kind)
                if op.num_params:
                    op(params[r, g], wires=wires[:op.num_wires] if op.num_wires != 1 else wires[0])
                else:
                    op(wires=wires[:op.num_wires] if op.num_wires != 1 else wires[0])
        return qml.state()

    return circuit


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 6))
def test_repeated_random_layers_match_default_qubit(seed, repeats):
    rng = np.random.default_rng(seed)
    layer = _random_layer(rng, 4)
    params = rng.uniform(-np.pi, np.pi, (repeats, len(layer)))
    circuit = _layered_circuit(layer, repeats)
    dev = qml.device("default.qubit", wires=4)
    assert np.allclose(qjit(qml.qnode(dev)(circuit))(params), qml.qnode(dev)(circuit)(params), atol=1e-10)


def test_gradient_through_a_repeated_fused_circuit():
    n, layers = 4, 5
    circuit = layered(n, layers, rotation=qml.RY, observable=qml.Z(0) @ qml.Z(n - 1))
    dev = qml.device("default.qubit", wires=n)
    params = np.random.default_rng(3).uniform(0, np.pi, (layers, n))
    with enable_x64():
        ours = jax.grad(qjit(qml.qnode(dev)(circuit)))(params)
        theirs = jax.grad(qml.qnode(dev, interface="jax")(circuit))(jax.numpy.asarray(params))
    assert np.allclose(ours, theirs, atol=1e-10)


def _monomial_of(op) -> Monomial:
    base, controls, values = (op.base, op.control_wires, op.control_values) if isinstance(op, qml.ops.Controlled) else (op, [], [])
    return Monomial.of(np.asarray(base.matrix()), tuple(base.wires), tuple(controls), tuple(int(v) for v in values))


AFFINE_OPS = st.sampled_from(["X", "CNOT", "SWAP", "CNOT0"])


def _affine_op(kind: str, wires: list):
    return {"X": lambda: qml.X(wires[0]), "CNOT": lambda: qml.CNOT(wires[:2]), "SWAP": lambda: qml.SWAP(wires[:2]),
            "CNOT0": lambda: qml.ctrl(qml.X(wires[1]), control=wires[0], control_values=[0])}[kind]()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(AFFINE_OPS, st.permutations(list(range(6)))), min_size=1, max_size=25))
def test_affine_chains_are_one_table_lookup_and_match_their_product(ops):
    n = 6
    ops = [_affine_op(kind, wires) for kind, wires in ops]
    monomials = [_monomial_of(op) for op in ops]
    assert AffineMap.of(monomials, n) is not None
    state = np.random.default_rng(len(ops)).normal(size=2**n) + 1j
    expected = state
    for op in ops:
        expected = qml.matrix(op, wire_order=range(n)) @ expected
    with enable_x64():
        assert np.allclose(apply_monomials(state, monomials, n), expected, atol=1e-12)


@pytest.mark.parametrize("n", [3, 12, 18])
def test_affine_tables_cover_every_index_bit(n):
    # A CNOT chain down the line, then X on the last wire: j(i) checked against the gates' own
    # per-gate index arithmetic at every basis index.
    from catalyst_lite.quantum.statevector import _source_indices

    x = np.array([[0, 1], [1, 0]])
    gates = [Monomial.of(x, (w + 1,), (w,), (1,)) for w in range(n - 1)] + [Monomial.of(x, (n - 1,))]
    j = np.arange(2**n)
    for g in reversed(gates):
        j = _source_indices(j, g, n)
    with enable_x64():
        assert np.array_equal(np.asarray(AffineMap.of(gates, n).indices(n)), j)


def test_toffoli_cswap_and_phases_are_not_affine():
    assert AffineMap.of([_monomial_of(qml.Toffoli([0, 1, 2]))], 3) is None
    assert AffineMap.of([_monomial_of(qml.CSWAP([0, 1, 2]))], 3) is None
    assert AffineMap.of([_monomial_of(qml.CNOT([0, 1])), _monomial_of(qml.CZ([1, 2]))], 3) is None
