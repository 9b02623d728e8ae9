"""One exception per error code of the service. Branch on the class (or ``code``) for
the HTTP outcome, and on ``reason`` for the fix. No exception ever holds the token."""

from __future__ import annotations

from typing import Any


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


class UnexpectedResult(FormsyncError):
    """The call succeeded but its ``data`` does not have the shape this client reads
    (a missing required member or a wrong type; unknown members are ignored)."""


class ApiError(FormsyncError):
    """A failure the service reported: ``{ok: false, error: {code, message, details}}``."""

    code: str = "API_ERROR"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict[str, Any] | None = None, method: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.status = status
        self.details: dict[str, Any] = details or {}
        self.method = method

    @property
    def reason(self) -> str | None:
        """``details.reason``: what to fix (the code says the HTTP outcome)."""
        return self.details.get("reason")

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


class InternalError(ApiError):
    code = "INTERNAL_ERROR"
    retryable = True


BY_CODE: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (ValidationError, Unauthorized, UpgradeRequired, Forbidden, NotFound, MethodNotFound, Conflict,
                RateLimited, InternalError)
}


def from_envelope(error: dict[str, Any], status: int | None, method: str | None = None) -> ApiError:
    """The exception for an ``error`` object of a failure envelope (an unknown code maps
    to the base class, keeping the code)."""
    code = str(error.get("code") or "API_ERROR")
    cls = BY_CODE.get(code, ApiError)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    err = cls(str(error.get("message") or code), code=code, status=status, details=details, method=method)
    if cls is ApiError and status is not None and status >= 500:
        err.retryable = True  # a server-side failure under a code this version does not know
    return err
