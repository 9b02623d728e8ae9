"""The async JSON-RPC client of the Form Collection Service.

One aiohttp session per client (use it as an async context manager), a typed method per
API method, async iterators that follow ``nextCursor``, one exception class per error
code, retries that never repeat a call that is not safe to repeat, and client-side pacing
that keeps every 60-second window within the limits.

    async with FormClient(base_url, token) as fc:
        async for form in fc.iter_forms(workspace_id):
            ...
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar

import aiohttp
import pydantic
from pydantic import BaseModel, SecretStr

from .. import errors, models
from ..config.settings import ServiceSettings
from ._clock import ServiceClock
from ._pacing import Clock, Pacer, Sleep, shared_pacer, token_key

log = logging.getLogger("formsync.client")
M = TypeVar("M", bound=BaseModel)


class Unset:
    """The type of :data:`UNSET`: a param left out of the call. ``None`` is sent as null,
    which some params take as a value (``folderId: null`` is the workspace root)."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET = Unset()

# Methods that also count against the service's second limit (60 per minute).
CREATE_METHODS = frozenset({"requests.create", "documents.create"})
# Calls that act anew each time: repeated after an ambiguous failure (a 5xx, a timeout, a
# dropped connection) they could act twice, so they are only retried when the service can
# deduplicate them (requests.create with an idempotencyKey).
UNSAFE_METHODS = frozenset({"requests.create", "forms.create", "folders.create", "documents.create",
                            "shareLinks.create", "webhooks.create", "requests.remind", "requests.replayCallback"})


class TokenSource(Protocol):
    """Where a client gets its token when it is not one static token (the stored grant,
    ``connector.client.grant.GrantTokens``): ``key`` names the source for its shared pacer."""

    key: str

    async def token(self) -> SecretStr:
        """The token to send now."""
        ...

    async def renew(self, stale: SecretStr) -> SecretStr:
        """A token to send instead of ``stale``, which the service refused (401)."""
        ...


# API method name -> the FormClient method that calls it; filled by @api below.
API_METHODS: dict[str, str] = {}
F = TypeVar("F", bound=Callable[..., Any])


def api(name: str) -> Callable[[F], F]:
    """Mark a FormClient method as the typed call of the API method ``name``."""

    def deco(fn: F) -> F:
        API_METHODS[name] = fn.__name__
        return fn

    return deco


def safe_to_repeat(method: str, params: Mapping[str, Any]) -> bool:
    """Whether ``method`` with ``params`` may be sent again after a failure that leaves
    its outcome unknown."""
    if method == "requests.create":
        return bool(params.get("idempotencyKey"))
    return method not in UNSAFE_METHODS


