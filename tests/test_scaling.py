"""Past one device: batches and state vectors split over 8 virtual CPU devices, each program in a
process of its own (``XLA_FLAGS`` must be set before JAX starts), and over two processes under
``jax.distributed`` on 127.0.0.1."""

import os
import pathlib
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
    """qjit(state_sharding=...): a 12-qubit state held 1/8 per device (no all-gather), expval,
    probs, state, samples with shots and grad as unsharded and as default.qubit."""
    run_on_eight_devices("sharded_states.py")
