"""The service's closed set of error codes and the one exception that carries them.

Domain code raises :class:`ApiError`; each binding (JSON-RPC, MCP) turns it into its
own wire shape. New failure modes add a ``details.reason``, never a code.
"""

from __future__ import annotations

from typing import Any

HTTP_STATUS: dict[str, int] = {
    "VALIDATION_ERROR": 400,
    "UNAUTHORIZED": 401,
    "UPGRADE_REQUIRED": 402,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_FOUND": 404,
    "CONFLICT": 409,
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
}
CODES = frozenset(HTTP_STATUS)


class ApiError(Exception):
    """A failure the API reports: ``code`` from the closed set, a message that says how
    to fix the call, and ``details`` (reason, field, validKeys, ...) when the cause can
    be named."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    @property
    def status(self) -> int:
        return HTTP_STATUS[self.code]

    def to_wire(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            err["details"] = self.details
        return err


def validation(message: str, **details: Any) -> ApiError:
    return ApiError("VALIDATION_ERROR", message, **details)


def not_found(what: str, **details: Any) -> ApiError:
    return ApiError("NOT_FOUND", f"{what} not found", **details)


def conflict(message: str, **details: Any) -> ApiError:
    return ApiError("CONFLICT", message, **details)


def forbidden(message: str, **details: Any) -> ApiError:
    return ApiError("FORBIDDEN", message, **details)


def upgrade_required(message: str, feature: str, **details: Any) -> ApiError:
    return ApiError("UPGRADE_REQUIRED", message, feature=feature, **details)
