"""Reports: plain data (:class:`Report`) and the renderers that print it."""

from tracedoc.report.model import SCHEMA_VERSION, Report

__all__ = ["SCHEMA_VERSION", "Report"]
