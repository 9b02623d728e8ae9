"""The sandbox's dialects: how much of each answer of ``/api/v1`` is sent.

``full`` (the default) answers with everything the sandbox knows, as the hosted service
does according to the notes. ``minimal`` answers with only what the spec
(form-collection-service-api.md) shows, so a client can be tried against the smallest
contract the service promises:

* a result keeps only the fields of the spec's tables for its method (:data:`RESULTS`);
  a field the spec marks "not shown" or leaves out is dropped. Methods the spec does not
  describe (notes-only methods such as ``webhooks.*``, ``requests.cancel``,
  ``documents.create``, ``folders.*``) keep the fields the notes show, which is what the
  sandbox sends: they have no entry here;
* an error keeps ``code``, ``message`` and the ``details`` members the spec lists; a
  ``reason`` the spec does not name moves into the message as its prefix
  (``REQUEST_NOT_PENDING: Request ... was canceled``), as services that put the reason in
  the message do.

The agent endpoint's tool results take the shape of the method a tool mirrors (and
``document_create`` the one the spec's agent section shows), and its failures the same
error shaping. All steps are pure functions applied at the bindings (formservice/rpc.py,
formservice/mcp.py), after the domain has answered: no domain method knows about dialects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from .errors import ApiError

Dialect = Literal["full", "minimal"]
DIALECTS: tuple[str, ...] = get_args(Dialect)

# A shape: the members an object keeps, each with the shape of its value (None keeps the
# value whole). A list takes its shape item by item.
Shape = Mapping[str, "Shape | None"]


def _keep(*names: str) -> dict[str, Shape | None]:
    return dict.fromkeys(names)


def _page(item: Shape, *extra: str) -> Shape:
    return {"items": item, **_keep("nextCursor", "hasMore", "canPaginate", *extra)}


# -- the spec's tables ("Resources and their fields", "Endpoints") ------------------------

FORM = _keep("id", "name", "folderId", "workspaceId", "isPublished", "publishedAt", "unpublishedAt", "createdAt",
             "lastEditedAt", "emoji")
QUESTION = _keep("id", "type", "inputType", "title", "metadata")
FORM_DETAIL: Shape = {**FORM, "questions": QUESTION,
                      **_keep("hasContent", "cover", "logo", "isDeleted", "trashedAt", "previewUrl")}
SETTINGS = _keep(
    "language", "requireAuthentication", "showBranding", "captchaEnabled", "passwordEnabled",
    "notifyOnSubmission", "notificationEmails", "selfNotificationSubject", "selfNotificationEmailBody",
    "pdfGenerationEnabled", "showViewSubmissionButton", "respondentNotificationEnabled",
    "respondentNotificationTo", "respondentNotificationSubject", "respondentNotificationBody",
    "respondentNotificationPdfEnabled", "respondentReminderEnabled", "respondentReminderTo",
    "respondentReminderSubject", "respondentReminderBody", "respondentReminderRequiredFieldIds", "reminderSteps",
    "redirectUrl", "redirectQueryParams", "allowAnotherResponse", "maxSubmissionsPerRespondent", "editAfterSubmit",
    "maxEdits", "draftRetentionDays", "submissionRetentionDays", "emailDomainId")  # never the password
SUBMISSION: Shape = {**_keep("id", "submittedAt", "isCompleted", "createdAt", "answers", "display"),
                     "translation": _keep("display")}


def _field() -> Shape:
    field: dict[str, Shape | None] = _keep("key", "type", "title", "required", "prefillable", "options", "rows",
                                           "columns", "context", "calculated", "repeating", "documents")
    field["members"] = field  # member descriptors have the same shape
    return field


FIELD = _field()
# "Fields shown" of a Request: the same on every read of a record.
REQUEST = _keep("id", "status", "url", "deliveryStatus", "externalId", "createdAt", "expiresAt", "answers",
                "display", "metadata")
EVENT: Shape = {**_keep("id", "type", "createdAt", "apiVersion", "test"),
                "data": {"form": _keep("id", "name", "snapshotId"),
                         "submission": _keep("id", "respondentEmail", "submittedAt", "updatedAt", "editCount",
                                             "pdfUrl", "language"),
                         **_keep("answers", "display")}}

RESULTS: dict[str, Shape] = {
    "forms.list": _page(FORM),
    "forms.get": FORM_DETAIL,
    "forms.create": _keep("id", "name", "workspaceId", "folderId", "isPublished", "createdAt", "previewUrl"),
    "forms.update": _keep("id", "name", "folderId", "emoji", "cover", "logo", "noChange"),
    "forms.publish": _keep("alreadyPublished", "warning"),
    "forms.unpublish": _keep("alreadyUnpublished"),
    "forms.delete": _keep("alreadyTrashed"),
    "forms.restore": {**FORM, **_keep("alreadyRestored")},
    "formSettings.get": {"settings": SETTINGS, **_keep("isDefault", "availableEmailDomains", "defaultFromAddress",
                                                       "payment")},
    "formSettings.update": SETTINGS,
    "submissions.list": _page(SUBMISSION, "formId", "formName"),
    "submissions.pdf": _keep("url", "filename", "contentType", "byteLength"),
    "submissions.sample": EVENT,
    "fields.list": {"items": FIELD, **_keep("published", "hasMore")},
    "requests.create": _keep("id", "status", "url", "deliveryStatus", "externalId", "deduplicated", "createdAt",
                             "expiresAt"),
    "requests.get": REQUEST,
    # The spec leaves the list's shape out, but its items are request records.
    "requests.list": _page(REQUEST),
}

# The agent endpoint: a tool that mirrors a method answers with that method's shape; the
# spec shows document_create's result itself. Other tools keep what the notes show.
TOOL_RESULTS: dict[str, Shape] = {
    "document_create": _keep("id", "name", "contentType", "size", "uploadUrl", "expiresAt"),
}

# -- the spec's Errors section --------------------------------------------------------------

DETAILS = frozenset({"reason", "field", "validKeys", "validValues", "expectedType", "feature", "retryAfterMs"})
REASONS = frozenset({"UNKNOWN_FIELD_KEY", "MONTHLY_ALLOWANCE_REACHED", "FREE_INVITATIONS_USED",
                     "DOCUMENT_NOT_UPLOADED"})


def shaped(value: Any, shape: Shape | None) -> Any:
    """``value`` cut down to ``shape`` (lists item by item; None keeps it whole)."""
    if shape is None:
        return value
    if isinstance(value, list):
        return [shaped(v, shape) for v in value]
    if isinstance(value, dict):
        return {k: shaped(v, shape[k]) for k, v in value.items() if k in shape}
    return value


def shape_result(dialect: str, method: str, data: Any) -> Any:
    """The ``data`` of a successful ``method`` call as ``dialect`` answers it."""
    if dialect != "minimal":
        return data
    return shaped(data, RESULTS.get(method))


def shape_tool_result(dialect: str, tool: str, method: str | None, data: Any) -> Any:
    """The ``data`` of a successful agent ``tool`` call (mirroring ``method``, if any) as
    ``dialect`` answers it."""
    if dialect != "minimal":
        return data
    return shaped(data, TOOL_RESULTS.get(tool) or (RESULTS.get(method) if method else None))


def shape_error(dialect: str, err: ApiError) -> ApiError:
    """``err`` as ``dialect`` answers it: under ``minimal`` only the spec's ``details``
    members are kept, and a reason the spec does not name leads the message instead."""
    if dialect != "minimal":
        return err
    details = {k: v for k, v in err.details.items() if k in DETAILS}
    message = err.message
    reason = details.get("reason")
    if reason is not None and reason not in REASONS:
        del details["reason"]
        if not message.startswith(f"{reason}:"):  # a message that leads with its reason keeps it once
            message = f"{reason}: {message}"
    return ApiError(err.code, message, **details)
