"""The size-generic tier (``compiler/size_generic.py``, IREE): new sizes run on one executable
compiled for every size, sizes that come back get XLA's, programs IREE cannot compile fall back to
XLA per size; and the persistent compilation caches (JAX's for XLA, ours for IREE).

The tests that need IREE are skipped without it (the ``iree`` extra); the
others check the fallback. IREE compilations take about a second each: the programs are built once
per module (fixtures) and shared.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pennylane as qml
import pytest
from jax.experimental import enable_x64

from catalyst_lite import QJIT, cond, for_loop, grad, qjit
from catalyst_lite.compiler import iree_backend
from catalyst_lite.compiler.inspection import SizeGenericInfo
from catalyst_lite.compiler.size_generic import SIZE_GENERIC_ENV_VAR, SizeGenericTier, Status
from catalyst_lite.errors import IncompatibleSizesError

needs_iree = pytest.mark.skipif(not iree_backend.available(), reason="IREE is not installed")
RTOL = 1e-12


def tier(f: QJIT) -> SizeGenericInfo | None:
    """The size-generic tier of ``f``'s most recent program."""
    return f.inspect().last.size_generic


def xla_sizes(f: QJIT) -> set:
    """The size signatures ``f``'s most recent program has XLA executables for."""
    return {key for (key, _), strategy in f.inspect().last.strategies.items() if strategy == "xla"}


def warmed_up(f: QJIT, *calls: tuple) -> QJIT:
    """``f`` after a call at each of two size signatures (the first starts compiling its
    size-generic executable) and the compilation."""
    for args in calls:
        f(*args)
    QJIT.wait_for_compilations()
    return f


def reference(fn, *args):
    """``jax.jit`` of ``fn`` in 64-bit types, integer arguments static."""
    static = [i for i, a in enumerate(args) if isinstance(a, int)]
    with enable_x64():
        return jax.jit(fn, static_argnums=static)(*args)


def assert_close(actual, expected, rtol=RTOL):
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=rtol, atol=1e-300 if rtol else 0)


# --- programs shared by the tests ----------------------------------------------------------------


def energy(x):
    y = jnp.sin(x) * 2.0 + x
    return y, jnp.sum(y * y)


def overview(sz: int):
    """Design document 000's first program: a loop keeping its carried array's size."""
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a * 0.5 + a0

    return a0 + loop(a0)


def nested(n: int, m: int):
    """Loops keeping their carried arrays' sizes, one inside the other, capturing from both."""
    x = jnp.arange(n) * 1.0

    @for_loop(0, m, 1)
    def outer(i, acc):
        @for_loop(0, 2, 1)
        def inner(j, a):
            return a * 0.5 + x * (i + j)

        return inner(acc) + jnp.sum(acc) / n

    return outer(jnp.ones([n]))


def overview_reference(sz: int):
    a0 = np.ones(sz)
    a = a0
    for _ in range(10):
        a = a * 0.5 + a0
    return a0 + a


def nested_reference(n: int, m: int):
    x, acc = np.arange(n) * 1.0, np.ones(n)
    for i in range(m):
        a = acc
        for j in range(2):
            a = a * 0.5 + x * (i + j)
        acc = a + np.sum(acc) / n
    return acc


def pick_reference(n: int):
    return np.arange(n) * 2.0 if n > 2 else np.zeros(n + 3)


def pick(n: int):
    """A conditional whose branches return different sizes (both symbolic: a number in one branch
    would have to be that number in the other, as in Catalyst)."""

    @cond(n > 2)
    def s():
        return jnp.arange(n) * 2.0

    @s.otherwise
    def s():
        return jnp.zeros((n + 3,))

    return s()


