"""The data contract's pure rules (``connector.store._schema``): a form's field list ->
its ordered, typed, named columns."""

from __future__ import annotations

from connector.store import StoredField
from connector.store._schema import (
    OWN,
    display_schema,
    fields_from_list,
    form_schema,
    same_columns,
    sql_name,
    variant_key,
)


def _cols(*fields: StoredField) -> list[tuple[str, str, str]]:
    return [(c.name, c.type, c.source) for c in form_schema("form_x", fields).fields()]


def test_every_field_is_a_column_in_list_order_whatever_was_answered() -> None:
    fields = fields_from_list([
        {"key": "b", "type": "number"}, {"key": "a", "type": "select", "options": [{"key": "x", "label": "X"}]},
        {"key": "docs", "type": "documents"}, {"key": "m", "type": "matrix", "rows": [{"key": "r1"}, {"key": "r2"}]},
        {"key": "g", "type": "group", "members": [{"key": "when", "type": "date"}, {"key": "pick", "type": "radio"},
                                                  {"key": "many", "type": "checkbox"}, {"key": "f", "type": "file"}]},
        {"key": "new_type", "type": "hologram"}])
    assert _cols(*fields) == [("b", "number", "answer"), ("a", "text", "answer"), ("a_label", "text", "label"),
                              ("m_r1", "text", "row"), ("m_r2", "text", "row"), ("g", "records", "answer"),
                              ("g__archived", "records", "archived"), ("new_type", "json", "answer")]
    group, archived = [c for c in form_schema("form_x", fields).columns if c.field_key == "g"]
    assert [(m.name, m.type) for m in group.members] == [("when", "text"), ("pick", "text"), ("many", "keys"),
                                                         ("f", "json")]
    assert [(m.name, m.type) for m in archived.members] == [("f", "keys")], "the file members' locations"


def test_names_are_sql_safe_unique_and_stable() -> None:
    assert sql_name("full_name") == "full_name"
    assert sql_name("Full.Name") == sql_name("Full.Name") != sql_name("full.name")
    assert sql_name("Full.Name").startswith("full_name_") and len(sql_name("x" * 80)) <= 63
    cols = _cols(StoredField("submitted_at", "text"), StoredField("topic", "text"),
                 StoredField("topic_label", "text"), StoredField("t", "select"), StoredField("t_label", "text"))
    names = [n for n, _, _ in cols]
    assert len(set(names)) == len(names) and not set(names) & {c.name for c in OWN}
    assert names[0].startswith("submitted_at_") and names[1:3] == ["topic", "topic_label"]
    (gone,) = _cols(StoredField("gone_at", "text"))
    assert gone[0].startswith("gone_at_"), "gone_at is reserved for gone rows"


def test_a_shape_unknown_is_json_and_an_unknown_type_is_json() -> None:
    assert _cols(StoredField("m", "matrix"), StoredField("g", "group"), StoredField("v", "boolean"),
                 StoredField("w", "json")) == [("m", "json", "answer"), ("g", "json", "answer"),
                                               ("v", "json", "answer"), ("w", "json", "answer")]


def test_a_type_variant_is_named_from_its_key_and_type_and_reads_the_same_answer() -> None:
    assert variant_key("score", "picture-choice") == "score__picture_choice"
    assert same_columns("text", "email") and same_columns("select", "radio") and not same_columns("text", "number")
    assert _cols(StoredField("score", "number"), StoredField("score", "text", name=variant_key("score", "text"))) == [
        ("score", "number", "answer"), ("score__text", "text", "answer")]


def test_the_display_variant_has_one_column_per_field_titled() -> None:
    table = form_schema("form_x", fields_from_list([
        {"key": "n", "type": "number", "title": "How many"}, {"key": "c", "type": "radio", "title": "Pick"},
        {"key": "m", "type": "matrix", "title": "Grid", "rows": [{"key": "r1"}, {"key": "r2"}]}]))
    shown = display_schema(table).fields()
    assert [(c.name, c.type, c.source, c.title) for c in shown] == [
        ("n", "number", "answer", "How many"), ("c", "text", "label", "Pick"), ("m", "text", "label", "Grid")]
