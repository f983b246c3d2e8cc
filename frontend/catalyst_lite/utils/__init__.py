"""Catalyst's ``catalyst.utils`` path that users import public names from: :mod:`.exceptions`."""