def numpy_mix(x):
    """jax.numpy calls whose lowering needed IREE's forms: reshapes, dot products in every form,
    slices of symbolic size, broadcasts of broadcasts, reductions, sort, argmax."""
    m = x[:, None] * jnp.array([1.0, -2.0, 3.0])
    return (
        jnp.dot(x, x),
        m.T @ x,
        jnp.einsum("ij,i->j", m, x),
        jnp.outer(x, x[::1]).sum(axis=0),
        x[1:] - x[:-1],
        m.reshape(-1),
        jnp.sort(-x),
        jnp.argmax(x),
        jnp.mean(m, axis=0),
        jnp.concatenate([x, x * 2]),
    )


@pytest.fixture(scope="module")
def generic_programs():
    """The shared programs, each with its size-generic executable compiled."""
    if not iree_backend.available():
        pytest.skip("IREE is not installed")
    vec = lambda n: np.linspace(0.5, 2.0, n)  # noqa: E731
    return {
        "energy": warmed_up(qjit(energy, abstracted_axes={0: "n"}, size_generic=True), (vec(10),), (vec(11),)),
        "overview": warmed_up(qjit(overview, size_generic=True), (3,), (4,)),
        "nested": warmed_up(qjit(nested, size_generic=True), (3, 4), (5, 6)),
        "pick": warmed_up(qjit(pick, size_generic=True), (5,), (1,)),
        "numpy_mix": warmed_up(qjit(numpy_mix, abstracted_axes={0: "n"}, size_generic=True), (vec(4),), (vec(5),)),
    }


# --- new sizes run on the size-generic executable ------------------------------------------------


@needs_iree
@pytest.mark.parametrize(
    "name, expected, sizes",
    [
        ("energy", lambda x: reference(energy, x), [(np.linspace(-1, 1, n),) for n in (1, 17, 1000)]),
        ("overview", overview_reference, [(n,) for n in (0, 1, 9, 1000)]),
        ("nested", nested_reference, [(1, 0), (7, 3), (20, 9)]),
        ("pick", pick_reference, [(0,), (3,), (12,)]),
        # Positive entries: sums without cancellation, whose rounding is relative to the result.
        ("numpy_mix", lambda x: reference(numpy_mix, x), [(np.linspace(0.5, 2.0, n),) for n in (2, 9, 64)]),
    ],
)
def test_new_sizes_run_on_the_size_generic_executable(generic_programs, name, expected, sizes):
    f = generic_programs[name]
    assert tier(f).status is Status.READY, tier(f)
    compiled_before = xla_sizes(f)
    for args in sizes:
        assert_close(f(*args), expected(*args))
    assert xla_sizes(f) == compiled_before  # no XLA compilation for a size seen once


INDICES_PAST_THE_END = {  # name -> (program, the tier's status): jax.jit clamps or drops such indices
    # one index or window: a clamped slice on IREE's executable
    "x[5]": (lambda x: x[5], Status.READY),
    "x[-5]": (lambda x: x[-5] * 2.0, Status.READY),
    "row 4": (lambda x: jnp.outer(x, jnp.ones(2))[4], Status.READY),
    # scatters and arrays of indices, which IREE does not bound: XLA's for each size
    "x.at[-4].add": (lambda x: x.at[-4].add(1.0), Status.UNSUPPORTED),
    "x.at[5].set": (lambda x: x.at[5].set(1.0), Status.UNSUPPORTED),
    "x[array]": (lambda x: x[jnp.array([0, 5])], Status.UNSUPPORTED),
    "take clip": (lambda x: jnp.take(x, jnp.array([1, 6]), mode="clip"), Status.UNSUPPORTED),
}


@needs_iree
@pytest.mark.parametrize("name", INDICES_PAST_THE_END)
def test_indices_past_the_end_of_an_axis_of_symbolic_size_give_jax_jits_results(name):
    """IREE neither clamps a gather's start nor drops a scatter's index past the end of an operand of
    symbolic size: ``x[5]`` of 3 elements read past the array (0.0 or other memory) on the
    size-generic executable, ``x.at[-4].add`` of 3 elements crashed the process."""
    fn, status = INDICES_PAST_THE_END[name]
    f = warmed_up(qjit(fn, abstracted_axes={0: "n"}, size_generic=True), (np.arange(8.0),), (np.arange(9.0),))
    assert tier(f).status is status, tier(f)
    for n in (3, 2, 6):
        x = np.arange(n) + 1.0
        assert_close(f(x), reference(fn, x))


