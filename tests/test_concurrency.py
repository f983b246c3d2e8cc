"""One compiled function used from many threads: right results, each size compiled by XLA once,
and the user's global JAX configuration never changed, also when tracing fails halfway.

XLA compilations are counted with JAX's public monitoring events (one
``/jax/core/compile/backend_compile_duration`` event per backend compilation).
"""

import sys
import threading
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import CatalystLiteError, cond, for_loop, measure, pure_callback, qjit
from catalyst_lite.jax_extras import patches

THREADS = 8
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


def global_config():
    return jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64


@pytest.fixture(autouse=True)
def jax_config_untouched():
    before = global_config()
    yield
    assert global_config() == before
    assert not patches.is_active()


class CompileCounter:
    """Counts XLA backend compilations in the whole process (JAX has no public way to remove a
    listener, so one is registered for the module and tests look at differences)."""

    def __init__(self):
        self.total = 0
        self.lock = threading.Lock()

    def __call__(self, event: str, duration: float, **kwargs) -> None:
        if event == BACKEND_COMPILE:
            with self.lock:
                self.total += 1


_COUNTER = CompileCounter()
jax.monitoring.register_event_duration_secs_listener(_COUNTER)


class CompilationsSince:
    """Compilations since this object was made (references are computed with NumPy only)."""

    def __init__(self):
        self.start = _COUNTER.total

    @property
    def compilations(self) -> int:
        return _COUNTER.total - self.start


