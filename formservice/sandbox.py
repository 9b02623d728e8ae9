"""The sandbox: seeding from YAML, the credentials file, the test clock and the test
helpers served at ``POST /api/sandbox`` (same envelope and bearer token as ``/api/v1``,
no rate budget spent)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from aiohttp import web
from pydantic import Field
from sqlmodel import select

from . import rpc
from .dialect import Dialect
from .domain import auth
from .domain.base import Ctx, Method, Params, Result, method_registry
from .errors import ApiError, not_found
from .faults import FaultPlan, FaultsView, unknown_methods
from .ids import new_id, new_signing_secret
from .service import Service
from .tables import (
    ApiToken,
    Delivery,
    DeliveryAttempt,
    Event,
    Folder,
    Form,
    Integration,
    Mail,
    Member,
    User,
    Workspace,
)

log = logging.getLogger("formservice.sandbox")
DEFAULT_SEED = Path(__file__).parent / "data" / "sandbox-seed.yaml"
CREDENTIALS = "sandbox-credentials.json"
HELPERS: dict[str, Method] = {}
helper = method_registry(HELPERS)


# -- seeding -----------------------------------------------------------------------


def load_seed(path: Path | str | None) -> dict[str, Any]:
    text = Path(path or DEFAULT_SEED).read_text()
    seed = yaml.safe_load(text)
    if not isinstance(seed, dict) or not isinstance(seed.get("workspaces"), list):
        raise ValueError(f"{path}: a seed holds a 'workspaces' list")
    return seed


def apply_seed(service: Service, seed: dict[str, Any]) -> dict[str, Any]:
    """Create the seed's people, workspaces, tokens and forms, and the system OAuth clients
    (``fboc_zapier``, ``fboc_make``). Returns the credentials
    (token values exist only here and in the credentials file: the store keeps hashes)."""
    from .domain import forms as forms_domain
    from .domain import oauth as oauth_domain
    from .domain import submissions as subs_domain

    now = service.now()
    out: list[dict[str, Any]] = []
    with service.session() as s:
        for ws_seed in seed["workspaces"]:
            owner = ws_seed.get("owner") or {}
            user = User(id=new_id("usr"), email=owner.get("email", "owner@example.test"),
                        name=owner.get("name", "Owner"))
            ws = Workspace(
                id=new_id("ws"), name=ws_seed["name"], plan=ws_seed.get("plan", "free"), owner_id=user.id,
                signing_secret=new_signing_secret(), monthly_allowance=int(ws_seed.get("monthlyAllowance", 100)),
                partial_tracking=bool(ws_seed.get("partialTracking", True)),
                payment_connected=bool(ws_seed.get("paymentConnected", False)),
                email_domains=[{"id": new_id("edom"), **d} for d in ws_seed.get("emailDomains", [])],
                custom_domains=[{"id": new_id("cdom"), **d} for d in ws_seed.get("customDomains", [])],
                created_at=now,
            )
            s.add_all([user, ws, Member(workspace_id=ws.id, user_id=user.id)])
            s.flush()
            token, _ = auth.create_api_token(s, user.id, ws.id, "sandbox", now)
            folder = Folder(id=new_id("fld"), workspace_id=ws.id, name="Archive", created_at=now)
            s.add(folder)
            form_ids: dict[str, str] = {}
            for i, f_seed in enumerate(ws_seed.get("forms", [])):
                # one ms apart, so "newest first" lists the seed's forms in reverse seed order
                created = now - len(ws_seed["forms"]) + i
                form = forms_domain.new_form(s, ws.id, f_seed["name"], None, created,
                                             blocks=f_seed.get("blocks") or [], emoji=f_seed.get("emoji"))
                if f_seed.get("published"):
                    forms_domain.publish_form(s, form, created)
                for j, sub in enumerate(f_seed.get("submissions", [])):
                    subs_domain.record_submission(
                        s, form, dict(sub.get("answers") or {}), created + j, completed=sub.get("completed", True),
                        respondent_email=sub.get("respondentEmail"),
                    )
                form_ids[f_seed["name"]] = form.id
            for integ in ws_seed.get("integrations", []):
                s.add(Integration(id=new_id("int"), form_id=form_ids[integ["form"]],
                                  include_pdf=bool(integ.get("includePdf")), created_at=now))
            out.append({"id": ws.id, "name": ws.name, "plan": ws.plan, "token": token,
                        "signingSecret": ws.signing_secret, "userId": user.id, "folderId": folder.id,
                        "forms": form_ids})
        clients = oauth_domain.seed_system_clients(s, now)
        service.set_meta(s, "seeded", "1")
        s.commit()
    return {"workspaces": out, "oauthClients": clients}


def prepare(service: Service, data_dir: Path | None, seed_path: Path | str | None) -> dict[str, Any]:
    """Seed a new data dir (or reuse what it holds) and return the credentials."""
    stored = data_dir / CREDENTIALS if data_dir else None
    if stored is not None and stored.exists() and service._meta("seeded"):
        creds = json.loads(stored.read_text())
    else:
        creds = apply_seed(service, load_seed(seed_path))
        service.save_seed_state()  # what the reset helper goes back to
        if stored is not None:
            stored.write_text(json.dumps(creds, indent=2))
    return {"baseUrl": service.base_url, **creds}


def renew_token(service: Service, workspace_id: str, user_id: str, name: str) -> str:
    """A new API token for the person in the workspace, valid for the usual lifetime from
    the service clock's now; tokens of the same ``name`` held by that person there are
    deleted first. For code that runs the sandbox in-process and moves its clock past a
    token's lifetime (the helpers need a live token to mint one)."""
    with service.session() as s:
        for old in s.exec(select(ApiToken).where(ApiToken.user_id == user_id, ApiToken.workspace_id == workspace_id,
                                                 ApiToken.name == name)).all():
            s.delete(old)
        s.flush()
        value, _ = auth.create_api_token(s, user_id, workspace_id, name, service.now())
        s.commit()
    return value


