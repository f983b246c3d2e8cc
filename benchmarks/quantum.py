"""Benchmark: a layered circuit compiled by catalyst_lite's ``qjit`` vs ``jax.jit`` of
``default.qubit`` (and Catalyst on ``lightning.qubit`` when installed).

The circuit: ``LAYERS`` layers of ``RX`` on every wire followed by a CNOT chain, then ``<Z0>``.
The run times of one number of wires are sampled interleaved (:mod:`benchmarks.timing`), together
with one ``memcpy`` of the state (``2**n`` complex128 values): ``passes`` is a run time over that
copy's, the number of times the run could have streamed the state through memory.
Run standalone with ``python -m benchmarks.quantum [--wires 8 14 18 20] [--skip-jax]``; the
benchmark runner calls :func:`run`.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from benchmarks.timing import Budget, time_steady

LAYERS = 10
WIRES = (8, 14, 18, 20)
LITE = "catalyst_lite"
CATALYST = "catalyst(lightning.qubit)"
FIRST_CALL_TARGET_S = 0.5
RUN_TIME_ALLOWANCE = {8: 1.0, 14: 1.0, 18: 1.0, 20: 1.0}
MAX_PASSES = {18: 40, 20: 40}
"""Targets: catalyst_lite's run time at most this multiple of Catalyst's, measured in the same
run, at each number of wires; its first call (trace, compile, run) under
:data:`FIRST_CALL_TARGET_S`; at most :data:`MAX_PASSES` memcpy times of the state per run."""
MEMCPY = "memcpy of the state"
STEADY = Budget(cold_repeats=0, steady_repeats=9, min_sample_seconds=0.05, max_case_seconds=20.0)
AGREEMENT_DIGITS = 12


def layered_qfunc(n_wires: int, qml: Any) -> Callable:
    """The benchmark's quantum function on ``n_wires`` wires, parameters of shape (LAYERS, n)."""

    def circuit(params):
        for layer in range(LAYERS):
            for w in range(n_wires):
                qml.RX(params[layer, w], wires=w)
            for w in range(n_wires - 1):
                qml.CNOT(wires=[w, w + 1])
        return qml.expval(qml.PauliZ(0))

    return circuit


def _first_call(fn: Callable, params: Any) -> tuple[float, float]:
    """(seconds, value) of the first call: trace, compile, run."""
    start = time.perf_counter()
    value = float(np.asarray(fn(params)))
    return time.perf_counter() - start, value


def _memcpy(n_wires: int) -> Callable[[], None]:
    """One copy of a state of ``n_wires`` qubits into a preallocated one."""
    source = np.ones(2**n_wires, np.complex128)
    target = np.empty_like(source)
    return lambda: np.copyto(target, source)


def target_met(row: dict, rows: list[dict]) -> bool | None:
    """Whether a catalyst_lite row meets the targets against the Catalyst row of the same number
    of wires in ``rows`` (measured in the same run); ``None`` for other rows, or when Catalyst was
    not measured (no figure is taken from anywhere else)."""
    if row["name"] != LITE:
        return None
    catalyst = [r for r in rows if r["name"] == CATALYST and r["wires"] == row["wires"]]
    if not catalyst:
        return None
    allowed = catalyst[0]["run_s"] * RUN_TIME_ALLOWANCE.get(row["wires"], 1.0)
    passes_ok = row["passes"] <= MAX_PASSES.get(row["wires"], float("inf"))
    return row["first_call_s"] < FIRST_CALL_TARGET_S and row["run_s"] <= allowed and passes_ok


def disagreements(rows: list[dict], digits: int = AGREEMENT_DIGITS) -> list[str]:
    """The rows whose value differs from catalyst_lite's at the same number of wires by more than
    ``10**-digits`` (all implementations compute the same expectation value)."""
    reference = {r["wires"]: r["value"] for r in rows if r["name"] == LITE}
    return [
        f"{r['name']} at {r['wires']} wires: {r['value']!r} vs {reference[r['wires']]!r}"
        for r in rows
        if r["wires"] in reference and abs(r["value"] - reference[r["wires"]]) > 10.0 ** -digits
    ]


