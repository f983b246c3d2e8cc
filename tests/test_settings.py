"""Import-time settings: ``import catalyst_lite`` switches on ``jax_enable_x64`` as ``import
catalyst`` does, unless ``CATALYST_LITE_ENABLE_X64=0`` keeps the user's configuration; qjit works
either way (64-bit inside, the caller's types outside)."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import disable_x64

from catalyst_lite import qjit
from catalyst_lite.settings import X64_ENV_VAR

PROBE = """
import jax
before = jax.config.jax_enable_x64
import catalyst_lite, jax.numpy as jnp
print(before, jax.config.jax_enable_x64, jnp.asarray(1.5).dtype,
      catalyst_lite.qjit(lambda x: x * 2)(jnp.arange(3.0)).dtype)
"""


def _probe(env_value):
    env = {k: v for k, v in os.environ.items() if k not in (X64_ENV_VAR, "JAX_ENABLE_X64")}
    if env_value is not None:
        env[X64_ENV_VAR] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_switches_on_x64_like_catalyst():
    assert _probe(None) == ["False", "True", "float64", "float64"]


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_the_environment_variable_keeps_the_users_configuration(value):
    # qjit still computes in 64 bits for its own thread; jax.numpy arrays made outside are float32.
    assert _probe(value) == ["False", "False", "float32", "float32"]


def test_qjit_with_x64_switched_off_again_by_the_user():
    f = qjit(lambda x: jnp.sum(x * 2.0), abstracted_axes={0: "n"})
    with disable_x64():
        x = jnp.arange(4.0)
        assert x.dtype == np.float32
        assert float(f(x)) == 12.0
        assert not jax.config.jax_enable_x64  # a call does not switch it on again


CLASSICAL_PROBE = """
import sys
import jax, jax.numpy as jnp
import catalyst_lite
from catalyst_lite import cond, for_loop, grad, qjit
from catalyst_lite.jax_extras import pe

@qjit(abstracted_axes={0: "n"})
def f(x):
    @for_loop(0, 3, 1)
    def body(i, acc):
        return acc * 0.5 + x
    total = jnp.sum(body(jnp.ones(x.shape[0])))
    @cond(total > 1.0)
    def signed():
        return total
    @signed.otherwise
    def signed():
        return -total
    return signed() + grad(lambda y: y * y)(2.0)

out = f(jnp.arange(4.0)), f(jnp.arange(2.0)), f.mlir is not None
def hashes(x):
    try:
        hash(x)
        return "hashable"
    except TypeError:
        return "unhashable"
seen = []
jax.jit(lambda x: seen.append(hashes(x)) or x)(1.0)
own = sorted(a for a in ("__bool__", "__array__", "__hash__") if a in vars(pe.DynamicJaxprTracer))
print("pennylane" in sys.modules, seen[0], own, [float(v) for v in out[:2]])
"""


def test_a_classical_program_leaves_pennylane_unimported_and_jax_unchanged():
    """A purely classical program never imports PennyLane (which takes seconds, and makes JAX's
    tracers hashable process-wide); after its trace, JAX's tracers are as before: unhashable in
    the user's own jax.jit code, with no copies of inherited methods left on their classes."""
    out = subprocess.run([sys.executable, "-c", CLASSICAL_PROBE], capture_output=True, text=True, check=True)
    imported, hashing, own, values = out.stdout.split(maxsplit=3)

    def reference(x):
        acc = np.ones(len(x))
        for _ in range(3):
            acc = acc * 0.5 + x
        total = acc.sum()
        return (total if total > 1.0 else -total) + 4.0

    assert (imported, hashing, own) == ("False", "unhashable", "[]")
    np.testing.assert_allclose(eval(values), [reference(np.arange(4.0)), reference(np.arange(2.0))])