# -- test helpers ------------------------------------------------------------------


class AdvanceParams(Params):
    ms: Annotated[int, Field(ge=0, le=400 * 24 * 3600 * 1000)]


class ClockResult(Result):
    now: int
    offsetMs: int


@helper("clock.advance")
def clock_advance(ctx: Ctx, p: AdvanceParams) -> ClockResult:
    """Move the test clock forward and run the time-driven work that became due."""
    svc: Service = ctx.service
    now = svc.advance_clock(p.ms)
    if svc.worker is not None:
        ctx.after_commit.append(svc.worker.tick)
    return ClockResult(now=now, offsetMs=svc.clock.offset_ms)


class NoParams(Params):
    pass


@helper("clock.get")
def clock_get(ctx: Ctx, p: NoParams) -> ClockResult:
    """The test clock's current time."""
    return ClockResult(now=ctx.service.now(), offsetMs=ctx.service.clock.offset_ms)


class TokenCreateParams(Params):
    name: str = "test"
    kind: Literal["api", "oauth"] = "api"


class TokenView(Result):
    id: str
    name: str
    kind: str
    prefix: str
    createdAt: int
    expiresAt: int
    token: str | None = None


def _token_view(row: ApiToken, value: str | None = None) -> TokenView:
    v = TokenView(id=row.id, name=row.name, kind=row.kind, prefix=row.prefix, createdAt=row.created_at,
                  expiresAt=row.expires_at)
    if value is not None:
        v.token = value
    return v


@helper("tokens.create")
def tokens_create(ctx: Ctx, p: TokenCreateParams) -> TokenView:
    """Mint a token for the caller's person and workspace (the dashboard's job in the
    hosted service). The value is returned once."""
    if p.kind == "oauth":
        value, row = auth.create_oauth_token(ctx.session, ctx.user.id, ctx.workspace.id, ctx.now)
    else:
        value, row = auth.create_api_token(ctx.session, ctx.user.id, ctx.workspace.id, p.name, ctx.now)
    return _token_view(row, value)


class TokenList(Result):
    items: list[TokenView]


@helper("tokens.list")
def tokens_list(ctx: Ctx, p: NoParams) -> TokenList:
    """The caller's tokens in this workspace, without their values."""
    rows = ctx.session.exec(select(ApiToken).where(ApiToken.user_id == ctx.user.id,
                                                   ApiToken.workspace_id == ctx.workspace.id)).all()
    return TokenList(items=[_token_view(r) for r in sorted(rows, key=lambda r: r.created_at)])


