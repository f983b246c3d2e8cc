"""Every program the tests trace is type-checked (see catalyst_lite.jax_extras.typecheck)."""

import os

os.environ.setdefault("CATALYST_LITE_TYPECHECK", "1")
