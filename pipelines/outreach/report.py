"""What an outreach run reports: its counts, and the CSV of the rows it did not send."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

from pydantic import Field, SkipValidation

from ..rules.contact import Canceled
from .counts import RunCounts
from .plan import Plan
from .values import Problem

REPORT_COLUMNS = ("row", "column", "problem", "accepted")
LINK_COLUMNS = ("externalId", "email", "url")
REPORT_DIR = Path("formsync-reports")


class OutreachReport(RunCounts):
    """What a run did: its counts (see ``RunCounts``), where its report and links went, the
    documents it uploaded."""

    report_path: Path | None = None
    links_path: Path | None = None  # the job's request links (externalId, email, url), when it sent
    documents_uploaded: int = 0
    canceled: list[Canceled] = []  # the form's pending requests canceled first: the contact rule refuses them
    # The plan the run followed (for a dry run's listing) and the report file's lines; not
    # part of the report's JSON.
    plan: Annotated[Plan | None, SkipValidation] = Field(default=None, exclude=True, repr=False)
    lines: Annotated[list[tuple[int, Problem]], SkipValidation] = Field(default_factory=list, exclude=True,
                                                                        repr=False)

    def counts(self) -> RunCounts:
        """The run's counts alone."""
        return RunCounts.model_validate(self.model_dump(include=set(RunCounts.model_fields)))


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
