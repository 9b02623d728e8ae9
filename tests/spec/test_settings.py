"""Form settings (spec: Resources > Form settings, rules 1-9; Endpoints > Form settings)
and translations.listEntries, over loopback against the seeded sandbox."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from formservice.domain.settings import password_matches
from formservice.tables import Form, TranslationEntry, Workspace

WRITABLE = {
    "language", "requireAuthentication", "showBranding", "captchaEnabled", "passwordEnabled",
    "notifyOnSubmission", "notificationEmails", "selfNotificationSubject", "selfNotificationEmailBody",
    "pdfGenerationEnabled", "showViewSubmissionButton", "respondentNotificationEnabled",
    "respondentNotificationTo", "respondentNotificationSubject", "respondentNotificationBody",
    "respondentNotificationPdfEnabled", "respondentReminderEnabled", "respondentReminderTo",
    "respondentReminderSubject", "respondentReminderBody", "respondentReminderRequiredFieldIds",
    "reminderSteps", "redirectUrl", "redirectQueryParams", "allowAnotherResponse",
    "maxSubmissionsPerRespondent", "editAfterSubmit", "maxEdits", "draftRetentionDays",
    "submissionRetentionDays", "emailDomainId",
}


# -- helpers ---------------------------------------------------------------------------


async def get(sb, ws: str = "pro", form: str = "Contact") -> dict[str, Any]:
    return (await sb.rpc("formSettings.get", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)).data


async def update(sb, ws: str = "pro", form: str = "Contact", **fields: Any):
    return await sb.rpc("formSettings.update", {"formId": sb.workspaces[ws].forms[form], **fields}, ws=ws)


async def question_ids(sb, ws: str = "pro", form: str = "Contact") -> dict[str, str]:
    """Question type -> block id (the first of each type) of a seeded form."""
    detail = (await sb.rpc("forms.get", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)).data
    ids: dict[str, str] = {}
    for q in detail["questions"]:
        ids.setdefault(q["inputType"], q["id"])
    return ids


async def entries(sb, ws: str = "pro", form: str = "Contact", **params: Any) -> list[dict[str, Any]]:
    """Every translation entry of a form, paging through with a small page size."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        p = {"formId": sb.workspaces[ws].forms[form], "limit": 7, **params}
        if cursor:
            p["cursor"] = cursor
        data = (await sb.rpc("translations.listEntries", p, ws=ws)).data
        items += data["items"]
        assert data["hasMore"] == (data["nextCursor"] is not None)
        if not data["hasMore"]:
            return items
        cursor = data["nextCursor"]


async def assert_refused_unchanged(sb, reply, code: str, status: int, ws: str = "pro", form: str = "Contact",
                                   *, before: dict[str, Any], **details: Any) -> None:
    """The update failed as expected and the stored settings are exactly as before."""
    reply.expect(code, status, **details)
    assert await get(sb, ws, form) == before


# -- formSettings.get ----------------------------------------------------------------------


async def test_get_defaults_before_any_save(sandbox):
    doc = await get(sandbox)
    assert doc["isDefault"] is True
    s = doc["settings"]
    assert set(s) == WRITABLE | {"hasPassword", "effectiveMaxEdits"}
    assert "password" not in s
    assert s["language"] == "en" and s["showBranding"] is True and s["notifyOnSubmission"] is True
    assert s["passwordEnabled"] is False and s["hasPassword"] is False
    assert s["reminderSteps"] == [] and s["redirectUrl"] is None and s["maxEdits"] == 0
    assert s["draftRetentionDays"] == 30 and s["submissionRetentionDays"] is None
    assert doc["defaultFromAddress"] == "noreply@form.formstep.test" == doc["fromAddress"]
    assert doc["payment"] == {"connected": False}
    assert [d["domain"] for d in doc["availableEmailDomains"]] == ["mail.pro.example.test"]
    assert doc["fixedDeletionAt"] is None


