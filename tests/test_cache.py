"""What a qjit function holds, and what it says it does: ``cache_info()``, ``clear_cache()``, the
least-recently-used bound on its executables, memory freed with it, and the reports of
``verbose=True`` and of the ``catalyst_lite`` logger."""

import gc
import io
import logging
import weakref

import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import qjit, while_loop
from catalyst_lite.compiler.runner import JaxprRunner
from catalyst_lite.compiler.compilation import Specialization
from catalyst_lite.errors import ArgumentValueError
from test_segments import _append_reference, append


def double(x):
    return x * 2.0 + jnp.sum(x)


def doubling(**options):
    # XLA per size (these tests count its executables), whether or not IREE is installed.
    return qjit(double, abstracted_axes={0: "n"}, size_generic=False, **options)


def expected(n):
    x = np.arange(float(n))
    return x * 2.0 + x.sum()


def test_cache_info_counts_programs_and_executables_and_clear_cache_drops_them():
    f = doubling()
    assert f.cache_info().programs == 0
    for n in (3, 4, 3):
        np.testing.assert_array_equal(f(jnp.arange(float(n))), expected(n))
    info = f.cache_info()
    # (In the order of first use: until the cache is full, calls that the dispatcher runs by
    # itself leave the order alone; the next test checks the order of a full cache.)
    assert (info.programs, info.executables, info.sizes) == (1, 2, ((3,), (4,)))
    f.clear_cache()
    assert (f.cache_info().programs, f.cache_info().executables, f.jaxpr) == (0, 0, None)
    np.testing.assert_array_equal(f(jnp.arange(5.0)), expected(5))  # traced and compiled again
    assert (f.cache_info().programs, f.cache_info().sizes) == (1, ((5,),))


def test_least_recently_used_executables_are_evicted_beyond_cache_size():
    f = doubling(cache_size=2)
    assert f.cache_info().maxsize == 2
    for n in (1, 2, 1, 3):  # 2 is the least recently used when 3 comes
        np.testing.assert_array_equal(f(jnp.arange(float(n))), expected(n))
    assert f.cache_info().sizes == ((1,), (3,))
    for n in (2, 3, 1):  # an evicted size compiles again, with the same result
        np.testing.assert_array_equal(f(jnp.arange(float(n))), expected(n))
    assert f.cache_info().executables == 2
    unbounded = doubling(cache_size=None)
    for n in range(1, 6):
        unbounded(jnp.arange(float(n)))
    assert (unbounded.cache_info().executables, unbounded.cache_info().maxsize) == (5, None)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10"])
def test_cache_size_must_be_a_positive_int_or_none(bad):
    with pytest.raises(ArgumentValueError, match="cache_size"):
        doubling(cache_size=bad)


def grow_reference(x):
    a = np.asarray(x, float)
    while a.sum() < 50.0:
        a = np.concatenate([a, a + 1.0])
    return a


def growing():
    """A host-driven program: its loop body compiles once per size it meets."""

    @qjit(abstracted_axes={0: "n"})
    def grow(x):
        # A sort along the resized axis cannot run on capacity buffers: sizes one by one.
        @while_loop(lambda a: jnp.sum(jnp.sort(a)) < 50.0, allow_array_resizing=True)
        def loop(a):
            return jnp.concatenate([a, a + 1.0])

        return loop(x)

    return grow


def test_what_a_deleted_or_cleared_function_held_is_freed():
    """The programs, their executables and the runners of nested loop bodies belong to the
    function: deleting it (or clearing its cache) frees them."""

    def held():
        """The runners (programs and loop bodies) and compiled specializations alive now."""
        gc.collect()
        return sum(isinstance(o, (JaxprRunner, Specialization)) for o in gc.get_objects())

    before = held()
    f = growing()
    np.testing.assert_array_equal(f(np.ones(2)), grow_reference(np.ones(2)))
    assert held() >= before + 4  # the program's, the loop's condition's and body's runners, executables
    del f
    assert held() == before

    g = growing()
    g(np.ones(2))
    assert held() >= before + 4
    g.clear_cache()
    assert held() == before
    np.testing.assert_array_equal(g(np.ones(1)), grow_reference(np.ones(1)))