class TokenIdParams(Params):
    tokenId: str


def _own_token(ctx: Ctx, token_id: str) -> ApiToken:
    row = ctx.session.get(ApiToken, token_id)
    if row is None or row.user_id != ctx.user.id or row.workspace_id != ctx.workspace.id:
        raise not_found("Token", field="tokenId")
    return row


class TokenRenameParams(Params):
    tokenId: str
    name: str


@helper("tokens.rename")
def tokens_rename(ctx: Ctx, p: TokenRenameParams) -> TokenView:
    """Rename a token; its value does not change."""
    auth.check_token_name(p.name)
    row = _own_token(ctx, p.tokenId)
    row.name = p.name
    return _token_view(row)


class Deleted(Result):
    id: str
    deleted: bool


@helper("tokens.delete")
def tokens_delete(ctx: Ctx, p: TokenIdParams) -> Deleted:
    """Delete a token; it stops authenticating on the next call."""
    ctx.session.delete(_own_token(ctx, p.tokenId))
    return Deleted(id=p.tokenId, deleted=True)


class MemberAddParams(Params):
    email: Annotated[str, Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]
    name: Annotated[str, Field(min_length=1, max_length=255)]


class MemberView(Result):
    userId: str
    email: str
    name: str
    token: str  # an API token of the new member, shown once


@helper("members.add")
def members_add(ctx: Ctx, p: MemberAddParams) -> MemberView:
    """Add a person to the caller's workspace with one API token (the dashboard's job in
    the hosted service), so a test can act as a second member."""
    user = User(id=new_id("usr"), email=p.email, name=p.name)
    ctx.session.add(user)
    ctx.session.add(Member(workspace_id=ctx.workspace.id, user_id=user.id, role="member"))
    ctx.session.flush()
    value, _ = auth.create_api_token(ctx.session, user.id, ctx.workspace.id, "member", ctx.now)
    return MemberView(userId=user.id, email=user.email, name=user.name, token=value)


class MemberIdParams(Params):
    userId: str


class MemberRemoved(Result):
    userId: str
    removed: bool
    tokensDeleted: int


@helper("members.remove")
def members_remove(ctx: Ctx, p: MemberIdParams) -> MemberRemoved:
    """A person leaves the caller's workspace: every token they hold there stops working."""
    if p.userId == ctx.user.id:
        raise ApiError("VALIDATION_ERROR", "The calling person cannot remove themselves; call as another member.",
                       reason="CANNOT_REMOVE_SELF", field="userId")
    deleted = auth.remove_member(ctx.session, ctx.workspace.id, p.userId)
    return MemberRemoved(userId=p.userId, removed=True, tokensDeleted=deleted)


class LimitsParams(Params):
    callsPerMinute: Annotated[int, Field(ge=1)] | None = None
    createsPerMinute: Annotated[int, Field(ge=1)] | None = None
    failedAuth: Annotated[int, Field(ge=1)] | None = None
    # The window of callsPerMinute and createsPerMinute (60000 by default): shorter, a
    # test sees several full windows in seconds. 100 ms to 1 hour.
    windowMs: Annotated[int, Field(ge=100, le=3_600_000)] | None = None


class LimitsView(Result):
    callsPerMinute: int
    createsPerMinute: int
    failedAuth: int
    windowMs: int


@helper("limits.set")
def limits_set(ctx: Ctx, p: LimitsParams) -> LimitsView:
    """Change the rate limits of this sandbox (raise them for a benchmark, shrink them to
    provoke throttling); ``windowMs`` scales the window those per-minute limits count in."""
    names = {"callsPerMinute": "calls_per_minute", "createsPerMinute": "creates_per_minute",
             "failedAuth": "failed_auth", "windowMs": "rate_window_ms"}
    values = {names[k]: v for k, v in p.model_dump(exclude_none=True).items()}
    lim = ctx.service.set_limits(**values)
    return LimitsView(callsPerMinute=lim.calls_per_minute, createsPerMinute=lim.creates_per_minute,
                      failedAuth=lim.failed_auth, windowMs=lim.rate_window_ms)


class CallsParams(Params):
    since: int | None = None
    method: str | None = None


class CallItem(Result):
    at: int
    method: str


class CallList(Result):
    count: int
    items: list[CallItem]


