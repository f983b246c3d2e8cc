"""Benchmark: circuits past one device, on virtual CPU devices (``python -m benchmarks --scaling``).

Rows, each measured in a fresh process with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``:

- ``state``: a layered circuit (``RY`` on every wire, a ``CNOT`` chain, per layer; ``<Z0 Z(n-1)>``)
  on ``--wires`` qubits (20 by default, 22 with ``--wires 22``), unsharded and with
  ``qjit(state_sharding=...)`` over 1, 2, 4 and 8 devices: run time (median) and the compiled
  program's memory per device (arguments, results and temporaries, from XLA's memory analysis);
- ``batch``: a 6-qubit QNode ``vmap``ped over 1,024 inputs, unsharded and with the batch split
  over 8 devices.

On a machine with a few cores, virtual devices share them: the rows show the cost of the
exchanges (the all_to_all of each global-qubit gate), not a speed-up. Results are written to
``benchmarks/results/scaling.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "scaling.json"
DEVICES = (0, 1, 2, 4, 8)  # 0: unsharded


def _child(kind: str, wires: int, devices: int, layers: int) -> dict:
    """One row, in this (fresh) process."""
    import jax
    import numpy as np
    import pennylane as qml
    from jax.sharding import NamedSharding, PartitionSpec as P

    from catalyst_lite import qjit, vmap

    if kind == "state":
        @qml.qnode(qml.device("default.qubit", wires=wires))
        def circuit(x):
            for layer in range(layers):
                for q in range(wires):
                    qml.RY(x * (q + 1) + layer, q)
                for q in range(wires - 1):
                    qml.CNOT([q, q + 1])
            return qml.expval(qml.Z(0) @ qml.Z(wires - 1))

        options = {} if devices == 0 else {
            "state_sharding": NamedSharding(jax.make_mesh((devices,), ("s",), devices=jax.devices()[:devices]), P("s"))}
        program, args = qjit(circuit, **options), (0.3,)
    else:
        @qml.qnode(qml.device("default.qubit", wires=6))
        def circuit(x):
            for q in range(6):
                qml.RY(x * (q + 1), q)
            for q in range(5):
                qml.CNOT([q, q + 1])
            return qml.expval(qml.Z(0) @ qml.Z(5))

        inputs = np.linspace(0.0, 1.0, 1024)
        if devices:
            rows = NamedSharding(jax.make_mesh((devices,), ("b",), devices=jax.devices()[:devices]), P("b"))
            program = qjit(lambda x: vmap(circuit)(x), in_shardings=rows, out_shardings=rows)
            args = (jax.device_put(inputs, rows),)
        else:
            program, args = qjit(lambda x: vmap(circuit)(x)), (inputs,)
    start = time.perf_counter()
    value = np.asarray(program(*args)).ravel()[0]
    first = time.perf_counter() - start
    times = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(program(*args))
        times.append(time.perf_counter() - start)
    memory = program.lower(*args).compile().memory_analysis()
    per_device = None if memory is None else (memory.argument_size_in_bytes + memory.output_size_in_bytes
                                              + memory.temp_size_in_bytes)
    return {"row": kind, "wires": wires if kind == "state" else 6, "devices": devices, "first_call_s": first,
            "run_s": statistics.median(times), "per_device_bytes": per_device, "value": float(value)}


def run(wires: int = 20, layers: int = 2) -> list[dict]:
    """Every row, each in its own process."""
    rows = []
    for kind, counts in (("state", DEVICES), ("batch", (0, 8))):
        for devices in counts:
            env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
                       PYTHONPATH=os.pathsep.join(sys.path))
            code = (f"import json, benchmarks.scaling as s; "
                    f"print(json.dumps(s._child({kind!r}, {wires}, {devices}, {layers})))")
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  timeout=1800)
            if done.returncode:
                rows.append({"row": kind, "devices": devices, "error": done.stderr.strip().splitlines()[-1:]})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def main(wires: int = 20, output: Path = RESULTS) -> int:
    rows = run(wires)
    base = {r["row"]: r for r in rows if r.get("devices") == 0 and "error" not in r}
    print(f"{'row':6} {'wires':>5} {'devices':>8} {'run':>10} {'vs unsharded':>13} {'per device':>11}")
    for r in rows:
        if "error" in r:
            print(f"{r['row']:6} {'':>5} {r['devices']:>8} failed: {r['error']}")
            continue
        ratio = r["run_s"] / base[r["row"]]["run_s"] if r["row"] in base else float("nan")
        memory = "-" if r["per_device_bytes"] is None else f"{r['per_device_bytes'] / 2**20:.1f} MiB"
        print(f"{r['row']:6} {r['wires']:5} {r['devices'] or 'none':>8} {r['run_s'] * 1e3:8.1f}ms "
              f"{ratio:12.2f}x {memory:>11}")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\nwritten to {output}")
    return 0