async def test_get_lists_only_verified_domains_and_payment(sandbox):
    doc = await get(sandbox, "business")
    assert [(d["domain"], d["verified"]) for d in doc["availableEmailDomains"]] == [
        ("mail.business.example.test", True)]
    assert doc["payment"] == {"connected": True}
    assert (await get(sandbox, "free"))["availableEmailDomains"] == []


async def test_foreign_form_is_403_and_unknown_form_404(sandbox):
    foreign = sandbox.free.forms["Contact"]
    for method, extra in [("formSettings.get", {}), ("formSettings.update", {"language": "de"}),
                          ("translations.listEntries", {})]:
        r = await sandbox.rpc(method, {"formId": foreign, **extra}, ws="pro")
        r.expect("FORBIDDEN", 403, field="formId", reason="FOREIGN_WORKSPACE")
        r = await sandbox.rpc(method, {"formId": "form_doesnotexist000000000", **extra}, ws="pro")
        r.expect("NOT_FOUND", 404, field="formId")
    assert (await get(sandbox, "free"))["isDefault"] is True


# -- formSettings.update: shape, partial update, isDefault ---------------------------------


async def test_partial_update_keeps_other_fields_and_clears_is_default(sandbox):
    defaults = (await get(sandbox))["settings"]
    r = await update(sandbox, language="de-ch")
    assert r.status == 200
    assert r.data == {**defaults, "language": "de-CH"}  # canonical casing, nothing else moved
    doc = await get(sandbox)
    assert doc["isDefault"] is False and doc["settings"] == r.data
    r2 = await update(sandbox, showBranding=False, notifyOnSubmission=False)
    assert r2.data == {**defaults, "language": "de-CH", "showBranding": False, "notifyOnSubmission": False}
    # another form of the workspace is untouched
    assert (await get(sandbox, form="Approval"))["isDefault"] is True


async def test_unknown_key_and_empty_update_are_refused(sandbox):
    before = await get(sandbox)
    r = await update(sandbox, lang="de")
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, reason="UNKNOWN_PARAM",
                                   field="lang")
    assert {"language", "password"} <= set(r.details["validKeys"])
    r = await update(sandbox, hasPassword=True)  # read-only in the result, not writable
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="hasPassword")
    r = await update(sandbox)
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, reason="NOTHING_TO_UPDATE")
    assert "reminderSteps" in r.details["validKeys"]
    r = await update(sandbox, showBranding="no")
    r.expect("VALIDATION_ERROR", 400, field="showBranding", reason="INVALID_TYPE", expectedType="boolean")
    r = await update(sandbox, showBranding=None)
    r.expect("VALIDATION_ERROR", 400, field="showBranding", reason="INVALID_TYPE", expectedType="boolean")


async def test_refused_update_changes_nothing(sandbox):
    """Valid fields sent with one bad field are not written either, whatever check refuses."""
    ids = await question_ids(sandbox)
    assert (await update(sandbox, language="fr", maxEdits=2)).status == 200
    before = await get(sandbox)
    bad_batches = [
        ({"maxEdits": 4}, "VALIDATION_ERROR", 400),  # params model
        ({"redirectUrl": "ftp://x.test"}, "VALIDATION_ERROR", 400),  # field format
        ({"respondentNotificationTo": ids["text"]}, "VALIDATION_ERROR", 400),  # field reference
        ({"emailDomainId": before["availableEmailDomains"][0]["id"]}, "UPGRADE_REQUIRED", 402),  # plan gate
        ({"password": "open sesame", "passwordEnabled": False}, "VALIDATION_ERROR", 400),  # cross-field
    ]
    for bad, code, status in bad_batches:
        r = await update(sandbox, language="it", showBranding=False, respondentNotificationSubject="Merci",
                         **bad)
        await assert_refused_unchanged(sandbox, r, code, status, before=before)
    assert not [e for e in await entries(sandbox) if e["key"].startswith("settings.")]
    # a refused first save leaves the form on defaults
    r = await update(sandbox, form="Approval", language="de", maxSubmissionsPerRespondent=1001)
    r.expect("VALIDATION_ERROR", 400, field="maxSubmissionsPerRespondent", reason="OUT_OF_RANGE")
    assert (await get(sandbox, form="Approval"))["isDefault"] is True


