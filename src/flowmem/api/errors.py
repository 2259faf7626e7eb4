"""The one table from flowmem error codes to HTTP statuses, and the error body.

Every refusal is ``{"error": {"code": STABLE_CODE, "message": …}}``; a 422 adds
``details`` (one entry per invalid field). Codes the HTTP layer itself produces
(``invalid_json``, ``body_too_deep``, ``unsupported_media_type``…) are listed
here too, so every code a client can see is in one place.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from flowmem.auth import authenticate, bearer_token
from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    FlowmemError,
    InvalidInputError,
    InvalidTextError,
    ModelError,
    NotFoundError,
    PayloadTooLargeError,
    StoreError,
    ToolError,
)

log = logging.getLogger("flowmem.http")

# Paths served without a token.
OPEN_PATHS = frozenset(
    {"/health", "/health/store", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)

# flowmem error class -> HTTP status; the first match wins (subclasses before bases).
STATUS_TABLE: list[tuple[type[FlowmemError], int]] = [
    (PayloadTooLargeError, 413),
    (InvalidTextError, 422),
    (InvalidInputError, 422),
    (AuthenticationError, 401),
    (AccessDeniedError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (ConfigurationError, 500),
    (StoreError, 503),
    (ModelError, 502),
    (ToolError, 502),
]

# Codes produced by the HTTP layer (not by a flowmem error class), with their status.
HTTP_CODES: dict[str, int] = {
    "invalid_json": 400,
    "invalid_body": 400,
    "body_too_deep": 400,
    "unsupported_media_type": 415,
    "payload_too_large": 413,
    "not_found": 404,
    "method_not_allowed": 405,
    "invalid_input": 422,
    "invalid_text": 422,
    "internal_error": 500,
}


def status_for(error: FlowmemError) -> int:
    """Return the HTTP status of a flowmem error (500 for an unmapped one)."""
    for kind, status in STATUS_TABLE:
        if isinstance(error, kind):
            return status
    return 500


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Return the JSON error envelope."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def error_response(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
) -> JSONResponse:
    """Return a JSON error response."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(code, message, details), status_code=status, headers=headers)


def _field_details(error: FlowmemError) -> list[dict[str, Any]] | None:
    field = error.details.get("field") or error.details.get("argument")
    if field is None:
        return None
    return [{"field": str(field), "message": error.message}]


async def _flowmem_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, FlowmemError):
        return await _unexpected(request, exc)
    status = status_for(exc)
    if status != 401:
        refused = await _unauthenticated(request)
        if refused is not None:
            return refused
    if status >= 500:
        log.error("request failed: %s", exc.message, exc_info=exc)
        return error_response(status, exc.code, "the server could not complete the request")
    details = _field_details(exc) if status == 422 else None
    if status == 422 and details is None:
        details = []
    return error_response(status, exc.code, exc.message, details)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc)


async def _unauthenticated(request: Request) -> JSONResponse | None:
    """Return the 401 response when the request's token is not valid (before telling it 422)."""
    if getattr(request.state, "principal", None) is not None or request.url.path in OPEN_PATHS:
        return None
    try:
        token = bearer_token(request.headers.get("authorization"))
        await run_in_threadpool(authenticate, request.app.state.services.store, token)
    except AuthenticationError as exc:
        return error_response(401, exc.code, exc.message)
    except FlowmemError:
        return None  # e.g. the store is down: the original error stands
    return None


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, RequestValidationError):
        return await _unexpected(request, exc)
    refused = await _unauthenticated(request)
    if refused is not None:
        return refused
    details = [
        {"field": _location(item.get("loc", ())), "message": str(item.get("msg", "invalid"))}
        for item in exc.errors()
    ]
    return error_response(422, "invalid_input", "the request has invalid fields", details)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette lists only the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE and isinstance(route, Route) and route.methods:
            methods |= set(route.methods)
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
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "the server could not complete the request")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into the JSON error envelope."""
    app.add_exception_handler(FlowmemError, _flowmem_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
