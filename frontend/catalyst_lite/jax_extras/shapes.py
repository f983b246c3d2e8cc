"""Primitives whose result shape is a parameter with ``None`` for each dynamic size.

For these, the dynamic sizes are the trailing operands of the equation, in order.
"""

from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing

SHAPE_PARAMS = {
    lax_internal.broadcast_in_dim_p: "shape",
    lax_internal.iota_p: "shape",
    lax_internal.reshape_p: "new_sizes",
    slicing.dynamic_slice_p: "slice_sizes",
}
