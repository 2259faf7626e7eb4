"""API refusals back to the ``flowmem.errors`` class the in-process service raises.

The table is derived, not written: every ``FlowmemError`` subclass names its stable
``code``, and ``flowmem.statuses`` (the server's one code → status table) gives, for
a code the HTTP layer produces without a class of its own (``invalid_json``,
``too_many_values`` …), the class of its 4xx status (``InvalidInputError`` for an
unreadable body); any other code is an ``ApiError`` carrying it. The raised error keeps the
response's exact ``code``, its ``message``, the HTTP status (``details["http_status"]``)
and the 422 field list (``details["fields"]``; the first one also as ``details["field"]``).
"""

from __future__ import annotations

from typing import Any

from flowmem import errors as _errors
from flowmem.errors import (
    AccessDeniedError,
    FlowmemError,
    InvalidInputError,
    ModelError,
    NodeError,
    RateLimitedError,
)
from flowmem.statuses import HTTP_CODES, STATUS_TABLE


class ApiError(FlowmemError):
    """A refusal whose code no flowmem error class names (``method_not_allowed``, ``internal_error`` …).

    ``code`` is the response's code; ``details["http_status"]`` its HTTP status.
    """

    code = "api_error"


class ServerUnreachableError(FlowmemError):
    """The server could not be reached, or stopped answering, after every retry.

    The underlying ``httpx`` error is the ``__cause__``. A write that ends so may or
    may not have been applied: repeat it with the same idempotency key to know.
    """

    code = "server_unreachable"


def _subclasses(base: type[FlowmemError]) -> list[type[FlowmemError]]:
    found: list[type[FlowmemError]] = []
    for kind in base.__subclasses__():
        found.append(kind)
        found.extend(_subclasses(kind))
    return found


def _code_classes() -> dict[str, type[FlowmemError]]:
    """Every error class of ``flowmem.errors`` by code, then the HTTP-layer codes by status."""
    table: dict[str, type[FlowmemError]] = {}
    kinds: list[type[FlowmemError]] = [FlowmemError, *_subclasses(FlowmemError)]
    for kind in kinds:
        if kind.__module__ == _errors.__name__:
            table.setdefault(kind.code, kind)
    by_status: dict[int, type[FlowmemError]] = {}
    for kind, status in STATUS_TABLE.items():
        if status < 500:  # a server fault of the HTTP layer (internal_error) is no store error
            by_status.setdefault(status, kind)
    for code, status in HTTP_CODES.items():
        if code in table:
            continue
        # an unreadable body (400, 415) is invalid input, as the service would say
        fallback = InvalidInputError if status in (400, 415) else ApiError
        table[code] = by_status.get(status, fallback)
    return table


CODE_CLASSES: dict[str, type[FlowmemError]] = _code_classes()
"""Error code → the class raised for it (derived from ``flowmem.errors`` and ``flowmem.statuses``)."""


def _build(kind: type[FlowmemError], code: str, message: str, **details: Any) -> FlowmemError:
    """Make an instance of ``kind`` whatever its constructor takes, with the response's code."""
    error = kind.__new__(kind)
    FlowmemError.__init__(error, message, **details)
    if isinstance(error, RateLimitedError):
        error.retry_after = int(details.get("retry_after") or 1)
    if isinstance(error, AccessDeniedError):
        error.rule = None
    if isinstance(error, ModelError):
        error.status = None
    if isinstance(error, NodeError):
        error.node, error.port = "", None
    if error.code != code:
        error.code = code  # an HTTP-layer code (too_many_values …) kept exactly
    return error


def retry_after_seconds(value: str | None) -> int | None:
    """Return a ``Retry-After`` header's whole seconds (None when absent or not a number)."""
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return max(0, seconds)


def error_from_response(status: int, body: Any, retry_after: str | None = None) -> FlowmemError:
    """Return the flowmem error an API refusal stands for (``status``, JSON ``body``)."""
    info = body.get("error") if isinstance(body, dict) else None
    if not isinstance(info, dict) or not isinstance(info.get("code"), str):
        code = f"http_{status}"
        return _build(ApiError, code, f"the server answered HTTP {status}", http_status=status)
    code = info["code"]
    message = str(info.get("message") or code)
    details: dict[str, Any] = {"http_status": status}
    fields = info.get("details")
    if isinstance(fields, list):
        details["fields"] = fields
        if fields and isinstance(fields[0], dict) and "field" in fields[0]:
            details["field"] = fields[0]["field"]
    seconds = retry_after_seconds(retry_after)
    if seconds is not None:
        details["retry_after"] = seconds
    return _build(CODE_CLASSES.get(code, ApiError), code, message, **details)


__all__ = [
    "CODE_CLASSES",
    "ApiError",
    "ServerUnreachableError",
    "error_from_response",
    "retry_after_seconds",
]
