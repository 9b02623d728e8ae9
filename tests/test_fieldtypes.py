"""Field types as pure functions: which values each field accepts (``check_value``), how an
answer reads (``display``), calculated fields (``calculate``) and key derivation
(``assign_keys``). Fixed inputs, plus a property over generated values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formservice.domain import fieldtypes as ft
from formservice.domain.fieldtypes import FieldValueError, assign_keys, calculate, check_value, display
from formservice.sandbox.seed import load_seed


def _seed_form(name: str) -> list[dict[str, Any]]:
    """The blocks of a form of the default seed, keyed as a publish would key them."""
    forms = {f["name"]: f for f in load_seed(None)["workspaces"][0]["forms"]}
    return assign_keys(forms[name]["blocks"])


EVERYTHING = {b["key"]: b for b in _seed_form("Everything") if ft.is_question(b)}
DECISION = next(b for b in _seed_form("Approval") if b.get("type") == "decision")


def refused(block: dict[str, Any], value: Any) -> FieldValueError:
    with pytest.raises(FieldValueError) as info:
        check_value(block, value)
    assert str(info.value), "a refusal says what the field takes"
    return info.value


# -- check_value ---------------------------------------------------------------------


def test_text_email_url_phone():
    assert check_value(EVERYTHING["full_name"], "Ada") == "Ada"
    assert refused(EVERYTHING["full_name"], 5).expected == "string"
    assert check_value(EVERYTHING["email"], "ada@example.test") == "ada@example.test"
    assert refused(EVERYTHING["email"], "ada.example.test").expected == "string"
    assert check_value(EVERYTHING["website"], "https://ada.example") == "https://ada.example"
    refused(EVERYTHING["website"], "ftp://ada.example")
    refused(EVERYTHING["website"], "ada.example")
    assert check_value(EVERYTHING["phone"], "+44 20 7946 0000") == "+44 20 7946 0000"
    assert check_value(EVERYTHING["crm_id"], "crm-1") == "crm-1"


@pytest.mark.parametrize("value", [3, 2.5, -1, 0])
def test_number_accepts_finite_numbers(value):
    assert check_value(EVERYTHING["quantity"], value) == value


@pytest.mark.parametrize("value", [True, "3", None, [], float("nan"), float("inf"), -float("inf"), 10**400])
def test_number_refuses_non_numbers_and_non_finite(value):
    # NaN and Infinity pass a JSON parser but cannot be written back as JSON
    assert refused(EVERYTHING["quantity"], value).expected == "number"


def test_date_is_calendar_yyyy_mm_dd_only():
    assert check_value(EVERYTHING["start_date"], "2026-01-15") == "2026-01-15"
    # fromisoformat alone would take the first two
    for bad in ("2026-W03-1", "20260115", "2026-02-30", "15/01/2026", "2026-1-5", 20260115):
        assert refused(EVERYTHING["start_date"], bad).expected == "string", bad


def test_time_is_hh_mm():
    assert check_value(EVERYTHING["start_time"], "09:30") == "09:30"
    for bad in ("9:30", "24:00", "09:60", "09:30:00", 930):
        refused(EVERYTHING["start_time"], bad)


def test_rating_and_scale_ranges():
    assert check_value(EVERYTHING["satisfaction"], 5) == 5
    for bad in (0, 6, 4.0, True, "4"):
        assert refused(EVERYTHING["satisfaction"], bad).expected == "integer"
    assert check_value(EVERYTHING["likelihood"], 0) == 0
    assert check_value(EVERYTHING["likelihood"], 10) == 10
    for bad in (-1, 11, 5.5):
        refused(EVERYTHING["likelihood"], bad)


def test_switch_takes_booleans_only():
    assert check_value(EVERYTHING["newsletter"], False) is False
    for bad in ("true", 1, None):
        assert refused(EVERYTHING["newsletter"], bad).expected == "boolean"


def test_choice_takes_the_option_key_not_the_label():
    assert check_value(EVERYTHING["country"], "de") == "de"
    err = refused(EVERYTHING["country"], "Germany")
    assert err.valid_values == ["de", "fr", "us"]
    assert "label of de" in str(err)
    assert refused(EVERYTHING["plan"], 1).valid_values == ["basic", "premium"]
    assert check_value(EVERYTHING["avatar"], "dog") == "dog"
    assert check_value(DECISION, "approve") == "approve"
    assert refused(DECISION, "yes").valid_values == ["approve", "changes", "decline"]


def test_multi_choice_is_a_list_of_distinct_keys():
    assert check_value(EVERYTHING["topics"], ["billing", "sales"]) == ["billing", "sales"]
    assert check_value(EVERYTHING["priorities"], ["quality", "price", "speed"]) == ["quality", "price", "speed"]
    assert refused(EVERYTHING["topics"], "billing").expected == "array"
    assert refused(EVERYTHING["topics"], ["billing", "billing"]).valid_values == ["billing", "support", "sales"]
    assert refused(EVERYTHING["topics"], ["billing", "nope"]).valid_values == ["billing", "support", "sales"]


def test_matrix_maps_row_keys_to_column_keys():
    block = EVERYTHING["service_quality"]
    assert check_value(block, {"speed": "great"}) == {"speed": "great"}
    assert refused(block, {"price": "great"}).valid_values == ["speed", "friendliness"]
    assert refused(block, {"speed": "Great"}).valid_values == ["poor", "ok", "great"]
    assert refused(block, {"speed": ["great"]}).valid_values == ["poor", "ok", "great"]
    assert refused(block, ["speed", "great"]).expected == "object"


def test_repeating_group_instances():
    block = EVERYTHING["line_items"]
    assert check_value(block, [{"item": "Widget", "amount": 2}, {"item": "Gadget"}]) == [
        {"item": "Widget", "amount": 2}, {"item": "Gadget"}]
    # blank members are left out, a wholly blank instance is no instance
    assert check_value(block, [{"item": "Widget", "amount": None}, {"item": "", "amount": None}]) == [
        {"item": "Widget"}]
    err = refused(block, [{"item": "Widget"}, {"item": "Gadget", "amount": "two"}])
    assert "instance 1, member amount" in str(err) and err.expected == "number"
    assert refused(block, [{"sku": "x"}]).valid_values == ["item", "amount"]
    assert refused(block, {"item": "Widget"}).expected == "array"
    assert refused(block, ["Widget"]).expected == "object"


def test_file_answers_are_normalised_lists():
    block = EVERYTHING["attachment"]
    assert check_value(block, [{"name": "cv.pdf", "size": 10}]) == [
        {"name": "cv.pdf", "type": "application/octet-stream", "size": 10, "url": None}]
    for bad in ({"name": "cv.pdf"}, [{"size": 1}], [{"name": "", "size": 1}], [{"name": "a", "size": -1}],
                [{"name": "a", "size": True}], [{"name": "a", "url": 5}], [{"name": "a", "type": 5}], ["a.pdf"]):
        refused(block, bad)
    assert check_value(EVERYTHING["signature"], [{"name": "sig.png", "type": "image/png", "size": 3,
                                                  "url": "https://x.test/s"}])[0]["type"] == "image/png"


def test_payment_and_booking_shapes():
    paid = {"status": "paid", "amount": 40, "currency": "USD"}
    assert check_value(EVERYTHING["deposit"], paid) == paid
    assert refused(EVERYTHING["deposit"], {"status": "done"}).valid_values == ft.PAYMENT_STATUSES
    assert refused(EVERYTHING["deposit"], {"status": "paid", "amount": "forty"}).expected == "number"
    refused(EVERYTHING["deposit"], {"status": "paid", "currency": "dollars"})
    refused(EVERYTHING["deposit"], "paid")
    booking = {"status": "confirmed", "start": "2026-01-15T09:30:00.000Z"}
    assert check_value(EVERYTHING["meeting"], booking) == booking
    assert refused(EVERYTHING["meeting"], {"status": "booked"}).valid_values == ft.BOOKING_STATUSES
    refused(EVERYTHING["meeting"], {"status": "confirmed", "start": 5})


def test_documents_and_calculated_blocks():
    assert refused(EVERYTHING["contract_docs"], "anything").expected == "none"
    # a calculated value is a number (the form computes it; check_answers refuses it as input)
    assert check_value(EVERYTHING["total"], 7.5) == 7.5


def test_is_empty():
    assert all(ft.is_empty(v) for v in (None, "", [], {}))
    assert not any(ft.is_empty(v) for v in (0, False, " ", [None]))


# -- display ---------------------------------------------------------------------------


def test_display_reads_labels_names_and_joined_instances():
    assert display(EVERYTHING["full_name"], "Ada") == "Ada"
    assert display(EVERYTHING["country"], "de") == "Germany"
    assert display(DECISION, "changes") == "Request changes"
    assert display(EVERYTHING["topics"], ["billing", "sales"]) == "Billing, Sales"
    assert display(EVERYTHING["service_quality"], {"speed": "great", "friendliness": "ok"}) == (
        "Speed: Great, Friendliness: OK")
    assert display(EVERYTHING["line_items"], [{"item": "Widget", "amount": 2}, {"item": "Gadget"}]) == (
        "Widget / 2, Gadget")
    files = check_value(EVERYTHING["attachment"], [{"name": "a.pdf"}, {"name": "b.png"}])
    assert display(EVERYTHING["attachment"], files) == "a.pdf, b.png"
    assert display(EVERYTHING["newsletter"], True) == "Yes"
    assert display(EVERYTHING["newsletter"], False) == "No"
    assert display(EVERYTHING["total"], 7.0) == "7"
    assert display(EVERYTHING["total"], 7.5) == "7.5"
    assert display(EVERYTHING["quantity"], None) == ""


def test_display_of_payment_and_booking():
    assert display(EVERYTHING["deposit"], {"status": "paid", "amount": 40, "currency": "usd"}) == (
        "$40.00 USD · Paid")
    assert display(EVERYTHING["deposit"], {"status": "partially_refunded", "amount": 1234.5,
                                           "currency": "EUR"}) == "€1,234.50 EUR · Partially refunded"
    assert display(EVERYTHING["meeting"], {"status": "confirmed", "start": "2026-01-15T09:30:00.000Z",
                                           "eventTitle": "Intro call"}) == (
        "Intro call · 2026-01-15T09:30:00.000Z (confirmed)")


# -- calculate --------------------------------------------------------------------------


def test_calculate_arithmetic_over_answers():
    assert calculate("quantity * unit_price", {"quantity": 3, "unit_price": 2.5}) == 7.5
    assert calculate("quantity * unit_price", {"quantity": 4, "unit_price": 2.5}) == 10
    assert isinstance(calculate("quantity * unit_price", {"quantity": 4, "unit_price": 2.5}), int)
    assert calculate("(a + b) / 2 - -c", {"a": 1, "b": 2, "c": 1}) == 2.5
    assert calculate("+a", {"a": 3}) == 3
    assert calculate("a * 3", {"a": 0.1}) == 0.3  # rounded, not 0.30000000000000004


def test_calculate_missing_or_non_numeric_inputs_count_as_zero():
    assert calculate("quantity * unit_price", {}) == 0
    assert calculate("a + b", {"a": "12", "b": True}) == 0
    assert calculate("a + 1", {"a": float("nan")}) == 1


def test_calculate_division_by_zero_and_overflow_yield_none():
    assert calculate("a / b", {"a": 1, "b": 0}) is None
    assert calculate("a / (b - b)", {"a": 1, "b": 5}) is None
    assert calculate("a * b", {"a": 1e308, "b": 10}) is None


@pytest.mark.parametrize("formula", [
    "a ** 2", "a % 2", "a // 2", "abs(a)", "a.real", "a if b else c", "[a]", "'a' * 2", "True * 2",
    "__import__('os')", "a *", "", "a < b", "lambda: 1", "x" * 501,
])
def test_calculate_refuses_unsupported_expressions(formula):
    with pytest.raises(ValueError):
        calculate(formula, {"a": 2, "b": 3, "c": 4})
    with pytest.raises(ValueError):
        ft.validate_formula(formula)


# -- assign_keys --------------------------------------------------------------------------


def test_assign_keys_derives_unique_keys_from_titles():
    blocks = [
        {"type": "heading", "title": "Intro"},
        {"type": "text", "title": "What is your name?"},
        {"type": "text", "title": "What is your name?"},
        {"type": "email", "title": "What is your name?!"},
        {"type": "decision", "title": "Verdict"},
        {"type": "rating", "title": "Ünïcödé ✨"},
        {"type": "number"},
    ]
    keyed = assign_keys(blocks)
    assert [b.get("key") for b in keyed] == [None, "what_is_your_name", "what_is_your_name_2",
                                             "what_is_your_name_3", "decision", "n_c_d", "number"]
    assert all(ft.KEY_RE.match(b["key"]) for b in keyed if ft.is_question(b))
    assert "key" not in blocks[1], "the input is not mutated"


def test_assign_keys_never_changes_an_existing_key():
    once = assign_keys([{"type": "text", "title": "Name"}, {"type": "email", "title": "Email"}])
    renamed = [dict(once[0], title="Full legal name"), once[1], {"type": "text", "title": "Name"}]
    again = assign_keys(renamed)
    assert [b["key"] for b in again] == ["name", "email", "name_2"]
    assert assign_keys(again) == again, "keying is idempotent"


def test_assign_keys_avoids_keys_later_blocks_own():
    keyed = assign_keys([{"type": "text", "title": "Name"}, {"type": "text", "key": "name", "title": "Other"}])
    assert [b["key"] for b in keyed] == ["name_2", "name"]


def test_assign_keys_dedups_copied_keys_and_cleans_bad_ones():
    keyed = assign_keys([
        {"id": "a", "type": "text", "key": "name", "title": "Name"},
        {"id": "b", "type": "text", "key": "name", "title": "Name (copy)"},
        {"id": "c", "type": "text", "key": "my key!", "title": "Mine"},
    ])
    assert [b["key"] for b in keyed] == ["name", "name_2", "my_key"]
    # a copy placed before the published block: the published (frozen) block keeps its key
    keyed = assign_keys([
        {"id": "copy", "type": "text", "key": "name", "title": "Name (copy)"},
        {"id": "orig", "type": "text", "key": "name", "title": "Name"},
    ], frozen_ids={"orig"})
    assert [b["key"] for b in keyed] == ["name_2", "name"]


def test_assign_keys_keys_group_members_within_the_group():
    keyed = assign_keys([
        {"type": "text", "title": "Item"},
        {"type": "group", "title": "Line items", "members": [
            {"type": "text", "title": "Item"}, {"type": "number", "title": "Item"}]},
    ])
    assert keyed[0]["key"] == "item"
    assert keyed[1]["key"] == "line_items"
    assert [m["key"] for m in keyed[1]["members"]] == ["item", "item_2"]


# -- property: display never raises for an accepted value ---------------------------------

_NAMES = ["status", "amount", "currency", "amountRefunded", "start", "end", "eventTitle", "timeZone", "name",
          "size", "type", "url", "item", "speed", "friendliness", "x"]
_VALUES = ["de", "fr", "us", "basic", "premium", "billing", "sales", "price", "speed", "quality", "cat", "poor",
           "ok", "great", "paid", "refunded", "confirmed", "no_show", "approve", "USD", "eur", "2026-01-15",
           "09:30", "a@b.co", "https://x.test"]
_scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True)
            | st.sampled_from(_VALUES) | st.text(max_size=8))
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_NAMES) | st.text(max_size=3),
                                                                inner, max_size=5),
    max_leaves=20,
)
_blocks = st.sampled_from([*EVERYTHING.values(), DECISION])


def _keys(items: list[dict[str, Any]]) -> st.SearchStrategy[str]:
    return st.sampled_from([i["key"] for i in items])


def _shaped(block: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values close to what the field takes, with arbitrary JSON wherever a part is free,
    so that most draws get past check_value and reach display."""
    kind, optional = ft.field_type(block).kind, {}
    if kind == "choice":
        return _keys(ft.options_of(block))
    if kind == "multi":
        return st.lists(_keys(ft.options_of(block)), unique=True)
    if kind == "matrix":
        return st.dictionaries(_keys(block["rows"]), _keys(block["columns"]) | _scalars)
    if kind == "group":
        members = [m for m in block["members"] if ft.is_question(m)]
        return st.lists(st.dictionaries(_keys(members), _scalars | st.integers()), max_size=3)
    if kind == "file":
        return st.lists(st.fixed_dictionaries({"name": st.text(min_size=1)}, optional={
            "size": _scalars, "type": _scalars, "url": _scalars}), max_size=3)
    if kind in ("payment", "booking"):
        statuses = ft.PAYMENT_STATUSES if kind == "payment" else ft.BOOKING_STATUSES
        names = ["amount", "currency", "amountRefunded", "receiptUrl"] if kind == "payment" else [
            "start", "end", "timeZone", "eventTitle", "meetingUrl", "attendee"]
        optional = {n: _json for n in names}
        return st.fixed_dictionaries({"status": st.sampled_from(statuses)}, optional=optional)
    return _scalars | st.text() | st.integers() | st.floats()


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_display_never_raises_for_an_accepted_value(data):
    block = data.draw(_blocks, label="block")
    value = data.draw(_shaped(block) | _json, label="value")
    try:
        clean = check_value(block, value)
    except FieldValueError:
        return
    text = display(block, clean)
    assert isinstance(text, str)
    assert check_value(block, clean) == clean, "a stored value passes its own check again"


