"""``switch``: Catalyst's index switch, one branch per integer case and a default.

``@switch(i)`` makes the decorated function the default branch; ``@<switch>.branch(k)`` adds the
branch taken when ``i == k`` (unlike ``jax.lax.switch`` the index is not clamped). With a traced
index the switch is a ``cond`` on ``i == k``; with a known one the chosen branch is called.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import ArgumentValueError, ControlFlowError, function_name
from ..jax_extras import Tracer, get_aval
from ..trace_context import refuse_under_capture
from ..jax_extras.size_facts import describe_aval
from .common import Switch, WithOperation
from .cond import cond

__all__ = ["switch", "SwitchCallable"]


class SwitchCallable(WithOperation):
    """A switch being assembled: ``@switch(i)`` (the default branch), then ``.branch(k)``."""

    operation_kind = "switch"
    operation_type = Switch

    def __init__(self, index: Any, default: Callable):
        if not callable(default):  # Catalyst's phrase first, then ours
            raise ArgumentValueError(
                "Switch requires a default branch. catalyst_lite: the default branch (the function "
                f"decorated by @switch(i)) must be callable, got {type(default).__name__}."
            )
        self.index, self.default = index, default
        self.cases: dict[int, Callable] = {}
        self.__name__ = function_name(default)
        self.__doc__ = getattr(default, "__doc__", None)

    def branch(self, case: int) -> Callable[[Callable], "SwitchCallable"]:
        """Add the branch taken when the index equals ``case`` (a later branch for the same case
        replaces an earlier one)."""
        if isinstance(case, (bool, np.bool_)) or not isinstance(case, (int, np.integer)):
            raise ControlFlowError(
                f"switch ({self.__name__}): a case must be a Python int, got {type(case).__name__} "
                f"{case!r}."
            )

        def decorator(fn: Callable) -> SwitchCallable:
            self.cases[int(case)] = fn
            return self

        return decorator

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._note_call()
        index = _checked_index(self.index, self.__name__)
        if not isinstance(index, Tracer):
            return self.cases.get(int(index), self.default)(*args, **kwargs)
        if not self.cases:
            return self.default(*args, **kwargs)
        (first_case, first_fn), *others = self.cases.items()
        branches = cond(index == first_case)(first_fn)
        for case, fn in others:
            branches.else_if(index == case)(fn)
        branches.otherwise(self.default)
        return branches(*args, **kwargs)


def _checked_index(index: Any, name: str) -> Any:
    """An integer scalar: a Python or NumPy int, or a traced integer (a boolean counts as 0/1)."""
    if isinstance(index, (bool, np.bool_, int, np.integer)):
        return int(index)
    aval = get_aval(index)
    if aval.shape != () or not (np.issubdtype(aval.dtype, np.integer) or aval.dtype == np.bool_):
        raise ControlFlowError(
            f"switch ({name}) needs an integer scalar index, got {describe_aval(aval)}. Convert "
            "it, e.g. with x.astype(int)."
        )
    return index


def switch(index_var: Any) -> Callable[[Callable], SwitchCallable]:
    """Decorator making ``fn`` the default branch of a switch on the integer ``index_var``; add
    cases with ``.branch(k)`` and call the switch with the branches' operands (see the module
    docstring).

    >>> from catalyst_lite import qjit, switch
    >>> @qjit
    ... def pick(k: int, x: float):
    ...     @switch(index_var=k)
    ...     def apply(y):
    ...         return -y
    ...     @apply.branch(0)
    ...     def _(y):
    ...         return y * 10.0
    ...     return apply(x)
    >>> float(pick(0, 2.0)), float(pick(5, 2.0))
    (20.0, -2.0)
    """
    refuse_under_capture("switch")  # as Catalyst does: captured programs use qml.cond

    def decorator(fn: Callable) -> SwitchCallable:
        return SwitchCallable(index_var, fn)

    return decorator
