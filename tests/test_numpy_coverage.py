"""jax.numpy with symbolic sizes: each call in :data:`CASES` gives what ``jax.jit`` gives.

Every case is a function of an ``int`` size ``n``, compiled once by ``qjit`` (symbolic ``n``) and
run at several sizes, against ``jax.jit`` with ``n`` static. :data:`CASES` is also the source of
``docs/numpy-support.md`` (``docs/gen_numpy_support.py``).
"""

from __future__ import annotations

import importlib.util
import pathlib
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import enable_x64

from catalyst_lite import qjit
from catalyst_lite.errors import CatalystLiteError, DataDependentSliceError, SymbolicShapeError

SIZES = (3, 6)
ROOT = pathlib.Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One jax.numpy call; ``fn(n)`` uses it on arrays whose size ``n`` is symbolic."""

    group: str
    call: str
    fn: Callable


def vec(n):
    """A length-``n`` float vector with positive and negative entries."""
    return jnp.arange(n, dtype=float) * 0.5 - 1.0


def mat(n):
    """An ``(n, 3)`` float matrix."""
    return vec(n)[:, None] * jnp.array([1.0, -2.0, 3.0])


CASES: dict[str, Case] = {
    c.call: c
    for c in [
        Case("Elementwise", "x + 1.0, x * y", lambda n: vec(n) * vec(n) + 1.0),
        Case("Elementwise", "broadcasting (n, 1) * (3,)", lambda n: vec(n).reshape(n, 1) * jnp.ones(3)),
        Case("Elementwise", "jnp.where", lambda n: jnp.where(vec(n) > 0, vec(n), 0.0)),
        Case("Elementwise", "jnp.clip", lambda n: jnp.clip(vec(n), -0.5, 0.5)),
        Case("Elementwise", "x.astype", lambda n: vec(n).astype(jnp.int32)),
        Case("Constructors", "jnp.ones", lambda n: jnp.ones(n)),
        Case("Constructors", "jnp.zeros", lambda n: jnp.zeros((n, 2))),
        Case("Constructors", "jnp.full", lambda n: jnp.full((n,), 3.0)),
        Case("Constructors", "jnp.empty", lambda n: jnp.empty((n,)).shape[0] + jnp.zeros(n)),
        Case("Constructors", "jnp.arange(n)", lambda n: jnp.arange(n)),
        Case("Constructors", "jnp.arange(start, n)", lambda n: jnp.arange(1, n)),
        Case("Constructors", "jnp.arange(1.0, n + 1) (a float start)", lambda n: jnp.arange(1.0, n + 1)),
        Case("Constructors", "jnp.arange(0, n, 0.5) (a float step)", lambda n: jnp.arange(0, n, 0.5)),
        Case("Constructors", "jnp.arange(n / 2) (a float size)", lambda n: jnp.arange(n * 1.0) + jnp.arange(n / 2 * 2)),
        Case("Constructors", "jnp.linspace", lambda n: jnp.linspace(0.0, 1.0, n)),
        Case("Constructors", "jnp.geomspace", lambda n: jnp.geomspace(1.0, 2.0, n)),
        Case("Constructors", "jnp.logspace", lambda n: jnp.logspace(0.0, 1.0, n)),
        Case("Constructors", "jnp.eye", lambda n: jnp.eye(n)),
        Case("Constructors", "jnp.ones_like", lambda n: jnp.ones_like(vec(n))),
        Case("Constructors", "jnp.zeros_like", lambda n: jnp.zeros_like(vec(n))),
        Case("Constructors", "jnp.full_like", lambda n: jnp.full_like(vec(n), 2.0)),
        Case("Reductions", "jnp.sum", lambda n: jnp.sum(vec(n))),
        Case("Reductions", "jnp.sum(axis=0)", lambda n: jnp.sum(mat(n), axis=0)),
        Case("Reductions", "jnp.mean", lambda n: jnp.mean(mat(n), axis=0)),
        Case("Reductions", "jnp.max", lambda n: jnp.max(vec(n))),
        Case("Reductions", "jnp.min(axis=1)", lambda n: jnp.min(mat(n), axis=1)),
        Case("Reductions", "jnp.argmax", lambda n: jnp.argmax(vec(n))),
        Case("Reductions", "jnp.argmin(axis=0)", lambda n: jnp.argmin(mat(n), axis=0)),
        Case("Reductions", "jnp.prod", lambda n: jnp.prod(vec(n) + 2.0)),
        Case("Reductions", "jnp.any", lambda n: jnp.any(vec(n) > 0)),
        Case("Reductions", "jnp.all(axis=0)", lambda n: jnp.all(mat(n) > -2, axis=0)),
        Case("Reductions", "jnp.cumsum", lambda n: jnp.cumsum(vec(n))),
        Case("Reductions", "jnp.cumprod", lambda n: jnp.cumprod(vec(n) + 1.5)),
        Case("Linear algebra", "jnp.dot", lambda n: jnp.dot(vec(n), vec(n))),
        Case("Linear algebra", "jnp.matmul / @", lambda n: jnp.ones((n, n)) @ vec(n)),
        Case("Linear algebra", "jnp.outer", lambda n: jnp.outer(vec(n), vec(n))),
        Case("Linear algebra", "jnp.einsum", lambda n: jnp.einsum("ij,i->j", mat(n), vec(n))),
        Case("Linear algebra", "jnp.linalg.norm", lambda n: jnp.linalg.norm(vec(n))),
        Case("Shape", "x.reshape", lambda n: mat(n).reshape(3, n)),
        Case("Shape", "x.reshape(-1)", lambda n: mat(n).reshape(-1)),
        Case("Shape", "x.reshape(-1, 3) (checked: 3 divides the size)", lambda n: vec(3 * n).reshape(-1, 3)),
        Case("Shape", "x.reshape(n, -1)", lambda n: mat(n).reshape(n, -1)),
        Case("Shape", "jnp.transpose", lambda n: jnp.transpose(mat(n))),
        Case("Shape", "x.T", lambda n: mat(n).T),
        Case("Shape", "jnp.concatenate", lambda n: jnp.concatenate([vec(n), vec(n) * 2])),
        Case("Shape", "jnp.stack", lambda n: jnp.stack([vec(n), vec(n)], axis=1)),
        Case("Shape", "jnp.flip", lambda n: jnp.flip(vec(n))),
        Case("Shape", "jnp.tile", lambda n: jnp.tile(vec(n), 2)),
        Case("Shape", "jnp.repeat (static count)", lambda n: jnp.repeat(vec(n), 2)),
        Case("Shape", "jnp.expand_dims", lambda n: jnp.expand_dims(vec(n), 0)),
        Case("Shape", "jnp.squeeze(axis=...)", lambda n: jnp.squeeze(vec(n)[None], axis=0)),
        Case("Indexing", "x[i] (traced i)", lambda n: vec(n)[n - 2]),
        Case("Indexing", "x[0]", lambda n: vec(n)[0]),
        Case("Indexing", "x[1:]", lambda n: vec(n)[1:]),
        Case("Indexing", "x[:k] (traced k)", lambda n: vec(n)[: n - 1]),
        Case("Indexing", "x[::-1]", lambda n: vec(n)[::-1]),
        Case("Indexing", "x[1:] - x[:-1]", lambda n: vec(n)[1:] - vec(n)[:-1]),
        Case("Indexing", "x.at[i].set", lambda n: vec(n).at[n - 1].set(7.0)),
        Case("Indexing", "x.at[i].add", lambda n: vec(n).at[0].add(7.0)),
        Case("Sorting", "jnp.sort", lambda n: jnp.sort(-vec(n))),
        Case("Sorting", "jnp.argsort", lambda n: jnp.argsort(-vec(n))),
        Case("Sorting", "jnp.unique(size=...)", lambda n: jnp.unique(jnp.round(vec(n)), size=2, fill_value=9.0)),
        Case("Searching and binning", "jnp.searchsorted", lambda n: jnp.searchsorted(vec(n), jnp.array([-0.3, 0.2]))),
        Case("Searching and binning", "jnp.searchsorted (symbolic queries)", lambda n: jnp.searchsorted(jnp.array([-0.5, 0.5]), vec(n))),
        Case("Searching and binning", "jnp.digitize", lambda n: jnp.digitize(vec(n), jnp.array([-0.5, 0.5]))),
        Case("Searching and binning", "jnp.interp", lambda n: jnp.interp(jnp.array([-0.8, 0.1]), vec(n), vec(n) ** 2)),
        Case("Searching and binning", "jnp.histogram", lambda n: jnp.histogram(vec(n), bins=3, range=(-1.0, 2.0))[0]),
        Case("Searching and binning", "jnp.bincount(length=...)", lambda n: jnp.bincount(jnp.arange(n) % 3, length=3)),
        Case("Convolution", "jnp.convolve", lambda n: jnp.convolve(vec(n), jnp.array([1.0, 2.0]))),
        Case("Convolution", "jnp.convolve (symbolic kernel)", lambda n: jnp.convolve(jnp.arange(8.0), vec(n), mode="same")),
        Case("Convolution", "jnp.correlate", lambda n: jnp.correlate(vec(n), jnp.array([1.0, -1.0]), mode="full")),
        Case("Also supported", "jnp.diff", lambda n: jnp.diff(vec(n))),
        Case("Also supported", "jnp.pad", lambda n: jnp.pad(vec(n), 2)),
        Case("Also supported", "jnp.roll", lambda n: jnp.roll(vec(n), 1)),
        Case("Also supported", "jnp.split (equal parts)", lambda n: jnp.split(vec(2 * n), 2)[1]),
        Case("Also supported", "jnp.array_split", lambda n: jnp.array_split(vec(n), 2)[1]),
        Case("Also supported", "jnp.var", lambda n: jnp.var(mat(n), axis=0)),
        Case("Also supported", "jnp.triu", lambda n: jnp.triu(jnp.ones((n, n)))),
        Case("Also supported", "jnp.take", lambda n: jnp.take(vec(n), jnp.array([0, 2]))),
        Case("Also supported", "x[i] of a 2-D array", lambda n: mat(n)[n - 1]),
        Case("Also supported", "x[:, 1:]", lambda n: mat(n).T[:, 1:]),
        Case("Also supported", "jax.nn.softmax", lambda n: jax.nn.softmax(vec(n))),
        Case("Also supported", "jnp.trapezoid", lambda n: jnp.trapezoid(vec(n))),
        Case("Also supported", "jnp.polyval (static coefficients)", lambda n: jnp.polyval(jnp.array([1.0, -2.0, 0.5]), vec(n))),
        Case("Also supported", "jnp.unwrap", lambda n: jnp.unwrap(vec(n) * 4.0)),
        Case("Also supported", "jnp.piecewise", lambda n: jnp.piecewise(vec(n), [vec(n) < 0], [lambda t: -t, lambda t: t * t])),
        Case("Also supported", "jnp.pad (symbolic width)", lambda n: jnp.pad(jnp.ones(3), (n, 1))),
        Case("Also supported", "jnp.diagonal", lambda n: jnp.diagonal(jnp.outer(vec(n), vec(n) + 1.0))),
    ]
}


@dataclass(frozen=True)
class Unsupported:
    """A call whose result cannot have a symbolic size; ``fn(x)`` on a symbolic-length ``x``."""

    call: str
    instead: str
    fn: Callable
    error: type[BaseException]  # what tracing it raises


UNSUPPORTED: dict[str, Unsupported] = {
    u.call: u
    for u in [
        Unsupported(
            "jnp.nonzero(x)", "pass `size=`", lambda x: jnp.nonzero(x), CatalystLiteError
        ),
        Unsupported("jnp.unique(x)", "pass `size=`", lambda x: jnp.unique(x), CatalystLiteError),
        Unsupported(
            "x[x > 0] (boolean mask)",
            "`jnp.where(x > 0, x, 0)`",
            lambda x: x[x > 0],
            SymbolicShapeError,
        ),
        Unsupported(
            "x[:jnp.sum(x > 0)] (a slice bound from the data)",
            "an `int` argument or abstracted size as the bound, or `jnp.where(jnp.arange(len(x)) < k, x, 0)`",
            lambda x: x[: jnp.sum(x > 0)],
            DataDependentSliceError,
        ),
        Unsupported(
            "jnp.squeeze(x) without axis",
            "pass `axis=` (the result's rank would depend on which sizes are 1)",
            lambda x: jnp.squeeze(x[None]),
            SymbolicShapeError,
        ),
    ]
}


def reference(fn: Callable, n: int) -> np.ndarray:
    """``jax.jit`` of ``fn`` with ``n`` static, in 64-bit like catalyst_lite."""
    with enable_x64():
        return np.asarray(jax.jit(fn, static_argnums=0)(n))


@pytest.mark.parametrize("call", list(CASES))
def test_symbolic_size_matches_jax_jit(call):
    fn = CASES[call].fn
    compiled = qjit(fn)  # one trace, reused at every size
    for n in SIZES:
        expected = reference(fn, n)
        got = np.asarray(compiled(n))
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_abstracted_axis_is_symbolic_too():
    compiled = qjit(lambda x: jnp.cumsum(x[1:] * x[:-1])[::-1], abstracted_axes={0: "n"})
    for n in SIZES:
        x = jnp.arange(float(n))
        with enable_x64():
            expected = np.asarray(jnp.cumsum(x[1:] * x[:-1])[::-1])
        np.testing.assert_allclose(np.asarray(compiled(x)), expected)


def test_slice_bound_from_an_argument():
    compiled = qjit(lambda x, k: x[:k], abstracted_axes=({0: "n"}, None))
    x = jnp.arange(5.0)
    assert np.asarray(compiled(x, 3)).tolist() == [0.0, 1.0, 2.0]
    assert np.asarray(compiled(x, 9)).tolist() == np.asarray(x).tolist()


def test_python_branch_on_a_size_is_still_refused():
    """Only JAX's own comparisons of sizes become assumptions, never the user's ``if``."""
    with pytest.raises(TypeError, match="boolean conversion"):
        qjit(lambda n: jnp.ones(3) if n > 2 else jnp.zeros(3))(3)


@pytest.mark.parametrize("call", list(UNSUPPORTED))
def test_unsupported_call_is_a_clear_error(call):
    case = UNSUPPORTED[call]
    compiled = qjit(case.fn, abstracted_axes={0: "n"})
    with pytest.raises(case.error):
        compiled(jnp.arange(3.0))


def test_data_dependent_result_size_names_the_call_and_the_fix():
    with pytest.raises(CatalystLiteError, match="size=") as info:
        qjit(lambda x: jnp.nonzero(x), abstracted_axes={0: "n"})(jnp.arange(3.0))
    assert isinstance(info.value, (TypeError, ValueError))


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_numpy_support", ROOT / "docs" / "gen_numpy_support.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_support_page_is_generated_from_this_table():
    generated = _load_generator().render(CASES, UNSUPPORTED)
    committed = (ROOT / "docs" / "numpy-support.md").read_text()
    assert committed == generated, "run: python docs/gen_numpy_support.py"