# -- rule 1: password --------------------------------------------------------------------------


async def test_rule1_password(sandbox):
    before = await get(sandbox)
    r = await update(sandbox, password="abc")
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="password",
                                   reason="OUT_OF_RANGE")
    r = await update(sandbox, passwordEnabled=True)  # a gate without a password
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="password",
                                   reason="PASSWORD_REQUIRED")
    r = await update(sandbox, password="open sesame", passwordEnabled=False)
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, reason="CONFLICTING_VALUES")

    s = (await update(sandbox, password="open sesame")).data
    assert s["passwordEnabled"] is True and s["hasPassword"] is True
    assert "open sesame" not in str(await get(sandbox))  # never returned
    with sandbox.service.session() as db:
        form = db.get(Form, sandbox.pro.forms["Contact"])
        assert password_matches(form, "open sesame") and not password_matches(form, "open sesamE")

    s = (await update(sandbox, passwordEnabled=False)).data  # gate off, password kept
    assert s["passwordEnabled"] is False and s["hasPassword"] is True
    s = (await update(sandbox, passwordEnabled=True)).data  # back on without resending it
    assert s["passwordEnabled"] is True

    r = await update(sandbox, password=None, passwordEnabled=True)
    r.expect("VALIDATION_ERROR", 400, reason="CONFLICTING_VALUES")
    s = (await update(sandbox, password=None)).data  # null clears the gate
    assert s["passwordEnabled"] is False and s["hasPassword"] is False
    r = await update(sandbox, passwordEnabled=True)
    r.expect("VALIDATION_ERROR", 400, field="password", reason="PASSWORD_REQUIRED")


# -- rule 2: reminder steps (Pro) ----------------------------------------------------------------


async def test_rule2_reminder_steps_sorted_deduplicated(sandbox):
    r = await update(sandbox, reminderSteps=["1w", "12h", "1d", "24h", "3d", "1d", "1w"])
    assert r.data["reminderSteps"] == ["12h", "1d", "3d", "1w"]  # by duration; 24h is 1d again
    assert (await get(sandbox))["settings"]["reminderSteps"] == ["12h", "1d", "3d", "1w"]
    assert (await update(sandbox, reminderSteps=[])).data["reminderSteps"] == []


async def test_rule2_reminder_steps_refused(sandbox):
    assert (await update(sandbox, reminderSteps=["2d"])).status == 200
    before = await get(sandbox)
    for i, bad in [(1, "2 days"), (0, "0d"), (1, "1m"), (0, "01d"), (1, "-1d"), (0, "")]:
        steps = ["1d", bad] if i == 1 else [bad]
        r = await update(sandbox, reminderSteps=steps)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before,
                                       field=f"reminderSteps.{i}", reason="INVALID_FORMAT")
    r = await update(sandbox, reminderSteps=["53w"])  # past a request's longest life
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="reminderSteps.0",
                                   reason="OUT_OF_RANGE")
    r = await update(sandbox, reminderSteps=["1h", "2h", "3h", "4h", "5h", "6h"])
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="reminderSteps",
                                   reason="OUT_OF_RANGE")
    r = await update(sandbox, reminderSteps=[1])
    r.expect("VALIDATION_ERROR", 400, field="reminderSteps.0", reason="INVALID_TYPE", expectedType="string")
    r = await update(sandbox, reminderSteps=None)
    r.expect("VALIDATION_ERROR", 400, field="reminderSteps", reason="INVALID_TYPE", expectedType="array")
    # five distinct steps after deduplication are fine
    r = await update(sandbox, reminderSteps=["1h", "2h", "3h", "4h", "5h", "5h", "1h"])
    assert r.data["reminderSteps"] == ["1h", "2h", "3h", "4h", "5h"]


