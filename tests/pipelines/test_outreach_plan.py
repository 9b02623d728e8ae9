"""The outreach plan without any I/O: every column target kind of the rules table, and
every prefill converter, with a cell it accepts and one it rejects; then whole sheets
planned into rows to send and rows rejected."""

from __future__ import annotations

from typing import Any

import pytest

from connector.models import FieldDescriptor, Option
from pipelines.outreach import COLUMN_RULES, RowParams, plan_rows, validate_row
from pipelines.outreach.plan import idempotency_key
from pipelines.outreach.values import CONVERTERS, Problem

OPTIONS = [Option(key="a", label="Alpha"), Option(key="b", label="Beta")]
FIELDS = [
    FieldDescriptor(key="name", type="text"), FieldDescriptor(key="email", type="email"),
    FieldDescriptor(key="topic", type="select", options=OPTIONS),
    FieldDescriptor(key="source", type="hidden", prefillable=False, context=True),
    FieldDescriptor(key="up", type="file", prefillable=False),
    FieldDescriptor(key="nda", type="documents", prefillable=False),
]

# (target kind, column, cell, mapping, what the params hold afterwards)
ACCEPTED: list[tuple[str, str, str, dict[str, str], dict[str, Any]]] = [
    ("email", "email", " ada@example.com ", {},
     {"recipient": {"email": "ada@example.com"}, "prefill": {"email": "ada@example.com"}}),
    ("name", "who", "Ada", {"who": "name"}, {"recipient": {"name": "Ada"}}),
    ("externalId", "externalId", " c-1 ", {}, {"externalId": "c-1"}),
    ("readonly", "readonly", "topic", {}, {"readonly": ["topic"], "prefill": {"topic": "a"}}),
    ("expiresAt", "expiresAt", "2030-01-01", {}, {"expiresAt": 1893456000000}),
    ("document", "document", "a.pdf", {}, {"documents": {"": "a.pdf"}}),
    ("document", "document.nda", "a.pdf", {}, {"documents": {"nda": "a.pdf"}}),
    ("metadata", "metadata.crm", "42", {}, {"metadata": {"crm": "42"}}),
    ("prefill", "topic", "alpha", {}, {"prefill": {"topic": "a"}}),
    ("prefill", "subject", "beta", {"subject": "prefill.topic"}, {"prefill": {"topic": "b"}}),
    ("context", "source", "web", {}, {"context": {"source": "web"}}),
    ("context", "origin", "web", {"origin": "context.source"}, {"context": {"source": "web"}}),
]

# (target kind, column, cell, mapping, the problem's text)
REJECTED: list[tuple[str, str, str, dict[str, str], str]] = [
    ("email", "email", "ada@", {}, "'ada@' is not an email address"),
    ("name", "who", "Ada", {"who": "name.first"}, "unknown mapping target 'name.first'"),
    ("externalId", "ref", "x", {"ref": "externalId.x"}, "unknown mapping target 'externalId.x'"),
    ("readonly", "readonly", "name", {}, "readonly key 'name' is not prefilled in this row"),
    ("expiresAt", "expiresAt", "later", {}, "'later' is not a date or time"),
    ("document", "document.name", "a.pdf", {}, "'name' is not a documents field of this form"),
    ("metadata", "crm", "42", {"crm": "metadata."}, "unknown mapping target 'metadata.'"),
    ("prefill", "topic", "Gamma", {}, "'Gamma' is not an option of topic"),
    ("prefill", "up", "f.pdf", {}, "'up' is a file field, which cannot be prefilled"),
    ("prefill", "x", "1", {"x": "prefill.nope"}, "'nope' is not a field of this form"),
    ("context", "x", "1", {"x": "context.name"}, "'name' is not a hidden field"),
]


def test_every_target_kind_of_the_rules_table_is_covered_both_ways() -> None:
    assert {case[0] for case in ACCEPTED} == set(COLUMN_RULES) == {case[0] for case in REJECTED}


@pytest.mark.parametrize(("kind", "column", "cell", "mapping", "want"), ACCEPTED,
                         ids=[f"{c[0]}:{c[1]}" for c in ACCEPTED])
