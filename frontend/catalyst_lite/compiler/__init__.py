"""From a traced program to what runs: which program a call takes, specialization, compilation.

- :mod:`.assumptions`: which traced program a call runs (the size facts of each, checked at the
  call's sizes), and tracing a new one when none holds.
- :mod:`.specialize`: evaluating a dynamically-shaped jaxpr at concrete sizes, staged into one
  XLA program per size signature or host-driven (``JaxprRunner``).
- :mod:`.tiers`: compiled specializations, and tiered compilation (fast first, optimized later).
- :mod:`.reverse_mode`: whether the program being specialized will be differentiated in reverse
  mode (loops then run host-driven).
- :mod:`.lowering`: ``QJIT.mlir``, the StableHLO of a traced program with ``?`` dimensions.
"""