async def test_reminders_are_pro(sandbox):
    ids = await question_ids(sandbox, "free")
    before = await get(sandbox, "free")
    for field, value in [("reminderSteps", ["1d"]), ("respondentReminderEnabled", True),
                         ("respondentReminderSubject", "Still there?"), ("respondentReminderTo", ids["email"])]:
        r = await update(sandbox, "free", **{field: value})
        await assert_refused_unchanged(sandbox, r, "UPGRADE_REQUIRED", 402, "free", before=before,
                                       feature="reminders", field=field, reason="PLAN_REQUIRED")
    # switching reminders off is never gated
    r = await update(sandbox, "free", reminderSteps=[], respondentReminderEnabled=False)
    assert r.status == 200 and r.data["reminderSteps"] == [] and r.data["respondentReminderEnabled"] is False
    pro_ids = await question_ids(sandbox)
    r = await update(sandbox, reminderSteps=["1d"], respondentReminderEnabled=True,
                     respondentReminderTo=pro_ids["email"])
    assert r.data["respondentReminderEnabled"] is True and r.data["respondentReminderTo"] == pro_ids["email"]


async def test_downgraded_workspace_keeps_settings_and_can_switch_off(sandbox):
    assert (await update(sandbox, reminderSteps=["3d", "1d"])).status == 200
    assert (await sandbox.helper("workspace.update", {"plan": "free"})).status == 200
    s = (await update(sandbox, language="nl")).data  # unrelated fields still writable
    assert s["reminderSteps"] == ["1d", "3d"] and s["effectiveMaxEdits"] == 3
    r = await update(sandbox, reminderSteps=["1w"])
    r.expect("UPGRADE_REQUIRED", 402, feature="reminders", field="reminderSteps")
    assert (await update(sandbox, reminderSteps=[])).data["reminderSteps"] == []


# -- rule 3: redirect ------------------------------------------------------------------------


async def test_rule3_redirect_url(sandbox):
    before = await get(sandbox)
    for bad in ["ftp://example.com/x", "example.com/thanks", "https://", "https://exa mple.com", "javascript:x"]:
        r = await update(sandbox, redirectUrl=bad)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="redirectUrl",
                                       reason="INVALID_FORMAT")
    assert (await update(sandbox, redirectUrl="https://example.com/thanks?a=1")).data["redirectUrl"] == \
        "https://example.com/thanks?a=1"
    assert (await update(sandbox, redirectUrl="")).data["redirectUrl"] is None
    assert (await update(sandbox, redirectUrl="http://127.0.0.1:9/done")).data["redirectUrl"] == \
        "http://127.0.0.1:9/done"
    assert (await update(sandbox, redirectUrl=None)).data["redirectUrl"] is None


async def test_rule3_allow_another_response_excludes_redirect(sandbox):
    r = await update(sandbox, redirectUrl="https://example.com/x", allowAnotherResponse=True)
    r.expect("VALIDATION_ERROR", 400, reason="MUTUALLY_EXCLUSIVE", field="allowAnotherResponse")
    assert "redirectUrl" in r.error["message"] and "allowAnotherResponse" in r.error["message"]
    assert (await update(sandbox, redirectUrl="https://example.com/x")).status == 200
    before = await get(sandbox)
    r = await update(sandbox, allowAnotherResponse=True)  # against the stored redirect
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, reason="MUTUALLY_EXCLUSIVE",
                                   field="allowAnotherResponse")
    s = (await update(sandbox, redirectUrl=None, allowAnotherResponse=True)).data  # switch in one call
    assert s["redirectUrl"] is None and s["allowAnotherResponse"] is True
    before = await get(sandbox)
    r = await update(sandbox, redirectUrl="https://example.com/y")  # against the stored flag
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, reason="MUTUALLY_EXCLUSIVE",
                                   field="redirectUrl")
    assert (await update(sandbox, redirectUrl="", allowAnotherResponse=True)).status == 200  # "" is no redirect


