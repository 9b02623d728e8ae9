"""Request documents of outreach rows: which local files can be sent (checked before any
call), and their upload, once per distinct file content per job."""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
from pathlib import Path
from typing import Protocol

from connector.client.rpc import FormClient

from .columns import RowParams
from .values import Problem

# What the service accepts as a request document (PDF or an image), and its size limit.
DOCUMENT_TYPES = ("application/pdf", "image/png", "image/jpeg", "image/webp", "image/gif", "image/svg+xml",
                  "image/avif", "image/bmp", "image/tiff")
DOCUMENT_MAX_BYTES = 25 * 1024 * 1024


class DocumentUnreadable(Exception):
    """A row's document file could not be read when its request was sent."""


class DocumentRecord(Protocol):
    """Where a job's uploaded documents are remembered (the outreach ledger)."""

    def documents(self, job: str) -> dict[str, str]: ...

    def record_documents(self, job: str, ids: dict[str, str]) -> None: ...


def document_type(path: Path) -> str | None:
    """The content type of a file, by its extension."""
    return mimetypes.guess_type(path.name, strict=False)[0]


def document_path(cell: str, base: Path) -> Path:
    """The file a document cell names: a relative path is relative to ``base`` (the sheet's folder)."""
    path = Path(cell).expanduser()
    return path if path.is_absolute() else base / path


def document_problem(path: Path) -> tuple[str, str] | None:
    """Why the local file at ``path`` cannot be a request document, as (problem,
    accepted), or None when it can: it must exist, be a PDF or an image (by its
    extension) and hold 1 byte to 25 MiB."""
    if not path.is_file():
        return f"file {str(path)!r} does not exist", "the path of a PDF or image file (relative to the sheet)"
    ctype = document_type(path)
    if ctype not in DOCUMENT_TYPES:
        return (f"file {path.name!r} is not a PDF or an image ({ctype or 'unknown type'})",
                "a .pdf, .png, .jpg, .webp, .gif, .svg, .avif, .bmp or .tif file")
    size = path.stat().st_size
    if not 0 < size <= DOCUMENT_MAX_BYTES:
        return f"file {path.name!r} has {size:,} bytes", "1 byte to 25 MiB"
    return None


def document_problems(params: RowParams, base: Path) -> list[Problem]:
    """The problems of a row's document files (none when every file can be sent)."""
    out = []
    for key, cell in params.documents.items():
        found = document_problem(document_path(cell, base))
        if found is not None:
            out.append(Problem(column=f"document.{key}" if key else "document", problem=found[0], accepted=found[1]))
    return out


class Documents:
    """The job's uploaded documents: one ``documents.create`` and PUT per distinct file
    content (by SHA-256), recorded in the ledger so a re-run reuses them too."""

    def __init__(self, client: FormClient, record: DocumentRecord, job: str, form_id: str, base: Path) -> None:
        self.client, self.record, self.job, self.form_id, self.base = client, record, job, form_id, base
        self.ids: dict[str, str] = record.documents(job)
        self.uploads = 0
        self.digests: dict[Path, str] = {}  # each file is read and hashed once per run

    async def refs(self, params: RowParams) -> list[dict[str, str]]:
        """The ``documents`` param of a row, uploading any file not uploaded yet."""
        refs = []
        for key, cell in sorted(params.documents.items()):
            path = document_path(cell, self.base)
            digest = self.digests.get(path)
            if digest is None:
                try:
                    data = await asyncio.to_thread(path.read_bytes)
                except OSError as e:
                    raise DocumentUnreadable(f"document {str(path)!r} cannot be read: {e.strerror or e}") from e
                digest = hashlib.sha256(data).hexdigest()
                if digest not in self.ids:
                    await self._upload(path, data, digest)
                self.digests[path] = digest  # only once its document exists
            refs.append({"documentId": self.ids[digest], **({"field": key} if key else {})})
        return refs

    async def _upload(self, path: Path, data: bytes, digest: str) -> None:
        upload = await self.client.create_document(self.form_id, path.name, document_type(path) or "", len(data),
                                                   sha256=digest)
        await self.client.upload_document(upload, data)
        self.ids[digest] = upload.id
        self.uploads += 1
        self.record.record_documents(self.job, dict(self.ids))  # recorded before any request refers to it
