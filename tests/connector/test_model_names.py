"""The connector's models read like Python and write like the wire: snake_case attributes
and arguments, camelCase JSON in and out, and the camelCase attribute still readable."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connector import models

RECORD = {"id": "req_1", "status": "pending", "externalId": "crm-42", "createdAt": 1, "readonlyKeys": ["email"],
          "recipient": {"email": "ada@example.com"}, "someFutureField": True}


def test_a_record_reads_in_snake_case_and_dumps_the_wire_names() -> None:
    r = models.RequestRecord.model_validate(RECORD)
    assert (r.external_id, r.created_at_ms, r.readonly_keys) == ("crm-42", 1, ["email"])
    assert r.created_at == datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC), "an aware UTC datetime"
    assert r.externalId == r.external_id, "the camelCase attribute still reads"
    dumped = r.model_dump(exclude_unset=True)
    assert dumped == {k: v for k, v in RECORD.items() if k != "someFutureField"}, "unknown fields are ignored"
    assert models.RequestRecord.model_validate(dumped) == r


def test_a_model_is_built_by_either_name() -> None:
    by_attr = models.DocumentRef(document_id="doc_1", field="files")
    by_wire = models.DocumentRef.model_validate({"documentId": "doc_1", "field": "files"})
    assert by_attr == by_wire and by_attr.model_dump(exclude_none=True) == {"documentId": "doc_1", "field": "files"}


def test_every_model_names_its_attributes_in_snake_case() -> None:
    wire_models = [m for m in vars(models).values()
                   if isinstance(m, type) and issubclass(m, models.WireModel) and m is not models.WireModel]
    camel = [f"{m.__name__}.{name}" for m in wire_models for name in m.model_fields if name != name.lower()]
    assert len(wire_models) > 40 and camel == []


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    page = models.Page[models.Submission].model_validate({"items": [], "nextCursor": "c", "hasMore": True})
    assert (page.next_cursor, page.has_more, page.nextCursor) == ("c", True, "c")
    with pytest.raises(AttributeError, match="next_cursr"):
        _ = page.next_cursr