async def test_redirect_query_params(sandbox):
    ids = await question_ids(sandbox)
    params = [{"paramName": "who", "fieldId": ids["text"]}, {"paramName": "mail", "fieldId": ids["email"]}]
    assert (await update(sandbox, redirectQueryParams=params)).data["redirectQueryParams"] == params
    before = await get(sandbox)
    cases = [
        ([{"paramName": "x", "fieldId": "blk_nope"}], "redirectQueryParams.0.fieldId", "UNKNOWN_FIELD_ID"),
        ([params[0], {"paramName": "who", "fieldId": ids["email"]}], "redirectQueryParams.1.paramName",
         "DUPLICATE_VALUE"),
        ([{"paramName": "a b", "fieldId": ids["text"]}], "redirectQueryParams.0.paramName", "INVALID_FORMAT"),
        ([{"paramName": "a", "fieldId": ids["text"], "extra": 1}], "redirectQueryParams.0.extra", "UNKNOWN_PARAM"),
        ([{"paramName": "a"}], "redirectQueryParams.0.fieldId", "REQUIRED"),
    ]
    for value, field, reason in cases:
        r = await update(sandbox, redirectQueryParams=value)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field=field,
                                       reason=reason)
    r = await update(sandbox, redirectQueryParams=[{"paramName": "x", "fieldId": "blk_nope"}])
    assert ids["email"] in r.details["validValues"]


# -- rules 4 and 5: limits -------------------------------------------------------------------------


async def test_rule4_max_submissions_per_respondent(sandbox):
    assert (await update(sandbox, maxSubmissionsPerRespondent=1000)).data["maxSubmissionsPerRespondent"] == 1000
    assert (await update(sandbox, maxSubmissionsPerRespondent=0)).data["maxSubmissionsPerRespondent"] == 0
    before = await get(sandbox)
    for bad in (1001, -1):
        r = await update(sandbox, maxSubmissionsPerRespondent=bad)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before,
                                       field="maxSubmissionsPerRespondent", reason="OUT_OF_RANGE")
    r = await update(sandbox, maxSubmissionsPerRespondent="5")
    r.expect("VALIDATION_ERROR", 400, field="maxSubmissionsPerRespondent", reason="INVALID_TYPE",
             expectedType="integer")


async def test_rule5_max_edits_by_plan(sandbox):
    r = await update(sandbox, "free", maxEdits=0, editAfterSubmit=True)
    assert r.data["maxEdits"] == 0 and r.data["effectiveMaxEdits"] == 3  # 0 on Free means 3
    r = await update(sandbox, "pro", maxEdits=0)
    assert r.data["maxEdits"] == 0 and r.data["effectiveMaxEdits"] is None  # unlimited
    r = await update(sandbox, "business", maxEdits=2)
    assert r.data["maxEdits"] == 2 and r.data["effectiveMaxEdits"] == 2
    before = await get(sandbox, "business")
    r = await update(sandbox, "business", maxEdits=4)
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, "business", before=before, field="maxEdits",
                                   reason="OUT_OF_RANGE")
    # the stored 0 follows the plan: upgrading Free lifts the limit
    assert (await sandbox.helper("workspace.update", {"plan": "pro"}, ws="free")).status == 200
    assert (await get(sandbox, "free"))["settings"]["effectiveMaxEdits"] is None


# -- rule 6: retention ----------------------------------------------------------------------------


