"""Each execution strategy against the simpler path, on the workload it exists for.

``python -m benchmarks.strategies [names...]``: for every strategy, the workload a user would
write where it should pay, timed with the strategy on and off (switched by a module constant of
catalyst_lite, restored afterwards), interleaved sample by sample in one process. Prints medians
and the ratio off/on; a strategy must pay at least 2x to stay. The strategies that did not are
deleted, their figures kept in docs/architecture.md ("Why each execution strategy exists").
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

import catalyst_lite as cl
from catalyst_lite import for_loop, qjit

from . import programs


@contextlib.contextmanager
def _setting(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _interleaved(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, sample in cases.items():
            samples[name].append(sample())
    return {k: statistics.median(v) for k, v in samples.items()}


def _cold(build: Callable[[], Callable], call: Callable[[Callable], Any], switch: Callable) -> Callable[[], float]:
    """Seconds of ``call`` on a freshly built function, with ``switch()`` held."""

    def sample() -> float:
        with switch():
            f = build()
            start = time.perf_counter()
            jax.block_until_ready(call(f))
            return time.perf_counter() - start

    return sample


def _steady(f: Callable, args: tuple, switch: Callable, batch: int) -> Callable[[], float]:
    """Seconds per call of an already warmed ``f(*args)``, with ``switch()`` held."""
    with switch():
        for _ in range(3):
            jax.block_until_ready(f(*args))

    def sample() -> float:
        with switch():
            start = time.perf_counter()
            for _ in range(batch):
                jax.block_until_ready(f(*args))
            return (time.perf_counter() - start) / batch

    return sample


def _on() -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


SIZES = list(range(7, 17))  # 10 new sizes


def _energy(**options: Any) -> Callable[[], Callable]:
    return lambda: programs.energy(cl, **options)


def _new_sizes(f: Callable) -> Any:
    out = None
    for n in SIZES:
        out = f(np.linspace(0.0, 1.0, n))
    return out


def bench_size_generic(rounds: int) -> dict[str, float]:
    """20 new sizes of the energy program: IREE's size-generic executable vs XLA per size.
    ``with``: the executable compiled before (this process, or the disk cache); ``compiled
    during``: compiled in the background during the 20 calls."""
    import catalyst_lite.compiler.iree_backend as iree

    def fresh_iree() -> Callable:
        iree.forget_compiled()
        return programs.energy(cl, size_generic=True)

    def new_sizes(f: Callable) -> Any:
        return [f(np.linspace(0.0, 1.0, n)) for n in range(7, 27)]

    cached = programs.energy(cl, size_generic=True)
    new_sizes(cached)
    cached.wait_for_compilations()
    result = _interleaved({
        "with": _cold(_energy(size_generic=True), new_sizes, _on),
        "compiled during": _cold(fresh_iree, new_sizes, _on),
        "without": _cold(_energy(size_generic=False), new_sizes, _on),
    }, rounds)
    cl.QJIT.wait_for_compilations()
    return result


def _runner_module():
    return sys.modules["catalyst_lite.compiler.runner"]


def _no_speculation() -> contextlib.AbstractContextManager:
    return _setting(_runner_module(), "MAX_SPECULATIONS", 0)


@contextlib.contextmanager
def _no_segments() -> Iterator[None]:
    runner = _runner_module()

    def whole_program_on_host(self, err):
        return lambda args: runner.eval_jaxpr(self.jaxpr, args, runner.Mode.HOST)

    with _no_speculation(), _setting(runner.JaxprRunner, "_segmentation", whole_program_on_host):
        yield


def bench_segments(rounds: int) -> dict[str, float]:
    """``mixed`` (100 operations, then a resizing while_loop) repeated, without speculation: the
    100 operations compiled as one segment vs run one primitive at a time."""
    x = jnp.ones(1000)
    cases = {}
    for name, switch in (("with", _no_speculation), ("without", _no_segments)):
        with switch():
            f = programs.mixed(cl)
        cases[name] = _steady(f, (x, programs.MIXED_STEPS), switch, 5)
    return _interleaved(cases, rounds)


def bench_speculation(rounds: int) -> dict[str, float]:
    """``append`` (a resizing for_loop with a traced trip count, 400 steps), repeated call: the
    whole program speculated vs its segments."""
    cases = {}
    for name, switch in (("with", _on), ("without", _no_speculation)):
        with switch():
            f = programs.append(cl)
        cases[name] = _steady(f, (programs.APPEND_STEPS,), switch, 20)
    return _interleaved(cases, rounds)


def bench_unroll(rounds: int) -> dict[str, float]:
    """``grow`` (a resizing for_loop, 10 known steps), first call and repeated call: unrolled vs
    the resizing-loop path (capacity buffers, speculation)."""
    fl = sys.modules["catalyst_lite.control_flow.loop_common"]  # where the short loops unroll

    def off() -> contextlib.AbstractContextManager:
        return _setting(fl, "UNROLL_LIMIT", -1)

    cases = {}
    for name, switch in (("with", _on), ("without", off)):
        with switch():
            f = programs.grow(cl)
        cases[name] = _steady(f, (1000,), switch, 50)
    steady = _interleaved(cases, rounds)
    cold = _interleaved({
        "with": _cold(lambda: programs.grow(cl), lambda f: (f(1000), f(1000), f(1000)), _on),
        "without": _cold(lambda: programs.grow(cl), lambda f: (f(1000), f(1000), f(1000)), off),
    }, rounds)
    return {"with": steady["with"], "without": steady["without"],
            "first 3 calls with": cold["with"], "first 3 calls without": cold["without"]}


@contextlib.contextmanager
def _no_buffers() -> Iterator[None]:
    cap = sys.modules["catalyst_lite.compiler.capacity"]
    with _setting(cap, "runs_on_buffers", lambda operands: False):
        yield


def bench_capacity(rounds: int, steps: int = 100) -> dict[str, float]:
    """``append`` with ``steps`` steps: first call and repeated call, on capacity buffers vs the
    body compiled per size signature (one size per iteration)."""
    cold = _interleaved({
        "first call with": _cold(lambda: programs.append(cl), lambda f: f(steps), _on),
        "first call without": _cold(lambda: programs.append(cl), lambda f: f(steps), _no_buffers),
    }, max(1, rounds // 2))
    cases = {}
    for name, switch in (("with", _on), ("without", _no_buffers)):
        with switch():
            f = programs.append(cl)
        cases[name] = _steady(f, (steps,), switch, 3)
    return {**_interleaved(cases, rounds), **cold}


@contextlib.contextmanager
def _no_bounded_scans() -> Iterator[None]:
    """Bounded scans refuse every loop: reverse mode then runs the loop from the host."""
    cap = sys.modules["catalyst_lite.compiler.capacity"]
    with _setting(cap.BoundedScan, "run", lambda self, *a, **k: None):
        yield


def _bounded_scans(rounds: int, build: Callable, steps: Any) -> dict[str, float]:
    """``build(catalyst_lite)(x, steps)``, repeated: a loop's reverse mode as a compiled scan vs
    driven from the host."""
    x = jnp.linspace(0.0, 1.0, 100)
    cases = {}
    for name, switch in (("with", _on), ("without", _no_bounded_scans)):
        with switch():
            f = build(cl)
        cases[name] = _steady(f, (x, steps), switch, 2)
    return _interleaved(cases, rounds)


def _grad_loop_array(api: Any) -> Callable:
    @api.qjit
    def grad_loop(x, n):
        def f(x):
            @api.for_loop(0, n, 1)
            def loop(i, a):
                return programs.grad_step(i, a)

            return jnp.sum(loop(x))

        return api.grad(f)(x)

    return grad_loop


def bench_bounded_scan(rounds: int) -> dict[str, float]:
    """``grad`` through a for_loop whose trip count is known only at run time (an array), 1,000
    steps. (With an ``int`` trip count the whole program is staged with it static, as
    ``jax.jit``'s ``static_argnums``: no scan; that workload measured 0.99x.)"""
    return _bounded_scans(rounds, _grad_loop_array, jnp.asarray(1000))


def bench_bounded_scan_while(rounds: int) -> dict[str, float]:
    """``grad`` through a while_loop of 1,000 iterations (counted forward, then a scan)."""
    return _bounded_scans(rounds, programs.grad_while, 1000.0)


@contextlib.contextmanager
def _no_learned_capacities() -> Iterator[None]:
    cap = sys.modules["catalyst_lite.compiler.capacity"]

    def forget(self, *args: Any) -> None:
        self._caps = {}

    with _setting(cap.MaskedLoop, "_learn", forget):
        yield


def bench_learned_capacities(rounds: int, steps: int = 400) -> dict[str, float]:
    """``append`` (``a[-1:]`` of an array that grows to ``steps``), repeated: the length of
    ``a[-1:]`` at a capacity of its own vs at the loop's capacity."""
    cases = {}
    for name, switch in (("with", _on), ("without", _no_learned_capacities)):
        with switch():
            f = programs.append(cl)
        cases[name] = _steady(f, (steps,), switch, 20)
    return _interleaved(cases, rounds)


def _index_sized() -> Callable:
    @qjit
    def index_sized(n: int):
        @for_loop(0, n, 1)
        def step(i, acc):
            return acc + jnp.sum(jnp.arange(i, dtype=float) ** 2)

        return step(0.0)

    return index_sized


def bench_index_sized(rounds: int, steps: int = 50) -> dict[str, float]:
    """A loop that keeps its sizes but makes arrays sized by its index (``jnp.arange(i)``), 50
    steps: first call and repeated call, on capacity buffers vs the body compiled per size."""
    cold = _interleaved({
        "first call with": _cold(_index_sized, lambda f: f(steps), _on),
        "first call without": _cold(_index_sized, lambda f: f(steps), _no_buffers),
    }, max(1, rounds // 2))
    cases = {}
    for name, switch in (("with", _on), ("without", _no_buffers)):
        with switch():
            f = _index_sized()
        cases[name] = _steady(f, (steps,), switch, 5)
    return {**_interleaved(cases, rounds), **cold}


BENCHMARKS = {
    "size_generic": bench_size_generic,
    "segments": bench_segments,
    "speculation": bench_speculation,
    "capacity": bench_capacity,
    "learned_capacities": bench_learned_capacities,
    "index_sized": bench_index_sized,
    "unroll": bench_unroll,
    "bounded_scan": bench_bounded_scan,
    "bounded_scan_while": bench_bounded_scan_while,
}


def main(argv: list[str]) -> None:
    rounds = 5
    for name in argv or list(BENCHMARKS):
        try:
            result = BENCHMARKS[name](rounds)
        except Exception as err:  # a failure: report it and go on
            print(f"{name}: {type(err).__name__}: {err}", flush=True)
            continue
        ratio = result["without"] / result["with"]
        extra = "  ".join(f"{k}={v * 1e3:.3f}ms" for k, v in result.items())
        print(f"{name}: {extra}  ratio without/with = {ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
