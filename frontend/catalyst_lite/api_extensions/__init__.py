"""Catalyst's ``catalyst.api_extensions`` path, for the public names users import from it:
:mod:`.callbacks` and :mod:`.control_flow` (``from catalyst.api_extensions.callbacks import
base_callback`` works with ``catalyst_lite`` in its place)."""