async def test_rule6_draft_retention(sandbox):
    assert (await update(sandbox, "free", draftRetentionDays=0)).data["draftRetentionDays"] == 0
    assert (await update(sandbox, "free", draftRetentionDays=36500)).data["draftRetentionDays"] == 36500
    before = await get(sandbox, "free")
    for bad in (36501, -1):
        r = await update(sandbox, "free", draftRetentionDays=bad)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, "free", before=before,
                                       field="draftRetentionDays", reason="OUT_OF_RANGE")
    assert (await update(sandbox, "free", draftRetentionDays=None)).data["draftRetentionDays"] == 30


async def test_rule6_submission_retention_is_business_and_clears_fixed_date(sandbox):
    for ws in ("free", "pro"):
        before = await get(sandbox, ws)
        r = await update(sandbox, ws, submissionRetentionDays=90)
        await assert_refused_unchanged(sandbox, r, "UPGRADE_REQUIRED", 402, ws, before=before,
                                       feature="submissionRetention", field="submissionRetentionDays")
        assert (await update(sandbox, ws, submissionRetentionDays=None)).status == 200  # the default is free

    form_id = sandbox.business.forms["Contact"]
    with sandbox.service.session() as db:  # the fixed date is set in the form builder, not over the API
        db.get(Form, form_id).fixed_deletion_at = 1_900_000_000_000
        db.commit()
    assert (await get(sandbox, "business"))["fixedDeletionAt"] == 1_900_000_000_000
    r = await update(sandbox, "business", submissionRetentionDays=36501)
    r.expect("VALIDATION_ERROR", 400, field="submissionRetentionDays", reason="OUT_OF_RANGE")
    assert (await get(sandbox, "business"))["fixedDeletionAt"] == 1_900_000_000_000  # refused: kept
    assert (await update(sandbox, "business", submissionRetentionDays=None)).status == 200
    assert (await get(sandbox, "business"))["fixedDeletionAt"] == 1_900_000_000_000  # null sets no rule
    assert (await update(sandbox, "business", submissionRetentionDays=90)).data["submissionRetentionDays"] == 90
    assert (await get(sandbox, "business"))["fixedDeletionAt"] is None
    assert (await update(sandbox, "business", submissionRetentionDays=None)).data["submissionRetentionDays"] is None


# -- rule 7: subjects and bodies, translations -------------------------------------------------------


async def test_rule7_templates(sandbox):
    body = "Hi {{name}},\n\nThanks for writing about {{ topic }}.\nSee you {soon}."
    s = (await update(sandbox, respondentNotificationBody=body, selfNotificationSubject="New: {{form.name}}")).data
    assert s["respondentNotificationBody"] == body  # stored as given
    assert s["selfNotificationSubject"] == "New: {{form.name}}"
    before = await get(sandbox)
    cases = [
        ("respondentNotificationSubject", "Hello {{name", "INVALID_PLACEHOLDER"),
        ("respondentNotificationBody", "Hello name}}", "INVALID_PLACEHOLDER"),
        ("selfNotificationEmailBody", "Hi {{first name}}", "INVALID_PLACEHOLDER"),
        ("respondentNotificationBody", "Hi {{}}", "INVALID_PLACEHOLDER"),
        ("selfNotificationSubject", "Line one\nline two", "INVALID_VALUE"),
        ("respondentNotificationSubject", "   ", "INVALID_VALUE"),
    ]
    for field, text, reason in cases:
        r = await update(sandbox, **{field: text})
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field=field,
                                       reason=reason)
    r = await update(sandbox, selfNotificationSubject="x" * 256)
    r.expect("VALIDATION_ERROR", 400, field="selfNotificationSubject", reason="OUT_OF_RANGE")
    assert (await update(sandbox, respondentNotificationBody=None)).data["respondentNotificationBody"] is None


