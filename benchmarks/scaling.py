"""Benchmark: circuits past one device, on virtual CPU devices (``python -m benchmarks --scaling``).

Rows, the rows of each kind measured in one fresh process with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``, their run times sampled interleaved:

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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "scaling.json"
DEVICES = (0, 1, 2, 4, 8)  # 0: unsharded


def _program(kind: str, wires: int, devices: int, layers: int) -> tuple[Any, tuple]:
    """The row's qjit program and its arguments (``devices == 0``: unsharded)."""
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
        return qjit(circuit, **options), (0.3,)

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
        return qjit(lambda x: vmap(circuit)(x), in_shardings=rows, out_shardings=rows), (jax.device_put(inputs, rows),)
    return qjit(lambda x: vmap(circuit)(x)), (inputs,)


def _child(kind: str, wires: int, counts: tuple[int, ...], layers: int) -> list[dict]:
    """The rows of one kind, in this (fresh) process: run times sampled interleaved over the
    device counts (:mod:`benchmarks.timing`), so that a machine's drift slows them alike."""
    import numpy as np

    from benchmarks.timing import Budget, time_steady

    programs = {devices: _program(kind, wires, devices, layers) for devices in counts}
    rows = {}
    for devices, (program, args) in programs.items():
        start = time.perf_counter()
        value = np.asarray(program(*args)).ravel()[0]
        first = time.perf_counter() - start
        memory = program.lower(*args).compile().memory_analysis()
        per_device = None if memory is None else (memory.argument_size_in_bytes + memory.output_size_in_bytes
                                                  + memory.temp_size_in_bytes)
        rows[devices] = {"row": kind, "wires": wires if kind == "state" else 6, "devices": devices,
                         "first_call_s": first, "per_device_bytes": per_device, "value": float(value)}
    budget = Budget(cold_repeats=0, steady_repeats=7, min_sample_seconds=0.05, max_case_seconds=20.0)
    medians = time_steady({d: (lambda p=p, a=a: p(*a)) for d, (p, a) in programs.items()}, budget)
    for devices, median in medians.items():
        rows[devices]["run_s"] = median if not isinstance(median, Exception) else float("nan")
    return list(rows.values())


def run(wires: int = 20, layers: int = 2) -> list[dict]:
    """Every row; the rows of one kind in one process of their own."""
    rows = []
    for kind, counts in (("state", DEVICES), ("batch", (0, 8))):
        env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
                   PYTHONPATH=os.pathsep.join(sys.path))
        code = (f"import json, benchmarks.scaling as s; "
                f"print(json.dumps(s._child({kind!r}, {wires}, {counts!r}, {layers})))")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=1800)
        if done.returncode:
            rows += [{"row": kind, "devices": d, "error": done.stderr.strip().splitlines()[-1:]} for d in counts]
        else:
            rows += json.loads(done.stdout.strip().splitlines()[-1])
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
