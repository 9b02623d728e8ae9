"""A typed client of the sandbox's test helpers: one method per helper, speaking HTTP to
``POST /api/sandbox`` with a workspace's bearer token.

    async with SandboxHelpers(base_url, token) as helpers:
        await helpers.requests_complete(request_id, {"email": "a@example.test"})
        await helpers.clock_advance(3_600_000)
        flushed = await helpers.deliveries_flush()
"""

from __future__ import annotations

import base64
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel

from ..domain.misc import MethodList
from .models import (
    CallList,
    ClockResult,
    CompletedRequest,
    Deleted,
    DeletedSubmission,
    DialectView,
    EventList,
    FaultPlan,
    FaultsView,
    FileObject,
    FlushResult,
    LimitsView,
    MailList,
    MemberRemoved,
    MemberView,
    PendingList,
    ResetResult,
    ShareSubmitted,
    SnapshotList,
    SnapshotView,
    SubmissionRef,
    TokenList,
    TokenView,
    UpdatedSubmission,
    WorkspaceView,
)

M = TypeVar("M", bound=BaseModel)


class HelperError(Exception):
    """A helper refused the call: the error envelope's ``code``, ``message`` and
    ``details``, and the HTTP status."""

    def __init__(self, method: str, status: int, error: dict[str, Any]) -> None:
        self.method, self.status = method, status
        self.code = str(error.get("code", ""))
        self.message = str(error.get("message", ""))
        self.details: dict[str, Any] = dict(error.get("details") or {})
        super().__init__(f"sandbox helper {method}: {status} {self.code}: {self.message}")


def _given(**params: Any) -> dict[str, Any]:
    """The params that were given (None means "not sent")."""
    return {k: v for k, v in params.items() if v is not None}