def test_a_target_kind_accepts_its_cell(kind: str, column: str, cell: str, mapping: dict[str, str],
                                        want: dict[str, Any]) -> None:
    row = {column: cell, **({"topic": "Alpha"} if kind == "readonly" else {})}
    params, problems = validate_row(FIELDS, row, mapping=mapping)
    assert problems == []
    assert params == RowParams(**want)


@pytest.mark.parametrize(("kind", "column", "cell", "mapping", "want"), REJECTED,
                         ids=[f"{c[0]}:{c[1]}" for c in REJECTED])
def test_a_target_kind_rejects_a_bad_cell_naming_its_column(kind: str, column: str, cell: str,
                                                            mapping: dict[str, str], want: str) -> None:
    params, problems = validate_row(FIELDS, {column: cell}, mapping=mapping)
    assert params is None
    assert [(p.column, p.problem) for p in problems] == [(column, want)]
    assert problems[0].accepted, "every problem says what is accepted"


def test_an_empty_cell_is_left_out_and_an_unknown_column_is_refused_even_when_empty() -> None:
    params, problems = validate_row(FIELDS, {"topic": "", "email": "  "})
    assert problems == [] and params == RowParams()
    params, problems = validate_row(FIELDS, {"colour": ""})
    assert params is None and [(p.column, p.problem) for p in problems] == [("colour", "unknown column")]


# (field, cell accepted, its value, cell rejected, the problem's text)
CONVERSIONS: list[tuple[FieldDescriptor, str, Any, str, str]] = [
    (FieldDescriptor(key="f", type="radio", options=OPTIONS), "BETA", "b", "c", "'c' is not an option of f"),
    (FieldDescriptor(key="f", type="ranking", options=OPTIONS), "b, Alpha", ["b", "a"], "a, c",
     "'c' is not an option of f"),
    (FieldDescriptor(key="f", type="rating"), "4", 4, "four", "'four' is not a number"),
    (FieldDescriptor(key="f", type="switch"), "No", False, "maybe", "'maybe' is not a boolean"),
    (FieldDescriptor(key="f", type="date"), "2026-03-01T10:00", "2026-03-01", "soon", "'soon' is not a date"),
    (FieldDescriptor(key="f", type="url"), "https://x.test/a", "https://x.test/a", "x.test", "is not an http(s) URL"),
    (FieldDescriptor(key="f", type="time"), "09:30", "09:30", "9h", "'9h' is not a time"),
    (FieldDescriptor(key="f", type="matrix", rows=[Option(key="r", label="R")], columns=[Option(key="c", label="C")]),
     '{"r": "c"}', {"r": "c"}, '{"r": "x"}', "unknown matrix row or column in ['r']"),
    (FieldDescriptor(key="f", type="group", repeating=True), '[{"a": 1}]', [{"a": 1}], '{"a": 1}',
     "has the wrong JSON shape"),
]


def test_every_field_type_with_a_converter_is_covered() -> None:
    covered = {c[0].type for c in CONVERSIONS} | {"select", "decision", "checkbox", "number", "scale", "email"}
    assert covered == set(CONVERTERS)


@pytest.mark.parametrize(("f", "good", "value", "bad", "problem"), CONVERSIONS, ids=[c[0].type for c in CONVERSIONS])
def test_a_field_type_converts_a_good_cell_and_names_a_bad_one(f: FieldDescriptor, good: str, value: Any,
                                                               bad: str, problem: str) -> None:
    assert validate_row([f], {"f": good}) == (RowParams(prefill={"f": value}), [])
    params, problems = validate_row([f], {"f": bad})
    assert params is None and len(problems) == 1 and problem in problems[0].problem


