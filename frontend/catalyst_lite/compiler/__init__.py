"""From a traced program to what runs: which program a call takes, specialization, compilation.

See docs/architecture.md for the road through :mod:`.assumptions` (which program a call runs),
:mod:`.executable` (a program made callable), :mod:`.options` (options and the executable cache),
:mod:`.boundary` (calls from inside JAX transformations), :mod:`.specialize` (one XLA program per
size signature, or host-driven: the interpreter), :mod:`.runner` (a program run per size signature,
in segments around host steps, speculated), :mod:`.capacity` (loops compiled whole) and
:mod:`.loop_body` (a loop body's layout, read by the loop rules and :mod:`.capacity`), :mod:`.compilation`, :mod:`.size_generic`, :mod:`.iree_backend`,
:mod:`.disk_cache` (background and size-generic compilation), :mod:`.reverse_mode`,
:mod:`.inspection` (``QJIT.inspect()``), :mod:`.lowering` (``QJIT.mlir``) and :mod:`.workspace`
(``QJIT.workspace``, with ``keep_intermediate``).
"""
