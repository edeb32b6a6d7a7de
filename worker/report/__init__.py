"""The report: the dashboard's main panels as rich tables, JSON or a static HTML page, from the panels' own SQL."""

from vigil.worker.report.build import build_report
from vigil.worker.report.html import write_html
from vigil.worker.report.model import Report

__all__ = ["Report", "build_report", "write_html"]
