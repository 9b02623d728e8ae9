"""A minimal PDF writer: one page (or more) of text lines, enough for retained
submission PDFs. No layout engine is needed for that."""

from __future__ import annotations

import textwrap

WIDTH = 90  # characters of 11 pt Helvetica that fit the 495 pt text column, roughly
PER_PAGE = 45


def _escape(text: str) -> str:
    text = text.encode("latin-1", "replace").decode("latin-1")
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _layout(text: str) -> list[str]:
    # a line break in an answer starts a new line; a long line wraps instead of running off the page
    out: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        out.extend(textwrap.wrap(line.expandtabs(4), WIDTH, replace_whitespace=False, drop_whitespace=True) or [""])
    return out


def render_text_pdf(title: str, lines: list[str]) -> bytes:
    """A valid PDF showing ``title`` and ``lines`` in Helvetica, 45 lines a page; line
    breaks inside a line are kept and long lines wrap. Characters outside Latin-1 show
    as ``?``."""
    all_lines = _layout(title) + [""] + [part for line in lines for part in _layout(line)]
    pages = [all_lines[i:i + PER_PAGE] for i in range(0, len(all_lines), PER_PAGE)]
    objects: list[bytes] = []
    font_id = 3 + 2 * len(pages)
    page_ids = []
    for i, page in enumerate(pages):
        content = "BT /F1 11 Tf 50 790 Td 15 TL " + " ".join(f"({_escape(line)}) '" for line in page) + " ET"
        page_id, content_id = 3 + 2 * i, 4 + 2 * i
        page_ids.append(page_id)
        objects.append(
            f"{page_id} 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {content_id} 0 R >> endobj\n".encode()
        )
        data = content.encode("latin-1")
        objects.append(f"{content_id} 0 obj << /Length {len(data)} >> stream\n".encode() + data +
                       b"\nendstream endobj\n")
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    head = [
        b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n",
        f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {len(pages)} >> endobj\n".encode(),
    ]
    font = f"{font_id} 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\n".encode()
    body = head + objects + [font]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for obj in body:
        offsets.append(len(out))
        out += obj
    xref = len(out)
    out += f"xref\n0 {len(body) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer << /Size {len(body) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
