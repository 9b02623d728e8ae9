"""One exception per error code of the service. Branch on the class (or ``code``) for
the HTTP outcome, and on ``reason`` for the fix. No exception ever holds the token.

Every failure envelope becomes its exception in one place, :func:`from_envelope`. The tree::

    FormsyncError                 every error the connector raises
    ├── TransportError            no answer, or an answer that is not the API's envelope
    │   └── DefaultServiceAbsent  no service.base_url, and no sandbox at the default address
    ├── UnexpectedResult          a success whose data lacks what the connector needs
    └── ApiError                  a failure the service reported (``code``, ``reason``, ``field``)
        ├── ValidationError       VALIDATION_ERROR, 400
        ├── Unauthorized          UNAUTHORIZED, 401
        ├── UpgradeRequired       UPGRADE_REQUIRED, 402
        ├── Forbidden             FORBIDDEN, 403
        ├── NotFound              NOT_FOUND, 404
        ├── MethodNotFound        METHOD_NOT_FOUND, 404
        ├── Conflict              CONFLICT, 409
        ├── RateLimited           RATE_LIMITED, 429
        │   └── AuthRateLimited   429 to a call whose token is bad: too many failed authentications
        └── InternalError         INTERNAL_ERROR, 500

A code this version does not know maps to :class:`ApiError` itself, keeping the code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

# A reason written where a message goes: the whole message, or its prefix before ": "
# (``FORM_NOT_PUBLISHED``, ``INVALID_PREFILL_VALUE: plan expects an option key``).
_REASON_PREFIX = re.compile(r"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)(?::\s|:?$)")

TokenState = Literal["unknown", "accepted", "refused"]


def reason_of(details: Mapping[str, Any], message: str) -> str | None:
    """``details.reason``, else a reason-shaped prefix of ``message``, else None."""
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        return reason
    match = _REASON_PREFIX.match(message)
    return match.group(1) if match else None


def retry_after_header(value: str | None, now: datetime | None = None) -> float | None:
    """The seconds an HTTP ``Retry-After`` header asks for (delta-seconds or an
    HTTP-date), or None when absent or unreadable. A date in the past is 0."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class FormsyncError(Exception):
    """Base of every error the connector raises.

    ``outcome_unknown`` is true when a call that is not safe to repeat failed in a way that
    leaves open whether the service acted on it; ``attempts`` counts the sends made."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.outcome_unknown = False
        self.attempts = 1

    def __str__(self) -> str:
        return self.message

    def mark_outcome_unknown(self, method: str) -> FormsyncError:
        """Say in the message that ``method`` may or may not have taken effect, so it was
        not repeated, and how to make it safe to repeat."""
        self.outcome_unknown = True
        if method == "requests.create":
            how = ("Call it again with an idempotencyKey: the same key and body return the original request "
                   "(deduplicated: true) instead of creating a second one.")
        else:
            how = "Check whether it took effect before calling it again."
        self.message += (f" The outcome is unknown: {method} may have taken effect before this failure, and "
                         f"repeating it could act twice, so it was not retried. {how}")
        return self

    def after_lost_attempt(self, method: str) -> FormsyncError:
        """Say that an earlier attempt of ``method`` failed without an answer and may have
        taken effect, so this refusal of the retry (a request no longer pending, a folder
        already gone) may be that earlier attempt's doing rather than a real failure."""
        self.outcome_unknown = True
        self.message += (f" An earlier attempt of {method} failed without an answer (a 5xx, a timeout or a "
                         f"dropped connection) and may have taken effect: this refusal of the retry may be its "
                         f"result. Check the current state before acting on it.")
        return self

    def gave_up(self, attempts: int) -> FormsyncError:
        """Record that the call was sent ``attempts`` times before this error was kept."""
        self.attempts = attempts
        if attempts > 1:
            self.message += f" (gave up after {attempts} attempts)"
        return self


