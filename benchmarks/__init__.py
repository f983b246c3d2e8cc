"""Benchmarks: catalyst_lite side by side with hand-written ``jax.jit`` and, when installed,
PennyLane Catalyst.

Run ``python -m benchmarks`` (or ``python benchmarks/run.py``) from the repository root; add
``--quick`` for a run under a minute. The table of medians and ratios is printed and written to
``benchmarks/results/latest.json``.
"""
