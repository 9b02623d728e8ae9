"""parse_form: posted form fields to JSON answers, for every field type, with fixed inputs."""

from __future__ import annotations

import json
from typing import Any

from multidict import MultiDict

from formservice.domain.submissions import check_answers
from formservice.pages import parse_form
from formservice.pages.parse import MAX_INSTANCES, instance_indices

OPTS = [{"key": "a", "label": "A"}, {"key": "b", "label": "B"}, {"key": "c", "label": "C"}]
BLOCKS: list[dict[str, Any]] = [
    {"type": "heading", "title": "Intro"},
    {"type": "text", "key": "name", "title": "Name", "required": True},
    {"type": "textarea", "key": "bio", "title": "Bio"},
    {"type": "email", "key": "email", "title": "Email"},
    {"type": "phone", "key": "phone", "title": "Phone"},
    {"type": "url", "key": "site", "title": "Site"},
    {"type": "number", "key": "qty", "title": "Quantity"},
    {"type": "number", "key": "price", "title": "Price"},
    {"type": "calculated", "key": "total", "title": "Total", "formula": "qty * price"},
    {"type": "date", "key": "day", "title": "Day"},
    {"type": "time", "key": "at", "title": "At"},
    {"type": "rating", "key": "stars", "title": "Stars", "maxStars": 5},
    {"type": "scale", "key": "nps", "title": "NPS", "min": 0, "max": 10},
    {"type": "switch", "key": "news", "title": "News"},
    {"type": "select", "key": "country", "title": "Country", "options": OPTS},
    {"type": "radio", "key": "plan", "title": "Plan", "options": OPTS},
    {"type": "decision", "key": "decision", "title": "Decision"},
    {"type": "picture-choice", "key": "pic", "title": "Picture", "options": OPTS},
    {"type": "checkbox", "key": "topics", "title": "Topics", "options": OPTS},
    {"type": "ranking", "key": "rank", "title": "Rank", "options": OPTS},
    {"type": "matrix", "key": "grid", "title": "Grid", "rows": [{"key": "r1", "label": "R1"}, {"key": "r2", "label": "R2"}],
     "columns": [{"key": "lo", "label": "Lo"}, {"key": "hi", "label": "Hi"}]},
    {"type": "hidden", "key": "crm", "title": "CRM"},
    {"type": "file", "key": "att", "title": "Attachment"},
    {"type": "signature", "key": "sig", "title": "Signature"},
    {"type": "payment", "key": "pay", "title": "Deposit"},
    {"type": "schedule-appointment", "key": "meet", "title": "Meeting"},
    {"type": "group", "key": "items", "title": "Items", "repeating": True,
     "members": [{"type": "text", "key": "item", "title": "Item", "required": True},
                 {"type": "number", "key": "amount", "title": "Amount"},
                 {"type": "switch", "key": "urgent", "title": "Urgent"},
                 {"type": "checkbox", "key": "tags", "title": "Tags", "options": OPTS}]},
    {"type": "documents", "key": "docs", "title": "Docs", "documents": [{"name": "T.pdf"}]},
]
FILE = {"name": "a.pdf", "type": "application/pdf", "size": 3, "url": "http://127.0.0.1/api/storage/x"}


def parse(*pairs: tuple[str, str]) -> dict[str, Any]:
    return parse_form(BLOCKS, MultiDict(pairs))


def test_absent_fields_are_absent_and_content_blocks_ignored():
    assert parse() == {}
    assert parse(("unrelated", "x"), ("Intro", "y")) == {}


def test_single_line_text_types_are_stripped_textarea_kept():
    got = parse(("name", "  Ada  "), ("bio", "  line 1\nline 2 "), ("email", " a@b.io "), ("phone", "+1 555"),
                ("site", "https://x.io"), ("day", "2026-01-15"), ("at", "09:30"))
    assert got == {"name": "Ada", "bio": "  line 1\nline 2 ", "email": "a@b.io", "phone": "+1 555",
                   "site": "https://x.io", "day": "2026-01-15", "at": "09:30"}


def test_blank_text_is_an_explicit_empty_answer():
    assert parse(("name", ""), ("bio", "")) == {"name": "", "bio": ""}


def test_numbers_become_int_or_float_and_bad_text_is_kept():
    assert parse(("qty", "3"))["qty"] == 3 and isinstance(parse(("qty", "3"))["qty"], int)
    assert parse(("qty", "-2"))["qty"] == -2
    assert parse(("price", "2.5"))["price"] == 2.5
    assert parse(("price", "1e3"))["price"] == 1000.0
    assert parse(("qty", " 7 "))["qty"] == 7
    assert parse(("qty", "abc"))["qty"] == "abc"
    assert parse(("qty", "inf"))["qty"] == "inf"  # not a finite number: kept for the check to refuse
    assert parse(("qty", ""))["qty"] == ""


def test_rating_and_scale_are_whole_numbers():
    assert parse(("stars", ""), ("stars", "4"), ("nps", ""), ("nps", "0")) == {"stars": 4, "nps": 0}
    assert parse(("stars", "")) == {"stars": ""}


def test_switch_marker_and_tick():
    assert parse(("news", "false")) == {"news": False}
    assert parse(("news", "false"), ("news", "true")) == {"news": True}
    assert parse(("news", "on")) == {"news": True}


def test_single_choice_types_take_the_chosen_key():
    got = parse(("country", "b"), ("plan", ""), ("plan", "a"), ("decision", ""), ("decision", "changes"),
                ("pic", ""), ("pic", "c"))
    assert got == {"country": "b", "plan": "a", "decision": "changes", "pic": "c"}
    assert parse(("plan", "")) == {"plan": ""}  # the marker alone: answered empty
    assert parse(("country", "")) == {"country": ""}