class TransportError(FormsyncError):
    """The service could not be reached, or answered something that is not the API's
    envelope. ``retryable``: a connection failure, a timeout or a 5xx, which a call that
    is safe to repeat may retry; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class DefaultServiceAbsent(TransportError):
    """``service.base_url`` is not set and nothing answers at the address it defaults to
    (the local sandbox): said at the first refused connection, never retried."""

    def __init__(self, base_url: str) -> None:
        super().__init__(f"is not set, and nothing listens at {base_url} (the local sandbox it defaults to); "
                         "set it in the config file's [service] section or FORMSYNC_SERVICE__BASE_URL, "
                         "or start `formsync sandbox`")
        self.base_url = base_url


class UnexpectedResult(FormsyncError):
    """The call succeeded but its ``data`` does not have the shape this client reads
    (a missing required member or a wrong type; unknown members are ignored)."""


class ApiError(FormsyncError):
    """A failure the service reported: ``{ok: false, error: {code, message, details}}``."""

    code: str = "API_ERROR"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict[str, Any] | None = None, method: str | None = None,
                 retry_after_header: float | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.status = status
        self.details: dict[str, Any] = details or {}
        self.method = method
        self.retry_after_header = retry_after_header
        self._reason = reason_of(self.details, message)

    @property
    def reason(self) -> str | None:
        """What to fix (the code says the HTTP outcome): ``details.reason``, or the
        reason a service wrote as the message or its prefix (``REQUEST_NOT_PENDING``)."""
        return self._reason

    @property
    def field(self) -> str | None:
        """``details.field``: the offending param, dotted for nesting (``prefill.<key>``)."""
        return self.details.get("field")

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        why = f" ({self.reason})" if self.reason else ""
        call = f"{self.method}: " if self.method else ""
        return f"{call}{self.code}{why}{where}: {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, reason={self.reason!r}, field={self.field!r}, "
                f"message={self.message!r})")


class ValidationError(ApiError):
    code = "VALIDATION_ERROR"


class Unauthorized(ApiError):
    code = "UNAUTHORIZED"


class UpgradeRequired(ApiError):
    code = "UPGRADE_REQUIRED"

    @property
    def feature(self) -> str | None:
        return self.details.get("feature")


class Forbidden(ApiError):
    code = "FORBIDDEN"


class NotFound(ApiError):
    code = "NOT_FOUND"


class MethodNotFound(ApiError):
    code = "METHOD_NOT_FOUND"


class Conflict(ApiError):
    code = "CONFLICT"


class RateLimited(ApiError):
    code = "RATE_LIMITED"

    @property
    def retry_after_ms(self) -> int:
        """``details.retryAfterMs``: how long the service asks to wait (0 when not given)."""
        value = self.details.get("retryAfterMs")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before sending again: ``details.retryAfterMs`` when given (the
        finer of the two), else the ``Retry-After`` header; None when neither is."""
        if self.retry_after_ms:
            return self.retry_after_ms / 1000
        return self.retry_after_header


class AuthRateLimited(RateLimited):
    """RATE_LIMITED answered to a call whose token is bad: the address made too many
    failed authentications (spec, Authentication 9). Waiting does not help a bad token;
    fix the token (a good one is still accepted)."""


class InternalError(ApiError):
    code = "INTERNAL_ERROR"
    retryable = True


BY_CODE: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (ValidationError, Unauthorized, UpgradeRequired, Forbidden, NotFound, MethodNotFound, Conflict,
                RateLimited, InternalError)
}


def from_envelope(error: Mapping[str, Any], status: int | None, method: str | None = None, *,
                  headers: Mapping[str, str] | None = None, token: TokenState = "unknown",
                  window: float = 60.0) -> ApiError:
    """The exception for an ``error`` object of a failure envelope: the class of its code
    (an unknown code maps to the base class, keeping the code). ``headers`` give a
    ``Retry-After``. A RATE_LIMITED is :class:`AuthRateLimited` when the call's ``token``
    is known to be refused, or is not yet known good and the wait asked is longer than
    any per-token ``window`` (seconds) could ask: only failed authentication does that."""
    code = str(error.get("code") or "API_ERROR")
    cls = BY_CODE.get(code, ApiError)
    raw = error.get("details")
    details = dict(raw) if isinstance(raw, Mapping) else {}
    header = retry_after_header((headers or {}).get("Retry-After"))
    err = cls(str(error.get("message") or code), code=code, status=status, details=details, method=method,
              retry_after_header=header)
    if isinstance(err, RateLimited) and _auth_throttled(err, token, window):
        err = AuthRateLimited(err.message, code=code, status=status, details=details, method=method,
                              retry_after_header=header)
    if cls is ApiError and status is not None and status >= 500:
        err.retryable = True  # a server-side failure under a code this version does not know
    return err


def _auth_throttled(err: RateLimited, token: TokenState, window: float) -> bool:
    if token == "refused":
        return True
    wait = err.retry_after
    return token == "unknown" and wait is not None and math.ceil(wait) > window
