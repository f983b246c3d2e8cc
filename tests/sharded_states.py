"""Run by tests/test_scaling.py in a process of its own with 8 virtual CPU devices:
``qjit(state_sharding=...)`` splits a 12-qubit and a 20-qubit state over the devices along 3 global qubits, against
the unsharded simulation and PennyLane's default.qubit. Prints OK at the end."""

import jax
import numpy as np
import pennylane as qml
from jax.sharding import NamedSharding, PartitionSpec as P

from catalyst_lite import for_loop, grad, qjit
from catalyst_lite.errors import QuantumOperationError

assert len(jax.devices()) == 8, jax.devices()
mesh = jax.make_mesh((8,), ("s",))
split = NamedSharding(mesh, P("s"))
N = 12


def layers(x, w):
    for layer in range(2):
        for q in range(N):
            qml.RY(x * (q + 1) + w[layer], q)
        for q in range(N - 1):
            qml.CNOT([q, q + 1])
    qml.RX(w[0], 0)
    qml.CRZ(x, [1, 7])
    qml.Toffoli([0, 2, N - 1])
    qml.SWAP([1, 5])
    qml.IsingXX(w[1], [2, 9])
    qml.MultiControlledX(wires=[0, 1, 2, 3, 4])  # wider than 3 wires: decomposed


def observables():
    return [qml.expval(qml.Z(0) @ qml.X(3) + 0.3 * qml.Y(1) - 0.7 * qml.Z(2) @ qml.Z(10)),
            qml.expval(qml.Hermitian(np.diag([1.0, 2.0, 3.0, 4.0]), wires=[1, 0])),
            qml.probs(wires=[0, 5, N - 1]), qml.probs()]


dev = qml.device("default.qubit", wires=N)


@qml.qnode(dev)
def circuit(x, w):
    layers(x, w)
    return (*observables(), qml.state())


x, w = 0.37, np.array([0.2, -0.9])
sharded = qjit(circuit, state_sharding=split)
got = sharded(x, w)
unsharded = qjit(circuit)(x, w)
reference = circuit(x, w)  # default.qubit
for g, u, r in zip(got, unsharded, reference):
    np.testing.assert_allclose(g, u, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)

