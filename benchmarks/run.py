"""Run every benchmark in one process and print a table of medians and ratios to ``jax.jit``.

    python -m benchmarks            # full run (about 10 minutes: the 2,000-size rows)
    python -m benchmarks --quick    # a few minutes, without the slow rows
    python -m benchmarks --quantum  # also the quantum circuits of benchmarks/quantum.py and large_circuits.py
    python -m benchmarks.quantum --grad  # only the gradient of the 12-wire StronglyEntanglingLayers circuit
    python -m benchmarks --scaling  # only sharded states and batches on 8 virtual devices (benchmarks/scaling.py)
    python -m benchmarks --only appending --only "resizing while_loop"  # rows whose name has one of these
    python benchmarks/run.py        # the same, as a script

Everything computes in 64-bit types, as Catalyst and catalyst_lite do. Ratios are
``time / jax.jit time`` in the same run (the implementations of a case are timed interleaved, see
``benchmarks/timing.py``): below 1 is faster than ``jax.jit``. Results also go to
``benchmarks/results/latest.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import importlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.programs import APPEND_STEPS, GRAD_STEPS, MIXED_STEPS, PROGRAMS
from benchmarks.timing import Budget, time_cold, time_reported, time_steady

JAX = "jax.jit"
LITE = "catalyst_lite"
CATALYST = "catalyst"
IMPLEMENTATIONS = (LITE, JAX, CATALYST)
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "latest.json"
CHILD_TIMEOUT_S = 600

QUICK = Budget(cold_repeats=3, steady_repeats=7, min_sample_seconds=0.04, max_case_seconds=0.5)
FULL = Budget(cold_repeats=7, steady_repeats=15, min_sample_seconds=0.1, max_case_seconds=20.0)
NEW_SIZES = tuple(1000 + 37 * k for k in range(20))
MANY_NEW_SIZES = tuple(1000 + k for k in range(2000))


@dataclass(frozen=True)
class Case:
    """One row of the table: a program, how it is called, and with which arguments.

    ``kind`` is ``"steady"`` (a compiled function called again), ``"first call"`` (a fresh
    function of a program not compiled before in the process, traced, compiled and called once;
    catalyst_lite's size-generic tier meanwhile starts IREE's compile, finished untimed),
    ``"new sizes"`` (a fresh function called once
    per argument in ``args``, each of a new size) or ``"cold process"`` (the same in a fresh
    Python process without a disk cache, at the sizes in ``args``).
    """

    key: str
    program: str
    kind: str
    args: tuple
    slow: bool = False  # seconds per call: left out of --quick runs
    samples: int | None = None  # samples of a cold case, when not the budget's (minutes each)
    only: tuple[str, ...] | None = None  # the implementations measured, when not all


@dataclass(frozen=True)
class Target:
    """A goal: ``numerator / denominator`` (median times, as ``(case key, implementation)``) at
    most ``limit``; without a denominator, ``numerator`` at most ``limit`` seconds."""

    label: str
    numerator: tuple[str, str]
    denominator: tuple[str, str] | None
    limit: float


def _vector(n: int) -> jax.Array:
    # From NumPy: jnp.linspace would compile once per size (minutes for the 2,000 sizes).
    return jnp.asarray(np.linspace(0.0, 1.0, n))


def _vectors(sizes: tuple[int, ...]) -> tuple[jax.Array, ...]:
    return tuple(map(_vector, sizes))


def cases() -> list[Case]:
    return [
        *(Case(f"circuit sz={label}", "circuit", "steady", (n,)) for label, n in
          (("3", 3), ("1e3", 1000), ("1e6", 10**6))),
        Case("while_loop n=1e3", "decay", "steady", (_vector(1000),)),
        Case("while_loop n=1e6", "decay", "steady", (_vector(10**6),), slow=True),
        Case("first call: circuit sz=1e3", "circuit", "first call", (1000,)),
        Case("first call: circuit, autograph", "circuit_autograph", "first call", (1000,)),
        Case("first call: while_loop n=1e3", "decay", "first call", (_vector(1000),)),
        # With IREE installed, catalyst_lite runs new sizes on one size-generic executable: in the
        # first row a fresh function finds it compiled before (an earlier sample in this process,
        # or another process with a disk cache); in the cold process it is compiled during the
        # sample. "XLA only" is XLA per size.
        Case("20 new sizes (abstracted_axes)", "energy", "new sizes", _vectors(NEW_SIZES)),
        Case("20 new sizes, XLA only", "energy_xla", "new sizes", _vectors(NEW_SIZES)),
        # Nothing loaded yet (IREE's compiler, XLA's compiled kernels), nothing on disk.
        Case("20 new sizes, cold process", "energy", "cold process", NEW_SIZES, slow=True),
        # Minutes per sample for jax.jit and XLA only: one sample each, jax.jit's in the first row.
        Case("2,000 new sizes", "energy", "new sizes", _vectors(MANY_NEW_SIZES), slow=True, samples=1),
        Case("2,000 new sizes, XLA only", "energy_xla", "new sizes", _vectors(MANY_NEW_SIZES),
             slow=True, samples=1, only=(LITE,)),
        # The size-generic tier installed, a size that comes back runs XLA's executable.
        Case("hot size after new sizes: abstracted_axes n=1e6", "energy", "steady", (_vector(10**6),)),
        Case("resizing for_loop sz=1e3", "grow", "steady", (1000,)),
        Case("fixed-size for_loop sz=1e3", "fixed", "steady", (1000,)),
        Case("dispatch: x + 1 on 3 elements", "add_one", "steady", (_vector(3),)),
        Case("dispatch: x + 1, a NumPy argument", "add_one", "steady", (np.linspace(0.0, 1.0, 3),)),
        Case("dispatch: a pytree of 10 arrays", "add_one_tree", "steady",
             ({f"x{k}": _vector(3) + k for k in range(10)},)),
        Case("dispatch: 5 arguments", "sum5", "steady", tuple(_vector(3) + k for k in range(5))),
        Case("dispatch: Python scalars", "affine", "steady", (2.0, 3)),
        Case(f"first call: appending for_loop, {APPEND_STEPS} steps", "append", "first call", (APPEND_STEPS,)),
        Case(f"appending for_loop, {APPEND_STEPS} steps", "append", "steady", (APPEND_STEPS,)),
        Case(f"first call: grad, traced loop {GRAD_STEPS} steps", "grad_loop", "first call", (_vector(100), GRAD_STEPS), slow=True),
        Case(f"grad, traced loop {GRAD_STEPS} steps", "grad_loop", "steady", (_vector(100), GRAD_STEPS)),
        Case(f"static ops + resizing while_loop n={MIXED_STEPS}", "mixed", "steady", (_vector(8), MIXED_STEPS)),
    ]


TARGETS = [
    *(Target(f"{case} <= 1.3x jax.jit", (case, LITE), (case, JAX), 1.3) for case in (
        "dispatch: x + 1 on 3 elements", "dispatch: x + 1, a NumPy argument", "dispatch: a pytree of 10 arrays",
        "dispatch: 5 arguments", "dispatch: Python scalars")),
    Target("circuit 1e6 <= 1.2x jax.jit", ("circuit sz=1e6", LITE), ("circuit sz=1e6", JAX), 1.2),
    Target("while_loop 1e6 <= 1.2x jax.jit", ("while_loop n=1e6", LITE), ("while_loop n=1e6", JAX), 1.2),
    Target("first call circuit <= 1.5x jax.jit", ("first call: circuit sz=1e3", LITE), ("first call: circuit sz=1e3", JAX), 1.5),
    Target("first call autograph <= 1.5x explicit for_loop", ("first call: circuit, autograph", LITE), ("first call: circuit sz=1e3", LITE), 1.5),
    Target("first call while_loop <= 1.5x jax.jit", ("first call: while_loop n=1e3", LITE), ("first call: while_loop n=1e3", JAX), 1.5),
    Target("20 new sizes <= 0.1x jax.jit", ("20 new sizes (abstracted_axes)", LITE), ("20 new sizes (abstracted_axes)", JAX), 0.1),
    Target("20 new sizes, cold process <= 0.3x jax.jit", ("20 new sizes, cold process", LITE),
           ("20 new sizes, cold process", JAX), 0.3),
    Target("2,000 new sizes <= 10 s", ("2,000 new sizes", LITE), None, 10.0),
    Target("hot size <= 1.2x jax.jit", ("hot size after new sizes: abstracted_axes n=1e6", LITE),
           ("hot size after new sizes: abstracted_axes n=1e6", JAX), 1.2),
    Target("resizing loop <= 10x fixed-size loop", ("resizing for_loop sz=1e3", LITE), ("fixed-size for_loop sz=1e3", LITE), 10.0),
    Target(f"first call appending loop {APPEND_STEPS} <= 3x jax.jit", (f"first call: appending for_loop, {APPEND_STEPS} steps", LITE), (f"first call: appending for_loop, {APPEND_STEPS} steps", JAX), 3.0),
    Target(f"appending loop {APPEND_STEPS} <= 1.5x a preallocated fori_loop", (f"appending for_loop, {APPEND_STEPS} steps", LITE), (f"appending for_loop, {APPEND_STEPS} steps", JAX), 1.5),
    # The repeated call against jax.jit's repeated call (the user's workload), not against its
    # first call: that ratio (0.16x in an earlier table) compared a call with a compilation.
    Target(f"grad traced loop {GRAD_STEPS} <= 1.5x jax.grad(fori_loop)", (f"grad, traced loop {GRAD_STEPS} steps", LITE), (f"grad, traced loop {GRAD_STEPS} steps", JAX), 1.5),
    Target(f"grad traced loop {GRAD_STEPS}, first call <= 2x jax.jit", (f"first call: grad, traced loop {GRAD_STEPS} steps", LITE), (f"first call: grad, traced loop {GRAD_STEPS} steps", JAX), 2.0),
    Target("static ops + resizing while_loop <= 2x at a static size", (f"static ops + resizing while_loop n={MIXED_STEPS}", LITE), (f"static ops + resizing while_loop n={MIXED_STEPS}", JAX), 2.0),
]


# --- measuring -----------------------------------------------------------------------------------


def frontends() -> tuple[dict[str, ModuleType], dict[str, str]]:
    """The importable front ends, and a note for each one that is not."""
    modules, notes = {LITE: importlib.import_module("catalyst_lite")}, {}
    try:
        modules[CATALYST] = importlib.import_module("catalyst")
    except ImportError as e:
        notes[CATALYST] = f"skipped: pennylane-catalyst is not installed ({e})"
    return modules, notes


def builder(program: str, implementation: str, modules: dict[str, ModuleType]) -> Callable[[], Callable]:
    """A function returning a fresh compiled version of ``program`` for ``implementation``."""
    if implementation == JAX:
        return PROGRAMS[program].jax_jit
    return functools.partial(PROGRAMS[program].frontend, modules[implementation])


def thunk(case: Case, build: Callable[[], Callable]) -> Callable[[], Any]:
    """What one timed sample runs."""
    if case.kind == "steady":
        compiled = build()
        return lambda: compiled(*case.args)
    if case.kind == "first call":
        def first_call() -> Any:
            # A program not compiled before in the process: catalyst_lite would otherwise load the
            # size-generic module an earlier sample compiled, and the call would compile nothing.
            _forget_compiled_modules()
            return build()(*case.args)

        return first_call

    def new_sizes() -> list[Any]:
        compiled = build()
        return [compiled(x) for x in case.args]

    return new_sizes


def _forget_compiled_modules() -> None:
    """Forget catalyst_lite's IREE modules compiled in this process (a no-op without IREE)."""
    importlib.import_module("catalyst_lite.compiler.iree_backend").forget_compiled()


