"""The file archive: the bytes of file and signature answers kept beside the store
(``formsync files``)."""

from __future__ import annotations

from .download import ArchiveProblem, ArchiveReport, LocationError, archive_files
from .refs import FileRef, file_refs

__all__ = ["ArchiveProblem", "ArchiveReport", "FileRef", "LocationError", "archive_files", "file_refs"]
