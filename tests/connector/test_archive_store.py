"""The file archive's table on SQLite, PostgreSQL and MariaDB: a file's place in an answer
is its key, and archiving it again replaces its row."""

from __future__ import annotations

from connector.store import Store
from connector.store._tables import ArchivedFile


def test_the_archive_table_round_trips(store: Store) -> None:
    assert store.archive.count() == 0
    row = ArchivedFile(submission_id="sub_1", field_key="docs", instance=2, member="scan", idx=1, form_id="f",
                       name="a.pdf", url="http://x/1", size=3, sha256="ab" * 32, location="file:///a", archived_at=1)
    other = row.model_copy(update={"submission_id": "sub_2", "form_id": "g"})
    store.archive.record([row, other])
    store.archive.record([row.model_copy(update={"location": "file:///b"})])  # archived again: replaced
    got = store.archive.archived(["f"])
    assert list(got) == [("sub_1", "docs", 2, "scan", 1)]
    assert got[("sub_1", "docs", 2, "scan", 1)].location == "file:///b"
    assert len(store.archive.archived()) == store.archive.count() == 2
