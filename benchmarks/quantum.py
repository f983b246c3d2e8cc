"""Benchmark: a layered circuit compiled by catalyst_lite's ``qjit`` vs ``jax.jit`` of
``default.qubit`` (and Catalyst on ``lightning.qubit`` when installed).

The circuit: ``LAYERS`` layers of ``RX`` on every wire followed by a CNOT chain, then ``<Z0>``.
The run times of one number of wires are sampled interleaved (:mod:`benchmarks.timing`), together
with one ``memcpy`` of the state (``2**n`` complex128 values): ``passes`` is a run time over that
copy's, the number of times the run could have streamed the state through memory.

A second row (:func:`run_grad`): the gradient of a ``GRAD_WIRES``-wire, ``GRAD_LAYERS``-layer
``StronglyEntanglingLayers`` circuit, ``qjit(grad(qnode))``; its first call (a fresh function each
sample) and its repeated call, each timed interleaved across the implementations.
Run standalone with ``python -m benchmarks.quantum [--wires 8 14 18 20] [--skip-jax]`` (``--grad``:
only the gradient row); the benchmark runner calls :func:`run` and :func:`run_grad`.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from benchmarks.timing import Budget, time_cold, time_steady

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
GRAD_WIRES, GRAD_LAYERS = 12, 3
GRAD_FIRST_CALL_ALLOWANCE = 1.0
"""Target: the gradient's first call at most this multiple of Catalyst's, in the same run."""
GRAD_AGREEMENT = 1e-10
GRAD_BUDGET = Budget(cold_repeats=5, steady_repeats=9, min_sample_seconds=0.05, max_case_seconds=20.0)


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


def entangling_qfunc(qml: Any) -> Callable:
    """``StronglyEntanglingLayers`` on ``GRAD_WIRES`` wires, then ``<Z0>``; weights of shape
    ``(GRAD_LAYERS, GRAD_WIRES, 3)``."""

    def circuit(weights):
        qml.StronglyEntanglingLayers(weights, wires=range(GRAD_WIRES))
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


# Each builder compiles a fresh QNode of ``qfunc`` on ``n`` wires, differentiated when ``grad``.


def _catalyst_lite(qfunc: Callable, n: int, grad: bool = False):
    import pennylane as qml

    import catalyst_lite

    qnode = qml.qnode(qml.device("default.qubit", wires=n))(qfunc)
    return catalyst_lite.qjit(catalyst_lite.grad(qnode) if grad else qnode)


def _jax_default_qubit(qfunc: Callable, n: int, grad: bool = False):
    import jax
    import pennylane as qml

    qnode = qml.qnode(qml.device("default.qubit", wires=n), interface="jax")(qfunc)
    return jax.jit(jax.grad(qnode) if grad else qnode)


def _catalyst_lightning(qfunc: Callable, n: int, grad: bool = False):
    import catalyst
    import pennylane as qml

    qnode = qml.qnode(qml.device("lightning.qubit", wires=n))(qfunc)
    return catalyst.qjit(catalyst.grad(qnode) if grad else qnode)


def _implementations(include_jax: bool = True) -> dict[str, Callable]:
    """The builders measured: catalyst_lite, jax.jit (unless not asked), Catalyst when installed."""
    implementations = {LITE: _catalyst_lite}
    if include_jax:
        implementations["jax.jit(default.qubit)"] = _jax_default_qubit
    if importlib.util.find_spec("catalyst") is not None:
        implementations[CATALYST] = _catalyst_lightning
    return implementations


def _first_failure(medians: dict[str, float | Exception]) -> None:
    failed = [m for m in medians.values() if isinstance(m, Exception)]
    if failed:
        raise failed[0]


def run(wires: tuple[int, ...] = WIRES, include_jax: bool = True, budget: Budget = STEADY) -> list[dict]:
    """One row per (implementation, wires): first-call and median run times in seconds, run time
    over one memcpy of the state (``passes``), and the value. The run times of one number of
    wires are sampled interleaved, with the memcpy."""
    import jax
    import pennylane as qml

    jax.config.update("jax_enable_x64", True)
    rows = []
    for n in wires:
        params = np.random.default_rng(0).uniform(0, np.pi, (LAYERS, n))
        compiled = {name: make(layered_qfunc(n, qml), n) for name, make in _implementations(include_jax).items()}
        first = {name: _first_call(fn, params) for name, fn in compiled.items()}
        thunks = {name: (lambda fn=fn: fn(params)) for name, fn in compiled.items()}
        medians = time_steady({MEMCPY: _memcpy(n), **thunks}, budget)
        _first_failure(medians)
        for name in compiled:
            rows.append({"name": name, "wires": n, "first_call_s": first[name][0], "run_s": medians[name],
                         "passes": medians[name] / medians[MEMCPY], "value": first[name][1]})
    return rows

def run_grad(budget: Budget = GRAD_BUDGET) -> list[dict]:
    """One row per implementation of the gradient of :func:`entangling_qfunc`: median first call
    (a fresh function each sample) and median repeated call, each sampled interleaved, and the
    largest difference of its gradient from catalyst_lite's (``max_diff``)."""
    import jax
    import pennylane as qml

    from catalyst_lite import QJIT

    jax.config.update("jax_enable_x64", True)
    settle = QJIT.wait_for_compilations  # background compilations finish between samples, untimed
    weights = np.random.default_rng(0).uniform(0, 2 * np.pi, (GRAD_LAYERS, GRAD_WIRES, 3))
    builds = {name: (lambda make=make: make(entangling_qfunc(qml), GRAD_WIRES, grad=True))
              for name, make in _implementations().items()}
    first = time_cold({name: (lambda build=build: build()(weights)) for name, build in builds.items()}, budget, settle)
    compiled = {name: build() for name, build in builds.items()}
    gradients = {name: np.asarray(fn(weights)) for name, fn in compiled.items()}
    runs = time_steady({name: (lambda fn=fn: fn(weights)) for name, fn in compiled.items()}, budget, settle)
    _first_failure({**first, **runs})
    return [{"name": name, "wires": GRAD_WIRES, "layers": GRAD_LAYERS, "first_call_s": first[name],
             "run_s": runs[name], "max_diff": float(np.max(np.abs(gradients[name] - gradients[LITE])))}
            for name in builds]


