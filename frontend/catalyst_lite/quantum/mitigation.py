"""``mitigate_with_zne``: Catalyst's zero-noise extrapolation of a circuit's expectation values.

ZNE runs a circuit folded into ``U (U^dagger U)^k`` (scale factor ``2k + 1``) and extrapolates the
results to zero noise. catalyst_lite's simulators are noiseless, so each scale factor runs the
circuit as written, once (with shots, each run draws its own samples); the extrapolation is
Catalyst's, by default an exact polynomial fit (``qml.noise.poly_extrapolate``) evaluated at zero.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError, UnsupportedOperationError, function_name

__all__ = ["mitigate_with_zne"]

FOLDINGS = ("global", "local-all")


def mitigate_with_zne(fn: Callable | None = None, *, scale_factors: Sequence[int],
                      extrapolate: Callable | None = None, extrapolate_kwargs: dict[str, Any] | None = None,
                      folding: str = "global") -> Callable:
    """``fn`` (a QNode, or a function of QNodes, returning float scalars) mitigated by zero-noise
    extrapolation over ``scale_factors`` (odd positive ints). ``extrapolate(scale_factors,
    results)`` gives the mitigated value (default: the exact polynomial fit); ``folding`` is
    ``"global"`` or ``"local-all"`` (``"local-random"``: ``UnsupportedOperationError``).

    >>> import pennylane as qml
    >>> from catalyst_lite import qjit, mitigate_with_zne
    >>> @qml.qnode(qml.device("default.qubit", wires=1))
    ... def circuit(x):
    ...     qml.RX(x, 0)
    ...     return qml.expval(qml.Z(0))
    >>> mitigated = qjit(mitigate_with_zne(circuit, scale_factors=[1, 3, 5]))
    >>> round(float(mitigated(0.5)), 6)   # noiseless: folding changes nothing, cos(0.5)
    0.877583
    """
    if fn is None:
        return functools.partial(mitigate_with_zne, scale_factors=scale_factors, extrapolate=extrapolate,
                                 extrapolate_kwargs=extrapolate_kwargs, folding=folding)
    if not callable(fn):
        raise ArgumentTypeError(f"mitigate_with_zne: the target must be callable, got {type(fn).__name__}.")
    _check_scale_factors(list(scale_factors))
    if extrapolate is None:
        import pennylane as qml  # a QNode's user: PennyLane is imported already

        extrapolate = functools.partial(qml.noise.poly_extrapolate, order=len(scale_factors) - 1)
    elif extrapolate_kwargs is not None:
        extrapolate = functools.partial(extrapolate, **extrapolate_kwargs)

    @functools.wraps(fn)
    def mitigated(*args: Any, **kwargs: Any) -> Any:
        if folding == "local-random":
            raise UnsupportedOperationError(
                "mitigate_with_zne: folding='local-random' is not available (nor in Catalyst 0.15)."
            )
        if folding not in FOLDINGS:
            raise ArgumentValueError(
                f"mitigate_with_zne: folding must be one of {[*FOLDINGS, 'local-random']}, got {folding!r}."
            )
        runs = [_float_scalars(fn, fn(*args, **kwargs)) for _ in scale_factors]
        results = jnp.stack([jnp.stack(r) for r in runs])  # (scale factors, results)
        if results.shape[1] == 1:
            results = results[:, 0]
        mitigated_values = extrapolate(jnp.asarray(scale_factors, dtype=float), results)
        return tuple(mitigated_values) if jnp.ndim(mitigated_values) else mitigated_values

    mitigated.__name__ = f"zne.{getattr(fn, '__name__', 'unknown')}"
    return mitigated


def _check_scale_factors(scale_factors: list) -> None:
    for n in scale_factors:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ArgumentTypeError(
                f"mitigate_with_zne: found non-integer {n!r} in scale_factors {scale_factors}; only odd "
                "positive integers are allowed."
            )
        if n < 0 or n % 2 == 0:
            raise ArgumentValueError(
                f"mitigate_with_zne: found {n} in scale_factors {scale_factors}; only odd positive "
                "integers are allowed (scale factor 2k + 1 folds the circuit k times)."
            )


def _float_scalars(fn: Callable, out: Any) -> list:
    """The results of one run: float scalars of one dtype, as Catalyst requires."""
    leaves = jax.tree_util.tree_leaves(out)
    if any(jnp.shape(x) for x in leaves):
        raise ArgumentTypeError(
            f"mitigate_with_zne({function_name(fn)}): only expectation values and classical scalars "
            "can be mitigated; it returns arrays."
        )
    dtypes = {jnp.result_type(x) for x in leaves}
    if len(dtypes) != 1 or not jnp.issubdtype(dtypes.pop(), jnp.floating):
        raise ArgumentTypeError(f"mitigate_with_zne({function_name(fn)}): all results must be floats of one "
                                "dtype.")
    return leaves
