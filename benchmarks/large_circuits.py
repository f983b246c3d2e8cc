"""Benchmark: compile time and memory of circuits that decompose into thousands of gates.

Rows (each measured in a fresh process, so that its peak memory is its own):

- ``multiplier``: ``qml.Multiplier`` on 8 + 10 wires (about 4,300 gates once decomposed);
- ``multiplier-x2``: two of them in a row (over 5,000 gates once decomposed);
- ``random-5000``: 5,000 gates (rotations, ``CNOT``, ``Toffoli``, ``CRZ``, ``H``) on random
  wires of 16, known angles;
- ``random-5000-traced``: the same with angles computed from the argument (``x * angle``);
- ``qmc-16``: ``qml.QuantumMonteCarlo`` on 16 wires (wide controlled unitaries).

For each: the number of gates, the compile time (first call minus a later call: trace, lowering,
XLA), the run time, the peak resident memory of the process, and Catalyst's figures on
``lightning.qubit`` when it is installed. Target: catalyst_lite compiles each in under
:data:`COMPILE_TARGET_S` seconds.

Run with ``python -m benchmarks.large_circuits [--rows multiplier qmc-16] [--skip-catalyst]``;
``python -m benchmarks --quantum`` runs it too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from typing import Any, Callable

COMPILE_TARGET_S = 10.0
ROWS = ("multiplier", "multiplier-x2", "random-5000", "random-5000-traced", "qmc-16")
LITE = "catalyst_lite"
CATALYST = "catalyst(lightning.qubit)"


# --- the circuits (built in the child process) -----------------------------------------------------


def multipliers(qml: Any, factors: tuple[int, ...] = (5,)) -> tuple[int, Callable]:
    """``qml.Multiplier`` by each of ``factors`` in turn, on 8 + 10 wires."""
    x_wires, work = list(range(8)), list(range(8, 18))

    def circuit(x: float):
        qml.BasisEmbedding(3, wires=x_wires)
        qml.RY(x, 0)
        for k in factors:
            qml.Multiplier(k, x_wires, mod=2**8, work_wires=work)
        return qml.probs(wires=x_wires)

    return 18, circuit


def _random_gates(count: int, n_wires: int, traced: bool, qml: Any) -> tuple[int, Callable]:
    import numpy as np

    rng = np.random.default_rng(1)
    kinds = rng.integers(0, 7, count)
    wires = [rng.choice(n_wires, 3, replace=False).tolist() for _ in range(count)]
    angles = rng.uniform(0, 2 * np.pi, count)
    ops = [qml.RX, qml.RY, qml.RZ]

    def circuit(x: float):
        for k, w, a in zip(kinds, wires, angles):
            angle = x * a if traced else a
            if k < 3:
                ops[k](angle, wires=w[0])
            elif k == 3:
                qml.CNOT(w[:2])
            elif k == 4:
                qml.Toffoli(w)
            elif k == 5:
                qml.CRZ(angle, wires=w[:2])
            else:
                qml.Hadamard(w[0])
        return qml.expval(qml.Z(0))

    return n_wires, circuit


def qmc(qml: Any) -> tuple[int, Callable]:
    import numpy as np

    m, estimation = 7, 8
    xs = np.linspace(-np.pi, np.pi, 2**m)
    p = np.exp(-(xs**2) / 2)
    p /= p.sum()
    target, est = range(m + 1), range(m + 1, m + 1 + estimation)

    def circuit(x: float):
        qml.RY(x, wires=est[0])
        qml.QuantumMonteCarlo(p, lambda i: np.sin(xs[i]) ** 2, target_wires=target, estimation_wires=est)
        return qml.probs(est)

    return m + 1 + estimation, circuit


CIRCUITS: dict[str, Callable[[Any], tuple[int, Callable]]] = {
    "multiplier": multipliers,
    "multiplier-x2": lambda qml: multipliers(qml, (5, 3)),
    "random-5000": lambda qml: _random_gates(5000, 16, False, qml),
    "random-5000-traced": lambda qml: _random_gates(5000, 16, True, qml),
    "qmc-16": qmc,
}


def _gate_count(n_wires: int, circuit: Callable, qml: Any) -> int:
    """Gates once decomposed into what catalyst_lite applies (its gate records)."""
    from catalyst_lite.quantum.gates import WireMap, gate_records

    tape = qml.workflow.construct_tape(qml.qnode(qml.device("default.qubit", wires=n_wires))(circuit))(0.3)
    with qml.QueuingManager.stop_recording():
        return sum(len(gate_records(op, WireMap(range(n_wires)))) for op in tape.operations)


def measure(row: str, implementation: str) -> dict:
    """One row, in this process: compile and run times, peak memory (MB)."""
    import resource
    import time

    import jax
    import numpy as np
    import pennylane as qml

    if implementation == LITE:
        from catalyst_lite import qjit

        device = "default.qubit"
    else:
        from catalyst import qjit

        device = "lightning.qubit"
    n_wires, circuit = CIRCUITS[row](qml)
    gates = _gate_count(n_wires, circuit, qml)
    start = time.perf_counter()
    compiled = qjit(qml.qnode(qml.device(device, wires=n_wires))(circuit))
    value = np.asarray(compiled(0.3))
    first = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(compiled(0.4))
    run = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"name": implementation, "row": row, "wires": n_wires, "gates": gates, "compile_s": max(first - run, 0.0),
            "run_s": run, "peak_mb": peak, "value": float(np.ravel(value)[0])}


TIMEOUT_S = 900


def _in_child(row: str, implementation: str) -> dict:
    code = f"import json, benchmarks.large_circuits as b; print(json.dumps(b.measure({row!r}, {implementation!r})))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"name": implementation, "row": row, "error": f"not done after {TIMEOUT_S} s"}
    if done.returncode:
        return {"name": implementation, "row": row, "error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(rows: tuple[str, ...] = ROWS, include_catalyst: bool = True) -> list[dict]:
    """One result per (row, implementation), each measured in a fresh process."""
    implementations = [LITE]
    if include_catalyst and importlib.util.find_spec("catalyst") is not None:
        implementations.append(CATALYST)
    return [_in_child(row, implementation) for row in rows for implementation in implementations]


def target_met(result: dict) -> bool | None:
    if result["name"] != LITE or "error" in result:
        return None
    return result["compile_s"] < COMPILE_TARGET_S


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--skip-catalyst", action="store_true")
    args = parser.parse_args(argv)
    print(f"{'row':20} {'implementation':26} {'wires':>5} {'gates':>6} {'compile':>9} {'run':>10} {'peak MB':>8}  target")
    for r in run(tuple(args.rows), not args.skip_catalyst):
        if "error" in r:
            print(f"{r['row']:20} {r['name']:26} failed: {r['error']}")
            continue
        met = {None: "", True: "met", False: "MISSED"}[target_met(r)]
        print(f"{r['row']:20} {r['name']:26} {r['wires']:5d} {r['gates']:6d} {r['compile_s']:8.2f}s "
              f"{r['run_s'] * 1e3:8.1f}ms {r['peak_mb']:8.0f}  {met}")
    print(f"target: catalyst_lite compiles each circuit in under {COMPILE_TARGET_S:g} s")


if __name__ == "__main__":
    main()