class SandboxHelpers:
    """The test helpers of the sandbox at ``base_url``, called as the holder of ``token``.

    ``async with SandboxHelpers(...) as helpers:`` keeps one HTTP session for its calls
    and closes it on exit. Used without ``async with``, each call opens and closes a
    session of its own, so nothing is left open to leak (``close()`` is then a no-op).
    Pass ``http`` to share an aiohttp session (it is then never closed here)."""

    def __init__(self, base_url: str, token: str, *, http: aiohttp.ClientSession | None = None,
                 timeout_s: float = 60.0) -> None:
        self.url = base_url.rstrip("/") + "/api/sandbox"
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http, self._own_http = http, http is None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def __aenter__(self) -> SandboxHelpers:
        if self._http is None:
            self._http, self._own_http = aiohttp.ClientSession(timeout=self._timeout), True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session ``async with`` opened (a shared ``http`` stays open)."""
        if self._own_http and self._http is not None:
            await self._http.close()
            self._http = None

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Call the helper ``method`` with ``params``; its ``data``, or HelperError."""
        if self._http is not None:
            return await self._post(self._http, method, params)
        async with aiohttp.ClientSession(timeout=self._timeout) as http:  # not entered: a session per call
            return await self._post(http, method, params)

    async def _post(self, http: aiohttp.ClientSession, method: str, params: dict[str, Any] | None) -> Any:
        async with http.post(self.url, json={"method": method, "params": params or {}},
                             headers=self._headers) as resp:
            body = await resp.json(content_type=None)
            if not isinstance(body, dict) or body.get("ok") is not True:
                error = body.get("error") if isinstance(body, dict) else None
                raise HelperError(method, resp.status, error if isinstance(error, dict) else {"message": body})
            return body["data"]

    async def _model(self, model: type[M], method: str, params: dict[str, Any] | None = None) -> M:
        return model.model_validate(await self.call(method, params))

    # -- clock, reset, deliveries ----------------------------------------------------
    async def clock_advance(self, ms: int) -> ClockResult:
        """Move the test clock forward ``ms`` and run the time-driven work that became due."""
        return await self._model(ClockResult, "clock.advance", {"ms": ms})

    async def clock_get(self) -> ClockResult:
        return await self._model(ClockResult, "clock.get")

    async def reset(self) -> ResetResult:
        """Back to the seeded state (store, clock, limits, fault plan)."""
        return await self._model(ResetResult, "reset")

    async def deliveries_flush(self) -> FlushResult:
        """Attempt every due delivery now; one item per attempt."""
        return await self._model(FlushResult, "deliveries.flush")

    # -- rate limits, call log, faults ----------------------------------------------------
    async def limits_set(self, *, calls_per_minute: int | None = None, creates_per_minute: int | None = None,
                         failed_auth: int | None = None, window_ms: int | None = None) -> LimitsView:
        return await self._model(LimitsView, "limits.set", _given(
            callsPerMinute=calls_per_minute, createsPerMinute=creates_per_minute, failedAuth=failed_auth,
            windowMs=window_ms))

    async def calls_list(self, *, since: int | None = None, method: str | None = None) -> CallList:
        """The API calls this token made, optionally since a time or of one method."""
        return await self._model(CallList, "calls.list", _given(since=since, method=method))

    async def faults_set(self, plan: FaultPlan | dict[str, Any]) -> FaultsView:
        """Inject faults by ``plan`` (a FaultPlan or its JSON: ``{seed, rules}``)."""
        params = plan.model_dump(mode="json", exclude_unset=True) if isinstance(plan, FaultPlan) else plan
        return await self._model(FaultsView, "faults.set", params)

    async def faults_get(self) -> FaultsView:
        return await self._model(FaultsView, "faults.get")

    async def faults_clear(self) -> FaultsView:
        return await self._model(FaultsView, "faults.clear")

    async def methods_list(self) -> MethodList:
        """Every helper's name, with a one-line summary each."""
        return await self._model(MethodList, "methods.list")

    async def dialect_set(self, dialect: str) -> DialectView:
        """Answer later ``/api/v1`` calls in ``full`` or ``minimal`` (formservice/dialect.py)."""
        return await self._model(DialectView, "dialect.set", {"dialect": dialect})

    # -- tokens, members, workspace -----------------------------------------------------
    async def tokens_create(self, name: str = "test", kind: str = "api") -> TokenView:
        return await self._model(TokenView, "tokens.create", {"name": name, "kind": kind})

    async def tokens_list(self) -> TokenList:
        return await self._model(TokenList, "tokens.list")

    async def tokens_rename(self, token_id: str, name: str) -> TokenView:
        return await self._model(TokenView, "tokens.rename", {"tokenId": token_id, "name": name})

    async def tokens_delete(self, token_id: str) -> Deleted:
        return await self._model(Deleted, "tokens.delete", {"tokenId": token_id})

    async def members_add(self, email: str, name: str) -> MemberView:
        return await self._model(MemberView, "members.add", {"email": email, "name": name})

    async def members_remove(self, user_id: str) -> MemberRemoved:
        return await self._model(MemberRemoved, "members.remove", {"userId": user_id})

    async def workspace_update(self, *, plan: str | None = None, monthly_allowance: int | None = None,
                               partial_tracking: bool | None = None,
                               payment_connected: bool | None = None) -> WorkspaceView:
        return await self._model(WorkspaceView, "workspace.update", _given(
            plan=plan, monthlyAllowance=monthly_allowance, partialTracking=partial_tracking,
            paymentConnected=payment_connected))

    # -- what respondents and recipients do -------------------------------------------------
    async def submissions_create(self, form_id: str, answers: dict[str, Any] | None = None, *,
                                 completed: bool = True, respondent_email: str | None = None) -> SubmissionRef:
        return await self._model(SubmissionRef, "submissions.create", _given(
            formId=form_id, answers=answers or {}, completed=completed, respondentEmail=respondent_email))

    async def requests_complete(self, request_id: str, answers: dict[str, Any] | None = None) -> CompletedRequest:
        """Complete the request as its recipient would; the request's full record."""
        return await self._model(CompletedRequest, "requests.complete",
                                 {"requestId": request_id, "answers": answers or {}})

    async def requests_open(self, request_id: str) -> CompletedRequest:
        """Open the request's page as its recipient would: ``openedAt`` and the ``opened``
        timeline entry (once); the request's full record."""
        return await self._model(CompletedRequest, "requests.open", {"requestId": request_id})

    async def requests_start(self, request_id: str, answers: dict[str, Any] | None = None) -> CompletedRequest:
        """Save a draft of ``answers`` as the recipient would: ``startedAt`` (and ``openedAt``)
        with their timeline entries; the request's full record."""
        return await self._model(CompletedRequest, "requests.start",
                                 {"requestId": request_id, "answers": answers or {}})

    async def submissions_update(self, submission_id: str, answers: dict[str, Any]) -> UpdatedSubmission:
        """Edit a sent public-link submission as its respondent would (the form's
        editAfterSubmit and maxEdits apply); emits ``submission.updated``."""
        return await self._model(UpdatedSubmission, "submissions.update",
                                 {"submissionId": submission_id, "answers": answers})

    async def submissions_delete(self, submission_id: str) -> DeletedSubmission:
        """Delete one submission as its form's owner would (no API method does): it leaves
        submissions.list; a request it answered keeps its status, its answers cleared."""
        return await self._model(DeletedSubmission, "submissions.delete", {"submissionId": submission_id})

    async def share_links_submit(self, url: str, answers: dict[str, Any] | None = None, *, completed: bool = True,
                                 password: str | None = None, edit_token: str | None = None,
                                 submission_id: str | None = None) -> ShareSubmitted:
        return await self._model(ShareSubmitted, "shareLinks.submit", _given(
            url=url, answers=answers or {}, completed=completed, password=password, editToken=edit_token,
            submissionId=submission_id))

    async def files_create(self, name: str, content: bytes, type: str = "application/octet-stream") -> FileObject:
        """Store ``content`` in the service's storage; the file object a file answer takes."""
        return await self._model(FileObject, "files.create", {
            "name": name, "type": type, "contentBase64": base64.b64encode(content).decode()})

    # -- the outbox -------------------------------------------------------------------------
    async def mail_list(self, *, to: str | None = None, request_id: str | None = None) -> MailList:
        return await self._model(MailList, "mail.list", _given(to=to, requestId=request_id))

    async def events_list(self, *, request_id: str | None = None, type: str | None = None,
                          form_id: str | None = None) -> EventList:
        return await self._model(EventList, "events.list", _given(requestId=request_id, type=type, formId=form_id))

    async def deliveries_pending(self, subscription_ids: list[str] | None = None) -> PendingList:
        """Per subscription, the deliveries still pending (only those of ``subscription_ids``)."""
        return await self._model(PendingList, "deliveries.pending", _given(subscriptionIds=subscription_ids))

    # -- snapshots --------------------------------------------------------------------------
    async def snapshot_save(self, name: str) -> SnapshotView:
        """Save the sandbox's whole state as ``name`` (replacing one of that name)."""
        return await self._model(SnapshotView, "snapshot.save", {"name": name})

    async def snapshot_restore(self, name: str) -> SnapshotView:
        """Go back to the state saved as ``name``."""
        return await self._model(SnapshotView, "snapshot.restore", {"name": name})

    async def snapshot_list(self) -> SnapshotList:
        """The snapshots kept, by name."""
        return await self._model(SnapshotList, "snapshot.list")