@needs_iree
def test_new_sizes_called_while_iree_compiles_wait_for_it_and_run_on_it(monkeypatch):
    """IREE's compile starts at the first call, which XLA serves; the new sizes called meanwhile
    wait for it instead of each compiling XLA."""
    # Waits as long as the compile takes (the bound, a few XLA compiles, depends on the load).
    monkeypatch.setattr(SizeGenericTier, "WAIT_IN_XLA_COMPILES", 10**6)

    def shifted_cos(x):
        return jnp.cos(x) * 0.625 - x

    f = qjit(shifted_cos, abstracted_axes={0: "n"}, size_generic=True)
    xs = [np.linspace(-1.0, 1.0, n) for n in (3, 4, 5)]
    assert_close(f(xs[0]), reference(shifted_cos, xs[0]))
    assert tier(f).status in (Status.COMPILING, Status.READY)  # started, not waiting for a second size
    for x in xs[1:]:
        assert_close(f(x), reference(shifted_cos, x))
    assert tier(f).status is Status.READY and not tier(f).from_cache
    assert xla_sizes(f) == {(3,)}  # the waiting sizes ran on IREE's executable


@needs_iree
def test_sizes_waiting_for_iree_go_on_before_its_module_is_written_to_disk(tmp_path, monkeypatch):
    """The compiled module's disk-cache write (fsyncs) comes after the calls waiting for it: a write
    held up does not hold them up, and the module is on disk once the compilations are waited for."""
    from catalyst_lite.compiler import disk_cache

    monkeypatch.setenv("CATALYST_LITE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(SizeGenericTier, "WAIT_IN_XLA_COMPILES", 10**6)
    release, write = threading.Event(), disk_cache.write

    def held_up(key, kind, content):
        release.wait(120)
        write(key, kind, content)

    monkeypatch.setattr(disk_cache, "write", held_up)

    def damped(x):
        return jnp.tanh(x) * 0.375 + x, jnp.max(x)

    f = qjit(damped, abstracted_axes={0: "n"}, size_generic=True)
    try:
        for n in (3, 4, 6):
            x = np.linspace(-2.0, 2.0, n)
            assert_close(f(x), reference(damped, x))
        assert tier(f).status is Status.READY and xla_sizes(f) == {(3,)}  # 4 and 6 waited for IREE
        assert not list(tmp_path.rglob("*.vmfb"))  # while the write is still held up
    finally:
        release.set()
        QJIT.wait_for_compilations()
    assert len(list(tmp_path.rglob("*.vmfb"))) == 1


@needs_iree
def test_a_size_that_comes_back_gets_its_xla_executable_bit_identical_to_jax_jit(generic_programs):
    f = generic_programs["energy"]
    x = np.linspace(-1.0, 1.0, 333)
    first = f(x)
    assert (333,) not in xla_sizes(f)
    f(x)  # the second call at this size starts its XLA compilation, in the background
    QJIT.wait_for_compilations()
    assert (333,) in xla_sizes(f)
    hot = f(x)
    expected = reference(energy, x)
    for a, e in zip(hot, expected):
        np.testing.assert_array_equal(a, e)
    assert_close(first, expected)


def _error_of(call) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


@needs_iree
def test_sizes_are_checked_as_without_the_tier(generic_programs):
    """What a new size must satisfy (size assumptions, reshape requirements, no negative sizes)
    is checked before the size-generic executable runs, with the errors of the XLA path."""

    def sized(n):
        return jnp.max(jnp.ones(n)) * jnp.ones(n - 2)

    def rows(x):
        return x.reshape(-1, 3)

    f = warmed_up(qjit(sized, size_generic=True), (5,), (6,))
    g = warmed_up(qjit(rows, abstracted_axes={0: "n"}, size_generic=True), (np.arange(6.0),), (np.arange(9.0),))
    assert tier(f).status is tier(g).status is Status.READY
    np.testing.assert_array_equal(f(9), np.ones(7))
    np.testing.assert_array_equal(g(np.arange(12.0)), np.arange(12.0).reshape(-1, 3))
    f_xla, g_xla = qjit(sized, size_generic=False), qjit(rows, abstracted_axes={0: "n"}, size_generic=False)
    for n in (1, 0):
        assert _error_of(lambda: f(n)) == _error_of(lambda: f_xla(n))
    with pytest.raises(IncompatibleSizesError):  # a reshape keeps the number of elements
        g(np.arange(7.0))
    assert _error_of(lambda: g(np.arange(7.0))) == _error_of(lambda: g_xla(np.arange(7.0)))


@needs_iree
def test_threads_calling_new_sizes_get_correct_results(generic_programs):
    f = generic_programs["energy"]
    results, errors = {}, []

    def work(n: int) -> None:
        try:
            results[n] = f(np.linspace(-1.0, 1.0, n))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(40, 56)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, r in results.items():
        assert_close(r, reference(energy, np.linspace(-1.0, 1.0, n)))


@needs_iree
def test_inside_jax_transformations_the_program_is_staged_by_xla(generic_programs):
    f = generic_programs["energy"]
    x = np.linspace(-1.0, 1.0, 7)
    with enable_x64():
        np.testing.assert_allclose(
            jax.grad(lambda x: f(x)[1])(x), jax.grad(lambda x: energy(x)[1])(x), rtol=RTOL
        )
        assert_close(jax.jit(f)(x), energy(x))


@needs_iree
def test_a_qnode_program_with_a_symbolic_size():
    dev = qml.device("default.qubit", wires=2)

    def circuit(params):
        @for_loop(0, params.shape[0], 1)
        def layer(i):
            qml.RX(params[i], wires=0)
            qml.CNOT(wires=[0, 1])

        layer()
        return qml.expval(qml.Z(1))

    def expected(params):
        @qml.qnode(dev)
        def plain():
            for p in params:
                qml.RX(p, wires=0)
                qml.CNOT(wires=[0, 1])
            return qml.expval(qml.Z(1))

        return plain()

    f = warmed_up(
        qjit(qml.qnode(dev)(circuit), abstracted_axes={0: "n"}, size_generic=True),
        (np.array([0.1, 0.2]),),
        (np.array([0.1, 0.2, 0.3]),),
    )
    assert tier(f).status is Status.READY, tier(f)
    for n in (1, 4, 7):
        params = np.linspace(0.1, 0.9, n)
        np.testing.assert_allclose(f(params), expected(params), atol=1e-12)


# --- what falls back to XLA per size -------------------------------------------------------------


@needs_iree
def test_a_loop_that_resizes_its_carry_falls_back_to_xla():
    """IREE assumes that a loop's carried sizes never change: such a program is not given to it."""

    @qjit(size_generic=True)
    def grow(n: int):
        @for_loop(0, 3, 1, allow_array_resizing=True)
        def body(i, a):
            return jnp.ones((a.shape[0] + 1,)) * i

        return body(jnp.zeros((n,)))

    for n in (3, 4, 5):
        np.testing.assert_array_equal(grow(n), np.full(n + 3, 2.0))
    assert tier(grow).status is Status.UNSUPPORTED
    assert "resizes its carried arrays" in tier(grow).reason


@needs_iree
def test_a_program_with_grad_inside_falls_back_to_xla():
    @qjit(abstracted_axes={0: "n"}, size_generic=True)
    def f(x):
        return grad(lambda y: jnp.sum(jnp.sin(y)))(x)

    for n in (3, 4, 5):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_allclose(f(x), np.cos(x), rtol=RTOL)
    QJIT.wait_for_compilations()
    assert tier(f).status is Status.UNSUPPORTED
    assert "custom_call" in tier(f).reason


@needs_iree
def test_a_lapack_custom_call_falls_back_to_xla():
    f = qjit(lambda a: jnp.linalg.eigh(a)[0], abstracted_axes=({0: "n", 1: "n"},), size_generic=True)
    for n in (2, 3, 4):
        a = np.eye(n) * 2.0 + 0.1
        np.testing.assert_allclose(f(a), np.linalg.eigvalsh(a), rtol=RTOL)
    QJIT.wait_for_compilations()
    assert tier(f).status is Status.UNSUPPORTED
    assert "custom_call" in tier(f).reason and "lapack" in tier(f).reason


@needs_iree
def test_arguments_of_extended_dtypes_fall_back_to_xla():
    """A typed PRNG key has no NumPy dtype for IREE's argument types: XLA runs the program."""

    def noisy(x, key):
        return x + jax.random.uniform(key, x.shape)

    f = qjit(noisy, abstracted_axes=({0: "n"}, {}), size_generic=True)
    key = jax.random.key(7)
    for n in (3, 4, 5, 4):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_allclose(f(x, key), jax.jit(noisy)(x, key), rtol=RTOL)
    QJIT.wait_for_compilations()


def test_programs_without_sizes_or_without_iree_have_no_size_generic_tier(monkeypatch):
    fixed = qjit(lambda x: x * 2.0, size_generic=True)
    fixed(np.ones(3))
    assert tier(fixed) is None  # nothing to be generic over
    monkeypatch.setattr(iree_backend, "available", lambda: False)
    f = qjit(energy, abstracted_axes={0: "n"}, size_generic=True)
    for n in (3, 4):
        assert_close(f(np.linspace(-1, 1, n)), reference(energy, np.linspace(-1, 1, n)))
    assert tier(f) is None


def test_the_tier_is_on_by_default_and_the_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setattr(iree_backend, "available", lambda: True)
    monkeypatch.delenv(SIZE_GENERIC_ENV_VAR, raising=False)  # as for a user (conftest sets it)
    default = qjit(energy, abstracted_axes={0: "n"})
    default(np.ones(3))
    assert tier(default) is not None
    monkeypatch.setenv(SIZE_GENERIC_ENV_VAR, "0")
    f = qjit(energy, abstracted_axes={0: "n"})
    f(np.ones(3))
    assert tier(f) is None
    g = qjit(energy, abstracted_axes={0: "n"}, size_generic=True)  # the option wins
    g(np.ones(3))
    assert tier(g) is not None


# --- persistent compilation caches ---------------------------------------------------------------

_SECOND_PROCESS = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    misses = []
    jax.monitoring.register_event_listener(
        lambda event, **kw: misses.append(event) if event.endswith("cache_misses") else None)
    from catalyst_lite import QJIT, qjit

    @qjit(abstracted_axes={0: "n"}, size_generic=sys.argv[2] == "1")
    def energy(x):
        y = jnp.sin(x) * 2.0 + x
        return y, jnp.sum(y * y)

    totals = [float(energy(np.linspace(0.0, 1.0, n))[1]) for n in (5, 6, 7)]
    QJIT.wait_for_compilations()
    tier = energy.inspect().last.size_generic
    print(json.dumps({"misses": len(misses), "totals": totals,
                      "generic": None if tier is None else [tier.status.value, tier.from_cache]}))
    """
)


def _second_process(cache_dir, size_generic: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CATALYST_LITE_CACHE_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", _SECOND_PROCESS, str(cache_dir), "1" if size_generic else "0"],
        capture_output=True, text=True, env=env, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_compiles_no_xla_executable_for_sizes_seen_before(tmp_path):
    first = _second_process(tmp_path, size_generic=False)
    second = _second_process(tmp_path, size_generic=False)
    assert first["misses"] > 0 and second["misses"] == 0
    assert first["totals"] == second["totals"]


@needs_iree
def test_a_second_process_loads_the_size_generic_executable_from_the_disk_cache(tmp_path):
    first = _second_process(tmp_path, size_generic=True)
    second = _second_process(tmp_path, size_generic=True)
    assert first["generic"] == ["ready", False]  # compiled from the first call on
    assert second["generic"] == ["ready", True]  # found in the cache at the first call
    assert any(p.suffix == ".vmfb" for p in (tmp_path / "catalyst_lite").iterdir())
    np.testing.assert_allclose(first["totals"], second["totals"], rtol=RTOL)


# --- process hygiene -------------------------------------------------------------------------------


def _mapped_iree_libraries() -> set[str]:
    """The files of IREE's module libraries mapped in this process (Linux)."""
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[-1] for line in maps if "iree_dylib_" in line}


