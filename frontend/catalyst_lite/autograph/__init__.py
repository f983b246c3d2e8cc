"""``qjit(autograph=True)``: Python ``if``, ``for`` and ``while`` become compiled control flow.

Built on diastatic-malt (the converter Catalyst uses): malt rewrites a function's source so that
its statements call *operators*, and these modules give the operators their meaning (README.md's
module map lists them).
"""

from .conversion import autograph_source, converted_call, disable_autograph, run_autograph

__all__ = ["run_autograph", "autograph_source", "disable_autograph", "converted_call"]