def run_in_threads(work, n_threads=THREADS):
    """Run ``work(i)`` in ``n_threads`` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n_threads)
    results, errors = [None] * n_threads, []

    def target(i):
        try:
            barrier.wait(30)
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001  (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def make_program():
    """A function with a loop, a sized constructor and a reduction; its NumPy reference."""

    # XLA per size (these tests count its compilations), whether or not IREE is installed.
    @qjit(abstracted_axes={0: "n"}, size_generic=False)
    def f(x):
        @for_loop(0, 3, 1)
        def body(i, acc):
            return acc * 0.5 + x

        return body(jnp.ones(x.shape[0] + 1)[1:]), jnp.sum(x * x)

    def reference(x):
        acc = np.ones(x.shape[0])
        for _ in range(3):
            acc = acc * 0.5 + x
        return acc, np.sum(x * x)

    return f, reference


@pytest.mark.parametrize("distinct_sizes", [THREADS, 3, 1])
def test_eight_threads_each_size_compiled_once(distinct_sizes):
    f, reference = make_program()
    f(np.ones(1))  # the first call also compiles JAX's own helpers once; size 1 is not used below
    compile_counter = CompilationsSince()
    sizes = [2 + i % distinct_sizes for i in range(THREADS)]

    results = run_in_threads(lambda i: f(np.linspace(0.0, 1.0, sizes[i])))

    for size, (acc, total) in zip(sizes, results):
        expected_acc, expected_total = reference(np.linspace(0.0, 1.0, size))
        np.testing.assert_allclose(acc, expected_acc, rtol=1e-12)
        np.testing.assert_allclose(total, expected_total, rtol=1e-12)
    assert compile_counter.compilations == distinct_sizes
    # Calling again at the same sizes, from any thread, compiles nothing.
    run_in_threads(lambda i: f(np.linspace(0.0, 1.0, sizes[i])))
    assert compile_counter.compilations == distinct_sizes


def test_python_function_traced_once_by_eight_threads():
    calls = []

    @qjit
    def f(n):
        calls.append(n)
        return jnp.arange(n) * 2

    results = run_in_threads(lambda i: f(i + 1))
    assert len(calls) == 1
    for i, out in enumerate(results):
        np.testing.assert_array_equal(out, np.arange(i + 1) * 2)


def test_different_signatures_trace_concurrently_and_stay_separate():
    """Scalars, vectors and matrices of several sizes: three signatures, each traced once."""
    calls = Counter()

    @qjit(abstracted_axes={0: "n"})
    def f(x):
        calls[np.ndim(x)] += 1
        return x * 2.0

    def make_input(i):
        return [np.float64(i), np.arange(i + 1.0), np.ones((i + 1, 3))][i % 3]

    results = run_in_threads(lambda i: f(make_input(i)))
    assert calls == {0: 1, 1: 1, 2: 1}
    for i, out in enumerate(results):
        np.testing.assert_allclose(out, make_input(i) * 2.0)


def test_config_unchanged_while_other_threads_fail_halfway_through_tracing():
    """Half the threads call a function whose trace fails in the middle, half a good one; while
    both are being traced the main thread sees the user's configuration and plain JAX behaves as
    usual, and afterwards nothing is left changed."""
    before = global_config()
    inside = {"bad": threading.Event(), "good": threading.Event()}
    release = threading.Event()

    def pause(name):
        inside[name].set()
        assert release.wait(30)

    @qjit
    def bad(n):
        jnp.ones([n])
        pause("bad")
        if n > 0:  # Python control flow on a traced value: fails while tracing
            return n
        return n

    @qjit
    def good(n):
        y = jnp.ones([n])
        pause("good")
        return y * 2.0

    def work(i):
        try:
            return (bad if i % 2 else good)(i + 1)
        except CatalystLiteError as e:
            return e

    outcome = []
    worker = threading.Thread(target=lambda: outcome.extend(run_in_threads(work)))
    worker.start()
    try:
        assert all(event.wait(30) for event in inside.values())  # both traces are under way
        seen = global_config(), jnp.ones(2).dtype, jax.jit(lambda x: x * 2)(jnp.ones(2)).dtype
    finally:
        release.set()
        worker.join(120)

    assert seen == (before, jnp.zeros(1).dtype, jnp.zeros(1).dtype)
    assert global_config() == before
    assert len(outcome) == THREADS
    for i, result in enumerate(outcome):
        if i % 2:
            assert isinstance(result, CatalystLiteError) and "cond" in str(result)
        else:
            np.testing.assert_allclose(result, np.full(i + 1, 2.0))


def test_patches_registered_while_another_thread_traces_are_undone():
    """A module imported lazily may register a patch while a trace is running: it is applied at
    once and removed with the others (before the fix, removing it raised ``KeyError``)."""
    owner = type("Owner", (), {"value": staticmethod(lambda: "original")})
    inside, release = threading.Event(), threading.Event()
    seen = []

    @qjit
    def f(n):
        inside.set()
        assert release.wait(30)
        seen.append(owner.value())
        return jnp.ones([n])

    worker = threading.Thread(target=lambda: seen.append(f(2)))
    worker.start()
    try:
        assert inside.wait(30)
        patch = patches.Patch("test_only", owner, "value", lambda original: lambda: "patched", "test")
        patches.register_patch(patch)
    finally:
        release.set()
        worker.join(60)
        patches.unregister_patch(patch)
    assert seen[0] == "patched"
    np.testing.assert_allclose(seen[1], np.ones(2))
    assert owner.value() == "original"


def make_qnode(i, measuring=False):
    """QNode number ``i`` (a distinct circuit for each thread) on ``default.qubit``. With
    ``measuring``, its last rotation is conditioned on a mid-circuit ``measure`` of an ancilla
    that is always 1 (only catalyst_lite's compilation of the QNode can run it)."""
    import pennylane as qml

    @qml.qnode(qml.device("default.qubit", wires=4))
    def circuit(x):
        qml.RX(x * (i + 1), wires=i % 3)
        qml.CNOT(wires=[i % 3, (i + 1) % 3])
        if measuring:
            qml.X(3)
            cond(measure(3))(lambda: qml.RY(0.3 * i, wires=(i + 2) % 3))()
        else:
            qml.RY(0.3 * i, wires=(i + 2) % 3)
        return qml.expval(qml.Z((i + 1) % 3)), qml.probs(wires=[0, 1])

    return circuit


def test_eight_threads_trace_qnodes_at_once():
    """Eight threads trace QNodes at once, their traces chained so that each starts while the
    previous one is under way, which ends before the next calls its QNode (the QNode interception is reference-counted:
    before, the first trace to end removed it for all). Each gets default.qubit's results, and
    afterwards PennyLane's QNode is as it was."""
    import pennylane as qml

    before = vars(qml.QNode)["__call__"]
    qnodes = [make_qnode(i, measuring=True) for i in range(THREADS)]
    entered = [threading.Event() for _ in range(THREADS)]
    done = [threading.Event() for _ in range(THREADS)]

    def traced(i):
        def program(x):
            entered[i].set()
            assert i == 0 or done[i - 1].wait(60)  # the previous trace has ended
            out = qnodes[i](x)
            assert i == THREADS - 1 or entered[i + 1].wait(60)  # the next one is under way
            return out

        return qjit(program)

    compiled = [traced(i) for i in range(THREADS)]

    def work(i):
        assert i == 0 or entered[i - 1].wait(60)  # traces start in order
        try:
            return compiled[i](0.7)
        finally:
            done[i].set()

    results = run_in_threads(work)
    for i, (expval, probs) in enumerate(results):
        ref_expval, ref_probs = make_qnode(i)(0.7)
        np.testing.assert_allclose(expval, ref_expval, atol=1e-12)
        np.testing.assert_allclose(probs, ref_probs, atol=1e-12)
    assert vars(qml.QNode)["__call__"] is before


def test_a_thread_not_tracing_sees_jax_and_pennylane_unpatched():
    """While one thread is inside a trace (all repairs installed), another thread gets JAX's and
    PennyLane's own behaviour: tracers refuse bool() and NumPy conversion in its jax.jit code, a
    QNode runs on default.qubit, the collector runs; afterwards no class keeps a patch."""
    import gc

    import pennylane as qml

    from catalyst_lite.jax_extras import pe

    tracer_attrs = ("__bool__", "__array__", "__hash__", "_short_repr", "make_eqn")
    before = {a: vars(pe.DynamicJaxprTracer).get(a) for a in tracer_attrs}
    qnode_call = vars(qml.QNode)["__call__"]
    qnode = make_qnode(1)
    inside, release = threading.Event(), threading.Event()

    @qjit
    def traced(x):
        out = qnode(x)
        inside.set()
        assert release.wait(30)
        return out

    worker = threading.Thread(target=traced.__call__, args=(0.5,))
    worker.start()
    try:
        assert inside.wait(60)
        assert vars(qml.QNode)["__call__"] is not qnode_call  # the interception is installed

        def uses_bool(x):
            return x if x > 0 else -x

        with pytest.raises(jax.errors.TracerBoolConversionError):
            jax.jit(uses_bool)(1.0)
        with pytest.raises(jax.errors.TracerArrayConversionError):
            jax.jit(lambda x: np.asarray(x))(1.0)
        with pytest.raises(TypeError):
            jax.jit(lambda n: jnp.ones((n,)))(3)
        expval, probs = qnode(0.5)  # PennyLane's own execution
        jit_expval, _ = jax.jit(qnode)(0.5)  # PennyLane's JAX interface
        collector_on = gc.isenabled()
    finally:
        release.set()
        worker.join(60)
    ref_expval = np.cos(0.5 * 2)  # RX(2x) on wire 1, then CNOT(1 -> 2): <Z_2> = cos(2x)
    np.testing.assert_allclose([expval, jit_expval], [ref_expval, ref_expval], atol=1e-12)
    np.testing.assert_allclose(np.sum(probs), 1.0)
    assert collector_on
    assert {a: vars(pe.DynamicJaxprTracer).get(a) for a in tracer_attrs} == before
    assert vars(qml.QNode)["__call__"] is qnode_call


class Raised(Exception):
    """What the failing callback raises: the value it was called with."""


def test_two_threads_each_get_their_own_callback_exception():
    """Each call re-raises the exception its own callback raised, never the other thread's (nor
    XLA's error because the other thread took it)."""

    @pure_callback
    def fails(x) -> float:
        raise Raised(float(x))

    @qjit
    def f(x: float):
        return fails(x) + 1.0

    calls = 500  # per thread: 1,000 calls in all
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: their calls interleave
    start = threading.Barrier(2)
    wrong = []

    def run(mine):
        start.wait()
        for _ in range(calls):
            try:
                f(mine)
            except Exception as err:
                if not isinstance(err, Raised) or err.args != (mine,):
                    wrong.append((mine, repr(err)[:80]))
            else:
                wrong.append((mine, "no exception"))

    threads = [threading.Thread(target=run, args=(v,)) for v in (1.0, 2.0)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
