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