@helper("calls.list")
def calls_list(ctx: Ctx, p: CallsParams) -> CallList:
    """The API calls this token made (counted on the server), optionally since a time or
    of one method: what poll and sync cost assertions count."""
    items = [CallItem(at=at, method=m) for at, tok, m in ctx.service.call_log
             if tok == ctx.token.id and (p.since is None or at >= p.since) and (p.method in (None, m))]
    return CallList(count=len(items), items=items)


class WorkspaceParams(Params):
    plan: Literal["free", "pro", "business"] | None = None
    monthlyAllowance: Annotated[int, Field(ge=0)] | None = None
    partialTracking: bool | None = None
    paymentConnected: bool | None = None


class WorkspaceView(Result):
    id: str
    plan: str
    monthlyAllowance: int
    partialTracking: bool
    paymentConnected: bool


@helper("workspace.update")
def workspace_update(ctx: Ctx, p: WorkspaceParams) -> WorkspaceView:
    """Change the caller's workspace plan or allowances (billing is the dashboard's job)."""
    ws = ctx.workspace
    if p.plan is not None:
        ws.plan = p.plan
    if p.monthlyAllowance is not None:
        ws.monthly_allowance = p.monthlyAllowance
    if p.partialTracking is not None:
        ws.partial_tracking = p.partialTracking
    if p.paymentConnected is not None:
        ws.payment_connected = p.paymentConnected
    return WorkspaceView(id=ws.id, plan=ws.plan, monthlyAllowance=ws.monthly_allowance,
                         partialTracking=ws.partial_tracking, paymentConnected=ws.payment_connected)


class SubmitParams(Params):
    formId: str
    answers: dict[str, Any] = {}
    completed: bool = True
    respondentEmail: str | None = None


class SubmissionRef(Result):
    id: str
    formId: str
    isCompleted: bool


@helper("submissions.create")
def submissions_create(ctx: Ctx, p: SubmitParams) -> SubmissionRef:
    """Store a public-link response to the form's published version, validated as the
    form page validates a submit (drafts skip the required check)."""
    from .domain import submissions as subs_domain

    form = ctx.form(p.formId)
    sub = subs_domain.submit_public(ctx, form, p.answers, completed=p.completed,
                                    respondent_email=p.respondentEmail)
    return SubmissionRef(id=sub.id, formId=form.id, isCompleted=sub.is_completed)


class CompleteParams(Params):
    requestId: str
    answers: dict[str, Any] = {}


@helper("requests.complete")
def requests_complete(ctx: Ctx, p: CompleteParams) -> dict[str, Any]:
    """What a recipient's submit does: validate the answers, complete the request, and
    queue its callback and events."""
    from .domain import requests as req_domain

    req = req_domain.own_request(ctx, p.requestId)
    req_domain.complete_request(ctx.session, ctx.service, req, p.answers, ctx.now, ctx.base_url)
    return req_domain.record(req, ctx.base_url, full=True)


class ShareSubmitParams(Params):
    url: str
    answers: dict[str, Any] = {}
    completed: bool = True
    password: str | None = None
    editToken: str | None = None
    submissionId: str | None = None


class ShareSubmitted(Result):
    submissionId: str
    isCompleted: bool
    editCount: int
    editUrl: str | None = None
    redirectUrl: str | None = None


@helper("shareLinks.submit")
def share_links_submit(ctx: Ctx, p: ShareSubmitParams) -> ShareSubmitted:
    """What a respondent does on a share link's page (the link's url): save a draft
    (``completed: false``; continue it with ``submissionId``), submit, or edit a sent
    submission (``editToken``, from its ``editUrl``). The form's password gate applies."""
    from .domain import sharelinks

    token = sharelinks.token_from_url(p.url)
    link = sharelinks.find_link(ctx.session, token) if token else None
    if link is None:
        raise not_found("Share link", field="url", reason="UNKNOWN_SHARE_LINK")
    form = ctx.session.get(Form, link.form_id)
    state = sharelinks.link_state(ctx.session, link, form, ctx.now)
    if state is not None:
        raise sharelinks.link_closed(state)
    sharelinks.check_password(form, p.password)
    sub = sharelinks.save_public(ctx.session, link, form, p.answers, ctx.now, completed=p.completed,
                                 submission_id=p.submissionId, edit_token=p.editToken, base_url=ctx.base_url)
    out = ShareSubmitted(submissionId=sub.id, isCompleted=sub.is_completed, editCount=sub.edit_count)
    edit_url = sharelinks.edit_url(link, sub, ctx.base_url)
    if edit_url is not None:
        out.editUrl = edit_url
    redirect = sharelinks.redirect_for(form, sub)
    if redirect is not None:
        out.redirectUrl = redirect
    return out


