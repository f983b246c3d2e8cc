"""From a traced program to what runs: which program a call takes, specialization, compilation.

- :mod:`.assumptions`: which traced program a call runs (the size facts of each, checked at the
  call's sizes), and tracing a new one when none holds.
- :mod:`.executable`: a traced program with its compile options: the flat argument layout, the
  call paths (general, and the fast one of repeated calls), the runners of its nested bodies.
- :mod:`.options`: compile options and the bounded cache of a function's executables.
- :mod:`.boundary`: calling a program from inside JAX's own transformations (64-bit inside, the
  caller's types outside).
- :mod:`.specialize`: evaluating a dynamically-shaped jaxpr at concrete sizes, staged into one
  XLA program per size signature or host-driven (``JaxprRunner``).
- :mod:`.segments`: a program that needs the host, split at the equations that need it (each
  segment compiled), and on repeated calls compiled whole at the sizes its host steps found.
- :mod:`.capacity`: resizing loops run in one XLA ``while`` loop on capacity buffers.
- :mod:`.bounded_scan`: reverse mode through loops with run-time trip counts, as a compiled scan.
- :mod:`.compilation`: compiled specializations, and the background compilation thread.
- :mod:`.size_generic`, :mod:`.iree_backend`, :mod:`.disk_cache`: the optional size-generic tier
  (one IREE executable for every size, kept on disk between processes).
- :mod:`.reverse_mode`: whether the program being specialized will be differentiated in reverse
  mode (loops then run as bounded scans, or host-driven).
- :mod:`.inspection`: what a function holds, as records (``QJIT.inspect()``).
- :mod:`.lowering`: ``QJIT.mlir``, the StableHLO of a traced program with ``?`` dimensions.
"""
