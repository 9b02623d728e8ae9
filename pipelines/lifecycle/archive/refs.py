"""Which files a stored answer names, and whether formsync may fetch one: pure functions
over the answers and the forms' field lists."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from connector.store._archive import FileFields

Place = tuple[str, str, int, str, int]  # submission, field, instance, member, index


@dataclass(frozen=True)
class FileRef:
    """One file of a file or signature answer: where it is, and what the answer says of it."""

    submission_id: str
    form_id: str
    field: str
    instance: int  # the repeating group's instance, -1 outside a group
    member: str  # the group member's key, "" outside a group
    index: int  # the file's place in the answer's list
    name: str
    size: int | None
    url: str | None

    @property
    def place(self) -> Place:
        return self.submission_id, self.field, self.instance, self.member, self.index

    @property
    def path(self) -> str:
        """Where the file is in the submission, as a report shows it: ``field[index]``, or
        ``group[instance].member[index]``."""
        inside = f"{self.field}[{self.instance}].{self.member}" if self.member else self.field
        return f"{inside}[{self.index}]"


def _files(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, list):
        yield from ((i, f) for i, f in enumerate(value) if isinstance(f, Mapping))


def _ref(sub: str, form: str, field: str, instance: int, member: str, i: int, f: Mapping[str, Any]) -> FileRef:
    size = f.get("size")
    url = f.get("url")
    return FileRef(sub, form, field, instance, member, i, str(f.get("name") or ""),
                   int(size) if isinstance(size, int | float) and not isinstance(size, bool) else None,
                   url if isinstance(url, str) and url else None)


def file_refs(submission_id: str, form_id: str, answers: Mapping[str, Any], fields: FileFields) -> list[FileRef]:
    """Every file the answers name, in the form's field order (top-level fields, then each
    group's instances)."""
    out = [_ref(submission_id, form_id, key, -1, "", i, f)
           for key in fields.top for i, f in _files(answers.get(key))]
    for group, members in fields.groups.items():
        instances = answers.get(group)
        for n, row in enumerate(instances if isinstance(instances, list) else []):
            if isinstance(row, Mapping):
                out += [_ref(submission_id, form_id, group, n, m, i, f) for m in members for i, f in _files(row.get(m))]
    return out


def same_origin(url: str, base_url: str) -> bool:
    """Whether ``url`` is on the service's own host (scheme, host and port): formsync
    fetches files from nowhere else."""
    a, b = urlsplit(url), urlsplit(base_url)
    return (a.scheme, a.hostname, a.port or _port(a.scheme)) == (b.scheme, b.hostname, b.port or _port(b.scheme))


def _port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


def refusal(ref: FileRef, base_url: str) -> str | None:
    """Why ``ref`` is not fetched at all (a report row), or None."""
    if ref.url is None:
        return "the answer has no url"
    if not same_origin(ref.url, base_url):
        return f"the url is not on the service's host ({urlsplit(base_url).netloc}); formsync fetches nothing else"
    return None


def location(root: str, sha256: str) -> str:
    """Where a file's bytes are kept: named by their sha256, so equal files are kept once."""
    return f"{root.rstrip('/')}/{sha256}"