async def test_rule7_respondent_texts_become_translatable(sandbox):
    assert [e for e in await entries(sandbox) if e["key"].startswith("settings.")] == []
    await update(sandbox, respondentNotificationSubject="Thanks, {{name}}", respondentNotificationBody="We got it.",
                 respondentReminderSubject="Still there?", selfNotificationSubject="New response",
                 selfNotificationEmailBody="Someone answered.")
    found = {e["key"]: e for e in await entries(sandbox)}
    settings_keys = sorted(k for k in found if k.startswith("settings."))
    assert settings_keys == ["settings.respondentNotificationBody", "settings.respondentNotificationSubject",
                             "settings.respondentReminderSubject"]  # owner emails are not translatable
    assert found["settings.respondentNotificationSubject"] == {
        "key": "settings.respondentNotificationSubject", "source": "Thanks, {{name}}", "translation": None}

    await update(sandbox, respondentNotificationSubject="Thank you, {{name}}", respondentReminderSubject=None)
    found = {e["key"]: e for e in await entries(sandbox)}
    assert found["settings.respondentNotificationSubject"]["source"] == "Thank you, {{name}}"
    assert "settings.respondentReminderSubject" not in found  # null removes its entry
    assert "settings.respondentNotificationBody" in found


async def test_list_entries_published_fields_and_translation(sandbox):
    items = await entries(sandbox)
    keys = [e["key"] for e in items]
    assert len(keys) == len(set(keys))  # paging neither repeats nor skips
    assert "field.topic.title" in keys and "field.email.title" in keys
    assert {e["key"]: e["source"] for e in items}["field.topic.option.sales"] == "Sales"
    form_id = sandbox.pro.forms["Contact"]
    with sandbox.service.session() as db:  # a translation made by a translator
        db.add(TranslationEntry(form_id=form_id, key="field.topic.option.sales", source="Sales",
                                translations={"de-CH": "Verkauf"}, updated_at=0))
        db.commit()
    by_key = {e["key"]: e for e in await entries(sandbox, language="de-ch")}
    assert by_key["field.topic.option.sales"]["translation"] == "Verkauf"
    assert by_key["field.topic.option.support"]["translation"] is None
    assert {e["key"]: e for e in await entries(sandbox)}["field.topic.option.sales"]["translation"] is None
    # never published: nothing of the draft to translate
    assert await entries(sandbox, form="Draft survey") == []
    r = await sandbox.rpc("translations.listEntries", {"formId": form_id, "language": "german!"})
    r.expect("VALIDATION_ERROR", 400, field="language", reason="INVALID_FORMAT")
    r = await sandbox.rpc("translations.listEntries", {"formId": form_id, "cursor": "nope"})
    r.expect("VALIDATION_ERROR", 400, field="cursor", reason="INVALID_CURSOR")
    with sandbox.service.session() as db:
        assert db.exec(select(TranslationEntry).where(TranslationEntry.form_id == form_id)).all()


# -- rule 8: respondent addresses ----------------------------------------------------------------------


async def test_rule8_respondent_notification_to(sandbox):
    ids = await question_ids(sandbox)
    assert (await update(sandbox, respondentNotificationTo=ids["email"])).data["respondentNotificationTo"] == \
        ids["email"]
    before = await get(sandbox)
    r = await update(sandbox, respondentNotificationTo=ids["text"])
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before,
                                   field="respondentNotificationTo", reason="NOT_AN_EMAIL_FIELD",
                                   validValues=[ids["email"]])
    r = await update(sandbox, respondentNotificationTo="email")  # the field key, not its id
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before,
                                   field="respondentNotificationTo", reason="UNKNOWN_FIELD_ID")
    assert ids["email"] in r.error["message"]
    other = await question_ids(sandbox, form="Everything")  # an email question of another form
    r = await update(sandbox, respondentNotificationTo=other["email"])
    r.expect("VALIDATION_ERROR", 400, field="respondentNotificationTo", reason="UNKNOWN_FIELD_ID")
    assert (await update(sandbox, respondentNotificationTo=None)).data["respondentNotificationTo"] is None