# The state is held split: 1/8 of the amplitudes per device; no device gathers it.
state = got[-1]
assert [s.data.shape for s in state.addressable_shards] == [(2**N // 8,)] * 8
assert len({s.device for s in state.addressable_shards}) == 8
text = sharded.lower(x, w).compile().as_text()
assert "all-gather" not in text and "all-to-all" in text, text[:2000]
assert f"c128[{2**N}]" not in text  # no full-length state anywhere in the per-device program
assert f"c128[{2**N // 8}]" in text


# Random circuits: the gates between swaps are applied fused (blocks of known and traced gates,
# permutations, controls with value 0, adjoints) on any wires, global ones included.
def random_gates(seed, x):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        kind = rng.integers(0, 9)
        a, b, c = (int(v) for v in rng.choice(N, 3, replace=False))
        angle = x * rng.uniform(-3, 3)
        if kind < 3:
            (qml.RX, qml.RY, qml.RZ)[kind](angle, a)
        elif kind == 3:
            qml.CNOT([a, b])
        elif kind == 4:
            qml.ctrl(qml.RY(angle, b), control=a, control_values=0)
        elif kind == 5:
            qml.Toffoli([a, b, c])
        elif kind == 6:
            qml.adjoint(qml.S(a))
            qml.Hadamard(b)
        elif kind == 7:
            qml.IsingZZ(angle, [a, b])
        else:
            qml.SWAP([a, b])
            qml.CZ([b, c])


for seed in range(2):
    @qml.qnode(dev)
    def random_circuit(x):
        random_gates(seed, x)
        return qml.state(), qml.expval(qml.Z(seed) @ qml.Y(N - 1 - seed))

    got_state, got_e = qjit(random_circuit, state_sharding=split)(0.71)
    want_state, want_e = random_circuit(0.71)  # default.qubit
    np.testing.assert_allclose(got_state, want_state, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_e, want_e, rtol=1e-12, atol=1e-14)

# ... and a derivative, against central differences of default.qubit (its own reverse mode is
# slow to take eagerly through 60 gates).
random_energy = qml.qnode(dev)(lambda x: (random_gates(0, x), qml.expval(qml.X(0) @ qml.Z(N - 1)))[1])
h = 1e-5
np.testing.assert_allclose(jax.grad(qjit(random_energy, state_sharding=split))(0.71),
                           (random_energy(0.71 + h) - random_energy(0.71 - h)) / (2 * h), rtol=1e-6, atol=1e-8)


# Derivatives: backprop through shard_map, against the unsharded program's.
@qml.qnode(dev)
def energy(x, w):
    layers(x, w)
    return qml.expval(qml.Z(0) @ qml.Z(N - 1) + 0.5 * qml.X(4))


sharded_energy = qjit(energy, state_sharding=split)
np.testing.assert_allclose(sharded_energy(x, w), energy(x, w), rtol=1e-12)
for argnums in (0, 1):
    np.testing.assert_allclose(jax.grad(sharded_energy, argnums)(x, w), jax.grad(qjit(energy), argnums)(x, w),
                               rtol=1e-12, atol=1e-14)


@qjit(state_sharding=split)
def inner_grad(x, w):
    return grad(energy, argnums=1)(x, w)


np.testing.assert_allclose(inner_grad(x, w), jax.grad(qjit(energy), 1)(x, w), rtol=1e-12, atol=1e-14)


# Samples with shots: a basis state is sampled exactly; a superposition's frequencies are close
# to its probabilities (same distribution as the unsharded simulation).
@qml.set_shots(50)
@qml.qnode(dev)
def basis():
    for q in (0, 2, 6, 11):
        qml.X(q)
    qml.CNOT([2, 3])
    return qml.sample(), qml.sample(wires=[3, 0, 1])


all_bits, some = qjit(basis, state_sharding=split, seed=3)()
expected = np.zeros(N, int)
expected[[0, 2, 3, 6, 11]] = 1
np.testing.assert_array_equal(all_bits, np.tile(expected, (50, 1)))
np.testing.assert_array_equal(some, np.tile([1, 1, 0], (50, 1)))
unsharded_bits = qjit(basis, seed=3)()
assert all_bits.shape == unsharded_bits[0].shape and all_bits.dtype == unsharded_bits[0].dtype


@qml.set_shots(4000)
@qml.qnode(dev)
def spread(x, w):
    layers(x, w)
    return qml.sample(wires=[0, 11])


bits = np.asarray(qjit(spread, state_sharding=split, seed=5)(x, w))
frequencies = np.bincount(bits[:, 0] * 2 + bits[:, 1], minlength=4) / 4000
probs = qjit(qml.qnode(dev)(lambda x, w: (layers(x, w), qml.probs(wires=[0, 11]))[1]))(x, w)
assert np.max(np.abs(frequencies - probs)) < 0.04, (frequencies, probs)

# Under jax.sharding.set_mesh the option may name the mesh axis.
with jax.sharding.set_mesh(mesh):
    named = qjit(energy, state_sharding="s")
    np.testing.assert_allclose(named(x, w), energy(x, w), rtol=1e-12)


# At 20 qubits (issue #27's size): each device holds 1/8 of the state and none gathers it.
WIDE = 20
wide_dev = qml.device("default.qubit", wires=WIDE)


@qml.qnode(wide_dev)
def wide(x):
    for q in range(WIDE):  # a staircase: each wire rotated, then entangled with the one before
        qml.RY(x * (q + 1), q)
        if q:
            qml.CNOT([q - 1, q])
    qml.CRX(x, [0, WIDE - 1])
    return qml.expval(qml.Z(0) @ qml.Z(WIDE - 1)), qml.probs(wires=[0, 1]), qml.state()


wide_sharded = qjit(wide, state_sharding=split)
for g, r in zip(wide_sharded(x), wide(x)):  # amplitudes of 2**-10: an absolute tolerance too
    np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)
wide_state = wide_sharded(x)[-1]
assert [s.data.shape for s in wide_state.addressable_shards] == [(2**WIDE // 8,)] * 8
wide_text = wide_sharded.lower(x).compile().as_text()
assert "all-gather" not in wide_text and f"c128[{2**WIDE}]" not in wide_text


# What the sharded path does not run is a clear error.
@qml.qnode(dev)
def looped(x):
    @for_loop(0, 3, 1)
    def body(i):
        qml.RX(x, wires=i)

    body()
    return qml.expval(qml.Z(0))


@qml.qnode(dev)
def variance(x):
    qml.RX(x, 0)
    return qml.var(qml.Z(0))


class Branching(qml.operation.Operation):
    num_params, num_wires = 1, 1

    def compute_decomposition(self, p, wires=None):
        with qml.tape.QuantumTape() as tape:
            qml.cond(p > 0.5, qml.RX)(p, wires=wires[0])
        return tape.operations


@qml.qnode(dev)
def decomposed_with_a_branch(x):
    Branching(x, wires=0)
    return qml.expval(qml.Z(0))


for program in (looped, variance, decomposed_with_a_branch):
    try:
        qjit(program, state_sharding=split)(0.1)
    except QuantumOperationError as e:
        assert "state_sharding" in str(e), e
    else:
        raise AssertionError(f"{program.__name__} ran on a sharded state")
print("OK")
