"""The package version, at the bottom of the layers (no imports)."""

__version__ = "0.1.0"
