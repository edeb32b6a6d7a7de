"""The report: the dashboard's main panels as rich tables, JSON or a static HTML page, from the panels' own SQL."""

from worker.report.build import build_report
from worker.report.html import write_html
from worker.report.model import Report

__all__ = ["Report", "build_report", "write_html"]
