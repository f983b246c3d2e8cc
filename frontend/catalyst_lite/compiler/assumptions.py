"""Specialization of ``assume_size`` and ``require_size`` equations (see
:mod:`catalyst_lite.jax_extras.dimensions` and :mod:`catalyst_lite.jax_extras.requirements`).

An assumption or a requirement about symbolic sizes is checked by evaluating its equation, which
needs the concrete values of its operands: they are dimension operands, so the specialization is
keyed on them and they are Python ints when it runs.
"""

from ..jax_extras.dimensions import assume_size_p
from ..jax_extras.requirements import require_size_p
from .specialize import dimension_operand_rules

dimension_operand_rules[assume_size_p] = lambda params: {0, 1}  # both sides of the comparison
dimension_operand_rules[require_size_p] = lambda params: {0, 1}
