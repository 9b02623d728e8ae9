"""One exception per error code of the service. Branch on the class (or ``code``) for
the HTTP outcome, and on ``reason`` for the fix."""

from __future__ import annotations

from typing import Any


class FormsyncError(Exception):
    """Base of every error the connector raises."""


class TransportError(FormsyncError):
    """The service could not be reached, or answered something that is not the API's
    envelope, after the retries the call was allowed."""


class ApiError(FormsyncError):
    """A failure the service reported: ``{ok: false, error: {code, message, details}}``."""

    code: str = "API_ERROR"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict[str, Any] | None = None, method: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.details: dict[str, Any] = details or {}
        self.method = method

    @property
    def reason(self) -> str | None:
        return self.details.get("reason")

    @property
    def field(self) -> str | None:
        return self.details.get("field")

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        why = f" ({self.reason})" if self.reason else ""
        call = f"{self.method}: " if self.method else ""
        return f"{call}{self.code}{why}{where}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, reason={self.reason!r}, message={self.message!r})"


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
        return int(self.details.get("retryAfterMs") or 0)


class InternalError(ApiError):
    code = "INTERNAL_ERROR"


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
    return cls(str(error.get("message") or code), code=code, status=status, details=details, method=method)