def grad_report(rows: list[dict]) -> str:
    """The gradient rows as text, with catalyst_lite / Catalyst ratios, the target and agreement."""
    by_name = {row["name"]: row for row in rows}
    lines = [f"grad {row['name']:26} {GRAD_WIRES} wires, {GRAD_LAYERS} layers: first call "
             f"{row['first_call_s']:.3f} s, run {row['run_s'] * 1e3:.3f} ms" for row in rows]
    if CATALYST in by_name:
        first, run = (by_name[LITE][k] / by_name[CATALYST][k] for k in ("first_call_s", "run_s"))
        verdict = "ok" if first <= GRAD_FIRST_CALL_ALLOWANCE else "MISSED"
        lines.append(f"  [{verdict}] grad first call <= {GRAD_FIRST_CALL_ALLOWANCE:g}x Catalyst: {first:.2f}x "
                     f"(run: {run:.2f}x)")
    apart = [f"{row['name']} by {row['max_diff']:.1e}" for row in rows if row["max_diff"] > GRAD_AGREEMENT]
    lines.append(f"  gradients agree to {GRAD_AGREEMENT:g}" if not apart else "  GRADIENTS DISAGREE: " + "; ".join(apart))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wires", type=int, nargs="+", default=list(WIRES))
    parser.add_argument("--repeats", type=int, default=STEADY.steady_repeats, help="interleaved samples")
    parser.add_argument("--skip-jax", action="store_true", help="skip jax.jit(default.qubit) (slow to compile)")
    parser.add_argument("--grad", action="store_true", help=f"only the gradient of the {GRAD_WIRES}-wire circuit")
    args = parser.parse_args(argv)
    if args.grad:
        print(grad_report(run_grad()))
        return
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
