"""Generators of kdissect's checked-in code and data, run by developers after a layout or
kio change (never shipped: pyproject.toml packages only kdissect). Each has a ``--check``
or a test that fails when its output is stale."""