def cold_process_seconds(program: str, implementation: str, sizes: tuple[int, ...]) -> float:
    """Seconds to build ``program`` and call it once at each of ``sizes``, results waited for,
    after the imports: what a ``"cold process"`` sample runs in its fresh process."""
    jax.config.update("jax_enable_x64", True)
    modules = {} if implementation == JAX else {implementation: importlib.import_module(implementation)}
    run = thunk(Case("cold", program, "new sizes", _vectors(sizes)), builder(program, implementation, modules))
    start = time.perf_counter()
    jax.block_until_ready(run())
    return time.perf_counter() - start


def _cold_process_sample(case: Case, implementation: str) -> float:
    """The seconds :func:`cold_process_seconds` reports in a fresh Python process, without disk
    caches: catalyst_lite's directory is a new, empty one and JAX's is unset."""
    from catalyst_lite.compiler.disk_cache import CACHE_DIR_ENV_VAR

    code = (f"import benchmarks.run as r; "
            f"print(r.cold_process_seconds({case.program!r}, {implementation!r}, {case.args!r}))")
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                              env={**env, CACHE_DIR_ENV_VAR: cache}, timeout=CHILD_TIMEOUT_S)
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1])
    return float(done.stdout.split()[-1])


def measure(case: Case, builds: dict[str, Callable[[], Callable]], budget: Budget) -> dict[str, float | Exception]:
    """Median seconds of each implementation (timed interleaved), or the exception it raised.
    Between samples, catalyst_lite's background compilations (the size-generic tier's) finish
    untimed, so that they slow neither the next sample nor another implementation's."""
    if case.samples is not None:
        budget = dataclasses.replace(budget, cold_repeats=case.samples)
    if case.kind == "cold process":  # each sample in its own process: nothing to settle here
        return time_reported({i: functools.partial(_cold_process_sample, case, i) for i in builds}, budget)
    settle = importlib.import_module("catalyst_lite").QJIT.wait_for_compilations
    thunks: dict[str, Callable[[], Any]] = {}
    failed: dict[str, Exception] = {}
    for implementation, build in builds.items():
        try:
            thunks[implementation] = thunk(case, build)
        except Exception as e:
            failed[implementation] = e
    if case.kind == "steady":
        return {**failed, **time_steady(thunks, budget, settle)}
    return {**failed, **time_cold(thunks, budget, settle)}