@needs_iree
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps (Linux)")
def test_a_dropped_function_releases_its_size_generic_module():
    import gc

    gc.collect()  # the functions of earlier tests, released now rather than while this one counts
    gc.collect()
    before = _mapped_iree_libraries()
    f = warmed_up(qjit(lambda x: jnp.cos(x) * 3.0 - x, abstracted_axes={0: "n"}, size_generic=True),
                  (np.ones(3),), (np.ones(4),))
    np.testing.assert_allclose(f(np.arange(9.0)), np.cos(np.arange(9.0)) * 3.0 - np.arange(9.0), rtol=RTOL)
    assert tier(f).status is Status.READY
    loaded = _mapped_iree_libraries() - before
    assert len(loaded) == 1
    del f
    gc.collect()  # the function's objects refer to each other; their release frees IREE's objects,
    gc.collect()  # which refer to each other too
    assert not loaded & _mapped_iree_libraries()


@needs_iree
def test_clear_cache_discards_the_compilations_under_way():
    from catalyst_lite.compiler.compilation import run_in_background

    f = warmed_up(qjit(energy, abstracted_axes={0: "n"}, size_generic=True), (np.ones(3),), (np.ones(4),))
    release = threading.Event()
    run_in_background(release.wait)  # the compilations submitted next wait behind this one
    x = np.linspace(-1.0, 1.0, 9)
    f(x), f(x)  # the second call at a size submits its XLA compilation
    f.clear_cache()
    release.set()
    QJIT.wait_for_compilations()
    assert f.cache_info().executables == 0
    assert_close(f(x), reference(energy, x))  # and it compiles again when called