# -- answers against a form (check_answers) -------------------------------------------------------

GROUP_FORM = assign_keys([
    {"type": "group", "title": "People", "required": True, "members": [
        {"type": "text", "title": "Name", "required": True}, {"type": "email", "title": "Email"}]},
    {"type": "number", "title": "Count"},
    {"type": "calculated", "title": "Double", "formula": "count * 2"},
])


def test_check_answers_required_group_and_members():
    from formservice.domain.submissions import check_answers

    clean, errors = check_answers(GROUP_FORM, {"people": [{"name": "", "email": None}]}, require=True)
    assert "people" not in clean and errors["people"].reason == "REQUIRED"
    clean, errors = check_answers(GROUP_FORM, {"people": [{"name": "A"}, {"email": "b@x.test"}]}, require=True)
    assert list(errors) == ["people.1.name"] and errors["people.1.name"].reason == "REQUIRED"
    clean, errors = check_answers(GROUP_FORM, {"people": [{"name": "A"}], "count": 4}, require=True)
    assert errors == {} and clean == {"people": [{"name": "A"}], "count": 4, "double": 8}
    # a draft skips the required checks
    assert check_answers(GROUP_FORM, {}, require=False) == ({"double": 0}, {})


def test_check_answers_refuses_computed_and_unknown_keys():
    from formservice.domain.submissions import check_answers

    _, errors = check_answers(GROUP_FORM, {"double": 3, "nope": 1}, require=False)
    assert errors["double"].reason == "FIELD_NOT_ANSWERABLE"
    assert errors["nope"].reason == "UNKNOWN_FIELD_KEY" and errors["nope"].valid_values == ["count", "people"]


def test_broken_formula_does_not_block_a_submit():
    from formservice.domain.submissions import check_answers

    blocks = assign_keys([{"type": "number", "title": "A"}, {"type": "calculated", "title": "B", "formula": "a **"}])
    assert check_answers(blocks, {"a": 2}, require=True) == ({"a": 2}, {})