def same_results(case: Case, modules: dict[str, ModuleType]) -> str | None:
    """How catalyst_lite's results compare with jax.jit's for this case: ``"identical"`` (bit for
    bit), ``"within 1e-12"`` (relative: the size-generic executable rounds otherwise), or
    ``"different"``; ``None`` when one of them fails."""
    if case.kind == "cold process":  # the same calls, compared in this process
        case = dataclasses.replace(case, kind="new sizes", args=_vectors(case.args))
    if case.kind == "new sizes":
        case = dataclasses.replace(case, args=case.args[: len(NEW_SIZES)])  # as many as compared

    settle = importlib.import_module("catalyst_lite").QJIT.wait_for_compilations

    def outputs(implementation: str) -> list[np.ndarray]:
        run = thunk(case, builder(case.program, implementation, modules))
        if case.kind == "steady":  # what the timing measures: calls after the warm-up, settled
            run(), run()
            settle()
        return [np.asarray(x) for x in jax.tree_util.tree_leaves(run())]

    try:
        pairs = list(zip(outputs(LITE), outputs(JAX), strict=True))
    except Exception:  # already reported as an error in the row
        return None
    if all(np.array_equal(a, b) for a, b in pairs):
        return "identical"
    if all(a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=0) for a, b in pairs):
        return "within 1e-12"
    return "different"


