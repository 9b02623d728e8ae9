"""The minimal PDF writer behind retained submission PDFs."""

from __future__ import annotations

import re

from formservice.pdf import PER_PAGE, WIDTH, render_text_pdf


def objects_at_offsets(data: bytes) -> int:
    """Check the cross-reference table points at each object; return the object count."""
    xref = int(re.search(rb"startxref\s+(\d+)", data).group(1))
    count = int(re.match(rb"xref\s+0 (\d+)", data[xref:]).group(1))
    rows = data[xref:].split(b"\n")[2:2 + count]
    assert all(len(row) == 19 for row in rows), "xref rows are 20 bytes with the newline"
    for number, row in enumerate(rows[1:], start=1):
        assert data[int(row[:10]):].startswith(f"{number} 0 obj".encode()), number
    return count - 1


def test_one_page_with_escaped_text():
    data = render_text_pdf("Contact (copy)", ["name: A\\B", "topic: (sales)"])
    assert data.startswith(b"%PDF-1.4") and data.endswith(b"%%EOF\n")
    assert objects_at_offsets(data) == 5  # catalog, pages, page, content, font
    assert b"(Contact \\(copy\\)) '" in data and b"(name: A\\\\B) '" in data
    assert b"/Count 1" in data


def test_line_breaks_wrap_and_pages():
    long = "word " * 60
    lines = [f"line {i}" for i in range(PER_PAGE * 2)] + ["a\nb", long]
    data = render_text_pdf("Title", lines)
    assert b"/Count 3" in data and objects_at_offsets(data) == 2 + 2 * 3 + 1
    assert b"(a) '" in data and b"(b) '" in data
    shown = [m.group(1) for m in re.finditer(rb"\((word[^)]*)\) '", data)]
    assert len(shown) > 1 and all(len(line) <= WIDTH for line in shown)


def test_text_outside_latin1_is_replaced_not_fatal():
    data = render_text_pdf("Ünïcode ✓", ["emoji 😀"])
    assert b"(\xdcn\xefcode ?) '" in data and b"(emoji ?) '" in data
