"""aiohttp handlers of the recipient pages: ``/r/{token}`` (request links),
``/f/{token}`` (share links) and ``/preview/{form_id}``. HTTP only: reading the posted
form and cookies, choosing the page and its status; the rules live in :mod:`.flow` and
in the domain modules."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiDict, MultiDictProxy
from sqlmodel import Session

from ..domain import fieldtypes, sharelinks, translation_drafts
from ..errors import ApiError
from ..rpc import SERVICE_KEY
from ..service import Service
from ..tables import Form, Request
from . import flow
from .parse import instance_indices, parse_form
from .render import STATIC, FormPage, render

HEADERS = {
    "Cache-Control": "no-store",  # pages carry prefilled personal data
    "Referrer-Policy": "no-referrer",  # the link token is the respondent's credential
    "X-Content-Type-Options": "nosniff",
}
DRAFT_COOKIE_DAYS = 30


def html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8", headers=HEADERS)


def see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={**HEADERS, "Location": location})


def closed_page(page: flow.Closed) -> web.Response:
    return html(render("closed.html", title=page.title, heading=page.title, message=page.message,
                       state=page.state), page.status)


def _service(request: web.Request) -> Service:
    return request.app[SERVICE_KEY]


def _language(form: Form, req: Request | None = None) -> str:
    return (req.language if req else None) or (form.settings or {}).get("language") or "en"


def _documents(session: Session, req: Request | None, blocks: list[dict[str, Any]],
               base_url: str) -> dict[str, list[dict[str, Any]]]:
    return {b["key"]: flow.documents_of(session, req, b, base_url) for b in blocks
            if b.get("type") == "documents" and b.get("key")}


def _group_sizes(blocks: list[dict[str, Any]], data: MultiDict[Any] | None, add: str | None) -> dict[str, int]:
    """Instances to draw per repeating group: as many as were posted, one more for the
    group whose "add another" button was pressed."""
    if data is None:
        return {}
    return {b["key"]: len(instance_indices(data, b["key"])) + (1 if add == b["key"] else 0)
            for b in blocks if fieldtypes.is_question(b) and b["type"] == "group" and b.get("key")}


def _page(session: Session, blocks: list[dict[str, Any]], values: dict[str, Any], base_url: str, *,
          req: Request | None = None, errors: dict[str, str] | None = None,
          sizes: dict[str, int] | None = None) -> FormPage:
    shown = {**((req.prefill or {}) if req else {}), **values}
    if req is not None and req.language:  # titles and option labels in the request's language
        blocks = translation_drafts.translate_blocks(
            blocks, translation_drafts.published_texts(session, req.form_id, req.language))
    return FormPage(blocks=blocks, values=shown, errors=errors or {},
                    readonly_keys=set((req.readonly_keys or []) if req else []),
                    computed=flow.computed_values(blocks, shown), documents=_documents(session, req, blocks, base_url),
                    group_sizes=sizes or {})


def _form(form: Form, page: FormPage, status: int = 200, *, req: Request | None = None, notice: str | None = None,
          general_error: str | None = None, can_save_draft: bool = True) -> web.Response:
    return html(render("form.html", title=form.name, form_name=form.name, page=page, notice=notice,
                       general_error=general_error, can_save_draft=can_save_draft,
                       lang=_language(form, req)), status)


def _thanks(form: Form, blocks: list[dict[str, Any]], display: dict[str, Any], *, req: Request | None = None,
            edit_url: str | None = None, another_url: str | None = None) -> web.Response:
    return html(render("thanks.html", title=f"Thank you: {form.name}", form_name=form.name,
                       rows=flow.summary(blocks, display), edit_url=edit_url, another_url=another_url,
                       lang=_language(form, req)))


def _store_uploads(session: Session, blocks: list[dict[str, Any]], data: MultiDictProxy[Any], now: int,
                   base_url: str) -> tuple[MultiDict[Any], dict[str, str]]:
    """The posted data with every uploaded file stored and replaced by its JSON file
    object (what :func:`parse_form` reads), and the uploads refused by field key."""
    out: MultiDict[Any] = MultiDict()
    errors: dict[str, str] = {}
    file_keys = {b["key"] for b in blocks if fieldtypes.is_question(b) and b.get("key")
                 and fieldtypes.field_type(b).kind == "file"}
    for name, value in data.items():
        if not isinstance(value, web.FileField):
            out.add(name, value)
            continue
        content = value.file.read()
        if name not in file_keys or (not value.filename and not content):
            continue  # an empty file input, or a file posted for a field that takes none
        if len(content) > flow.MAX_UPLOAD_BYTES:
            errors[name] = f"{value.filename} is larger than 25 MB; attach a smaller file."
            continue
        stored = flow.store_upload(session, value.filename or "upload", value.content_type, content, now, base_url)
        out.add(name, json.dumps(stored))
    return out, errors


def _field_of(err: ApiError) -> str:
    """The answer key an ApiError names (``answers.<key>`` -> ``<key>``), or ""."""
    field = str(err.details.get("field", ""))
    return field.removeprefix("answers.") if field.startswith("answers.") else ""


@dataclass
class Posted:
    """A posted form page: its answers, the button pressed and the group sizes to draw."""

    data: MultiDict[Any]
    answers: dict[str, Any]
    upload_errors: dict[str, str]
    action: str  # submit | save (| unlock on the password page)
    add: str | None  # the repeating group whose "add another" button was pressed
    sizes: dict[str, int]


def read_posted(session: Session, blocks: list[dict[str, Any]], data: MultiDictProxy[Any], now: int,
                base_url: str) -> Posted:
    """Store the uploads (committed at once, so a page drawn again still holds them) and
    parse the answers of a posted form page."""
    posted, upload_errors = _store_uploads(session, blocks, data, now, base_url)
    session.commit()
    add, action = data.get("__add"), data.get("__action")
    add = add if isinstance(add, str) and add else None
    return Posted(posted, parse_form(blocks, posted), upload_errors, action if isinstance(action, str) else "submit",
                  add, _group_sizes(blocks, posted, add))


# -- request links ------------------------------------------------------------------


async def request_get(request: web.Request) -> web.Response:
    """The request's page: its snapshot's form with the prefill (and a saved draft)
    filled in. The first view marks the request opened."""
    service = _service(request)
    now = service.now()
    with service.session() as s:
        found = flow.open_request(s, request.match_info["token"], now)
        if isinstance(found, flow.Closed):
            return closed_page(found)
        flow.mark_opened(found.req, now)
        s.commit()
        page = _page(s, found.blocks, flow.initial_values(found.req), service.base_url, req=found.req)
        notice = "Your saved draft was restored." if found.req.draft else None
        return _form(found.form, page, req=found.req, notice=notice)


async def request_post(request: web.Request) -> web.Response:
    """Submit, save a draft, or add a group instance (``__add``). A closed link stores
    nothing and answers with its page; field problems re-draw the page with 422."""
    service = _service(request)
    data = await request.post()
    now, base = service.now(), service.base_url
    token = request.match_info["token"]
    with service.session() as s:
        found = flow.open_request(s, token, now)
        if isinstance(found, flow.Closed):
            return closed_page(flow.closed(found.state, posted=True))
        req = found.req
        posted = read_posted(s, found.blocks, data, now, base)
        answers = flow.recipient_answers(req, posted.answers)
        values = {**flow.initial_values(req), **answers}

        def again(errors: dict[str, str] | None = None, status: int = 200, **kw: Any) -> web.Response:
            page = _page(s, found.blocks, values, base, req=req, errors=errors, sizes=posted.sizes)
            return _form(found.form, page, status, req=req, **kw)

        if posted.add:
            return again()
        draft = posted.action == "save"
        if posted.upload_errors:
            merged = flow.merged_answers(req, answers)
            return again({**flow.field_errors(found.blocks, merged, require=not draft), **posted.upload_errors}, 422)
        if draft:
            errors = flow.save_draft(s, found, answers, now)
            if errors:
                s.rollback()
                return again(errors, 422)
            s.commit()
            return again(notice="Your draft was saved. Open this link again to continue.")
        try:
            sub, errors = flow.submit(s, service, found, answers, now, base)
        except ApiError as err:
            s.rollback()
            if err.code != "VALIDATION_ERROR":
                fresh = flow.open_request(s, token, now)
                if isinstance(fresh, flow.Closed):  # the link closed while the page was open
                    return closed_page(flow.closed(fresh.state, posted=True))
                return again(None, err.status, general_error=err.message)
            field = _field_of(err)
            return again({field: err.message} if field else None, 422, general_error=None if field else err.message)
        if sub is None:
            s.rollback()
            return again(errors, 422)
        s.commit()
        return _thanks(found.form, found.blocks, sub.display or {}, req=req)


# -- share links ----------------------------------------------------------------------


def _password_cookie_name(token: str) -> str:
    return f"fs_pw_{token}"


def _draft_cookie_name(token: str) -> str:
    return f"fs_draft_{token}"


def _password_page(form: Form, status: int = 200, error: str | None = None) -> web.Response:
    return html(render("password.html", title=form.name, form_name=form.name, error=error,
                       lang=_language(form)), status)


def _cookie_path(token: str) -> str:
    return f"/f/{token}"


async def share_get(request: web.Request) -> web.Response:
    """A share link's page: the published form (behind the password gate when the form
    has one), with the respondent's saved draft, or, with ``?edit=<edit token>``, a sent
    response to edit."""
    service = _service(request)
    now, base = service.now(), service.base_url
    token = request.match_info["token"]
    with service.session() as s:
        found = flow.open_share_link(s, token, now)
        if isinstance(found, flow.Closed):
            return closed_page(found)
        if not flow.unlocked(s, found, request.cookies.get(_password_cookie_name(token))):
            return _password_page(found.form)
        edit = request.query.get("edit")
        notice = None
        if edit is not None:
            sent = flow.sent_submission(s, found.form, edit)
            if sent is None:
                return closed_page(flow.CLOSED["unknown-edit"])
            values = sent.answers or {}
            notice = "You are editing the response you sent."
        else:
            draft = flow.draft_from_cookie(s, found, request.cookies.get(_draft_cookie_name(token)))
            values = (draft.answers or {}) if draft else {}
            notice = "Your saved draft was restored." if draft else None
        page = _page(s, found.blocks, values, base)
        return _form(found.form, page, notice=notice, can_save_draft=edit is None)


async def share_post(request: web.Request) -> web.Response:
    """Unlock the password gate (``password``), save a draft, submit, or send an edit
    (``?edit=<edit token>``). A closed link stores nothing and answers with its page."""
    service = _service(request)
    data = await request.post()
    now, base = service.now(), service.base_url
    token = request.match_info["token"]
    with service.session() as s:
        found = flow.open_share_link(s, token, now)
        if isinstance(found, flow.Closed):
            return closed_page(found)
        if data.get("__action") == "unlock":
            password = data.get("password")
            if not isinstance(password, str) or not sharelinks.password_ok(found.form, password):
                return _password_page(found.form, 403, "That password is not right. Try again.")
            resp = see_other(request.path_qs)
            resp.set_cookie(_password_cookie_name(token), flow.password_cookie(s, found), path=_cookie_path(token),
                            httponly=True, samesite="Lax", secure=request.secure)
            return resp
        if not flow.unlocked(s, found, request.cookies.get(_password_cookie_name(token))):
            return _password_page(found.form, 403, "Enter the form's password first.")
        edit = request.query.get("edit")
        draft = flow.draft_from_cookie(s, found, request.cookies.get(_draft_cookie_name(token)))
        posted = read_posted(s, found.blocks, data, now, base)
        answers = posted.answers
        stored = (flow.sent_submission(s, found.form, edit) if edit else draft)
        values = {**((stored.answers or {}) if stored else {}), **answers}
        completed = posted.action != "save" or edit is not None

        def again(errors: dict[str, str] | None = None, status: int = 200, **kw: Any) -> web.Response:
            page = _page(s, found.blocks, values, base, errors=errors, sizes=posted.sizes)
            return _form(found.form, page, status, can_save_draft=edit is None, **kw)

        if posted.add:
            return again()
        errors = {**flow.field_errors(found.blocks, values, require=completed), **posted.upload_errors}
        if errors:
            return again(errors, 422)
        try:
            sub = sharelinks.save_public(s, found.link, found.form, answers, now, completed=completed,
                                         submission_id=None if edit else (draft.id if draft else None),
                                         edit_token=edit, base_url=base)
        except ApiError as err:
            s.rollback()
            field = _field_of(err)
            if err.code == "VALIDATION_ERROR" and field:
                return again({field: err.message}, 422)
            return again(None, 422 if err.code == "VALIDATION_ERROR" else err.status, general_error=err.message)
        s.commit()
        if not completed:
            resp = again(notice="Your draft was saved. Open this link again on this device to continue.")
            resp.set_cookie(_draft_cookie_name(token), flow.draft_cookie(s, found, sub.id), path=_cookie_path(token),
                            max_age=DRAFT_COOKIE_DAYS * 86400, httponly=True, samesite="Lax", secure=request.secure)
            return resp
        target = sharelinks.redirect_for(found.form, sub)
        if target is not None:
            resp = see_other(target)
        else:
            another = f"/f/{token}" if flow.another_response_allowed(s, found.form) else None
            resp = _thanks(found.form, found.blocks, sub.display or {},
                           edit_url=sharelinks.edit_url(found.link, sub, base), another_url=another)
        resp.del_cookie(_draft_cookie_name(token), path=_cookie_path(token))
        return resp


# -- preview --------------------------------------------------------------------------


async def preview_get(request: web.Request) -> web.Response:
    """A read-only view of the form's current draft (``forms.get``'s ``previewUrl``)."""
    service = _service(request)
    with service.session() as s:
        form = s.get(Form, request.match_info["form_id"])
        if form is None:
            return closed_page(flow.CLOSED["unknown"])
        if form.trashed_at is not None:
            return closed_page(flow.CLOSED["trashed"])
        blocks = fieldtypes.assign_keys(form.blocks or [])
        page = FormPage(blocks=blocks, preview=True, documents=_documents(s, None, blocks, service.base_url))
        return html(render("form.html", title=f"Preview: {form.name}", form_name=form.name, page=page, notice=None,
                           general_error=None, can_save_draft=False, lang=_language(form)))


def register(app: web.Application) -> None:
    """Add the page routes and their static files to the service app."""
    app.router.add_get("/r/{token}", request_get)
    app.router.add_post("/r/{token}", request_post)
    app.router.add_get("/f/{token}", share_get)
    app.router.add_post("/f/{token}", share_post)
    app.router.add_get("/preview/{form_id}", preview_get)
    app.router.add_static("/static/pages", STATIC)