_AT_EXIT = textwrap.dedent(
    """
    import logging, os, sys, time
    import jax.numpy as jnp, numpy as np
    from catalyst_lite import QJIT, qjit

    f = qjit(lambda x: jnp.sum(jnp.sin(x) * 2.0), abstracted_axes={0: "n"}, size_generic=True)
    print(float(f(np.ones(3))), len(logging.root.handlers))
    if sys.argv[1] == "compiling":  # exit once the compiler runs
        while not os.path.exists(os.environ["COMPILER_PID"]):
            time.sleep(0.01)
    else:  # exit with the module loaded
        QJIT.wait_for_compilations()
        print(float(f(np.ones(5))), len(logging.root.handlers))
    """
)


@needs_iree
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("at_exit", ["compiling", "loaded"])
def test_at_exit_no_compile_is_waited_for_no_iree_object_reported_leaked_and_the_root_logger_untouched(tmp_path, at_exit):
    """A process exits promptly: an IREE compile still running (here a stand-in for iree-compile
    that never ends) is killed, not waited for, and not recorded as a failure of the program."""
    tools, cache, pid_file = tmp_path / "tools", tmp_path / "cache", tmp_path / "compiler.pid"
    env = {**os.environ, "COMPILER_PID": str(pid_file), "CATALYST_LITE_CACHE_DIR": str(cache)}
    if at_exit == "compiling":
        tools.mkdir()
        compiler = tools / "iree-compile"
        compiler.write_text(f"#!/bin/sh\necho $$ > {pid_file}.tmp\nmv {pid_file}.tmp {pid_file}\nexec sleep 600\n")
        compiler.chmod(0o755)
        env["IREE_TOOL_PATH"] = str(tools)
    done = subprocess.run([sys.executable, "-c", _AT_EXIT, at_exit], capture_output=True, text=True,
                          env=env, timeout=120)  # far below the stand-in's 600 s
    assert done.returncode == 0, done.stderr[-3000:]
    assert "leaked" not in done.stderr, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.strip().splitlines()]
    assert [float(line[0]) for line in lines] == pytest.approx([2 * n * np.sin(1.0) for n in (3, 5)[:len(lines)]],
                                                               rel=1e-12)
    assert all(line[-1] == "0" for line in lines)  # no handler on the root logger
    if at_exit == "compiling":
        stat = f"/proc/{int(pid_file.read_text())}/stat"
        for _ in range(1000):  # the killed compiler's exit, as the kernel completes it
            if not os.path.exists(stat) or open(stat).read().rsplit(")", 1)[1].split()[0] == "Z":
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the compiler still runs after the process exited")
        assert not list(cache.rglob("*.unsupported"))  # the kill says nothing of the program
    else:
        assert len(lines) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_background_compiler_runs_at_a_lower_priority():
    """``iree-compile`` runs while the program serves calls: it yields the CPU to them."""
    status, out, _ = iree_backend._compiler_subprocesses.run(["sh", "-c", "sleep 0.5; cat /proc/self/stat"], b"")
    niceness = int(out.decode().rsplit(")", 1)[1].split()[16])  # field 19 of proc(5)
    assert status == 0 and niceness == iree_backend.background_niceness()  # 10 above ours


