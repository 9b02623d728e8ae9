"""Files a test puts in the service's storage, to answer file and signature questions
without a page."""

from __future__ import annotations

import base64
import binascii

from ...domain.base import Ctx
from ...errors import validation
from ...pages.flow import store_upload
from ..models import FileCreateParams, FileObject
from .registry import helper


@helper("files.create")
def files_create(ctx: Ctx, p: FileCreateParams) -> FileObject:
    """Store bytes as an upload does, and answer the file object ``{name, type, size,
    url}`` that ``submissions.create`` and ``requests.complete`` take in a file answer (the
    whole call is at most the 1 MiB body every call is)."""
    try:
        data = base64.b64decode(p.contentBase64, validate=True)
    except (binascii.Error, ValueError):
        raise validation("contentBase64 is not base64 (RFC 4648, standard alphabet, padded).",
                         field="contentBase64", reason="INVALID_FORMAT") from None
    return FileObject(**store_upload(ctx.session, p.name, p.type, data, ctx.now, ctx.base_url))