async def test_rule8_reminder_to_and_required_fields(sandbox):
    ids = await question_ids(sandbox)
    r = await update(sandbox, respondentReminderTo=ids["select"])
    r.expect("VALIDATION_ERROR", 400, field="respondentReminderTo", reason="NOT_AN_EMAIL_FIELD")
    s = (await update(sandbox, respondentReminderTo=ids["email"],
                      respondentReminderRequiredFieldIds=[ids["text"], ids["select"], ids["text"]])).data
    assert s["respondentReminderTo"] == ids["email"]
    assert s["respondentReminderRequiredFieldIds"] == [ids["text"], ids["select"]]
    before = await get(sandbox)
    r = await update(sandbox, respondentReminderRequiredFieldIds=[ids["text"], "blk_nope"])
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before,
                                   field="respondentReminderRequiredFieldIds.1", reason="UNKNOWN_FIELD_ID")


# -- rule 9: sender domain (Business) ------------------------------------------------------------------


async def test_rule9_email_domain(sandbox):
    doc = await get(sandbox, "business")
    verified = doc["availableEmailDomains"][0]
    s = (await update(sandbox, "business", emailDomainId=verified["id"])).data
    assert s["emailDomainId"] == verified["id"]
    assert (await get(sandbox, "business"))["fromAddress"] == f"noreply@{verified['domain']}"
    before = await get(sandbox, "business")
    with sandbox.service.session() as db:
        pending = next(d["id"] for d in db.get(Workspace, sandbox.business.id).email_domains if not d["verified"])
    r = await update(sandbox, "business", emailDomainId=pending)
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, "business", before=before,
                                   field="emailDomainId", reason="EMAIL_DOMAIN_NOT_VERIFIED",
                                   validValues=[verified["id"]])
    r = await update(sandbox, "business", emailDomainId="edom_unknown")
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, "business", before=before,
                                   field="emailDomainId", reason="UNKNOWN_EMAIL_DOMAIN",
                                   validValues=[verified["id"]])
    s = (await update(sandbox, "business", emailDomainId=None)).data
    assert s["emailDomainId"] is None
    assert (await get(sandbox, "business"))["fromAddress"] == "noreply@form.formstep.test"


async def test_rule9_custom_sender_is_business(sandbox):
    pro_domain = (await get(sandbox))["availableEmailDomains"][0]["id"]  # verified, but Pro
    before = await get(sandbox)
    r = await update(sandbox, emailDomainId=pro_domain)
    await assert_refused_unchanged(sandbox, r, "UPGRADE_REQUIRED", 402, before=before, feature="customSender",
                                   field="emailDomainId")
    assert (await update(sandbox, "free", emailDomainId=None)).status == 200  # resetting is never gated


# -- other fields --------------------------------------------------------------------------------------


async def test_language_and_notification_emails(sandbox):
    for tag, canon in [("en", "en"), ("pt-br", "pt-BR"), ("zh-hant-tw", "zh-Hant-TW"), ("es-419", "es-419")]:
        assert (await update(sandbox, language=tag)).data["language"] == canon
    before = await get(sandbox)
    for bad in ("english", "e", "en_US", "en-"):
        r = await update(sandbox, language=bad)
        await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="language",
                                       reason="INVALID_FORMAT")
    r = await update(sandbox, language=None)
    r.expect("VALIDATION_ERROR", 400, field="language", reason="INVALID_TYPE", expectedType="string")

    s = (await update(sandbox, notificationEmails=["a@example.test", "B@example.test", "A@Example.test"])).data
    assert s["notificationEmails"] == ["a@example.test", "B@example.test"]
    before = await get(sandbox)
    r = await update(sandbox, notificationEmails=["ok@example.test", "not-an-email"])
    await assert_refused_unchanged(sandbox, r, "VALIDATION_ERROR", 400, before=before, field="notificationEmails.1",
                                   reason="INVALID_FORMAT")
    assert (await update(sandbox, notificationEmails=[])).data["notificationEmails"] == []
