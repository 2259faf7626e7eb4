"""The one table from flowmem error codes to HTTP statuses, and the error body.

Every refusal is ``{"error": {"code": STABLE_CODE, "message": …}}``; a 422 adds
``details`` (one entry per invalid field). Codes the HTTP layer itself produces
(``invalid_json``, ``body_too_deep``, ``unsupported_media_type``…) are listed
here too, so every code a client can see is in one place.

The handlers only map: they do no I/O. Authentication is not theirs: the request
gate (``flowmem.api.gate``) answers 401 before routing to any request off the open
paths without a valid token, so an error a handler maps (a 422 included) is always
told to an authenticated caller, and an unauthenticated one only ever sees 401.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowmem import metrics
from flowmem.errors import (
    FlowmemError,
    RateLimitedError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreReadOnlyError,
)
from flowmem.statuses import HTTP_CODES, STATUS_TABLE, status_for
from flowmem.ui import OPEN_PREFIXES, UI_PATH

__all__ = ["HTTP_CODES", "OPEN_PREFIXES", "STATUS_TABLE", "status_for"]

log = logging.getLogger("flowmem.http")

# Paths served without a token: these, and those under ``OPEN_PREFIXES`` (the inspector's
# and Swagger UI's files; the inspector's page asks for a token and sends it to the API).
OPEN_PATHS = frozenset(
    {"/health", "/health/store", "/openapi.json", "/docs", "/docs/oauth2-redirect"}
    | {"/", UI_PATH}
)

# What a 5xx tells the client: one sentence per code, never the driver's text (paths,
# hosts). A storage condition the operator must fix is named, so clients and probes
# can tell a full disk from a read-only or damaged database.
SERVER_MESSAGES: dict[str, str] = {
    StoreFullError.code: "the server's storage is full: the request was refused and nothing "
    "was written",
    StoreReadOnlyError.code: "the server's database is read-only: the request was refused and "
    "nothing was written",
    StoreCorruptError.code: "the server's database is damaged: the request was refused; it "
    "must be restored from a backup",
    StoreLockedError.code: "the server's database is locked by another process: the request "
    "was refused and nothing was written; try again later",
}
SERVER_MESSAGE = "the server could not complete the request"
# Conditions whose cause the error names (the operator's to fix, or to wait out): logged
# as one line, not with the traceback of a fault in flowmem.
NAMED_CONDITIONS = frozenset(SERVER_MESSAGES)

# Seconds a full or read-only store met by any request keeps readiness failing, even
# when the probe's small write still fits. A damaged database fails it until restart.
STORE_FAULT_WINDOW = 60.0


def record_store_fault(app: Any, error: FlowmemError) -> None:
    """Remember a storage condition a request met, for ``/health/store`` (and count it)."""
    if isinstance(error, StoreError):
        metrics.store_error(error.code)
    if isinstance(error, StoreCorruptError):
        app.state.store_fault = (error, None)  # never heals by itself
    elif isinstance(error, StoreFullError | StoreReadOnlyError):
        app.state.store_fault = (error, time.monotonic() + STORE_FAULT_WINDOW)


CORRUPT_HINT = (
    "; the server goes on serving what it can read, /health/store fails until a restart. "
    "Stop the server, run `flowmem doctor --database <url>` to see the damage, and restore "
    "the last copy `flowmem backup` made (SQLite; PostgreSQL: your base backup / pg_dump)"
)


def what_to_do(error: FlowmemError) -> str:
    """What the operator should do about a named storage condition (a damaged database)."""
    return CORRUPT_HINT if isinstance(error, StoreCorruptError) else ""


def recent_store_fault(app: Any) -> FlowmemError | None:
    """The storage condition a request met that still fails readiness, if any."""
    fault = getattr(app.state, "store_fault", None)
    if fault is None:
        return None
    error, until = fault
    if until is not None and time.monotonic() >= until:
        return None
    return error  # type: ignore[no-any-return]


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Return the JSON error envelope."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    retry_after: int | None = None,
) -> JSONResponse:
    """Return a JSON error response (with ``Retry-After`` when given)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return JSONResponse(
        error_body(code, message, details), status_code=status, headers=headers or None
    )


def server_error_response(error: FlowmemError) -> JSONResponse:
    """Return the response of a server-side error (its code and public sentence, no details)."""
    return error_response(
        status_for(error), error.code, SERVER_MESSAGES.get(error.code, SERVER_MESSAGE)
    )


def _field_details(error: FlowmemError) -> list[dict[str, Any]] | None:
    field = error.details.get("field") or error.details.get("argument")
    if field is None:
        return None
    detail: dict[str, Any] = {"field": str(field), "message": error.message}
    if "needed" in error.details:  # window_too_small: the budget that would fit (issue 28)
        detail["needed"] = error.details["needed"]
    return [detail]


async def _flowmem_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, FlowmemError):
        return await _unexpected(request, exc)
    status = status_for(exc)
    if status >= 500:
        if exc.code in NAMED_CONDITIONS:
            log.error("request refused (%s): %s%s", exc.code, exc.message, what_to_do(exc))
        else:
            log.error("request failed: %s", exc.message, exc_info=exc)
        record_store_fault(request.app, exc)
        return server_error_response(exc)
    details = _field_details(exc) if status == 422 else None
    if status == 422 and details is None:
        details = []
    retry_after = exc.retry_after if isinstance(exc, RateLimitedError) else None
    return error_response(status, exc.code, exc.message, details, retry_after)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, RequestValidationError):
        return await _unexpected(request, exc)
    details = [
        {"field": _location(item.get("loc", ())), "message": str(item.get("msg", "invalid"))}
        for item in exc.errors()
    ]
    return error_response(422, "invalid_input", "the request has invalid fields", details)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path, HEAD wherever GET is.

    Starlette's 405 lists only the first matching route's methods, and FastAPI
    keeps an included router's routes inside it (``iter_route_contexts`` walks
    them).
    """
    path = request.scope["path"]
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        pattern = getattr(route, "path_regex", None)
        if route.methods and pattern is not None and pattern.match(path):
            methods |= set(route.methods)
    if "GET" in methods:
        methods.add("HEAD")  # the request gate serves HEAD as GET without the body
    return sorted(methods)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, StarletteHTTPException):
        return await _unexpected(request, exc)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    response = error_response(exc.status_code, code, message)
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # bounded like the request log line (flowmem.api.logs): the method from a set, the path cut
    method, path = metrics.method_label(request.method), request.url.path[:512]
    log.error("unhandled error on %s %s", method, path, exc_info=exc)
    return error_response(500, "internal_error", "the server could not complete the request")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into the JSON error envelope."""
    app.add_exception_handler(FlowmemError, _flowmem_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
