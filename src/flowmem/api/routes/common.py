"""What every route shares: error responses for OpenAPI, the routes on a scope's data, pagination helpers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query

from flowmem.api.fast.route import DirectRoute, Target, memory_call
from flowmem.api.models import ErrorBody
from flowmem.scope import NAME_MAX, SCOPES

MAX_LIMIT = 100
DEFAULT_LIMIT = 20


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Return the OpenAPI ``responses`` entries for the given error statuses."""
    descriptions = {
        400: "Unreadable body (invalid JSON, too deep, not an object or array).",
        401: "Missing, unknown or revoked token.",
        403: "The access rules deny this action.",
        404: "No such resource (or the caller may not know it exists).",
        408: "The body did not arrive in time (`request_timeout`).",
        409: "Conflicts with the current state, or a stored limit would be passed "
        "(`buffer_full`, `too_many_sessions`).",
        413: "Body, batch, message, record or metadata too large.",
        415: "The body is not JSON.",
        422: "Invalid fields; `details` lists them.",
        429: "Too many requests from this token, or bad tokens from this address; "
        "see `Retry-After`.",
        503: "The store is unreachable, busy, read-only or damaged; `code` says which.",
        507: "The server's storage is full (`store_full`); nothing was written.",
    }
    return {s: {"model": ErrorBody, "description": descriptions[s]} for s in statuses}


BODY_ERRORS = (400, 408, 413, 415, 422)
AUTH_ERRORS = (401, 429)
SCOPE_ERRORS = (*AUTH_ERRORS, 403, 404, 422)
"""What a route on a scope's data may answer whatever it does: the token's, the access rules', the address's."""


def scoped(model: type, *statuses: int, openapi: dict[str, Any] | None = None) -> dict[str, Any]:
    """The declaration of a route on a scope's data: its answer ``model``, its errors, its OpenAPI extra.

    The model's unset fields are left out, so ``refused`` is there only on a refusal;
    the errors are ``SCOPE_ERRORS`` and ``statuses``; ``openapi``: the parameters the
    route reads by hand (``TARGET_OPENAPI``, ``WRITE_OPENAPI``).
    """
    declared: dict[str, Any] = {
        "response_model": model,
        "response_model_exclude_unset": True,
        "responses": errors(*SCOPE_ERRORS, *statuses),
    }
    if openapi is not None:
        declared["openapi_extra"] = openapi
    return declared


def scoped_router() -> APIRouter:
    """A router of routes on a scope's data under ``/v1`` (tag ``memory``), answered by the fast path (``DirectRoute``)."""
    return APIRouter(prefix="/v1", tags=["memory"], route_class=DirectRoute)


CALL = Depends(memory_call)
"""The ``MemoryCall`` parameter of a route of ``scoped_router``: its scope, key and caller, resolved once."""


def _scope_id() -> Any:
    """A scope-id query parameter: one ``Query`` each (FastAPI keeps only the first of a shared one)."""
    return Query(None, max_length=NAME_MAX)


# an unknown scope is ``unknown_scope`` (422) from ``check_scope``, as on the other memory routes
ScopeName = Path(description="The memory scope.", json_schema_extra={"enum": list(SCOPES)})


def query_target(
    scope: str = ScopeName,
    session_id: str | None = _scope_id(),
    workflow_id: str | None = _scope_id(),
    pipeline_id: str | None = _scope_id(),
    execution_id: str | None = _scope_id(),
) -> Target:
    """The target of a route on a whole scope: its scope from the path, its scope ids from the query (no key)."""
    return Target(scope, "", session_id, workflow_id, pipeline_id, execution_id)


QUERY_TARGET = Depends(query_target)
"""The ``Target`` parameter of a route on a whole scope (``query_target``)."""


PAGE_SIZE = Query(DEFAULT_LIMIT, description=f"Page size, clamped to 1–{MAX_LIMIT}.")
"""The ``limit`` query parameter of a paged list; the route clamps it (``clamp_limit``)."""


def clamp_limit(limit: int | None) -> int:
    """Clamp a page size into 1–100 (default 20)."""
    if limit is None:
        return DEFAULT_LIMIT
    return max(1, min(MAX_LIMIT, limit))
