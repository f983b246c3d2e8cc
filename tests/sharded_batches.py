"""Run by tests/test_scaling.py in a process of its own with 8 virtual CPU devices: batches split
over the devices by ``catalyst_lite.vmap`` and by ``jax.vmap`` of a qjit program, each device
mapping its own rows (no all-gather of the batch in the compiled HLO), against unsharded results
and PennyLane's default.qubit. Prints OK at the end."""

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
from jax.sharding import NamedSharding, PartitionSpec as P

from catalyst_lite import pure_callback, qjit, vmap

assert len(jax.devices()) == 8, jax.devices()
mesh = jax.make_mesh((8,), ("b",))
rows = NamedSharding(mesh, P("b"))
replicated = NamedSharding(mesh, P())


@qml.qnode(qml.device("default.qubit", wires=3))
def circuit(theta, weights):
    qml.RX(theta, 0)
    qml.RY(weights[0], 1)
    qml.CNOT([0, 1])
    qml.CRZ(weights[1], [1, 2])
    qml.Hadamard(2)
    return qml.expval(qml.Z(0) @ qml.X(2) + 0.5 * qml.Y(1))


angles = np.linspace(0.0, np.pi, 32)
weights = np.array([0.3, -1.1])
reference = np.array([float(circuit(t, weights)) for t in angles])  # default.qubit, one circuit at a time


def no_gather(fn, *args):
    text = fn.lower(*args).compile().as_text()
    assert "all-gather" not in text and "all-to-all" not in text, text[:3000]


# catalyst_lite.vmap inside qjit: the batch axis of in_shardings is found and each device loops
# over its 4 rows; the unmapped weights are replicated.
@qjit(in_shardings=(rows, replicated), out_shardings=rows)
def energies(thetas, w):
    return vmap(circuit, in_axes=(0, None))(thetas, w)


out = energies(angles, weights)
np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)
assert out.sharding == rows and [s.data.shape for s in out.addressable_shards] == [(4,)] * 8
no_gather(energies, angles, weights)
np.testing.assert_allclose(qjit(energies.original_function)(angles, weights), out, rtol=1e-12, atol=1e-12)


# A classical function, spmd_axis_name given, results with the batch on axis 1 and a pytree.
@qjit(in_shardings=rows)
def features(x):
    mapped = vmap(lambda r: {"s": jnp.sin(r) * jnp.arange(3.0), "c": jnp.cos(r)}, out_axes={"s": 1, "c": 0},
                  spmd_axis_name="b")
    return mapped(x)


x = np.linspace(-1.0, 1.0, 16)
got = features(x)
np.testing.assert_allclose(got["s"], (np.sin(x)[:, None] * np.arange(3.0)).T, rtol=1e-12)
np.testing.assert_allclose(got["c"], np.cos(x), rtol=1e-12)
assert got["c"].sharding.spec[0] == "b" and got["s"].sharding.spec[1] == "b"
no_gather(features, x)

# Under jax.sharding.set_mesh, in_shardings as PartitionSpecs.
with jax.sharding.set_mesh(mesh):
    squares = qjit(lambda x: vmap(lambda r: r @ r)(x), in_shardings=P("b"))
    m = np.arange(16.0 * 3).reshape(16, 3)
    np.testing.assert_allclose(squares(m), np.einsum("ij,ij->i", m, m), rtol=1e-12)
    no_gather(squares, m)

# A batch size the mesh does not divide (or a symbolic one) is one loop over the whole batch.
odd = qjit(lambda x: vmap(jnp.sin)(x), in_shardings=NamedSharding(mesh, P()))
np.testing.assert_allclose(odd(np.arange(5.0)), np.sin(np.arange(5.0)), rtol=1e-12)
sized = qjit(lambda x: vmap(jnp.sin)(x), abstracted_axes={0: "n"}, in_shardings=rows)
np.testing.assert_allclose(sized(np.arange(16.0)), np.sin(np.arange(16.0)), rtol=1e-12)
try:
    qjit(lambda x: vmap(jnp.sin, spmd_axis_name="b")(x), in_shardings=rows)(np.arange(12.0))
except ValueError as e:
    assert "divisible" in str(e), e
else:
    raise AssertionError("12 rows over 8 devices were accepted")

# A pure_callback in the mapped function runs on the host for every device's rows, as
# jax.pure_callback under jax.jit with in_shardings.
def host_sin(x):
    return np.sin(x)


def with_callback(r):
    return pure_callback(host_sin, jax.ShapeDtypeStruct((), jnp.float64))(r) * 2.0


out = qjit(lambda x: vmap(with_callback)(x), in_shardings=rows)(angles)
expected = jax.jit(jax.vmap(lambda r: jax.pure_callback(host_sin, jax.ShapeDtypeStruct((), jnp.float64), r,
                                                        vmap_method="sequential") * 2.0), in_shardings=rows)(angles)
np.testing.assert_allclose(out, expected, rtol=1e-15)
np.testing.assert_allclose(out, 2.0 * np.sin(angles), rtol=1e-15)

# Outside qjit: vmap of a sharded array maps each device's rows on that device.
batched = vmap(circuit, in_axes=(0, None))
out = batched(jax.device_put(angles, rows), weights)
np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)
assert out.sharding == rows

# jax.vmap of a qjit program (a QNode) over a sharded batch: batched by JAX's rules, no gather.
program = qjit(circuit)
vmapped = jax.jit(jax.vmap(program, in_axes=(0, None)))
out = vmapped(jax.device_put(angles, rows), weights)
np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)
assert out.sharding == rows
no_gather(vmapped, jax.device_put(angles, rows), weights)
out = jax.vmap(qjit(lambda t: jnp.sin(t) ** 2))(jax.device_put(angles, rows))
np.testing.assert_allclose(out, np.sin(angles) ** 2, rtol=1e-12)
assert out.sharding == rows
print("OK")
