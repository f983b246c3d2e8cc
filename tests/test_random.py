"""``jax.random`` inside ``qjit``: raw and typed keys, static and symbolic sizes, ``jax.jit``'s
numbers.

Each sampler is compiled once by ``qjit`` (the size symbolic where the program has one) and
compared, at several sizes, with ``jax.jit`` at the same static size: the numbers must be equal,
not merely distributed alike.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import for_loop, qjit


def raw_key(seed):
    return jax.random.PRNGKey(seed)


def typed_key(seed):
    return jax.random.key(seed)


KEYS = {"raw": raw_key, "typed": typed_key}

# sampler(key, n) -> an array whose sizes depend on the integer n
SAMPLERS = {
    "uniform": lambda key, n: jax.random.uniform(key, (n, 2)),
    "uniform(minval, maxval)": lambda key, n: jax.random.uniform(key, (n,), minval=-2.0, maxval=3.0),
    "normal": lambda key, n: jax.random.normal(key, (n,)),
    "randint": lambda key, n: jax.random.randint(key, (n,), 0, 10),
    "bernoulli": lambda key, n: jax.random.bernoulli(key, 0.3, (n,)),
    "permutation(n)": lambda key, n: jax.random.permutation(key, jnp.arange(n)),
    "permutation of rows": lambda key, n: jax.random.permutation(key, jnp.arange(2 * n).reshape(n, 2)),
    "choice": lambda key, n: jax.random.choice(key, jnp.arange(n) * 2.0, (3,)),
    "choice without replacement": lambda key, n: jax.random.choice(key, jnp.arange(n), (2,), replace=False),
    "split into n": lambda key, n: jax.random.key_data(jax.random.split(key, n))
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    else jax.random.split(key, n),
    "split, then sample each": lambda key, n: jax.vmap(lambda k: jax.random.normal(k, (2,)))(
        jax.random.split(key, 3)
    )
    * jnp.ones((n, 1, 1)),
    "fold_in": lambda key, n: jax.random.normal(jax.random.fold_in(key, n), (n,)),
}


def as_numbers(x):
    """Key arrays as their data, so that results compare as numbers."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


# Every sampler with raw keys; typed keys take the same paths after `random_wrap`, so a few.
CASES = [(name, "raw") for name in SAMPLERS] + [
    (name, "typed") for name in ("normal", "permutation of rows", "split into n", "fold_in")
]


@pytest.mark.parametrize("name, key_kind", CASES)
def test_symbolic_size_gives_jax_jits_numbers(name, key_kind):
    sampler, make_key = SAMPLERS[name], KEYS[key_kind]

    def program(seed, n):
        return sampler(make_key(seed), n)

    compiled = qjit(program)
    for seed, n in ((0, 4), (1, 7)):
        expected = jax.jit(program, static_argnums=1)(seed, n)
        got = compiled(seed, n)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(as_numbers(got), as_numbers(expected))
    assert len(compiled.inspect().programs) == 1  # one trace for every size


@pytest.mark.parametrize("key_kind", KEYS)
def test_static_sizes_and_a_key_argument(key_kind):
    """A key passed in (raw uint32 data or a typed key), static shapes."""

    def program(key, x):
        k1, k2 = jax.random.split(key)
        return x * jax.random.normal(k1, (3,)) + jax.random.uniform(k2, (3,))

    key, x = KEYS[key_kind](42), jnp.arange(3.0)
    np.testing.assert_array_equal(qjit(program)(key, x), jax.jit(program)(key, x))


def test_key_argument_with_an_abstracted_axis():
    def program(key, x):
        return x + jax.random.normal(key, x.shape)

    noisy = qjit(program, abstracted_axes=(None, {0: "n"}))
    for n in (2, 5):
        x = jnp.arange(float(n))
        for key in (raw_key(3), typed_key(3)):
            np.testing.assert_array_equal(noisy(key, x), jax.jit(program)(key, x))
    assert len(noisy.inspect().programs) == 2  # one per key type


def test_keys_that_change_in_a_loop():
    @qjit
    def walk(n: int):
        key = jax.random.key(0)

        @for_loop(0, 4, 1)
        def step(i, acc):
            return acc + jax.random.normal(jax.random.fold_in(key, i), (n,))

        return step(jnp.zeros(n))

    def reference(n):
        key, acc = jax.random.key(0), jnp.zeros(n)
        for i in range(4):
            acc = acc + jax.random.normal(jax.random.fold_in(key, i), (n,))
        return acc

    for n in (1, 3):
        np.testing.assert_allclose(walk(n), reference(n), rtol=1e-12)


def test_the_traced_program_keeps_the_size_symbolic():
    """``random_bits`` takes its size as an operand, and ``.mlir`` shows the draws as opaque
    calls (their bodies are chosen at specialization)."""
    f = qjit(lambda x: x + jax.random.uniform(jax.random.key(0), x.shape), abstracted_axes={0: "n"})
    f(np.zeros(3))
    (bits,) = [e for e in f.jaxpr.jaxpr.eqns if e.primitive.name == "random_bits"]
    assert bits.params["shape"] == (None,) and bits.invars[-1] is f.jaxpr.jaxpr.invars[0]
    assert "@catalyst_lite.random_bits" in f.mlir and "tensor<?xf64>" in f.mlir
    g = qjit(lambda x: jax.random.permutation(jax.random.key(0), x), abstracted_axes={0: "n"})
    g(np.zeros(3))
    assert "@catalyst_lite.shuffle" in g.mlir
