"""Catalyst's callbacks at Catalyst's import path, ``catalyst.api_extensions.callbacks``.

>>> from catalyst_lite.api_extensions.callbacks import base_callback, pure_callback
>>> import catalyst_lite
>>> pure_callback is catalyst_lite.pure_callback
True
"""

from ..callbacks import accelerate, base_callback, pure_callback

__all__ = ["accelerate", "base_callback", "pure_callback"]