def run_all(budget: Budget, modules: dict[str, ModuleType], quick: bool,
            only: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for case in cases():
        if (quick and case.slow) or (only and not any(part in case.key for part in only)):
            continue
        row: dict[str, Any] = {"case": case.key, "kind": case.kind, "seconds": {}, "errors": {}}
        builds = {
            implementation: builder(case.program, implementation, modules)
            for implementation in IMPLEMENTATIONS
            if (implementation == JAX or implementation in modules) and implementation in (case.only or IMPLEMENTATIONS)
        }
        for implementation, result in measure(case, builds, budget).items():
            if isinstance(result, Exception):  # a front end that cannot compile a program is a result too
                row["errors"][implementation] = f"{type(result).__name__}: {str(result).splitlines()[0][:120]}"
            else:
                row["seconds"][implementation] = result
        row["identical_to_jax"] = same_results(case, modules)
        rows.append(row)
        print(f"  measured {case.key}", file=sys.stderr, flush=True)
    return rows


# --- reporting -----------------------------------------------------------------------------------


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def table(rows: list[dict[str, Any]], implementations: list[str]) -> str:
    header = ["case", *implementations, *(f"{i}/jit" for i in implementations if i != JAX), "same"]
    lines = [header]
    for row in rows:
        s = row["seconds"]
        ratios = [_ratio(s.get(i), s.get(JAX)) for i in implementations if i != JAX]
        lines.append([
            row["case"],
            *(_fmt_time(s.get(i)) if i not in row["errors"] else "error" for i in implementations),
            *("-" if r is None else f"{r:.2f}x" for r in ratios),
            {"identical": "yes", "within 1e-12": "1e-12", "different": "NO", None: "-"}[row["identical_to_jax"]],
        ])
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    text = [" | ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    text.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(text)


def evaluate_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seconds = {(row["case"], i): t for row in rows for i, t in row["seconds"].items()}
    out = []
    for target in TARGETS:
        numerator = seconds.get(target.numerator)
        ratio = numerator if target.denominator is None else _ratio(numerator, seconds.get(target.denominator))
        holds = None if ratio is None else ratio <= target.limit  # None: a case was not run
        out.append({**asdict(target), "ratio": ratio, "holds": holds})
    return out


def machine() -> dict[str, Any]:
    versions = {"python": platform.python_version(), "jax": jax.__version__}
    for name, distribution in (("catalyst", "pennylane-catalyst"), ("iree", "iree-base-compiler")):
        try:
            versions[name] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            pass
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), **versions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples: under a minute")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON results")
    parser.add_argument("--quantum", action="store_true", help="also run benchmarks/quantum.py and large_circuits.py (slow)")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="only the rows whose name contains TEXT (repeatable)")
    parser.add_argument("--scaling", action="store_true",
                        help="only benchmarks/scaling.py: sharded state vectors and batches on 8 virtual devices")
    parser.add_argument("--wires", type=int, default=20, help="--scaling: qubits of the sharded circuit (20 or 22)")
    args = parser.parse_args(argv)
    if args.scaling:
        from benchmarks import scaling

        return scaling.main(args.wires, args.output if args.output != RESULTS else scaling.RESULTS)

    jax.config.update("jax_enable_x64", True)  # what catalyst_lite and Catalyst compute with
    modules, notes = frontends()
    budget = QUICK if args.quick else FULL
    rows = run_all(budget, modules, args.quick, args.only)
    implementations = [i for i in IMPLEMENTATIONS if i == JAX or i in modules]
    targets = evaluate_targets(rows)

    print(table(rows, implementations))
    for note in notes.values():
        print(f"note: catalyst {note}")
    if not importlib.import_module("catalyst_lite.compiler.iree_backend").available():
        print("note: IREE is not installed (pip install 'catalyst-lite[iree]'): catalyst_lite "
              "compiles every new size with XLA, and the size-generic rows measure that")
    print("\ntargets (catalyst_lite, medians):")
    for t in targets:
        unit = "x" if t["denominator"] is not None else " s"
        ratio = "-" if t["ratio"] is None else f"{t['ratio']:.2f}{unit}"
        verdict = {True: "ok", False: "MISSED", None: "not measured"}[t["holds"]]
        print(f"  [{verdict}] {t['label']}: {ratio}")

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "budget": asdict(budget),
        "notes": notes,
        "rows": rows,
        "targets": targets,
    }
    if args.quantum:
        from benchmarks import quantum

        report["quantum"] = quantum.run(wires=quantum.WIRES[:1] if args.quick else quantum.WIRES)
        for row in report["quantum"]:
            print(f"quantum {row['name']:28} wires={row['wires']:3} first call {_fmt_time(row['first_call_s'])}, "
                  f"run {_fmt_time(row['run_s'])} ({row['passes']:.0f} memcpy of the state)")
        grad_budget = dataclasses.replace(quantum.GRAD_BUDGET, cold_repeats=budget.cold_repeats) if args.quick else quantum.GRAD_BUDGET
        report["quantum_grad"] = quantum.run_grad(grad_budget)
        print(quantum.grad_report(report["quantum_grad"]))
        from benchmarks import large_circuits

        report["large_circuits"] = large_circuits.run(large_circuits.ROWS[:1] if args.quick else large_circuits.ROWS)
        for row in report["large_circuits"]:
            if "error" in row:
                print(f"large circuit {row['row']:20} {row['name']:26} failed: {row['error']}")
                continue
            print(f"large circuit {row['row']:20} {row['name']:26} {row['gates']:5d} gates: compile "
                  f"{_fmt_time(row['compile_s'])}, run {_fmt_time(row['run_s'])}, peak {row['peak_mb']:.0f} MB")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
