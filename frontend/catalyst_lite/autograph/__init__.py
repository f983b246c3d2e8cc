"""``qjit(autograph=True)``: Python ``if``, ``for`` and ``while`` become compiled control flow.

Built on diastatic-malt (the converter Catalyst uses): malt rewrites a function's source so that
its statements call *operators*, and these modules give the operators their meaning.

- :mod:`.conversion`: the entry points: which functions are converted (user code, not libraries),
  converted calls, :func:`run_autograph`, :data:`disable_autograph`, :func:`autograph_source`.
- :mod:`.transformer`: converting one function with malt's passes, compiled at the user's lines.
- :mod:`.conditionals`: ``if``, ``x if c else y``, ``and``/``or``/``not`` -> ``cond``.
- :mod:`.loops`: ``for`` -> ``for_loop``, ``while`` -> ``while_loop`` (or a Python loop).
- :mod:`.builtins`: ``range``/``enumerate``/``len`` of traced values; what a ``for`` iterates over;
  ``x[i] = v`` -> ``x = x.at[i].set(v)``.
- :mod:`.state`: the variables flowing through a statement; where in the user's code it is.
"""

from .conversion import autograph_source, converted_call, disable_autograph, run_autograph

__all__ = ["run_autograph", "autograph_source", "disable_autograph", "converted_call"]
