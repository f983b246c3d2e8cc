"""Circuits with mid-circuit measurements whose results cover many branches, run again and again
inside one counted loop: :func:`one_shot_results` once per shot (``"one-shot"``, ``"deferred"``
with shots; the results are statistics of each shot's records over the valid shots, a value that
is no measurement stacked per shot, as in Catalyst), :func:`all_branches_results` once per branch
(``"deferred"`` without shots: exact statistics of the weighted mixture, as PennyLane's).

``run(policy, key)`` runs the quantum function once (:func:`.qnode.run_circuit`); ``probe`` is the
run that found the measurements: the results' structure and the QNode's key carry.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

from ..control_flow import for_loop
from ..errors import QuantumOperationError
from . import prng
from .mcm import Branches, McmConfig, OneShot, ShotPlan
from .measurements import (
    apply_observable, exact_measurement, flatten_results, is_measurement, measurement_kind, shot_records,
    statistic, value_record,
)

__all__ = ["one_shot_results", "all_branches_results", "MAX_BRANCHING_MEASUREMENTS"]

MAX_BRANCHING_MEASUREMENTS = 20
"""``mcm_method="deferred"`` without shots runs ``2**k`` branches: at most this many measurements."""


def _shot_records(leaves: list, run: Any, key: Any) -> list:
    """What one execution (one shot) records of each output leaf."""
    drawn = [leaf for leaf in leaves if is_measurement(leaf) and leaf.mv is None]  # never state() (qnode._check_shots)
    state = run.state
    records = iter(shot_records(drawn, state.vector, key.split, 1, state.n_wires, state.wires))
    return [jnp.asarray(leaf) if not is_measurement(leaf) else value_record(leaf) if leaf.mv is not None else next(records)[0]
            for leaf in leaves]


def one_shot_results(run: Callable, probe: Any, shots: ShotPlan, config: McmConfig) -> Any:
    """The QNode's results with one execution per shot (see the module docstring)."""
    key = probe.key
    leaves, tree = flatten_results(probe.output)
    # Each record's type, from the probe (with a key of its own: its equations are dropped)
    scratch = type(key)(key.get())
    shapes = [jnp.asarray(r) for r in _shot_records(leaves, probe, scratch)]
    base = key.split()
    count = shots.total

    @for_loop(0, count, 1)
    def each_shot(i, records, valid):
        policy = OneShot(config.fill_shots)
        shot_key = type(key)(prng.fold_in(base, i), key.on_draw)
        current = run(policy, shot_key)
        now = _shot_records(flatten_results(current.output)[0], current, shot_key)
        records = [lax.dynamic_update_index_in_dim(r, jnp.asarray(x, r.dtype), i, 0) for r, x in zip(records, now)]
        return records, lax.dynamic_update_index_in_dim(valid, policy.valid.get(), i, 0)

    init = [jnp.zeros((count,) + s.shape, s.dtype) for s in shapes]
    records, valid = each_shot(init, jnp.ones((count,), bool))
    kept = None if config.fill_shots else valid

    def entry(records: list, kept: Any) -> Any:
        values = [statistic(leaf, r, probe.state.n_wires, kept) if is_measurement(leaf) else r
                  for leaf, r in zip(leaves, records)]
        return jax.tree_util.tree_unflatten(tree, values)

    if not shots.partitioned:
        return entry(records, kept)
    return tuple(entry([r[start:stop] for r in records], None if kept is None else kept[start:stop])
                 for start, stop in shots.slices())


def _moments(leaf: Any, state: Any) -> Any:
    """What one branch contributes (weighted) to a measurement: its exact value (and mean square)."""
    if not is_measurement(leaf):
        raise QuantumOperationError(
            "With mcm_method='deferred' and no shots the QNode must return measurements only (a "
            "mid-circuit measurement value differs from branch to branch); use qml.expval(m) or "
            "qml.probs(op=m)."
        )
    kind = measurement_kind(leaf)
    if kind not in ("expval", "var", "probs"):
        problem = "needs finite shots" if kind in ("sample", "counts") else "is not supported here"
        raise QuantumOperationError(
            f"{kind} {problem}; with mcm_method='deferred' and no shots, expval, var and probs are "
            "computed exactly."
        )
    if leaf.mv is not None:
        value = value_record(leaf)
        if kind == "probs":
            return jax.nn.one_hot(value, 2 ** len(leaf.mv if isinstance(leaf.mv, (list, tuple)) else [leaf.mv]),
                                  dtype=jnp.float64)
        return jnp.stack([value, value**2])
    if kind == "probs":
        return exact_measurement(leaf, state.vector, state.n_wires, state.wires)
    applied = apply_observable(leaf.obs, state.vector, state.n_wires, state.wires)
    return jnp.stack([jnp.real(jnp.vdot(state.vector, applied)), jnp.real(jnp.vdot(applied, applied))])


def _combined(leaf: Any, total: Any, norm: Any) -> Any:
    moments, kind = total / norm, measurement_kind(leaf)
    return moments if kind == "probs" else moments[0] if kind == "expval" else moments[1] - moments[0] ** 2


def all_branches_results(run: Callable, probe: Any) -> Any:
    """The QNode's exact results over every branch of its mid-circuit measurements."""
    sites = probe.policy.sites
    if probe.policy.sites_in_loops:
        raise QuantumOperationError(
            "mcm_method='deferred' without shots needs the number of mid-circuit measurements "
            "while tracing, but a measurement is inside a for_loop/while_loop. Set finite shots "
            "(each shot then follows its own branch), or measure outside loops."
        )
    if sites > MAX_BRANCHING_MEASUREMENTS:
        raise QuantumOperationError(
            f"mcm_method='deferred' without shots runs every branch: {sites} mid-circuit "
            f"measurements would be 2**{sites} executions. Set finite shots instead."
        )
    leaves, tree = flatten_results(probe.output)
    init = [jnp.zeros_like(_moments(leaf, probe.state)) for leaf in leaves]

    @for_loop(0, 2**sites, 1)
    def each_branch(b, totals, norm):
        policy = Branches(b)
        current = run(policy, probe.key)
        weight = policy.total_weight()
        moments = [_moments(leaf, current.state) for leaf in flatten_results(current.output)[0]]
        return [t + weight * m for t, m in zip(totals, moments)], norm + weight

    totals, norm = each_branch(init, jnp.zeros(()))
    return jax.tree_util.tree_unflatten(tree, [_combined(leaf, t, norm) for leaf, t in zip(leaves, totals)])
