"""Test configuration.

- Every program the tests trace is type-checked (see catalyst_lite.jax_extras.typecheck).
- The size-generic tier (IREE, ``compiler/size_generic.py``) is off in the suite unless a test
  asks for it (``qjit(size_generic=True)``, as ``test_size_generic.py`` does): with IREE installed
  it would compile most programs of the suite a second time, for about a second each, and the
  other tests check XLA's behaviour. ``CATALYST_LITE_SIZE_GENERIC=1 python -m pytest`` runs the
  whole suite with it on.
"""

import os

os.environ.setdefault("CATALYST_LITE_TYPECHECK", "1")
os.environ.setdefault("CATALYST_LITE_SIZE_GENERIC", "0")
