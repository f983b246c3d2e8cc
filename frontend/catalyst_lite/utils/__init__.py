"""Catalyst's ``catalyst.utils`` paths that users import public names from: only
:mod:`.exceptions` (``from catalyst.utils.exceptions import CompileError`` works with
``catalyst_lite`` in its place). Catalyst's other utilities are its internals."""
