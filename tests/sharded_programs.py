"""Run by tests/test_jit_options.py in a process of its own with 8 virtual CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before JAX starts): qjit's
in_shardings/out_shardings against single-device NumPy results. Prints OK at the end."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
from jax.sharding import NamedSharding, PartitionSpec as P

from catalyst_lite import qjit

assert len(jax.devices()) == 8, jax.devices()
mesh = jax.make_mesh((8,), ("b",))
rows, replicated = NamedSharding(mesh, P("b")), NamedSharding(mesh, P())


@qjit(abstracted_axes={0: "n"}, in_shardings=rows, out_shardings=(rows, replicated))
def scaled(x):
    y = jnp.sin(x) * 2.0
    return y, jnp.sum(y)


for n in (16, 40):  # 40 rows: 5 per device
    x = np.linspace(0.0, 1.0, n)
    y, total = scaled(x)
    np.testing.assert_allclose(y, np.sin(x) * 2.0, rtol=1e-12)
    np.testing.assert_allclose(total, np.sum(np.sin(x) * 2.0), rtol=1e-12)
    assert y.sharding == rows and total.sharding == replicated
    assert [s.data.shape for s in y.addressable_shards] == [(n // 8,)] * 8
assert scaled.cache_info().executables == 2  # one SPMD program per size, traced once
assert "mhlo.num_partitions = 8" in scaled.lower(np.ones(16)).as_text()
y, _ = scaled.lower(np.ones(24)).compile()(np.ones(24))  # the AOT stages keep the shardings
assert y.sharding == rows

# Under jax.sharding.set_mesh, PartitionSpecs name the context mesh's axes (as for jax.jit).
with jax.sharding.set_mesh(mesh):
    columns = qjit(lambda a: a @ a.T, abstracted_axes={1: "k"}, in_shardings=P(None, "b"), out_shardings=P())
    a = np.arange(4.0 * 16).reshape(4, 16)
    out = columns(a)
np.testing.assert_allclose(out, a @ a.T, rtol=1e-12)
assert out.sharding.is_fully_replicated
try:  # without a mesh set, a PartitionSpec means nothing: the error says what to do
    columns(a)
except TypeError as error:
    assert "<lambda>: the sharding PartitionSpec(None, 'b') is a PartitionSpec" in str(error), error
    assert "jax.sharding.set_mesh" in str(error)
else:
    raise AssertionError("a PartitionSpec without a mesh was accepted")


# A batch of circuits: the batch sharded over the devices, each row one circuit; the reference is
# PennyLane's default.qubit, run circuit by circuit outside qjit.
@qml.qnode(qml.device("default.qubit", wires=2))
def circuit(theta):
    qml.RX(theta, 0)
    qml.RY(theta / 2, 1)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(0) @ qml.Z(1) + qml.X(1))


@qjit(abstracted_axes={0: "batch"}, in_shardings=rows, out_shardings=rows)
def energies(angles):
    return jax.vmap(circuit)(angles)


angles = np.linspace(0.0, np.pi, 16)
out = energies(angles)
np.testing.assert_allclose(out, [float(circuit(t)) for t in angles], rtol=1e-12, atol=1e-12)
assert out.sharding == rows
print("OK")
