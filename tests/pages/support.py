"""Helpers shared by the page tests: creating requests through the API, fetching pages
over loopback, and reading the controls, labels and errors out of the HTML."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import aiohttp

from formservice import tables
from formservice.ids import new_id

CONTEXT_SECRET = "ctx-9f3b2e71-never-shown"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


async def create_request(sb, form: str = "Everything", ws: str = "pro", **params: Any) -> dict[str, Any]:
    r = await sb.rpc("requests.create", {"formId": sb.workspaces[ws].forms[form], **params}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def record(sb, request_id: str, ws: str = "pro") -> dict[str, Any]:
    r = await sb.rpc("requests.get", {"requestId": request_id}, ws=ws)
    assert r.status == 200, r.body
    return r.data


@dataclass
class Page:
    status: int
    text: str
    headers: Any
    url: str = ""

    @property
    def doc(self) -> Doc:
        return parse_html(self.text)


async def fetch(http: aiohttp.ClientSession, url: str) -> Page:
    async with http.get(url, allow_redirects=False) as resp:
        return Page(resp.status, await resp.text(), resp.headers, str(resp.url))


async def send(http: aiohttp.ClientSession, url: str, fields: list[tuple[str, Any]],
               files: list[tuple[str, str, str, bytes]] = ()) -> Page:
    """POST a form: ``fields`` as (name, value) pairs, ``files`` as (name, filename,
    content type, bytes); multipart when there are files."""
    if files:
        data: Any = aiohttp.FormData()
        for name, value in fields:
            data.add_field(name, str(value))
        for name, filename, ctype, content in files:
            data.add_field(name, content, filename=filename, content_type=ctype)
    else:
        data = [(n, str(v)) for n, v in fields]
    async with http.post(url, data=data, allow_redirects=False) as resp:
        return Page(resp.status, await resp.text(), resp.headers, str(resp.url))


def add_document(sb, ws: str, form: str, name: str, content: bytes, ctype: str = "application/pdf") -> str:
    """An uploaded document of ``form`` (documents.create and its PUT, done in the store)."""
    with sb.service.session() as s:
        now = sb.service.now()
        stored = tables.StoredFile(id=str(uuid.uuid4()), content_type=ctype, data=content, created_at=now)
        doc = tables.Document(id=new_id("doc"), workspace_id=sb.workspaces[ws].id, form_id=sb.workspaces[ws].forms[form],
                              name=name, content_type=ctype, size=len(content),
                              sha256=hashlib.sha256(content).hexdigest(), upload_token=new_id("upl"),
                              upload_expires_at=now + 3_600_000, uploaded_at=now, file_id=stored.id, created_at=now)
        s.add_all([stored, doc])
        s.commit()
        return doc.id


@dataclass
class Control:
    tag: str
    attrs: dict[str, str | None]
    fieldsets: list[int]  # indices of the fieldsets it sits in, innermost last

    def get(self, name: str) -> str | None:
        return self.attrs.get(name)

    def has(self, name: str) -> bool:
        return name in self.attrs


@dataclass
class Doc:
    controls: list[Control] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # for -> text
    legends: dict[int, str] = field(default_factory=dict)  # fieldset index -> legend text
    texts: dict[str, str] = field(default_factory=dict)  # element id -> its text
    links: list[str] = field(default_factory=list)
    options: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # select id -> (value, selected)
    elements: dict[str, dict[str, str | None]] = field(default_factory=dict)  # id -> attributes, any element

    def named(self, name: str) -> list[Control]:
        return [c for c in self.controls if c.get("name") == name]

    def by_id(self, id_: str) -> Control:
        found = [c for c in self.controls if c.get("id") == id_]
        assert len(found) == 1, f"{len(found)} controls with id {id_}"
        return found[0]

    def visible(self) -> list[Control]:
        """Controls a person interacts with (not hidden markers, not buttons)."""
        return [c for c in self.controls if c.tag in ("input", "select", "textarea", "output")
                and c.get("type") not in ("hidden", "submit")]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.doc = Doc()
        self.stack: list[int] = []
        self.count = 0
        self.capture: list[tuple[str, str, list[str]]] = []  # (tag, key, text parts)
        self.select: str | None = None

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = dict(attrs_list)
        if attrs.get("id"):
            self.doc.elements[attrs["id"] or ""] = attrs
        if tag == "fieldset":
            self.stack.append(self.count)
            self.count += 1
        if tag in ("input", "select", "textarea", "output", "button"):
            self.doc.controls.append(Control(tag, attrs, list(self.stack)))
        if tag == "select":
            self.select = attrs.get("id") or ""
            self.doc.options[self.select] = []
        if tag == "option" and self.select is not None:
            self.doc.options[self.select].append((attrs.get("value") or "", "selected" in attrs))
        if tag == "a" and attrs.get("href"):
            self.doc.links.append(attrs["href"] or "")
        if tag == "label" and attrs.get("for"):
            self.capture.append(("label", attrs["for"] or "", []))
        elif tag == "legend" and self.stack:
            self.capture.append(("legend", str(self.stack[-1]), []))
        elif attrs.get("id") and tag in ("p", "output", "h2", "section"):
            self.capture.append((tag, attrs["id"] or "", []))

    def handle_endtag(self, tag: str) -> None:
        if tag == "fieldset" and self.stack:
            self.stack.pop()
        if tag == "select":
            self.select = None
        if self.capture and self.capture[-1][0] == tag:
            kind, key, parts = self.capture.pop()
            text = " ".join("".join(parts).split())
            if kind == "label":
                self.doc.labels[key] = text
            elif kind == "legend":
                self.doc.legends[int(key)] = text
            else:
                self.doc.texts[key] = text

    def handle_data(self, data: str) -> None:
        for _, _, parts in self.capture:
            parts.append(data)


def parse_html(text: str) -> Doc:
    p = _Parser()
    p.feed(text)
    return p.doc


PAYMENT = {"status": "paid", "amount": 40, "currency": "USD"}
BOOKING = {"status": "confirmed", "start": "2026-03-02T10:00:00.000Z", "end": "2026-03-02T10:30:00.000Z",
           "timeZone": "UTC", "eventTitle": "Intro call"}


def everything_fields() -> list[tuple[str, Any]]:
    """What a browser posts for a complete answer to the seeded "Everything" form (files
    aside), markers included."""
    import json

    return [
        ("full_name", "Ada Lovelace"), ("bio", "Wrote the first program."), ("email", "ada@example.test"),
        ("phone", "+44 20 7946 0000"), ("website", "https://ada.example.test"), ("quantity", "3"),
        ("unit_price", "2.5"), ("start_date", "2026-03-01"), ("start_time", "09:45"), ("satisfaction", ""),
        ("satisfaction", "4"), ("likelihood", ""), ("likelihood", "9"), ("newsletter", "false"),
        ("newsletter", "true"), ("country", "fr"), ("plan", ""), ("plan", "premium"), ("topics", ""),
        ("topics", "billing"), ("topics", "sales"), ("priorities", ""), ("priorities[0]", "quality"),
        ("priorities[1]", "price"), ("priorities[2]", "speed"), ("avatar", ""), ("avatar", "dog"),
        ("service_quality", ""), ("service_quality[speed]", "great"), ("service_quality[friendliness]", "ok"),
        ("attachment", ""), ("signature", ""), ("deposit", json.dumps(PAYMENT)), ("meeting", json.dumps(BOOKING)),
        ("line_items", ""), ("line_items[0][item]", "Bolts"), ("line_items[0][amount]", "12"),
        ("line_items[1][item]", "Nuts"), ("line_items[1][amount]", "3.5"), ("__action", "submit"),
    ]


EXPECTED_ANSWERS = {
    "full_name": "Ada Lovelace", "bio": "Wrote the first program.", "email": "ada@example.test",
    "phone": "+44 20 7946 0000", "website": "https://ada.example.test", "quantity": 3, "unit_price": 2.5,
    "total": 7.5, "start_date": "2026-03-01", "start_time": "09:45", "satisfaction": 4, "likelihood": 9,
    "newsletter": True, "country": "fr", "plan": "premium", "topics": ["billing", "sales"],
    "priorities": ["quality", "price", "speed"], "avatar": "dog",
    "service_quality": {"speed": "great", "friendliness": "ok"}, "deposit": PAYMENT, "meeting": BOOKING,
    "line_items": [{"item": "Bolts", "amount": 12}, {"item": "Nuts", "amount": 3.5}],
}
EXPECTED_DISPLAY = {
    "newsletter": "Yes", "country": "France", "plan": "Premium", "topics": "Billing, Sales",
    "priorities": "Quality, Price, Speed", "avatar": "Dog", "service_quality": "Speed: Great, Friendliness: OK",
    "deposit": "$40.00 USD · Paid", "line_items": "Bolts / 12, Nuts / 3.5", "total": "7.5", "quantity": "3",
}