@needs_iree
def test_every_compilation_of_the_tier_and_the_swap_to_xla_are_reported(caplog):
    """verbose=True and the catalyst_lite logger see the background IREE compilation, the calls it
    serves, and the XLA compilation that takes a size over."""
    caplog.set_level("DEBUG", logger="catalyst_lite")

    def scaled_sum(x):
        return jnp.sum(x * 3.25)

    f = warmed_up(qjit(scaled_sum, abstracted_axes={0: "n"}, size_generic=True), (np.ones(3),), (np.ones(4),))
    assert tier(f).status is Status.READY and not tier(f).from_cache
    for _ in range(2):
        f(np.ones(9))
    QJIT.wait_for_compilations()
    assert float(f(np.ones(9))) == 9 * 3.25
    text = caplog.text
    for event in ["first called (sizes (3,), served by XLA): then IREE compiles it for every size in the background",
                  "at sizes (4,): waits for IREE's compile",
                  "scaled_sum for every size in",
                  "scaled_sum at sizes (9,): runs on the size-generic (IREE) executable",
                  "scaled_sum at sizes (9,) called again: XLA compiles them in the background",
                  "scaled_sum at sizes (9,) in",
                  "scaled_sum for sizes (9,): one XLA program (compiled ahead"]:
        assert event in text, event  # (the function's name is its qualified name)


@needs_iree
def test_a_new_function_of_a_program_compiled_in_this_process_runs_every_size_at_its_first_call():
    """A function made again (a notebook cell run twice) finds the module compiled for the same
    program earlier in the process: no IREE compile, no XLA compile for its new sizes."""

    def make():
        return qjit(lambda x: jnp.tanh(x) * 1.75 + x, abstracted_axes={0: "n"}, size_generic=True)

    first = warmed_up(make(), (np.ones(3),), (np.ones(4),))
    assert tier(first).status is Status.READY and not tier(first).from_cache
    again = make()
    for n in (5, 6, 7):
        x = np.linspace(-1.0, 1.0, n)
        np.testing.assert_allclose(again(x), np.tanh(x) * 1.75 + x, rtol=RTOL)
    assert tier(again).status is Status.READY and tier(again).from_cache
    assert xla_sizes(again) == set()
