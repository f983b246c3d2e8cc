"""From a traced program to what runs: which program a call takes, specialization, compilation.

See docs/architecture.md: :mod:`.assumptions` (which program a call runs), :mod:`.executable`
(also calls from JAX transformations), :mod:`.options`, :mod:`.specialize` (the interpreter),
:mod:`.runner` (per size signature, segmented, speculated), :mod:`.capacity` (loops compiled
whole), :mod:`.loop_body`, :mod:`.compilation`, :mod:`.size_generic`, :mod:`.iree_backend`,
:mod:`.disk_cache`, :mod:`.inspection` (``QJIT.inspect()``) and :mod:`.lowering` (``QJIT.mlir``).
"""
