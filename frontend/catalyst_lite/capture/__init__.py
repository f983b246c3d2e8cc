"""Compiling programs captured by PennyLane (``qjit(capture=True)``): :mod:`.program` traces a
function through PennyLane's program capture inside a catalyst_lite trace and compiles the
captured program (plxpr), PennyLane's primitives becoming ours. This package imports PennyLane:
it is imported when a program is first traced through capture (the ``capture`` option and
PennyLane's capture switch are in :mod:`catalyst_lite.trace_context`).
"""