def _catalyst_lite(n: int):
    import pennylane as qml

    from catalyst_lite import qjit

    return qjit(qml.qnode(qml.device("default.qubit", wires=n))(layered_qfunc(n, qml)))


def _jax_default_qubit(n: int):
    import jax
    import pennylane as qml

    return jax.jit(qml.qnode(qml.device("default.qubit", wires=n), interface="jax")(layered_qfunc(n, qml)))


def _catalyst_lightning(n: int):
    import catalyst
    import pennylane as qml

    return catalyst.qjit(qml.qnode(qml.device("lightning.qubit", wires=n))(layered_qfunc(n, qml)))


def run(wires: tuple[int, ...] = WIRES, include_jax: bool = True, budget: Budget = STEADY) -> list[dict]:
    """One row per (implementation, wires): first-call and median run times in seconds, run time
    over one memcpy of the state (``passes``), and the value. The run times of one number of
    wires are sampled interleaved, with the memcpy."""
    import jax

    jax.config.update("jax_enable_x64", True)
    implementations = {LITE: _catalyst_lite}
    if include_jax:
        implementations["jax.jit(default.qubit)"] = _jax_default_qubit
    if importlib.util.find_spec("catalyst") is not None:
        implementations[CATALYST] = _catalyst_lightning
    rows = []
    for n in wires:
        params = np.random.default_rng(0).uniform(0, np.pi, (LAYERS, n))
        compiled = {name: make(n) for name, make in implementations.items()}
        first = {name: _first_call(fn, params) for name, fn in compiled.items()}
        thunks = {name: (lambda fn=fn: fn(params)) for name, fn in compiled.items()}
        medians = time_steady({MEMCPY: _memcpy(n), **thunks}, budget)
        failed = [m for m in medians.values() if isinstance(m, Exception)]
        if failed:
            raise failed[0]
        for name in compiled:
            rows.append({"name": name, "wires": n, "first_call_s": first[name][0], "run_s": medians[name],
                         "passes": medians[name] / medians[MEMCPY], "value": first[name][1]})
    return rows
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wires", type=int, nargs="+", default=list(WIRES))
    parser.add_argument("--repeats", type=int, default=STEADY.steady_repeats, help="interleaved samples")
    parser.add_argument("--skip-jax", action="store_true", help="skip jax.jit(default.qubit) (slow to compile)")
    args = parser.parse_args(argv)
    print(f"{'implementation':28} {'wires':>5} {'first call':>11} {'run':>11} {'passes':>7}  {'value':>16}  target")
    rows = run(tuple(args.wires), not args.skip_jax, replace(STEADY, steady_repeats=args.repeats))
    for row in rows:
        met = {None: "", True: "met", False: "MISSED"}[target_met(row, rows)]
        print(f"{row['name']:28} {row['wires']:5d} {row['first_call_s']:10.3f}s "
              f"{row['run_s'] * 1e3:9.3f}ms {row['passes']:7.0f}  {row['value']:16.12f}  {met}")
    print(f"targets: first call < {FIRST_CALL_TARGET_S} s; run time <= "
          + ", ".join(f"{x:g}x" for x in RUN_TIME_ALLOWANCE.values())
          + f" Catalyst's at {', '.join(map(str, RUN_TIME_ALLOWANCE))} wires (measured above; "
          "not judged when Catalyst is not installed); at most "
          + ", ".join(f"{p} passes at {w}" for w, p in MAX_PASSES.items()) + " wires (run time / memcpy)")
    mismatched = disagreements(rows)
    print(f"values agree to {AGREEMENT_DIGITS} digits" if not mismatched
          else "VALUES DISAGREE: " + "; ".join(mismatched))


if __name__ == "__main__":
    main()