@pytest.mark.parametrize("drop", ["delete", "clear_cache"])
def test_compiled_loops_are_freed_with_their_function(drop):
    """The loop compiled for a loop body belongs to the function that ran it, not to the process:
    deleting the function or clearing its cache frees it (nothing keeps the body alive then)."""
    f = qjit(append.original_function)  # a resizing loop run on capacity buffers
    np.testing.assert_array_equal(f(40), _append_reference(40))
    info = f.inspect().last
    (loop,) = info.loops
    assert loop.kind == "capacity buffers" and loop.executables == 1
    (eqn,) = [e for e in info.jaxpr.jaxpr.eqns if "body_jaxpr" in e.params]
    body = weakref.ref(eqn.params["body_jaxpr"].jaxpr)
    del info, eqn
    if drop == "delete":
        del f
    else:
        f.clear_cache()
        assert f.inspect().programs == ()
    gc.collect()
    assert body() is None


def test_a_compiled_loop_keeps_at_most_cache_size_executables():
    """A resizing loop is compiled for each value of the sizes it depends on (here the argument's):
    like its function, it keeps the ``cache_size`` most recently used executables, not one per size
    ever called (it kept them all), and a size called again after its eviction is right."""

    def tiled(x, limit):
        @while_loop(lambda a: jnp.sum(a) < limit, allow_array_resizing=True)
        def grow(a):
            return jnp.concatenate([a, x])

        return grow(x)

    def reference(x, limit):
        a = x
        while a.sum() < limit:
            a = np.concatenate([a, x])
        return a

    f = qjit(tiled, abstracted_axes={0: "n"}, cache_size=2, size_generic=False)
    for n in (1, 2, 3, 4, 5, 1):
        x = np.arange(1.0, n + 1.0)
        np.testing.assert_array_equal(f(x, 20.0), reference(x, 20.0))
    loops = [loop for program in f.inspect().programs for loop in program.loops]
    assert loops and all(loop.executables <= 2 for loop in loops)


def test_programs_traced_for_many_shapes_are_bounded_by_cache_size():
    """Each new shape (no abstracted axes) is a new program: beyond ``cache_size`` the oldest ones
    go, as ``jax.jit`` bounds its traces (all were kept: memory grew with every shape), and a shape
    called again after its program went is traced again, right."""
    f = qjit(lambda x: jnp.sin(x) * 2.0 + x.sum(), cache_size=3)
    for n in [*range(1, 30), 1, 2, 29]:
        x = np.arange(float(n))
        np.testing.assert_allclose(f(x), np.sin(x) * 2.0 + x.sum(), rtol=1e-12)
        assert f.cache_info().programs <= 3 and f.cache_info().executables <= 3


def test_the_logger_reports_trace_specialization_compile_time_and_cache_hits(caplog):
    f = doubling()
    with caplog.at_level(logging.DEBUG, logger="catalyst_lite"):
        f(jnp.arange(3.0))
        first = [r.getMessage() for r in caplog.records if r.name == "catalyst_lite"]
        caplog.clear()
        f(jnp.arange(3.0))
        again = [r.getMessage() for r in caplog.records if r.name == "catalyst_lite"]
    assert first[0].startswith("double: traced for (float64[n]) in ")
    assert "double: new specialization of double for sizes (3,): one XLA program" in first
    assert any(m.startswith("double: XLA compiled double at sizes (3,) in ") for m in first)
    assert again == ["double: cache hit: double at sizes (3,)"]


def test_verbose_writes_the_reports_to_logfile_or_stderr(capsys):
    log = io.StringIO()
    f = doubling(verbose=True, logfile=log)
    f(jnp.arange(2.0))
    f(jnp.arange(2.0))
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("[catalyst_lite] double: traced for (float64[n])")
    assert any("host-driven" in line or "one XLA program" in line for line in lines)
    assert lines[-1] == "[catalyst_lite] double: cache hit: double at sizes (2,)"
    g = qjit(growing().original_function, abstracted_axes={0: "n"}, verbose=True)
    g(np.ones(2))
    err = capsys.readouterr().err
    assert "grow: new specialization of growing.<locals>.grow for sizes (2,): host-driven" in err
    assert "grow: new specialization of while_loop body for sizes (4,): one XLA program" in err
    quiet = doubling()
    quiet(jnp.arange(2.0))
    assert capsys.readouterr().err == ""


def test_reports_name_a_typed_key_argument(caplog):
    import jax

    f = qjit(lambda key: jax.random.uniform(key, (3,)))
    key = jax.random.key(0)
    with caplog.at_level(logging.DEBUG, logger="catalyst_lite"):
        np.testing.assert_array_equal(f(key), jax.jit(lambda k: jax.random.uniform(k, (3,)))(key))
    assert any("traced for (key<fry>[])" in r.getMessage() for r in caplog.records)
