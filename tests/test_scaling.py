"""Past one device: batches and state vectors split over 8 virtual CPU devices, each program in a
process of its own (``XLA_FLAGS`` must be set before JAX starts), and over two processes under
``jax.distributed`` on 127.0.0.1."""

import os
import pathlib
import socket
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def run_on_eight_devices(script: str) -> None:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, str(HERE / script)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stdout[-2000:] + run.stderr[-3000:]


def test_batches_split_over_devices():
    """catalyst_lite.vmap and jax.vmap of qjit programs (classical, QNodes) over a sharded batch:
    each device maps its own rows, no all-gather, results as unsharded and as default.qubit."""
    run_on_eight_devices("sharded_batches.py")


def test_state_split_over_devices():
    """qjit(state_sharding=...): 12- and 20-qubit states held 1/8 per device (no all-gather), expval,
    probs, state, samples with shots and grad as unsharded and as default.qubit."""
    run_on_eight_devices("sharded_states.py")


def test_two_processes_on_localhost():
    """jax.distributed with 2 processes on 127.0.0.1 (gloo), 2 CPU devices each: a batched QNode
    and a sharded state, each process checking the shards it holds; both stopped in any case."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=os.pathsep.join(sys.path))
    processes = [subprocess.Popen([sys.executable, str(HERE / "two_processes.py"), str(port), str(i)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outputs = [p.communicate(timeout=600) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(processes, outputs):
        assert p.returncode == 0 and out.strip().endswith("OK"), out[-2000:] + err[-3000:]


def test_state_sharding_option_is_checked():
    """state_sharding is a NamedSharding of a 1-D spec (or axis names under set_mesh): anything
    else is a clear error when the QNode is compiled."""
    pennylane = pytest.importorskip("pennylane")
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from catalyst_lite import qjit
    from catalyst_lite.errors import ArgumentValueError

    @pennylane.qnode(pennylane.device("default.qubit", wires=2))
    def circuit(x):
        pennylane.RX(x, 0)
        return pennylane.expval(pennylane.Z(0))

    mesh = jax.make_mesh((1,), ("s",))
    for option, message in ((42, "NamedSharding"), ("s", "need a mesh"),
                            (NamedSharding(mesh, P()), "one dimension")):
        with pytest.raises(ArgumentValueError, match=message):
            qjit(circuit, state_sharding=option)(0.1)