def test_checkbox_is_a_list_and_marker_alone_is_empty():
    assert parse(("topics", ""), ("topics", "a"), ("topics", "c")) == {"topics": ["a", "c"]}
    assert parse(("topics", "")) == {"topics": []}


def test_ranking_in_position_order_blank_positions_skipped():
    got = parse(("rank", ""), ("rank[2]", "a"), ("rank[0]", "c"), ("rank[1]", ""))
    assert got == {"rank": ["c", "a"]}
    assert parse(("rank[0]", "b"), ("rank[1]", "b")) == {"rank": ["b", "b"]}  # the check names the repeat
    assert parse(("rank", "")) == {"rank": []}
    assert parse(("rank[10]", "a"), ("rank[9]", "b")) == {"rank": ["b", "a"]}  # numeric, not text, order


def test_matrix_is_an_object_of_answered_rows():
    assert parse(("grid", ""), ("grid[r1]", "hi"), ("grid[r2]", "")) == {"grid": {"r1": "hi"}}
    assert parse(("grid", "")) == {"grid": {}}
    assert parse(("grid[r2]", "lo"), ("grid[nope]", "hi")) == {"grid": {"r2": "lo"}}


def test_files_are_json_objects_and_junk_is_dropped():
    got = parse(("att", ""), ("att", json.dumps(FILE)), ("att", "not json"), ("sig", ""))
    assert got == {"att": [FILE], "sig": []}


def test_payment_and_appointment_take_json():
    pay = {"status": "paid", "amount": 40, "currency": "USD"}
    got = parse(("pay", json.dumps(pay)), ("meet", "{broken"))
    assert got == {"pay": pay, "meet": "{broken"}
    assert parse(("pay", "  ")) == {"pay": ""}


def test_group_instances_in_index_order_blank_ones_dropped():
    got = parse(("items", ""), ("items[1][item]", "Second"), ("items[1][amount]", "2.5"),
                ("items[0][item]", "First"), ("items[0][amount]", "3"), ("items[0][urgent]", "false"),
                ("items[0][urgent]", "true"), ("items[2][item]", ""), ("items[2][amount]", ""),
                ("items[2][urgent]", "false"), ("items[10][item]", "Tenth"), ("items[10][tags]", ""),
                ("items[10][tags]", "b"))
    assert got == {"items": [{"item": "First", "amount": 3, "urgent": True},
                             {"item": "Second", "amount": 2.5},
                             {"item": "Tenth", "tags": ["b"]}]}
    assert parse(("items", "")) == {"items": []}
    assert parse(("items[0][item]", "")) == {"items": []}


def test_group_members_keep_unconvertible_text():
    assert parse(("items[0][item]", "X"), ("items[0][amount]", "lots")) == {"items": [{"item": "X", "amount": "lots"}]}


def test_hidden_calculated_and_documents_are_never_read():
    assert parse(("crm", "posted"), ("total", "999"), ("docs", "x")) == {}


def test_instance_indices_sorted_numeric_and_capped():
    data = MultiDict([("items[3][item]", "a"), ("items[1][amount]", "b"), ("items[3][amount]", "c"),
                      ("itemsx[0][item]", "d"), ("items[0]", "e")])
    assert instance_indices(data, "items") == [1, 3]
    many = MultiDict([(f"items[{i}][item]", "x") for i in range(MAX_INSTANCES + 5)])
    assert instance_indices(many, "items") == list(range(MAX_INSTANCES))
    assert len(parse_form(BLOCKS, many)["items"]) == MAX_INSTANCES


def test_a_full_post_passes_the_answer_check():
    """What the page posts for every field type is what the service accepts."""
    pay = {"status": "paid", "amount": 40, "currency": "USD"}
    meet = {"status": "confirmed", "start": "2026-01-15T09:30:00.000Z"}
    got = parse(("name", "Ada"), ("bio", "Hi"), ("email", "ada@example.test"), ("phone", "+1"),
                ("site", "https://ada.dev"), ("qty", "3"), ("price", "2.5"), ("day", "2026-02-01"), ("at", "10:15"),
                ("stars", "5"), ("nps", "9"), ("news", "false"), ("news", "true"), ("country", "a"), ("plan", "b"),
                ("decision", "approve"), ("pic", "c"), ("topics", "a"), ("topics", "b"), ("rank[0]", "c"),
                ("rank[1]", "a"), ("rank[2]", "b"), ("grid[r1]", "lo"), ("grid[r2]", "hi"),
                ("att", json.dumps(FILE)), ("sig", json.dumps(FILE)), ("pay", json.dumps(pay)),
                ("meet", json.dumps(meet)), ("items[0][item]", "Bolt"), ("items[0][amount]", "4"))
    clean, errors = check_answers(BLOCKS, got, require=True)
    assert errors == {}
    assert clean["total"] == 7.5
    assert clean["rank"] == ["c", "a", "b"] and clean["grid"] == {"r1": "lo", "r2": "hi"}
    assert clean["items"] == [{"item": "Bolt", "amount": 4}] and clean["news"] is True
    assert clean["att"] == [FILE]


def test_unconvertible_values_are_named_by_the_check():
    got = parse(("name", "Ada"), ("qty", "abc"), ("stars", "9"), ("rank[0]", "a"), ("rank[1]", "a"),
                ("pay", "{broken"), ("items[0][amount]", "1"))
    _, errors = check_answers(BLOCKS, got, require=True)
    assert set(errors) == {"qty", "stars", "rank", "pay", "items.0.item"}
    assert errors["items.0.item"].reason == "REQUIRED"
