"""jax.jit's options on qjit with jax.jit's meaning (donation, keep_unused, device, shardings), the
AOT stages trace/lower/compile, and options validated by type when qjit runs."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import qjit
from catalyst_lite.errors import ArgumentTypeError

HERE = pathlib.Path(__file__).resolve().parent


def test_sharded_programs_on_eight_virtual_devices():
    """in_shardings/out_shardings (and set_mesh's PartitionSpecs) on 8 virtual CPU devices, in a
    process of its own: XLA_FLAGS must be set before JAX starts."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, str(HERE / "sharded_programs.py")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stderr[-3000:]


def test_donated_argument_is_consumed_and_results_match():
    @qjit(abstracted_axes={0: "n"}, donate_argnames="x")
    def step(x, y):
        return x + 2.0 * y

    for n in (3, 5):
        x, y = jnp.arange(float(n)), jnp.ones(n)
        np.testing.assert_allclose(step(x, y), np.arange(n) + 2.0)
        assert x.is_deleted() and not y.is_deleted()


def test_donate_argnums_outside_the_parameters_is_refused():
    with pytest.raises(ArgumentTypeError, match=r"donate_argnums=3.*position\(s\) \[3\].*has 1"):
        qjit(lambda x: x, donate_argnums=3)


def test_keep_unused_keeps_the_unused_argument_in_the_compiled_program():
    def f(x, unused):
        return x * 2.0

    args = (jnp.ones(3), jnp.ones(2))
    assert "%arg1" not in qjit(f).lower(*args).as_text()
    kept = qjit(f, keep_unused=True)
    assert "%arg1" in kept.lower(*args).as_text()
    np.testing.assert_allclose(kept(*args), jax.jit(f, keep_unused=True)(*args))


@pytest.mark.filterwarnings("ignore:backend and device argument on jit is deprecated")  # as jax.jit warns
def test_device_and_backend_place_the_results():
    device = jax.devices("cpu")[-1]
    out = qjit(lambda x: x + 1.0, device=device)(jnp.ones(2))
    assert out.devices() == {device}
    np.testing.assert_allclose(qjit(lambda x: x + 1.0, backend="cpu")(np.ones(2)), [2.0, 2.0])


def test_aot_stages_match_jax_stages():
    def f(x):
        return jnp.sum(jnp.sin(x) ** 2)

    q = qjit(f, abstracted_axes={0: "n"})
    x = jnp.linspace(0.0, 1.0, 5)
    traced = q.trace(x)
    assert "f64[a]" in str(traced.jaxpr)  # the size is symbolic in the trace
    lowered = q.lower(x)
    assert "tensor<5xf64>" in lowered.as_text()  # and static at the lowered arguments'
    assert lowered.as_text() == traced.lower().as_text() == q.specialized_mlir(x)
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(x), jax.jit(f)(x), rtol=1e-14)
    np.testing.assert_allclose(q.compile(x)(x), np.sum(np.sin(x) ** 2), rtol=1e-14)
    assert compiled.cost_analysis()["flops"] == jax.jit(f).lower(x).compile().cost_analysis()["flops"]
    assert lowered.cost_analysis()["flops"] > 0
    with pytest.raises(TypeError, match=r"lowered for sizes \(5,\) and is called with sizes \(6,\)"):
        compiled(jnp.ones(6))


def test_lower_of_an_annotated_size_argument():
    @qjit
    def ramp(n: int):
        return jnp.arange(n) * 2.0

    np.testing.assert_allclose(ramp.lower(4).compile()(4), [0.0, 2.0, 4.0, 6.0])


def f(x):
    return x


@pytest.mark.parametrize("option", ["autograph", "verbose", "tiered_compilation", "size_generic", "keep_unused"])
def test_switch_options_refused_at_decoration(option):
    with pytest.raises(ArgumentTypeError, match=rf"qjit\({option}='no'\) of f: {option} must be True or False"):
        qjit(f, **{option: "no"})
    with pytest.raises(ArgumentTypeError, match=rf"{option} must be True or False"):
        qjit(**{option: 1})(f)


def test_qjit_of_a_non_function_is_refused():
    with pytest.raises(ArgumentTypeError, match=r"qjit\(3\): qjit compiles a function, got int"):
        qjit(3)


def test_donation_turns_the_size_generic_tier_off_and_says_so(capsys):
    qjit(lambda x: x, donate_argnums=0, verbose=True)
    assert "size-generic tier off: donated or sharded calls are compiled by XLA" in capsys.readouterr().err
