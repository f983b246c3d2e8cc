"""Differential test: jax.numpy programs under ``qjit`` (symbolic sizes) against ``jax.jit``.

Each program is compiled once by ``qjit``, with its sizes symbolic (``abstracted_axes``, or an
integer argument that sizes arrays), and called at every size in :data:`SIZES`; ``jax.jit`` runs
it at the same sizes, static. Wherever ``jax.jit`` succeeds, ``qjit`` must give the same value
(shape, dtype and numbers); where both raise, the exceptions must be of the same kind
(``ValueError``, ``TypeError``, ``IndexError``). ``qjit`` may succeed where ``jax.jit`` refuses a
size (``jnp.arange(n)`` of a negative ``n`` is empty, as in NumPy).

Most sizes reuse the program traced at generic sizes; sizes at which JAX's shape logic decides
differently (empty arrays, length 1, equal lengths of two axes) get a program traced for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import qjit

SIZES = range(10)
KINDS = (IndexError, TypeError, ValueError, ArithmeticError, NotImplementedError)


def vec(n: int) -> np.ndarray:
    """A length-``n`` float vector with negative, positive and repeated values."""
    return np.round(np.sin(np.arange(n) * 1.7) * 3.0, 1)


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable
    args: Callable[[int], tuple]  # the arguments at size n
    abstracted_axes: Any = None  # None: the integer arguments are the sizes
    static_argnums: tuple[int, ...] = ()  # what jax.jit needs static (the integer sizes)


def of_x(name: str, fn: Callable) -> Program:
    """``fn(x)`` of a vector whose length is the symbolic axis ``n``."""
    return Program(name, fn, lambda n: (vec(n),), {0: "n"})


def of_n(name: str, fn: Callable) -> Program:
    """``fn(n)`` of an integer size ``n``."""
    return Program(name, fn, lambda n: (n,), None, (0,))


def of_xy(name: str, fn: Callable, y_length: Callable[[int], int]) -> Program:
    """``fn(x, y)`` of two vectors with their own symbolic lengths ``n`` and ``m``."""
    return Program(name, fn, lambda n: (vec(n), vec(y_length(n)) + 0.5), ({0: "n"}, {0: "m"}))


GRID = np.array([-2.0, 0.25, 1.0, 4.0])

PROGRAMS = [
    # Slices and indexing: empty and one-element arrays take other paths in JAX.
    of_x("x[::2]", lambda x: x[::2]),
    of_x("x[::-1]", lambda x: x[::-1]),
    of_x("x[:-1]", lambda x: x[:-1]),
    of_x("x[1:-1]", lambda x: x[1:-1]),
    of_x("x[1:] - x[:-1]", lambda x: x[1:] - x[:-1]),
    of_x("x[-3:]", lambda x: x[-3:] * 2.0),
    of_x("x[0]", lambda x: x[0]),
    of_x("jnp.take", lambda x: jnp.take(x, jnp.array([0, 2]))),
    of_x("x.at[1:].set", lambda x: x.at[1:].set(0.0)),
    # Functions whose code branches on the length.
    of_x("jnp.diff", jnp.diff),
    of_x("jnp.insert", lambda x: jnp.insert(x, 1, 5.0)),
    of_x("jnp.delete", lambda x: jnp.delete(x, 0)),
    of_x("jnp.roll", lambda x: jnp.roll(x, 1)),
    of_x("jnp.trapezoid", jnp.trapezoid),
    of_x("jnp.unwrap", jnp.unwrap),
    of_x("jnp.pad", lambda x: jnp.pad(x, 2)),
    of_x("jnp.pad(reflect)", lambda x: jnp.pad(x, 1, mode="reflect")),
    of_x("jnp.tile", lambda x: jnp.tile(x, 2)),
    of_x("jnp.repeat", lambda x: jnp.repeat(x, 2)),
    of_x("jnp.resize", lambda x: jnp.resize(x, 4)),
    of_x("jnp.split", lambda x: jnp.split(x, 2)[1]),
    of_x("x.reshape(-1, 2)", lambda x: x.reshape(-1, 2).sum(axis=1)),
    # Searching, sorting, binning.
    of_x("jnp.sort", jnp.sort),
    of_x("jnp.argsort", jnp.argsort),
    of_x("jnp.searchsorted", lambda x: jnp.searchsorted(jnp.sort(x), GRID)),
    of_x("jnp.digitize", lambda x: jnp.digitize(x, GRID)),
    of_x("jnp.interp", lambda x: jnp.interp(GRID, jnp.sort(x), x)),
    of_x("jnp.histogram", lambda x: jnp.histogram(x, bins=3, range=(-3.0, 3.0))[0]),
    of_x("jnp.bincount", lambda x: jnp.bincount(jnp.abs(x).astype(int), length=4)),
    of_x("jnp.unique(size=)", lambda x: jnp.unique(x, size=3, fill_value=0.0)),
    of_x("jnp.nonzero(size=)", lambda x: jnp.nonzero(x > 0, size=2)[0]),
    of_x("jnp.piecewise", lambda x: jnp.piecewise(x, [x < 0], [lambda t: -t, lambda t: t * 2])),
    # Convolutions.
    of_x("jnp.convolve", lambda x: jnp.convolve(x, jnp.array([1.0, 2.0]))),
    of_x("jnp.polyval", lambda x: jnp.polyval(jnp.array([1.0, -2.0, 0.5]), x)),
    of_x("jnp.correlate", lambda x: jnp.correlate(x, jnp.array([1.0, -1.0, 0.5]), mode="same")),
    # Reductions (some have no identity: an empty array is an error for both).
    of_x("jnp.max", jnp.max),
    of_x("jnp.mean", jnp.mean),
    of_x("jnp.cumsum", jnp.cumsum),
    of_x("jax.nn.softmax", jax.nn.softmax),
    of_x("jnp.linalg.norm", jnp.linalg.norm),
    # Integer sizes.
    of_n("jnp.arange(n)", jnp.arange),
    of_n("jnp.arange(n - 3)", lambda n: jnp.arange(n - 3)),
    of_n("jnp.linspace", lambda n: jnp.linspace(0.0, 1.0, n)),
    of_n("jnp.geomspace", lambda n: jnp.geomspace(1.0, 2.0, n)),
    of_n("jnp.eye(n) @ v", lambda n: jnp.eye(n) @ (jnp.arange(n) * 0.5)),
    Program("x[:k] + jnp.ones(k)", lambda x, k: x[:k] + jnp.ones(k), lambda n: (vec(9), n),
            ({0: "n"}, None), (1,)),
    Program("jnp.ones(n) + jnp.ones(m)", lambda n, m: jnp.ones(n) + jnp.ones(m),
            lambda n: (n, n if n % 3 else 1), None, (0, 1)),
    # Two abstracted axes: equal, broadcast (one of length 1) or mismatched at call time.
    of_xy("x * y (equal lengths)", lambda x, y: x * y, lambda n: n),
    of_xy("x + y (one of length 1)", lambda x, y: x + y, lambda n: 1 if n % 2 else n),
    of_xy("x + y (lengths differ)", lambda x, y: x + y, lambda n: 3),
    of_xy("jnp.dot", jnp.dot, lambda n: n),
    of_xy("jnp.stack", lambda x, y: jnp.stack([x, y]), lambda n: n),
    of_xy("jnp.where", lambda x, y: jnp.where(x > 0, x, y), lambda n: n),
    of_xy("jnp.concatenate(axis=1)",
          lambda x, y: jnp.concatenate([x[:, None], y[:, None]], axis=1), lambda n: n),
    of_xy("jnp.convolve(x, y)", jnp.convolve, lambda n: 3),
]


def outcome(run: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return jax.tree_util.tree_map(np.asarray, run()), None
    except KINDS as err:  # anything else is a bug of the test or of JAX: let it fail
        return None, err


def kind(err: BaseException) -> type:
    return next(k for k in KINDS if isinstance(err, k))


def jax_jit(program: Program, args: tuple) -> Any:
    """``jax.jit`` of the program at these arguments."""
    return jax.jit(program.fn, static_argnums=program.static_argnums)(*args)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_qjit_gives_jax_jits_results_at_every_size(program):
    compiled = qjit(program.fn, abstracted_axes=program.abstracted_axes)
    for n in SIZES:
        args = program.args(n)
        expected, jit_error = outcome(lambda: jax_jit(program, args))
        got, error = outcome(lambda: compiled(*args))
        if jit_error is not None:
            # qjit may compute what jax.jit refuses (a negative arange is empty, as in NumPy).
            assert error is None or isinstance(error, kind(jit_error)), (n, jit_error, error)
            continue
        assert error is None, f"n={n}: jax.jit gives {expected!r}, qjit raises {error!r}"
        assert got.shape == expected.shape and got.dtype == expected.dtype, (n, got, expected)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"n={n}")
    # Sizes share programs: a new one only where JAX's shape logic decides differently.
    assert len(compiled.inspect().programs) <= len(SIZES) // 2
