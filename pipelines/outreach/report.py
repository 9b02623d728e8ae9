"""What an outreach run reports: its counts, and the CSV of the rows it did not send."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field, SkipValidation

from .plan import Plan
from .values import Problem

REPORT_COLUMNS = ("row", "column", "problem", "accepted")
LINK_COLUMNS = ("externalId", "email", "url")
REPORT_DIR = Path("formsync-reports")


class OutreachReport(BaseModel):
    """What a run did: rows read, sent now, already sent before, invalid (in the report
    file), changed since they were sent (reported, not sent again), failed on send."""

    rows: int
    sent: int
    skipped_existing: int
    invalid: int
    changed: int
    failed: int
    report_path: Path | None = None
    links_path: Path | None = None  # the job's request links (externalId, email, url), when it sent
    stopped: bool = False  # a stop request ended the run between rows; a re-run sends the rest
    left: int = 0  # rows to send that this run did not go through (stopped, or a dry run)
    documents_uploaded: int = 0
    # The plan the run followed (for a dry run's listing); not part of the report's JSON.
    plan: Annotated[Plan | None, SkipValidation] = Field(default=None, exclude=True, repr=False)


def default_report_path(job: str) -> Path:
    return REPORT_DIR / f"{job}-report.csv"


def links_path(report_path: Path, job: str) -> Path:
    """Where a job's links go: ``<job>-links.csv`` beside its report."""
    return report_path.parent / f"{job}-links.csv"


def write_links(path: Path, links: Iterable[tuple[str | None, str | None, str | None]]) -> None:
    """Write the job's request links (``externalId,email,url``), creating the folder: with
    ``delivery = "none"`` these are what the recipients are sent by hand."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(LINK_COLUMNS)
        w.writerows([v or "" for v in link] for link in links)


def write_report(path: Path, lines: Iterable[tuple[int, Problem]]) -> None:
    """Write the report CSV (``row,column,problem,accepted``), creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(REPORT_COLUMNS)
        for n, p in lines:
            w.writerow([n, p.column, p.problem, p.accepted])