def backoff_delay(attempt: int, base: float = 0.5, cap: float = 30.0,
                  rand: Callable[[], float] = random.random) -> float:
    """Full-jitter exponential backoff: a random delay in [0, min(cap, base * 2**attempt)]."""
    return rand() * min(cap, base * 2.0 ** attempt)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: models become objects (members left None omitted),
    datetimes become epoch milliseconds (the API's time unit)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"datetime {value.isoformat()} has no time zone; give an aware datetime")
        return int(value.timestamp() * 1000)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def params_of(**values: Any) -> dict[str, Any]:
    """The params object: UNSET values dropped, everything else as JSON."""
    return {k: jsonable(v) for k, v in values.items() if v is not UNSET}


class FormClient:
    """A client for ``{base_url}/api/v1`` acting with one token.

    Every call waits for the token's shared pacer (``calls_per_minute`` calls and
    ``creates_per_minute`` creates in any ``rate_window`` seconds, 60 by default: a
    sandbox can be given a shorter window); RATE_LIMITED is retried after
    ``retryAfterMs``; a 5xx or a connection failure is retried with jittered backoff when
    the call is safe to repeat, up to ``max_retries`` times. The token is a SecretStr: it
    never appears in a repr, a log line or an exception. ``sleep`` and ``clock`` are
    injectable for tests."""

    # API method name -> the method of this class that calls it (filled as the class body runs).
    API_METHODS: ClassVar[Mapping[str, str]] = API_METHODS

    def __init__(self, base_url: str, token: str | SecretStr | TokenSource, *, calls_per_minute: int = 120,
                 creates_per_minute: int = 60, rate_window: float = 60.0, max_retries: int = 5,
                 timeout: float = 30.0,
                 backoff_base: float = 0.5, backoff_cap: float = 30.0,
                 session: aiohttp.ClientSession | None = None, pacer: Pacer | None = None,
                 sleep: Sleep = asyncio.sleep, clock: Clock = time.monotonic, base_url_unset: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        # base_url left at its default: a refused connection there means no sandbox runs, not
        # a service that is down for a while, so it is said at once instead of retried.
        self.base_url_unset = base_url_unset
        # A token source (the stored grant) gives the token of each call; 401 asks it once for another.
        self._source: TokenSource | None = None
        if isinstance(token, str | SecretStr):
            self._token = token if isinstance(token, SecretStr) else SecretStr(token)
            if not self._token.get_secret_value():
                raise ValueError("token is empty; give the workspace's API token")
        else:
            self._source, self._token = token, SecretStr("")
        if calls_per_minute < 1 or creates_per_minute < 1:
            raise ValueError("calls_per_minute and creates_per_minute must be 1 or more")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if rate_window <= 0:
            raise ValueError(f"rate_window must be longer than 0 s, not {rate_window}")
        self.rate_window = rate_window
        self.calls_per_minute = calls_per_minute
        self.creates_per_minute = creates_per_minute
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._session = session
        self._own_session = session is None
        self._pacer = pacer
        self._sleep = sleep
        self._clock = clock
        self.stats = {"calls": 0, "retries": 0, "rate_limited": 0, "paced_seconds": 0.0}
        self.service_clock = ServiceClock()  # the service's time, from the Date of its answers
        # What the service made of the token so far: decides whether a 429 is the
        # failed-authentication limit (spec, Authentication 9) or a per-token one.
        self._token_state: errors.TokenState = "unknown"

    @classmethod
    def from_settings(cls, service: ServiceSettings, source: TokenSource | None = None,
                      **overrides: Any) -> FormClient:
        """A client configured by the ``[service]`` settings (base URL, token, limits,
        timeout, retries); ``source`` (the stored grant) gives the tokens when
        ``service.token`` is not set; ``overrides`` are passed on (``session``, ``sleep``...)."""
        token: SecretStr | TokenSource | None = service.token or source
        if token is None:
            raise ValueError("service.token is not set: put it in the config file's [service] section or in "
                             "FORMSYNC_SERVICE__TOKEN, or run `formsync login`")
        options: dict[str, Any] = {
            "calls_per_minute": service.calls_per_minute, "creates_per_minute": service.creates_per_minute,
            "max_retries": service.max_retries, "timeout": service.timeout_seconds,
            "base_url_unset": not service.base_url_given, **overrides}
        return cls(service.base_url, token, **options)

    def __repr__(self) -> str:
        return f"FormClient(base_url={self.base_url!r}, token=SecretStr('**********'))"

    @property
    def token_key(self) -> str:
        """A short hash that identifies the token (to share its pacer) without revealing it."""
        return self._source.key if self._source is not None else token_key(self._token.get_secret_value())

    @property
    def pacer(self) -> Pacer | None:
        return self._pacer

    async def __aenter__(self) -> FormClient:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
            self._own_session = True
        if self._pacer is None:
            self._pacer = shared_pacer(self.base_url, self.token_key, self.calls_per_minute,
                                       self.creates_per_minute, window=self.rate_window, clock=self._clock,
                                       sleep=self._sleep)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def service_now(self) -> int:
        """The service's time now (epoch ms): on a sandbox on this machine its test clock
        (``clock.get``); else from the ``Date`` of the last answer, or of one ``HEAD``
        when none came yet (see ``connector.client._clock``). Every decision about the service's
        state reads it."""
        session, _ = self._ready()
        try:
            token = await self.token()  # a signed-in client reads a sandbox's exact clock too
            return await self.service_clock.now(session, self.base_url, token.get_secret_value())
        except ValueError as exc:
            raise errors.TransportError(str(exc)) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._check_default_address(exc)
            raise errors.TransportError(f"the service at {self.base_url} could not be reached to read its time "
                                        f"({type(exc).__name__}: {exc})") from None

    # -- the call path ------------------------------------------------------------------
    def _ready(self) -> tuple[aiohttp.ClientSession, Pacer]:
        if self._session is None or self._pacer is None:
            raise RuntimeError("use FormClient as an async context manager: async with FormClient(...) as fc")
        return self._session, self._pacer

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call ``method`` and return its ``data`` as parsed JSON (the typed methods wrap
        this). Waits for the pacer; on RATE_LIMITED waits ``retryAfterMs`` and sends again;
        on a 5xx, a timeout or a connection failure sends again after a jittered backoff
        when the call is safe to repeat, and otherwise raises at once with
        ``outcome_unknown`` set. A CONFLICT or NOT_FOUND answered to such a retry also has
        ``outcome_unknown`` set: the lost attempt may have done the work (a cancel, a
        delete). Raises the error code's class, or TransportError."""
        session, pacer = self._ready()
        params = dict(params or {})
        create = method in CREATE_METHODS
        safe = safe_to_repeat(method, params)
        body = json.dumps({"method": method, "params": params}, separators=(",", ":")).encode()
        attempt = 0
        lost = False  # an attempt failed in a way that leaves open whether it acted
        while True:
            try:
                # Logged against the windows when the answer comes back (see Pacer.slot).
                async with pacer.slot(create=create) as waited:
                    self.stats["paced_seconds"] += waited
                    self.stats["calls"] += 1
                    return await self._send_renewing(session, method, body)
            except errors.RateLimited as exc:
                # A throttled call was refused, not run: repeating it is always safe. A bad
                # token stays bad however long it waits, so failed-auth throttling is final.
                self.stats["rate_limited"] += 1
                if attempt >= self.max_retries or isinstance(exc, errors.AuthRateLimited):
                    raise exc.gave_up(attempt + 1) from None
                wait = exc.retry_after
                delay = wait if wait is not None else self._backoff(attempt)
                log.info("%s rate limited; retrying in %.3f s", method, delay)
            except errors.FormsyncError as exc:
                if not exc.retryable:
                    if lost and isinstance(exc, errors.Conflict | errors.NotFound):
                        # e.g. requests.cancel: the lost first attempt canceled it, the retry finds it canceled.
                        raise exc.after_lost_attempt(method) from None
                    raise
                lost = True
                if not safe:
                    raise exc.mark_outcome_unknown(method) from None
                if attempt >= self.max_retries:
                    raise exc.gave_up(attempt + 1) from None
                delay = self._backoff(attempt)
                log.info("%s failed (%s); retrying in %.3f s", method, type(exc).__name__, delay)
            await self._sleep(delay)
            attempt += 1
            self.stats["retries"] += 1

    def _backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self.backoff_base, self.backoff_cap)

    async def token(self) -> SecretStr:
        """The token a call sends now: the static one, else the token source's (the stored
        grant's, refreshed when due). For the few requests beside the API (the sandbox's
        helpers) that need the same bearer."""
        return self._token if self._source is None else await self._source.token()
    def _check_default_address(self, exc: BaseException) -> None:
        """Raises DefaultServiceAbsent when ``exc`` is a refused connection to the default address."""
        cause = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else exc
        refused = isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        if self.base_url_unset and refused:
            raise errors.DefaultServiceAbsent(self.base_url) from None

    async def _send_renewing(self, session: aiohttp.ClientSession, method: str, body: bytes) -> Any:
        """Send with the token of now; a 401 to a token from a source is sent once more
        with the token the source gives instead (refused before it acted: safe)."""
        if self._source is None:
            return await self._send(session, method, body, self._token)
        token = await self._source.token()
        try:
            return await self._send(session, method, body, token)
        except errors.Unauthorized:
            return await self._send(session, method, body, await self._source.renew(token))

    async def _send(self, session: aiohttp.ClientSession, method: str, body: bytes, token: SecretStr) -> Any:
        headers = {"Authorization": f"Bearer {token.get_secret_value()}",
                   "Content-Type": "application/json", "Accept": "application/json"}
        started = time.monotonic()
        try:
            async with session.post(f"{self.base_url}/api/v1", data=body, headers=headers) as resp:
                status = resp.status
                answer_headers = resp.headers
                raw = await resp.read()
            self.service_clock.observe(answer_headers.get("Date"))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            # Only the exception's type and text are kept: aiohttp's request info holds the headers.
            # A malformed URL or a TLS failure stays the same however often it is tried.
            self._check_default_address(exc)
            lasting = isinstance(exc, aiohttp.InvalidURL | aiohttp.ClientSSLError)
            raise errors.TransportError(f"{method}: the service at {self.base_url} could not be reached "
                                        f"({type(exc).__name__}: {exc})", retryable=not lasting) from None
        log.debug("%s -> HTTP %d in %.3f s", method, status, time.monotonic() - started)
        try:
            envelope = json.loads(raw)
        except ValueError:
            envelope = None
        if not isinstance(envelope, dict) or not isinstance(envelope.get("ok"), bool):
            raise errors.TransportError(f"{method}: HTTP {status} from {self.base_url}/api/v1 is not an API "
                                        f"envelope ({raw[:80]!r})", status=status, retryable=status >= 500)
        if envelope["ok"]:
            self._token_state = "accepted"
            return envelope.get("data")
        error = envelope.get("error")
        err = errors.from_envelope(error if isinstance(error, dict) else {}, status, method,
                                   headers=answer_headers, token=self._token_state, window=self.rate_window)
        self._note_token(err)
        raise err

    def _note_token(self, err: errors.ApiError) -> None:
        """Learn from a failure whether the service took the token: an UNAUTHORIZED
        refuses it; any answer past authentication other than a throttle accepts it."""
        if isinstance(err, errors.Unauthorized):
            self._token_state = "refused"
        elif not isinstance(err, errors.RateLimited):
            self._token_state = "accepted"

    async def _model(self, method: str, model: type[M], params: dict[str, Any]) -> M:
        return self._parse(method, model, await self.call(method, params))

    @staticmethod
    def _parse(method: str, model: type[M], data: Any) -> M:
        try:
            return model.model_validate(data)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(result)'}: {e['msg']}"
                                 for e in exc.errors(include_input=False)[:5])
            raise errors.UnexpectedResult(f"{method}: the result does not match {model.__name__}: "
                                          f"{problems}") from None

    async def _items(self, method: str, model: type[M], params: dict[str, Any]) -> list[M]:
        data = await self.call(method, params)
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise errors.UnexpectedResult(f"{method}: the result has no items list")
        return [self._parse(method, model, i) for i in items]

    async def _pages(self, method: str, model: type[M], params: dict[str, Any]) -> AsyncIterator[M]:
        """Follow ``nextCursor`` until the last page, yielding items as ``model``."""
        seen: set[str] = set()
        while True:
            page = self._parse(method, models.Page[model], await self.call(method, params))  # type: ignore[valid-type]
            for item in page.items:
                yield item
            cursor = page.next_cursor
            if not page.has_more or not page.can_paginate or not cursor:
                return
            if cursor in seen:  # a cursor that comes back would loop forever
                raise errors.UnexpectedResult(f"{method}: the service returned a cursor it had already given")
            seen.add(cursor)
            params = {**params, "cursor": cursor}

    # -- me, workspaces, methods ------------------------------------------------------------
    @api("me.get")
    async def me(self) -> models.Me:
        """The person the token acts for (a cheap connection test)."""
        return await self._model("me.get", models.Me, {})

    @api("workspaces.list")
    async def list_workspaces(self) -> list[models.WorkspaceRef]:
        """The token's workspace (a token is scoped to exactly one)."""
        return await self._items("workspaces.list", models.WorkspaceRef, {})

    @api("methods.list")
    async def list_methods(self) -> models.MethodList:
        """The names (and summaries) of every method the service offers."""
        return await self._model("methods.list", models.MethodList, {})

    # -- forms -------------------------------------------------------------------------------
    @api("forms.list")
    async def list_forms(self, workspace_id: str, *, folder_id: str | None | Unset = UNSET,
                         query: str | Unset = UNSET, limit: int | Unset = UNSET,
                         cursor: str | Unset = UNSET) -> models.Page[models.Form]:
        """One page of forms, newest first. ``folder_id=None``: root-level forms only;
        ``query``: a fuzzy name search (one capped page, no cursor)."""
        return await self._model("forms.list", models.Page[models.Form], params_of(
            workspaceId=workspace_id, folderId=folder_id, query=query, limit=limit, cursor=cursor))

    def iter_forms(self, workspace_id: str, *, folder_id: str | None | Unset = UNSET,
                   limit: int = 100) -> AsyncIterator[models.Form]:
        """Every form of the workspace (or folder), page after page."""
        return self._pages("forms.list", models.Form, params_of(workspaceId=workspace_id, folderId=folder_id,
                                                                limit=limit))

    @api("forms.get")
    async def get_form(self, form_id: str) -> models.FormDetail:
        return await self._model("forms.get", models.FormDetail, params_of(formId=form_id))

    @api("forms.create")
    async def create_form(self, workspace_id: str, name: str, *,
                          folder_id: str | Unset = UNSET) -> models.FormCreated:
        """Create an empty, unpublished form. Not retried after an ambiguous failure."""
        return await self._model("forms.create", models.FormCreated, params_of(
            workspaceId=workspace_id, name=name, folderId=folder_id))

    @api("forms.update")
    async def update_form(self, form_id: str, *, name: str | Unset = UNSET, folder_id: str | None | Unset = UNSET,
                          emoji: str | None | Unset = UNSET, cover: Mapping[str, Any] | Unset = UNSET,
                          logo: Mapping[str, Any] | Unset = UNSET) -> models.FormUpdated:
        """Rename, move (``folder_id=None``: the root) or decorate a form; send at least one."""
        return await self._model("forms.update", models.FormUpdated, params_of(
            formId=form_id, name=name, folderId=folder_id, emoji=emoji, cover=cover, logo=logo))

    @api("forms.publish")
    async def publish_form(self, form_id: str) -> models.FormPublished:
        return await self._model("forms.publish", models.FormPublished, params_of(formId=form_id))

    @api("forms.unpublish")
    async def unpublish_form(self, form_id: str) -> models.FormUnpublished:
        return await self._model("forms.unpublish", models.FormUnpublished, params_of(formId=form_id))

    @api("forms.delete")
    async def delete_form(self, form_id: str) -> models.FormTrashed:
        """Move the form to the trash (its share links are revoked)."""
        return await self._model("forms.delete", models.FormTrashed, params_of(formId=form_id))

    @api("forms.restore")
    async def restore_form(self, form_id: str, *, folder_id: str | None | Unset = UNSET) -> models.FormRestored:
        """Take the form out of the trash: into its original folder, or ``folder_id``
        (``None``: the root)."""
        return await self._model("forms.restore", models.FormRestored, params_of(formId=form_id,
                                                                                 folderId=folder_id))

    # -- folders -------------------------------------------------------------------------------
    @api("folders.list")
    async def list_folders(self, workspace_id: str) -> list[models.Folder]:
        return await self._items("folders.list", models.Folder, params_of(workspaceId=workspace_id))

    @api("folders.create")
    async def create_folder(self, workspace_id: str, name: str) -> models.Folder:
        return await self._model("folders.create", models.Folder, params_of(workspaceId=workspace_id, name=name))

    @api("folders.update")
    async def rename_folder(self, folder_id: str, name: str) -> models.FolderUpdated:
        return await self._model("folders.update", models.FolderUpdated, params_of(folderId=folder_id, name=name))

    @api("folders.delete")
    async def delete_folder(self, folder_id: str) -> models.FolderDeleted:
        """Delete a folder; its forms move to the workspace root."""
        return await self._model("folders.delete", models.FolderDeleted, params_of(folderId=folder_id))

    # -- settings and translations ---------------------------------------------------------------
    @api("formSettings.get")
    async def get_form_settings(self, form_id: str) -> models.FormSettings:
        return await self._model("formSettings.get", models.FormSettings, params_of(formId=form_id))

    @api("formSettings.update")
    async def update_form_settings(self, form_id: str, **settings: Any) -> models.FormSettingsValues:
        """Partial update: only the settings named are written, by their wire (camelCase)
        names: ``update_form_settings(form_id, language="de", reminderSteps=["1d"])``."""
        return await self._model("formSettings.update", models.FormSettingsValues,
                                 params_of(formId=form_id, **settings))

    @api("translations.listEntries")
    async def list_translation_entries(self, form_id: str, *, language: str | Unset = UNSET,
                                       limit: int | Unset = UNSET,
                                       cursor: str | Unset = UNSET) -> models.Page[models.TranslationEntry]:
        """One page of the form's translatable texts with their translation into ``language``."""
        return await self._model("translations.listEntries", models.Page[models.TranslationEntry], params_of(
            formId=form_id, language=language, limit=limit, cursor=cursor))

    def iter_translation_entries(self, form_id: str, *, language: str | Unset = UNSET,
                                 limit: int = 100) -> AsyncIterator[models.TranslationEntry]:
        return self._pages("translations.listEntries", models.TranslationEntry,
                           params_of(formId=form_id, language=language, limit=limit))

    # -- submissions and fields ---------------------------------------------------------------------
    @api("submissions.list")
    async def list_submissions(self, form_id: str, *, include_drafts: bool | Unset = UNSET,
                               translation_language: str | Unset = UNSET, limit: int | Unset = UNSET,
                               cursor: str | Unset = UNSET) -> models.SubmissionPage:
        """One page of submissions, newest first (drafts too unless ``include_drafts=False``)."""
        return await self._model("submissions.list", models.SubmissionPage, params_of(
            formId=form_id, includeDrafts=include_drafts, translationLanguage=translation_language, limit=limit,
            cursor=cursor))

    def iter_submissions(self, form_id: str, *, include_drafts: bool | Unset = UNSET,
                         translation_language: str | Unset = UNSET,
                         limit: int = 100) -> AsyncIterator[models.Submission]:
        """Every submission of the form, newest first, page after page."""
        return self._pages("submissions.list", models.Submission, params_of(
            formId=form_id, includeDrafts=include_drafts, translationLanguage=translation_language, limit=limit))

    @api("submissions.sample")
    async def sample_submission(self, form_id: str) -> models.Event:
        """An example ``submission.completed`` event of the form (``test: true``)."""
        return await self._model("submissions.sample", models.Event, params_of(formId=form_id))

    @api("submissions.pdf")
    async def submission_pdf(self, form_id: str, submission_id: str) -> models.SubmissionPdf:
        """The retained PDF of a completed submission (NOT_FOUND unless the form keeps PDFs)."""
        return await self._model("submissions.pdf", models.SubmissionPdf, params_of(
            formId=form_id, submissionId=submission_id))

    @api("fields.list")
    async def list_fields(self, form_id: str) -> models.FieldList:
        """The field keys of the published form: read before ``create_request``."""
        return await self._model("fields.list", models.FieldList, params_of(formId=form_id))

    # -- requests ----------------------------------------------------------------------------------------
    @api("requests.create")
    async def create_request(self, form_id: str, *, recipient: models.Recipient | Mapping[str, Any] | Unset = UNSET,
                             prefill: Mapping[str, Any] | Unset = UNSET, readonly: Sequence[str] | Unset = UNSET,
                             context: Mapping[str, str] | Unset = UNSET, metadata: Mapping[str, Any] | Unset = UNSET,
                             external_id: str | Unset = UNSET, delivery: str | Unset = UNSET,
                             expires_at: int | datetime | Unset = UNSET, callback_url: str | Unset = UNSET,
                             idempotency_key: str | Unset = UNSET, test: bool | Unset = UNSET,
                             reminders: Sequence[str] | Unset = UNSET, domain_id: str | Unset = UNSET,
                             documents: Sequence[models.DocumentRef | Mapping[str, Any]] | Unset = UNSET,
                             language: str | Unset = UNSET) -> models.RequestCreated:
        """Create a request for one recipient. Pass ``idempotency_key`` to make the call
        safe to retry: the same key and body return the original request. Without one, a
        failure that may have created the request raises with ``outcome_unknown`` and is
        never retried (RATE_LIMITED, which runs nothing, is still waited out)."""
        return await self._model("requests.create", models.RequestCreated, params_of(
            formId=form_id, recipient=recipient, prefill=prefill, readonly=readonly, context=context,
            metadata=metadata, externalId=external_id, delivery=delivery, expiresAt=expires_at,
            callbackUrl=callback_url, idempotencyKey=idempotency_key, test=test, reminders=reminders,
            domainId=domain_id, documents=documents, language=language))

    @api("requests.get")
    async def get_request(self, request_id: str) -> models.RequestRecord:
        """The whole request; once completed with its answers and display."""
        return await self._model("requests.get", models.RequestRecord, params_of(requestId=request_id))

    @api("requests.list")
    async def list_requests(self, *, form_id: str | Unset = UNSET, workspace_id: str | Unset = UNSET,
                            status: str | Unset = UNSET, outcome: str | Unset = UNSET,
                            external_id: str | Unset = UNSET, include_test: bool | Unset = UNSET,
                            limit: int | Unset = UNSET, cursor: str | Unset = UNSET
                            ) -> models.Page[models.RequestRecord]:
        """One page of requests of a form or a workspace (name one), newest first."""
        return await self._model("requests.list", models.Page[models.RequestRecord], params_of(
            formId=form_id, workspaceId=workspace_id, status=status, outcome=outcome, externalId=external_id,
            includeTest=include_test, limit=limit, cursor=cursor))

    def iter_requests(self, *, form_id: str | Unset = UNSET, workspace_id: str | Unset = UNSET,
                      status: str | Unset = UNSET, outcome: str | Unset = UNSET, external_id: str | Unset = UNSET,
                      include_test: bool | Unset = UNSET, limit: int = 100) -> AsyncIterator[models.RequestRecord]:
        """Every matching request, newest first, page after page."""
        return self._pages("requests.list", models.RequestRecord, params_of(
            formId=form_id, workspaceId=workspace_id, status=status, outcome=outcome, externalId=external_id,
            includeTest=include_test, limit=limit))

    @api("requests.cancel")
    async def cancel_request(self, request_id: str, *, reason: str | Unset = UNSET) -> models.RequestRecord:
        """Cancel a pending request (CONFLICT when it is no longer pending)."""
        return await self._model("requests.cancel", models.RequestRecord, params_of(requestId=request_id,
                                                                                    reason=reason))

    @api("requests.remind")
    async def remind_request(self, request_id: str) -> models.RequestRecord:
        """Email the recipient a reminder now. Not retried after an ambiguous failure."""
        return await self._model("requests.remind", models.RequestRecord, params_of(requestId=request_id))

    @api("requests.replayCallback")
    async def replay_callback(self, request_id: str) -> models.Replay:
        """Send the callback of a terminal request again (the same event id)."""
        return await self._model("requests.replayCallback", models.Replay, params_of(requestId=request_id))

    @api("requests.sample")
    async def sample_request_event(self, form_id: str, event_type: str = "request_completed") -> models.Event:
        """An example ``request.<status>`` event (``request_completed``, ``request_expired``
        or ``request_canceled``)."""
        return await self._model("requests.sample", models.Event, params_of(formId=form_id, eventType=event_type))

    # -- documents -------------------------------------------------------------------------------------
    @api("documents.create")
    async def create_document(self, form_id: str, name: str, content_type: str, content: bytes | int, *,
                              sha256: str | Unset = UNSET) -> models.DocumentUpload:
        """Reserve a document (PDF or image) and get its upload URL; then
        :meth:`upload_document`. Give the file's bytes as ``content``: its exact size and
        its ``sha256`` (which the hosted service takes, notes section 1) are computed
        here. Given only a size, ``sha256`` is sent when passed. Counts against the
        creates limit."""
        if isinstance(content, bytes | bytearray | memoryview):
            data = bytes(content)
            size = len(data)
            if isinstance(sha256, Unset):
                sha256 = hashlib.sha256(data).hexdigest()
        else:
            size = content
        return await self._model("documents.create", models.DocumentUpload, params_of(
            formId=form_id, name=name, contentType=content_type, size=size, sha256=sha256))

    async def upload_document(self, upload: models.DocumentUpload, data: bytes) -> models.DocumentUploaded:
        """PUT the bytes to the upload URL. The URL is its own credential: no token is sent."""
        session, _ = self._ready()
        try:
            async with session.put(upload.upload_url, data=data, headers={"Content-Type": upload.content_type}) as resp:
                status = resp.status
                raw = await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise errors.TransportError(f"document upload of {upload.id}: {type(exc).__name__}: {exc}",
                                        retryable=True) from None
        try:
            envelope = json.loads(raw)
        except ValueError:
            envelope = None
        if isinstance(envelope, dict) and envelope.get("ok") is True:
            return self._parse("document upload", models.DocumentUploaded, envelope.get("data"))
        if isinstance(envelope, dict) and isinstance(envelope.get("error"), dict):
            raise errors.from_envelope(envelope["error"], status, "document upload")
        if status < 300:  # a storage service that answers without the envelope
            return models.DocumentUploaded(id=upload.id, name=upload.name, content_type=upload.content_type,
                                           size=len(data))
        raise errors.TransportError(f"document upload of {upload.id}: HTTP {status} ({raw[:80]!r})", status=status,
                                    retryable=status >= 500)

    # -- share links and webhooks -----------------------------------------------------------------------
    @api("shareLinks.create")
    async def create_share_link(self, form_id: str, *, name: str | Unset = UNSET) -> models.ShareLink:
        """A new public URL of a published form."""
        return await self._model("shareLinks.create", models.ShareLink, params_of(formId=form_id, name=name))

    @api("shareLinks.list")
    async def list_share_links(self, form_id: str) -> list[models.ShareLink]:
        """The form's share links, newest first, revoked ones included."""
        return await self._items("shareLinks.list", models.ShareLink, params_of(formId=form_id))

    @api("shareLinks.update")
    async def update_share_link(self, share_link_id: str, *, name: str | None | Unset = UNSET,
                                revoked: bool | Unset = UNSET) -> models.ShareLink:
        """Rename a share link (``name=None`` removes the name) or revoke it for good."""
        return await self._model("shareLinks.update", models.ShareLink, params_of(
            shareLinkId=share_link_id, name=name, revoked=revoked))

    @api("webhooks.create")
    async def create_webhook(self, form_id: str, target_url: str, provider: str, *,
                             event_type: str | Unset = UNSET, idle_window: str | Unset = UNSET,
                             signing_secret: str | SecretStr | Unset = UNSET) -> models.WebhookSubscription:
        """Subscribe ``target_url`` (https) to one event type of a form. The service signs
        deliveries with ``signing_secret`` (32-255 characters), never echoed."""
        return await self._model("webhooks.create", models.WebhookSubscription, params_of(
            formId=form_id, targetUrl=target_url, provider=provider, eventType=event_type, idleWindow=idle_window,
            signingSecret=signing_secret))

    @api("webhooks.list")
    async def list_webhooks(self, form_id: str) -> list[models.WebhookSubscription]:
        return await self._items("webhooks.list", models.WebhookSubscription, params_of(formId=form_id))

    @api("webhooks.delete")
    async def delete_webhook(self, subscription_id: str) -> models.WebhookDeleted:
        return await self._model("webhooks.delete", models.WebhookDeleted, params_of(subscriptionId=subscription_id))

