"""Programs that autograph cannot compile, written once for a Catalyst-style front end (``api``:
``catalyst_lite`` or ``catalyst``): test_autograph.py checks our errors and the lines they name,
test_autograph_catalyst.py compares their classes with Catalyst 0.15's."""

import jax.numpy as jnp


def undefined_in_a_branch(api):
    @api.qjit(autograph=True)
    def f(x: float):
        if x > 0:
            y = x
        return y


def rank_mismatch(api):
    @api.qjit(autograph=True)
    def f(x: float):
        if x > 0:
            y = jnp.ones((2, 2))
        else:
            y = jnp.ones(3)
        return y


def structure_mismatch(api):
    @api.qjit(autograph=True)
    def f(x: float):
        if x > 0:
            y = (x, x)
        else:
            y = x
        return y


def python_if_in_disabled_function(api):
    @api.disable_autograph
    def g(x):
        if x > 0:
            return x
        return -x

    @api.qjit(autograph=True)
    def f(x: float):
        return g(x)