def test_plan_numbers_rows_as_the_sheet_rejects_repeats_and_keys_the_rest() -> None:
    rows = [{"externalId": "c-1", "email": "a@x.test"}, {"externalId": "c-2", "topic": "Gamma"},
            {"externalId": "c-1", "email": "b@x.test"}, {"email": "c@x.test"}, {"email": "c@x.test"}]
    plan = plan_rows(rows, FIELDS, job="j", form_id="f")
    assert (plan.rows, plan.invalid) == (5, 3)
    assert [(r.number, r.identity) for r in plan.valid] == [(2, "ext:c-1"), (5, plan.valid[1].identity)]
    assert plan.valid[1].identity.startswith("hash:")
    assert [r.key for r in plan.valid] == [idempotency_key("j", "f", r.identity) for r in plan.valid]
    assert [(n, p.column, p.problem) for n, p in plan.rejected] == [
        (3, "topic", "'Gamma' is not an option of topic"),
        (4, "externalId", "same row identity as row 2"),
        (6, "", "same row identity as row 5"),
    ]
    assert plan_rows(rows, FIELDS, job="j", form_id="f") == plan, "the same inputs give the same plan"


def test_plan_asks_the_document_check_only_for_rows_with_documents_and_rejects_what_it_finds() -> None:
    asked: list[dict[str, str]] = []

    def check(params: RowParams) -> list[Problem]:
        asked.append(params.documents)
        return [Problem(column="document", problem="no such file")] if params.documents.get("") == "gone.pdf" else []

    rows = [{"email": "a@x.test"}, {"email": "b@x.test", "document": "ok.pdf"},
            {"email": "c@x.test", "document": "gone.pdf"}]
    plan = plan_rows(rows, FIELDS, job="j", form_id="f", check_documents=check)
    assert asked == [{"": "ok.pdf"}, {"": "gone.pdf"}]
    assert [r.number for r in plan.valid] == [2, 3]
    assert [(n, p.problem) for n, p in plan.rejected] == [(4, "no such file")]


def test_email_delivery_needs_an_email_in_every_row() -> None:
    plan = plan_rows([{"name": "Ada"}, {"email": "b@x.test"}], FIELDS, job="j", form_id="f", delivery="email")
    assert [r.number for r in plan.valid] == [3]
    assert [(n, p.column, p.problem) for n, p in plan.rejected] == [(2, "email", "missing email with email delivery")]


def test_a_bad_email_with_email_delivery_is_one_problem_not_two() -> None:
    plan = plan_rows([{"email": "not-an-email"}, {"E-mail": "nope", "name": "Bo"}, {"email": " ", "name": "Cy"}],
                     FIELDS, job="j", form_id="f", delivery="email")
    assert [(n, p.column, p.problem) for n, p in plan.rejected] == [
        (2, "email", "'not-an-email' is not an email address"), (3, "E-mail", "'nope' is not an email address"),
        (4, "email", "missing email with email delivery")]


def test_the_estimate_comes_from_the_pacing_and_progress_from_the_measured_rate() -> None:
    from pipelines.outreach import SendProgress
    from pipelines.outreach.show import RateMeter, duration, pace_seconds, progress_note

    assert [pace_seconds(n, 60) for n in (0, 1, 60, 61, 240)] == [0, 0, 0, 60, 180]
    assert (duration(30), duration(180), duration(7500)) == ("under a minute", "about 3 min", "about 2 h 5 min")
    now = [0.0]
    meter = RateMeter(lambda: now[0])
    assert progress_note(SendProgress(done=1, total=240, sent=1), meter) == "measuring the rate"
    for sent in range(1, 61):  # 30 creates a minute, whatever the configured cap
        meter.note(sent)
        now[0] += 2.0
    assert meter.per_minute() == 30.0
    assert progress_note(SendProgress(done=60, total=240, sent=60), meter) == "30/min, about 6 min left"
    waiting = progress_note(SendProgress(done=60, total=240, sent=60, waiting=41.2), meter)
    assert waiting == "30/min, about 7 min left; waiting for the rate limit, next in 42 s"


def test_without_a_terminal_progress_is_a_log_line_at_most_every_30_seconds() -> None:
    from pipelines.outreach import SendProgress
    from pipelines.outreach.show import progress_log

    now, lines = [0.0], []
    log = progress_log(lines.append, lambda: now[0])
    for done in range(1, 201):  # one row a second for 200 s
        log(SendProgress(done=done, total=200, sent=done))
        now[0] += 1.0
    assert len(lines) == 7  # at 0, 30, ..., 180 s
    assert lines[0] == "outreach: 1 of 200 rows, measuring the rate"
    assert lines[1] == "outreach: 31 of 200 rows, 60/min, about 3 min left"
