"""The file archive's repository (``store.archive``): which stored answers hold files (by
the forms' field lists), which of those files are archived already, and the record of
each file archived (``formsync_archived_files``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, tuple_
from sqlmodel import col, select

from ._database import Database, in_lists
from ._tables import ArchivedFile, FormField, SubmissionRow

FILE_TYPES = ("file", "signature")
_BATCH = 500  # submissions read at a time
_PLACE = (col(ArchivedFile.submission_id), col(ArchivedFile.field_key), col(ArchivedFile.instance),
          col(ArchivedFile.member), col(ArchivedFile.idx))


@dataclass(frozen=True)
class FileFields:
    """Where a form's answers hold files: its top-level file fields, and for each repeating
    group the keys of its file members."""

    top: tuple[str, ...]
    groups: dict[str, tuple[str, ...]]


def file_fields_of(rows: Sequence[FormField]) -> FileFields:
    """The file fields among a form's stored field descriptors."""
    top = tuple(r.field_key for r in rows if r.type in FILE_TYPES)
    groups = {r.field_key: members for r in rows if r.type == "group"
              if (members := tuple(str(m["key"]) for m in r.options or [] if m.get("type") in FILE_TYPES))}
    return FileFields(top, groups)


class ArchiveStore:
    """Reads and writes of the file archive."""

    def __init__(self, db: Database, clock: Callable[[], int]) -> None:
        self._db = db
        self._clock = clock

    def file_fields(self, form_ids: Sequence[str] | None = None) -> dict[str, FileFields]:
        """Each form with file fields (of ``form_ids``, or every form) and where they are."""
        query = select(FormField).order_by(col(FormField.form_id), col(FormField.position))
        if form_ids is not None:
            query = query.where(col(FormField.form_id).in_(form_ids))
        with self._db.reader() as s:
            rows = list(s.exec(query).all())
        by_form: dict[str, list[FormField]] = {}
        for r in rows:
            by_form.setdefault(r.form_id, []).append(r)
        found = {form: file_fields_of(rs) for form, rs in by_form.items()}
        return {form: f for form, f in found.items() if f.top or f.groups}

    def answers(self, form_ids: Sequence[str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(submission id, form id, answers)`` of every stored submission of ``form_ids``
        with answers, read in batches."""
        last = ""
        while form_ids:
            query = (select(SubmissionRow.id, SubmissionRow.form_id, SubmissionRow.answers)
                     .where(col(SubmissionRow.form_id).in_(form_ids), col(SubmissionRow.id) > last,
                            col(SubmissionRow.answers).is_not(None))
                     .order_by(col(SubmissionRow.id)).limit(_BATCH))
            with self._db.reader() as s:
                rows = list(s.exec(query).all())
            for sub_id, form_id, answers in rows:
                if isinstance(answers, dict):
                    yield sub_id, form_id, answers
            if len(rows) < _BATCH:
                return
            last = rows[-1][0]

    def archived(self, form_ids: Sequence[str] | None = None) -> dict[tuple[str, str, int, str, int], ArchivedFile]:
        """The files archived so far (of ``form_ids``), by their place in an answer."""
        query = select(ArchivedFile)
        if form_ids is not None:
            query = query.where(col(ArchivedFile.form_id).in_(form_ids))
        with self._db.reader() as s:
            return {(a.submission_id, a.field_key, a.instance, a.member, a.idx): a for a in s.exec(query).all()}

    def record(self, files: Sequence[ArchivedFile | Mapping[str, Any]]) -> None:
        """Record archived files (rows, or their columns' values) in one transaction (a
        file archived again replaces its row)."""
        if not files:
            return
        values = [f.model_dump() if isinstance(f, ArchivedFile) else dict(f) for f in files]
        keys = [(v["submission_id"], v["field_key"], v["instance"], v["member"], v["idx"]) for v in values]
        rows = list(dict(zip(keys, values, strict=True)).values())
        with self._db.session() as s:
            for some in in_lists(keys):
                s.execute(delete(ArchivedFile).where(tuple_(*_PLACE).in_(some)))
            s.execute(insert(ArchivedFile), rows)

    def count(self) -> int:
        """How many files are archived (0 before the table exists)."""
        if ArchivedFile.__tablename__ not in self._db.table_names():
            return 0
        with self._db.reader() as s:
            return len(s.exec(select(ArchivedFile.sha256)).all())
