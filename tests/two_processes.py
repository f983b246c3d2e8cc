"""Run twice by tests/test_scaling.py, as processes 0 and 1 of ``jax.distributed`` on 127.0.0.1
(``python two_processes.py PORT PROCESS_ID``, 2 CPU devices each, gloo collectives): a batch of
circuits split over the 4 devices of both processes, and a state vector split over them; each
process checks the shards it holds against default.qubit and the unsharded simulation. Prints
OK at the end."""

import sys

import jax

port, process_id = int(sys.argv[1]), int(sys.argv[2])
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                           initialization_timeout=120)

import numpy as np  # noqa: E402
import pennylane as qml  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from catalyst_lite import qjit, vmap  # noqa: E402

assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
mesh = jax.make_mesh((4,), ("d",))
rows = NamedSharding(mesh, P("d"))
N = 6
dev = qml.device("default.qubit", wires=N)


@qml.qnode(dev)
def circuit(theta):
    for q in range(N):
        qml.RY(theta * (q + 1), q)
    for q in range(N - 1):
        qml.CNOT([q, q + 1])
    qml.CRX(theta, [N - 1, 0])
    return qml.expval(qml.Z(0) @ qml.Z(N - 1) + 0.5 * qml.X(2))


# A batch of 8 circuits, 2 rows per device: each process holds and checks its own 4 rows.
angles = np.linspace(0.1, 1.5, 8)
reference = np.array([float(circuit(t)) for t in angles])
energies = qjit(lambda a: vmap(circuit)(a), in_shardings=rows, out_shardings=rows)
out = energies(angles)
assert not out.is_fully_addressable and len(out.addressable_shards) == 2
for shard in out.addressable_shards:
    np.testing.assert_allclose(shard.data, reference[shard.index], rtol=1e-12)


# A 6-qubit state split over the 4 devices (2 global qubits): each process holds half of it.
@qml.qnode(dev)
def state_and_energy(theta):
    circuit.func(theta)
    return qml.state(), qml.expval(qml.Z(0) @ qml.Z(N - 1) + 0.5 * qml.X(2))


state, energy = qjit(state_and_energy, state_sharding=rows)(0.4)
full_state, full_energy = qjit(state_and_energy)(0.4)  # unsharded, on this process's first device
np.testing.assert_allclose(energy.addressable_shards[0].data, full_energy, rtol=1e-12)
np.testing.assert_allclose(energy.addressable_shards[0].data, float(circuit(0.4)), rtol=1e-12)
assert [s.data.shape for s in state.addressable_shards] == [(2**N // 4,)] * 2
for shard in state.addressable_shards:
    np.testing.assert_allclose(shard.data, np.asarray(full_state)[shard.index], rtol=1e-12, atol=1e-14)
print("OK", flush=True)