class MailParams(Params):
    to: str | None = None
    requestId: str | None = None


@helper("mail.list")
def mail_list(ctx: Ctx, p: MailParams) -> dict[str, Any]:
    """Every invitation and reminder the sandbox "sent" for this workspace, oldest first."""
    stmt = select(Mail).where(Mail.workspace_id == ctx.workspace.id)
    if p.to is not None:
        stmt = stmt.where(Mail.to == p.to)
    if p.requestId is not None:
        stmt = stmt.where(Mail.request_id == p.requestId)
    rows = ctx.session.exec(stmt.order_by(Mail.created_at)).all()
    return {"items": [{"id": m.id, "kind": m.kind, "to": m.to, "from": m.sender, "subject": m.subject,
                       "body": m.body, "status": m.status, "requestId": m.request_id,
                       "submissionId": m.submission_id, "createdAt": m.created_at}
                      for m in rows]}


class EventsParams(Params):
    requestId: str | None = None
    type: str | None = None
    formId: str | None = None


@helper("events.list")
def events_list(ctx: Ctx, p: EventsParams) -> dict[str, Any]:
    """The workspace's events, oldest first, each with its deliveries and their attempts."""
    stmt = select(Event).where(Event.workspace_id == ctx.workspace.id)
    if p.requestId is not None:
        stmt = stmt.where(Event.request_id == p.requestId)
    if p.type is not None:
        stmt = stmt.where(Event.type == p.type)
    if p.formId is not None:
        stmt = stmt.where(Event.form_id == p.formId)
    items = []
    for ev in ctx.session.exec(stmt.order_by(Event.created_at)).all():
        deliveries = []
        for d in ctx.session.exec(select(Delivery).where(Delivery.event_id == ev.id).order_by(Delivery.created_at)):
            attempts = ctx.session.exec(select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == d.id)
                                        .order_by(DeliveryAttempt.id)).all()
            deliveries.append({"id": d.id, "kind": d.kind, "targetUrl": d.target_url, "state": d.state,
                               "attemptCount": d.attempt_count, "nextAttemptAt": d.next_attempt_at,
                               "subscriptionId": d.subscription_id,
                               "attempts": [{"at": a.at, "status": a.status, "error": a.error,
                                             "signature": a.signature, "durationMs": a.duration_ms}
                                            for a in attempts]})
        items.append({"id": ev.id, "type": ev.type, "createdAt": ev.created_at, "test": ev.test,
                      "requestId": ev.request_id, "submissionId": ev.submission_id, "payload": ev.payload,
                      "deliveries": deliveries})
    return {"items": items}


@helper("faults.set")
def faults_set(ctx: Ctx, p: FaultPlan) -> FaultsView:
    """Inject faults into every later ``/api/v1`` call and ``/api/mcp`` ``tools/call``
    (of any token), as the seeded plan decides; replaces the plan in force and restarts
    its counters. ``methods`` names API methods (``requests.create``) or tools
    (``request_create``)."""
    from .agent.tools import TOOLS
    from .domain.base import METHODS

    unknown = unknown_methods(p, set(METHODS) | set(TOOLS))
    if unknown:
        where, name = unknown[0]
        raise ApiError("VALIDATION_ERROR", f"{where}: unknown method {name!r}; name /api/v1 methods such as "
                       "'requests.create' (methods.list has them all) or agent tools such as 'request_create'.",
                       reason="UNKNOWN_METHOD", field=where)
    ctx.service.faults.set(p)
    return ctx.service.faults.view()


class DialectParams(Params):
    dialect: Dialect


class DialectView(Result):
    dialect: Dialect


