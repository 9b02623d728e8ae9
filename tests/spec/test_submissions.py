"""Spec "Submission item", "Submissions" (submissions.list, submissions.sample,
submissions.pdf) and the Events envelope as the sample shows it. Responses are stored
with the sandbox helper ``submissions.create`` (a public-link submit)."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from typing import Any

from sqlmodel import select

from formservice.tables import Integration, TranslationEntry

SQL_TS = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DATE_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}$")

# One answer for every answerable field of the seed's "Everything" form
EVERYTHING_ANSWERS: dict[str, Any] = {
    "full_name": "Ada Lovelace",
    "bio": "Mathematician.\nWrote the first program.",
    "email": "ada@example.test",
    "phone": "+44 20 7946 0000",
    "website": "https://ada.example.test",
    "quantity": 3,
    "unit_price": 2.5,
    "start_date": "2026-03-01",
    "start_time": "09:30",
    "satisfaction": 4,
    "likelihood": 9,
    "newsletter": True,
    "country": "de",
    "plan": "premium",
    "topics": ["billing", "sales"],
    "priorities": ["quality", "price", "speed"],
    "avatar": "cat",
    "service_quality": {"speed": "great", "friendliness": "ok"},
    "crm_id": "crm-42",
    "attachment": [{"name": "cv.pdf", "type": "application/pdf", "size": 1234,
                    "url": "https://files.example.test/cv.pdf"},
                   {"name": "photo.png", "type": "image/png", "size": 99, "url": "https://files.example.test/p"}],
    "signature": [{"name": "signature.png", "type": "image/png", "size": 512,
                   "url": "https://files.example.test/sig.png"}],
    "deposit": {"status": "paid", "amount": 40, "currency": "USD", "amountRefunded": 0,
                "receiptUrl": "https://pay.example.test/r/1", "paidAt": "2026-03-01T09:30:00.000Z",
                "refundedAt": None, "disputedAt": None, "provider": "stripe", "providerPaymentIntentId": "pi_1"},
    "meeting": {"status": "confirmed", "start": "2026-03-02T10:00:00.000Z", "end": "2026-03-02T10:30:00.000Z",
                "timeZone": "Europe/London", "attendee": {"name": "Ada", "email": "ada@example.test"},
                "provider": "cal", "providerBookingId": "bk_1", "eventTitle": "Intro call"},
    "line_items": [{"item": "Widget", "amount": 2}, {"item": "Gadget", "amount": 5}],
}


async def create(sandbox, form: str, answers: dict[str, Any], *, ws: str = "pro", completed: bool = True):
    return await sandbox.helper("submissions.create", {"formId": sandbox.workspaces[ws].forms[form],
                                                       "answers": answers, "completed": completed}, ws=ws)


async def created_id(sandbox, form: str, answers: dict[str, Any], **kw: Any) -> str:
    r = await create(sandbox, form, answers, **kw)
    assert r.status == 200, r.body
    return r.data["id"]


async def listing(sandbox, form: str, ws: str = "pro", **params: Any) -> dict[str, Any]:
    r = await sandbox.rpc("submissions.list", {"formId": sandbox.workspaces[ws].forms[form], **params}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def all_ids(sandbox, form: str, ws: str = "pro", **params: Any) -> list[str]:
    return [i["id"] for i in (await listing(sandbox, form, ws, limit=100, **params))["items"]]


async def field_map(sandbox, form: str, ws: str = "pro") -> dict[str, dict[str, Any]]:
    r = await sandbox.rpc("fields.list", {"formId": sandbox.workspaces[ws].forms[form]}, ws=ws)
    return {f["key"]: f for f in r.data["items"]}


def labels(items: list[dict[str, str]]) -> dict[str, str]:
    return {o["key"]: o["label"] for o in items}


# -- submissions.list: items ------------------------------------------------------------------


async def test_list_result_wrapper_has_no_totals(sandbox):
    data = await listing(sandbox, "Contact")
    assert {"formId", "formName", "items", "nextCursor", "hasMore", "canPaginate"} <= set(data)
    assert data["formId"] == sandbox.pro.forms["Contact"] and data["formName"] == "Contact"
    assert "total" not in data and "count" not in data
    assert data["hasMore"] is False and data["nextCursor"] is None and data["canPaginate"] is True


async def test_item_answers_and_display_for_every_field_type(sandbox):
    sub_id = await created_id(sandbox, "Everything", EVERYTHING_ANSWERS)
    item = (await listing(sandbox, "Everything"))["items"][0]
    assert item["id"] == sub_id
    assert item["isCompleted"] is True
    assert SQL_TS.match(item["submittedAt"]) and SQL_TS.match(item["createdAt"])
    # the implementation's extra members (clients ignore unknown fields)
    assert item["updatedAt"] is None and item["editCount"] == 0 and item["requestId"] is None
    assert item["respondentEmail"] == "ada@example.test"
    assert "translation" not in item

    answers, display = item["answers"], item["display"]
    expected = {**EVERYTHING_ANSWERS, "total": 3 * 2.5}  # the calculated field, computed by the form
    assert answers == expected
    assert set(display) == set(answers)
    assert all(isinstance(v, str) for v in display.values())

    f = await field_map(sandbox, "Everything")
    # choice: option key in answers, its label in display
    assert display["country"] == labels(f["country"]["options"])["de"] == "Germany"
    assert display["plan"] == labels(f["plan"]["options"])["premium"]
    assert display["avatar"] == labels(f["avatar"]["options"])["cat"]
    # multi-choice: an array of keys, labels joined
    topic = labels(f["topics"]["options"])
    assert display["topics"] == ", ".join(topic[k] for k in ["billing", "sales"])
    prio = labels(f["priorities"]["options"])
    assert display["priorities"] == ", ".join(prio[k] for k in ["quality", "price", "speed"])
    # matrix: row key -> column key
    rows, cols = labels(f["service_quality"]["rows"]), labels(f["service_quality"]["columns"])
    assert display["service_quality"] == f"{rows['speed']}: {cols['great']}, {rows['friendliness']}: {cols['ok']}"
    # repeating group: an array of instance objects, display joined text
    assert isinstance(answers["line_items"], list) and answers["line_items"][1] == {"item": "Gadget", "amount": 5}
    assert display["line_items"] == "Widget / 2, Gadget / 5"
    # files: {name, type, size, url} each; display = names
    for file in answers["attachment"] + answers["signature"]:
        assert set(file) == {"name", "type", "size", "url"} and isinstance(file["size"], int | float)
    assert display["attachment"] == "cv.pdf, photo.png"
    assert display["signature"] == "signature.png"
    # calculated and hidden
    assert answers["total"] == answers["quantity"] * answers["unit_price"] and display["total"] == "7.5"
    assert answers["crm_id"] == "crm-42" and display["crm_id"] == "crm-42"
    # the rest reads as written
    assert display["full_name"] == "Ada Lovelace" and display["quantity"] == "3"
    assert display["newsletter"] == "Yes"
    assert display["deposit"] == "$40.00 USD · Paid"
    assert "Intro call" in display["meeting"]
    assert set(answers) <= set(f), "answers are keyed by field key"


async def test_file_answers_are_normalised(sandbox):
    await created_id(sandbox, "Everything", {**_required(), "attachment": [{"name": "notes.txt", "size": 7}]})
    item = (await listing(sandbox, "Everything"))["items"][0]
    assert item["answers"]["attachment"] == [
        {"name": "notes.txt", "type": "application/octet-stream", "size": 7, "url": None}]
    assert item["display"]["attachment"] == "notes.txt"


def _required() -> dict[str, Any]:
    return {k: EVERYTHING_ANSWERS[k] for k in ("full_name", "email", "plan")}


async def test_calculated_field_is_computed_even_from_missing_inputs(sandbox):
    await created_id(sandbox, "Everything", {**_required(), "quantity": 4})
    item = (await listing(sandbox, "Everything"))["items"][0]
    assert item["answers"]["total"] == 0 and item["display"]["total"] == "0"
    await created_id(sandbox, "Everything", {**_required(), "quantity": 4, "unit_price": 1.25})
    assert (await listing(sandbox, "Everything"))["items"][0]["answers"]["total"] == 5


async def test_newest_first(sandbox):
    made = [await created_id(sandbox, "Contact", {"name": f"Person {i}", "email": f"p{i}@example.test"})
            for i in range(4)]
    items = (await listing(sandbox, "Contact"))["items"]
    assert [i["id"] for i in items[:4]] == made[::-1]
    stamps = [i["createdAt"] for i in items]
    assert stamps == sorted(stamps, reverse=True)


async def test_timestamps_are_sql_strings_of_the_service_clock(sandbox):
    advanced = (await sandbox.helper("clock.advance", {"ms": 3 * 24 * 3600 * 1000})).data["now"]
    await created_id(sandbox, "Contact", {"name": "Late", "email": "late@example.test"})
    item = (await listing(sandbox, "Contact"))["items"][0]
    for stamp in (item["createdAt"], item["submittedAt"]):
        assert SQL_TS.match(stamp), stamp
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp() * 1000
        assert abs(at - advanced) < 5000, (stamp, advanced)


# -- drafts and plans --------------------------------------------------------------------------


async def test_drafts_listed_on_pro_by_default(sandbox):
    draft = await created_id(sandbox, "Contact", {"name": "Half done"}, completed=False)
    items = (await listing(sandbox, "Contact"))["items"]
    assert items[0]["id"] == draft
    assert items[0]["isCompleted"] is False and items[0]["submittedAt"] is None
    assert SQL_TS.match(items[0]["createdAt"])
    seeded_drafts = [i for i in items[1:] if not i["isCompleted"]]
    assert len(seeded_drafts) == 1  # the seed's unfinished Contact response
    assert await all_ids(sandbox, "Contact", includeDrafts=True) == [i["id"] for i in items]


async def test_include_drafts_false_lists_completed_only(sandbox):
    draft = await created_id(sandbox, "Contact", {"name": "Half done"}, completed=False)
    items = (await listing(sandbox, "Contact", includeDrafts=False, limit=100))["items"]
    assert items and all(i["isCompleted"] for i in items)
    assert draft not in [i["id"] for i in items]
    everything = await all_ids(sandbox, "Contact")
    assert [i["id"] for i in items] == [i for i in everything if i in {x["id"] for x in items}]
    assert len(everything) - len(items) == 2


async def test_free_plan_lists_completed_only(sandbox):
    await created_id(sandbox, "Contact", {"name": "Half done"}, ws="free", completed=False)
    default = (await listing(sandbox, "Contact", ws="free", limit=100))["items"]
    assert default and all(i["isCompleted"] for i in default)
    assert await all_ids(sandbox, "Contact", ws="free", includeDrafts=False) == [i["id"] for i in default]


async def test_free_plan_asking_for_drafts_needs_an_upgrade(sandbox):
    form_id = sandbox.free.forms["Contact"]
    r = await sandbox.rpc("submissions.list", {"formId": form_id, "includeDrafts": True}, ws="free")
    r.expect("UPGRADE_REQUIRED", 402, feature="drafts")


# -- translation -----------------------------------------------------------------------------


def seed_translation(sandbox, form_id: str, key: str, source: str, translations: dict[str, str]) -> None:
    with sandbox.service.session() as s:
        s.add(TranslationEntry(form_id=form_id, key=key, source=source, translations=translations,
                               updated_at=sandbox.service.now()))
        s.commit()


async def test_translation_language_adds_translated_display(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    seed_translation(sandbox, form_id, "field.country.option.de", "Germany", {"de": "Deutschland"})
    seed_translation(sandbox, form_id, "field.service_quality.column.great", "Great", {"de": "Sehr gut"})
    await created_id(sandbox, "Everything", EVERYTHING_ANSWERS)

    item = (await listing(sandbox, "Everything", translationLanguage="de"))["items"][0]
    translated = item["translation"]["display"]
    assert item["display"]["country"] == "Germany" and translated["country"] == "Deutschland"
    assert translated["service_quality"] == "Speed: Sehr gut, Friendliness: OK"
    assert set(translated) == set(item["display"])
    untouched = set(item["display"]) - {"country", "service_quality"}
    assert {k: translated[k] for k in untouched} == {k: item["display"][k] for k in untouched}

    regional = (await listing(sandbox, "Everything", translationLanguage="de-AT"))["items"][0]
    assert regional["translation"]["display"]["country"] == "Deutschland"  # falls back to de
    other = (await listing(sandbox, "Everything", translationLanguage="fr"))["items"][0]
    assert other["translation"]["display"]["country"] == "Germany"  # no French entry: the source label
    assert "translation" not in (await listing(sandbox, "Everything"))["items"][0]


async def test_translation_language_is_checked(sandbox):
    r = await sandbox.rpc("submissions.list", {"formId": sandbox.pro.forms["Contact"],
                                               "translationLanguage": "German!"})
    r.expect("VALIDATION_ERROR", 400, field="translationLanguage")


# -- pagination -----------------------------------------------------------------------------


async def test_cursor_walk_has_no_gap_or_duplicate_while_submissions_arrive(sandbox):
    for i in range(8):
        await created_id(sandbox, "Contact", {"name": f"Before {i}", "email": f"b{i}@example.test"})
    before = await all_ids(sandbox, "Contact")
    assert len(before) == 12

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5}
        if cursor is not None:
            params["cursor"] = cursor
        page = await listing(sandbox, "Contact", **params)
        pages += 1
        seen += [i["id"] for i in page["items"]]
        assert page["canPaginate"] is True
        assert page["hasMore"] is (page["nextCursor"] is not None)
        if not page["hasMore"]:
            break
        assert isinstance(page["nextCursor"], str) and len(page["items"]) == 5
        cursor = page["nextCursor"]
        # newer responses arrive between pages: they sort before the cursor
        await created_id(sandbox, "Contact", {"name": f"During {pages}", "email": f"d{pages}@example.test"})
    assert pages == 3
    assert seen == before, "every submission once, in order"
    arrived = await all_ids(sandbox, "Contact")
    assert len(arrived) == 14 and arrived[2:] == before


async def test_limit_bounds_and_default(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    for bad in (0, 101, -1):
        r = await sandbox.rpc("submissions.list", {"formId": form_id, "limit": bad})
        r.expect("VALIDATION_ERROR", 400, field="limit", reason="OUT_OF_RANGE")
    r = await sandbox.rpc("submissions.list", {"formId": form_id, "limit": "5"})
    r.expect("VALIDATION_ERROR", 400, field="limit", reason="INVALID_TYPE", expectedType="integer")
    one = await listing(sandbox, "Contact", limit=1)
    assert len(one["items"]) == 1 and one["hasMore"] is True and one["nextCursor"]
    for i in range(20):
        await created_id(sandbox, "Contact", {"name": f"N{i}"}, completed=False)
    assert len((await listing(sandbox, "Contact"))["items"]) == 20  # default page size
    full = await listing(sandbox, "Contact", limit=100)
    assert len(full["items"]) == 24 and full["hasMore"] is False


async def test_bad_cursor(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    wrong_shape = base64.urlsafe_b64encode(json.dumps(["sub_x", 5]).encode()).decode().rstrip("=")
    for cursor in ("not-a-cursor", wrong_shape):
        r = await sandbox.rpc("submissions.list", {"formId": form_id, "cursor": cursor})
        r.expect("VALIDATION_ERROR", 400, field="cursor", reason="INVALID_CURSOR")


async def test_list_scoping(sandbox):
    r = await sandbox.rpc("submissions.list", {"formId": sandbox.business.forms["Contact"]}, ws="pro")
    r.expect("FORBIDDEN", 403, field="formId")
    r = await sandbox.rpc("submissions.list", {"formId": "form_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="formId")
    r = await sandbox.rpc("submissions.list", {})
    r.expect("VALIDATION_ERROR", 400, field="formId", reason="REQUIRED")


# -- refused answers store nothing -------------------------------------------------------------------


async def test_refused_answers_store_nothing(sandbox):
    before = await all_ids(sandbox, "Everything")
    f = await field_map(sandbox, "Everything")

    r = await create(sandbox, "Everything", {**_required(), "favourite_colour": "blue"})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_FIELD_KEY", field="answers.favourite_colour")
    assert "full_name" in r.details["validKeys"] and "crm_id" in r.details["validKeys"]
    assert set(r.details["validKeys"]) <= set(f)
    # keys that take no answer are not offered
    assert "total" not in r.details["validKeys"] and "contract_docs" not in r.details["validKeys"]

    r = await create(sandbox, "Everything", {**_required(), "country": "Germany"})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_ANSWER", field="answers.country",
             validValues=[o["key"] for o in f["country"]["options"]])

    r = await create(sandbox, "Everything", {**_required(), "topics": ["billing", "hr"]})
    r.expect("VALIDATION_ERROR", 400, field="answers.topics", validValues=["billing", "support", "sales"])

    r = await create(sandbox, "Everything", {"full_name": "Ada", "email": "ada@example.test"})
    r.expect("VALIDATION_ERROR", 400, reason="REQUIRED", field="answers.plan")

    r = await create(sandbox, "Everything", {**_required(), "line_items": [{"amount": 3}]})
    r.expect("VALIDATION_ERROR", 400, reason="REQUIRED", field="answers.line_items.0.item")

    r = await create(sandbox, "Everything", {**_required(), "total": 99})
    r.expect("VALIDATION_ERROR", 400, reason="FIELD_NOT_ANSWERABLE", field="answers.total")

    r = await create(sandbox, "Everything", {**_required(), "quantity": "3"})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_ANSWER", field="answers.quantity", expectedType="number")

    r = await create(sandbox, "Everything", {**_required(), "start_date": "2026-W03-1"})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_ANSWER", field="answers.start_date")

    assert await all_ids(sandbox, "Everything") == before


async def test_request_born_submission_is_listed_with_the_same_shapes(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    req = (await sandbox.rpc("requests.create", {"formId": form_id, "context": {"crm_id": "crm-7"}})).data
    answers = {k: v for k, v in EVERYTHING_ANSWERS.items() if k != "crm_id"}  # hidden: from context
    r = await sandbox.helper("requests.complete", {"requestId": req["id"], "answers": answers})
    assert r.status == 200, r.body
    item = (await listing(sandbox, "Everything"))["items"][0]
    assert item["requestId"] == req["id"] and item["isCompleted"] is True
    assert item["answers"] == {**answers, "crm_id": "crm-7", "total": 7.5}
    assert item["display"]["country"] == "Germany" and item["display"]["total"] == "7.5"


async def test_draft_submit_skips_the_required_check(sandbox):
    draft = await created_id(sandbox, "Everything", {"bio": "Only this"}, completed=False)
    item = (await listing(sandbox, "Everything"))["items"][0]
    assert item["id"] == draft and item["isCompleted"] is False
    assert item["answers"]["bio"] == "Only this"


# -- submissions.sample -------------------------------------------------------------------------


def assert_envelope(event: dict[str, Any]) -> None:
    assert set(event) == {"id", "type", "createdAt", "apiVersion", "test", "data"}
    assert isinstance(event["id"], str) and event["id"]
    assert event["type"] == "submission.completed"
    assert ISO_MS.match(event["createdAt"]), event["createdAt"]
    assert DATE_VERSION.match(event["apiVersion"]), event["apiVersion"]
    assert event["test"] is True
    data = event["data"]
    assert {"form", "submission", "answers", "display"} <= set(data)
    assert set(data["form"]) == {"id", "name", "snapshotId"}
    sub = data["submission"]
    assert set(sub) == {"id", "respondentEmail", "submittedAt", "updatedAt", "editCount", "pdfUrl", "language"}
    assert isinstance(sub["id"], str) and ISO_MS.match(sub["submittedAt"])
    assert sub["updatedAt"] is None and sub["editCount"] == 0 and sub["pdfUrl"] is None
    assert sub["language"] is None or isinstance(sub["language"], str)
    assert set(data["display"]) == set(data["answers"])
    assert all(isinstance(v, str) for v in data["display"].values())


async def test_sample_of_a_published_form(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    before = await all_ids(sandbox, "Everything")
    r = await sandbox.rpc("submissions.sample", {"formId": form_id})
    assert r.status == 200
    event = r.data
    assert_envelope(event)
    snapshot = (await sandbox.rpc("forms.publish", {"formId": form_id})).data
    assert snapshot["alreadyPublished"] is True
    assert event["data"]["form"] == {"id": form_id, "name": "Everything", "snapshotId": snapshot["snapshotId"]}
    f = await field_map(sandbox, "Everything")
    answerable = {k for k, d in f.items() if d["type"] != "documents"}
    answers = event["data"]["answers"]
    assert set(answers) == answerable, "keyed by the form's field keys"
    assert answers["total"] == answers["quantity"] * answers["unit_price"]
    assert answers["country"] in labels(f["country"]["options"])
    assert event["data"]["display"]["country"] == labels(f["country"]["options"])[answers["country"]]
    assert await all_ids(sandbox, "Everything") == before, "a sample stores nothing"


async def test_sample_of_an_unpublished_form_has_no_snapshot(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    event = (await sandbox.rpc("submissions.sample", {"formId": form_id})).data
    assert_envelope(event)
    assert event["data"]["form"] == {"id": form_id, "name": "Draft survey", "snapshotId": None}
    assert set(event["data"]["answers"]) == {"what_should_we_build_next", "how_do_you_rate_us"}

    published = (await sandbox.rpc("forms.publish", {"formId": form_id})).data
    event = (await sandbox.rpc("submissions.sample", {"formId": form_id})).data
    assert event["data"]["form"]["snapshotId"] == published["snapshotId"] and published["snapshotId"]
    assert set(event["data"]["answers"]) == set(await field_map(sandbox, "Draft survey"))

    assert (await sandbox.rpc("forms.unpublish", {"formId": form_id})).status == 200
    event = (await sandbox.rpc("submissions.sample", {"formId": form_id})).data
    assert event["data"]["form"]["snapshotId"] is None


async def test_sample_scoping(sandbox):
    r = await sandbox.rpc("submissions.sample", {"formId": sandbox.free.forms["Everything"]}, ws="pro")
    r.expect("FORBIDDEN", 403, field="formId")
    r = await sandbox.rpc("submissions.sample", {"formId": "form_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="formId")


# -- submissions.pdf ----------------------------------------------------------------------------


def assert_valid_pdf(data: bytes) -> None:
    """The bytes are a PDF whose cross-reference table points at its objects."""
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    xref = int(re.search(rb"startxref\s+(\d+)", data).group(1))
    assert data[xref:xref + 4] == b"xref"
    count = int(re.match(rb"xref\s+0 (\d+)", data[xref:]).group(1))
    rows = data[xref:].split(b"\n")[2:2 + count]
    for number, row in enumerate(rows[1:], start=1):
        offset = int(row[:10])
        assert data[offset:].startswith(f"{number} 0 obj".encode()), number


async def test_pdf_of_a_completed_submission_with_a_pdf_integration(sandbox):
    long_message = "Please call me back (after 5pm). " * 12 + "\nThanks — Ada ✓"
    sub_id = await created_id(sandbox, "Contact", {"name": "Ada", "email": "ada@example.test", "topic": "sales",
                                                   "message": long_message}, ws="business")
    r = await sandbox.rpc("submissions.pdf", {"formId": sandbox.business.forms["Contact"], "submissionId": sub_id},
                          ws="business")
    assert r.status == 200, r.body
    pdf = r.data
    assert set(pdf) == {"url", "filename", "contentType", "byteLength"}
    assert pdf["contentType"] == "application/pdf"
    assert pdf["filename"].endswith(".pdf") and sub_id in pdf["filename"]
    assert isinstance(pdf["byteLength"], int) and pdf["byteLength"] > 0
    async with sandbox.http.get(pdf["url"]) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/pdf")
        body = await resp.read()
    assert body.startswith(b"%PDF") and len(body) == pdf["byteLength"]
    assert_valid_pdf(body)
    assert b"Please call me back \\(after 5pm\\)." in body


async def test_pdf_needs_the_integration_to_be_active_still(sandbox):
    form_id = sandbox.business.forms["Contact"]
    sub_id = await created_id(sandbox, "Contact", {"name": "Ada", "email": "ada@example.test"}, ws="business")
    params = {"formId": form_id, "submissionId": sub_id}
    assert (await sandbox.rpc("submissions.pdf", params, ws="business")).status == 200
    with sandbox.service.session() as s:
        for integration in s.exec(select(Integration).where(Integration.form_id == form_id)):
            integration.active = False
            s.add(integration)
        s.commit()
    r = await sandbox.rpc("submissions.pdf", params, ws="business")
    r.expect("NOT_FOUND", 404, reason="PDF_NOT_RETAINED")
    later = await created_id(sandbox, "Contact", {"name": "Bob", "email": "bob@example.test"}, ws="business")
    r = await sandbox.rpc("submissions.pdf", {"formId": form_id, "submissionId": later}, ws="business")
    r.expect("NOT_FOUND", 404, reason="PDF_NOT_RETAINED")


async def test_pdf_not_retained_without_an_integration(sandbox):
    sub_id = await created_id(sandbox, "Contact", {"name": "Ada", "email": "ada@example.test"})
    r = await sandbox.rpc("submissions.pdf", {"formId": sandbox.pro.forms["Contact"], "submissionId": sub_id})
    r.expect("NOT_FOUND", 404, reason="PDF_NOT_RETAINED", field="submissionId")


async def test_pdf_not_retained_for_submissions_before_the_integration(sandbox):
    form_id = sandbox.business.forms["Contact"]
    seeded = [i for i in (await listing(sandbox, "Contact", ws="business"))["items"] if i["isCompleted"]]
    r = await sandbox.rpc("submissions.pdf", {"formId": form_id, "submissionId": seeded[0]["id"]}, ws="business")
    r.expect("NOT_FOUND", 404, reason="PDF_NOT_RETAINED")


async def test_pdf_of_a_draft_or_another_forms_submission_is_not_found(sandbox):
    form_id = sandbox.business.forms["Contact"]
    draft = await created_id(sandbox, "Contact", {"name": "Half"}, ws="business", completed=False)
    r = await sandbox.rpc("submissions.pdf", {"formId": form_id, "submissionId": draft}, ws="business")
    r.expect("NOT_FOUND", 404, field="submissionId", reason="SUBMISSION_NOT_COMPLETED")
    other = await created_id(sandbox, "Everything", _required(), ws="business")
    r = await sandbox.rpc("submissions.pdf", {"formId": form_id, "submissionId": other}, ws="business")
    r.expect("NOT_FOUND", 404, field="submissionId")
    r = await sandbox.rpc("submissions.pdf", {"formId": form_id, "submissionId": "sub_0000000000000000000000"},
                          ws="business")
    r.expect("NOT_FOUND", 404, field="submissionId")


async def test_pdf_scoping_and_params(sandbox):
    sub_id = await created_id(sandbox, "Contact", {"name": "Ada", "email": "ada@example.test"}, ws="business")
    r = await sandbox.rpc("submissions.pdf", {"formId": sandbox.business.forms["Contact"], "submissionId": sub_id},
                          ws="pro")
    r.expect("FORBIDDEN", 403, field="formId")
    r = await sandbox.rpc("submissions.pdf", {"formId": sandbox.business.forms["Contact"]}, ws="business")
    r.expect("VALIDATION_ERROR", 400, field="submissionId", reason="REQUIRED")