@helper("dialect.set")
def dialect_set(ctx: Ctx, p: DialectParams) -> DialectView:
    """Answer later ``/api/v1`` calls in ``full`` (everything) or ``minimal`` (only what
    the spec shows; see formservice/dialect.py). ``reset`` keeps it."""
    ctx.service.dialect = p.dialect
    return DialectView(dialect=p.dialect)


@helper("faults.get")
def faults_get(ctx: Ctx, p: NoParams) -> FaultsView:
    """The fault plan in force, the calls it met and the faults it injected."""
    return ctx.service.faults.view()


@helper("faults.clear")
def faults_clear(ctx: Ctx, p: NoParams) -> FaultsView:
    """Stop injecting faults; returns what the plan had injected."""
    view = ctx.service.faults.view()
    ctx.service.faults.clear()
    return view


async def _reset(service: Service) -> dict[str, Any]:
    """Wipe the sandbox back to its seeded state: every workspace, form, request,
    submission, token and delivery made since is gone; the seeded tokens work again; the
    clock, rate limits and fault plan are a new sandbox's. Delivery attempts under way
    finish first, so none writes into the restored store."""
    await service.worker.settle()
    try:
        service.restore_seed_state()
    except LookupError:
        raise ApiError("CONFLICT", "This sandbox's data dir was seeded before reset existed, so no copy of its "
                       "seeded state was kept; start the sandbox on a new --data-dir to use reset.",
                       reason="NO_SEED_STATE") from None
    return {"reset": True, "now": service.now()}


async def _deliveries_flush(service: Service) -> dict[str, Any]:
    """Attempt every due delivery now (after doing the time-driven work that is due)."""
    service.worker.tick()
    return {"attempts": await service.worker.flush()}


ASYNC_HELPERS = {"deliveries.flush": _deliveries_flush, "reset": _reset}


# -- binding -----------------------------------------------------------------------


async def handle(request: web.Request) -> web.Response:
    service: Service = request.app[rpc.SERVICE_KEY]
    try:
        body = await rpc.read_limited(request)
        caller = service.authenticate(request.headers.get("Authorization"), rpc.client_ip(request))
        name, params = rpc.parse_envelope(body)
        if name in ASYNC_HELPERS:
            return rpc.ok(await ASYNC_HELPERS[name](service))
        return rpc.ok(service.invoke(caller, name, params, registry=HELPERS, throttle=False))
    except ApiError as err:
        return rpc.fail(err)
    except Exception as exc:
        return rpc.internal(exc)


# -- running -----------------------------------------------------------------------


async def start(data_dir: Path, *, host: str = "127.0.0.1", port: int = 0, seed: Path | None = None,
                dialect: Dialect = "full") -> tuple[web.AppRunner, Service, dict[str, Any]]:
    """Start the sandbox in the running event loop (no signal handlers, nothing printed):
    bind ``host``:``port`` (0 picks a free port), seed ``data_dir`` on first start (or
    reuse what it holds) and return the runner (``await runner.cleanup()`` stops it), the
    service and the credentials. ``dialect`` ``minimal`` answers only what the spec shows
    (formservice/dialect.py). ``OSError`` when the port cannot be bound."""
    from .app import create_app

    service = Service(data_dir)
    service.dialect = dialect
    runner = web.AppRunner(create_app(service), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        shown_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        service.base_url = f"http://{shown_host}:{bound}"
        credentials = prepare(service, data_dir, seed)
    except BaseException:  # a port in use, a bad seed: nothing stays bound or open
        await runner.cleanup()
        service.engine.dispose()
        raise
    return runner, service, credentials


async def serve(host: str, port: int, data_dir: Path, seed: Path | None, credentials_file: Path | None,
                ready: asyncio.Event | None = None, stop: asyncio.Event | None = None,
                dialect: Dialect = "full") -> None:
    """Run the sandbox until ``stop`` is set (or SIGINT/SIGTERM): bind, seed on first
    start, write the credentials file, serve (in ``dialect``)."""
    runner, service, creds = await start(data_dir, host=host, port=port, seed=seed, dialect=dialect)
    if credentials_file is not None:
        credentials_file.parent.mkdir(parents=True, exist_ok=True)
        credentials_file.write_text(json.dumps(creds, indent=2))
    log.info("sandbox listening on %s", service.base_url)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    if ready is not None:
        ready.set()
    print(f"formsync sandbox listening on {service.base_url}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        service.engine.dispose()
