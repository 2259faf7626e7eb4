"""Where a memory or buffer request goes, read from the request by hand in one dependency.

The memory routes are the hot path of the API (an append per agent step), and
FastAPI's per-parameter work (six path and query parameters, a security
dependency, a sub-dependency) cost more CPU than the store call itself: about
0.3 ms per request. ``memory_call`` reads the bearer token, the path and the
scope-id query parameters in one pass, refuses invalid ones with FastAPI's own
``RequestValidationError`` (so the 422 looks like every other), and
``TARGET_OPENAPI`` declares the same parameters and security in the OpenAPI
document that FastAPI would have generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from flowmem.api.deps import Caller
from flowmem.auth import bearer_token
from flowmem.scope import SCOPES

KEY_MAX = 255

# (name, max length, description) of the scope-id query parameters
QUERY_IDS: tuple[tuple[str, int, str], ...] = (
    ("session_id", 255, "For scope `session`: a session the caller may view/drive (a write to an id that names none creates it, owned by the caller)."),
    ("workflow_id", 255, "For scope `workflow`."),
    ("pipeline_id", 255, "For scope `pipeline`."),
    ("execution_id", 255, "For scope `execution`."),
)


@dataclass(frozen=True)
class Target:
    """The scope and key of the path and the scope ids of the query."""

    scope: str
    key: str
    session_id: str | None = None
    workflow_id: str | None = None
    pipeline_id: str | None = None
    execution_id: str | None = None


@dataclass(frozen=True)
class MemoryCall:
    """A memory request: who calls (token not yet checked) and where it goes."""

    caller: Caller
    target: Target


def _error(where: str, name: str, kind: str, message: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "loc": (where, name), "msg": message, "input": value}


def target_of(request: Request) -> Target:
    """Read and check the target of ``request``; RequestValidationError (422) lists what is wrong."""
    path = request.path_params
    scope, key = str(path.get("scope", "")), str(path.get("key", ""))
    problems: list[dict[str, Any]] = []
    if scope not in SCOPES:
        expected = ", ".join(repr(s) for s in SCOPES)
        problems.append(
            _error("path", "scope", "literal_error", f"Input should be {expected}", scope)
        )
    if not 1 <= len(key) <= KEY_MAX:
        problems.append(
            _error("path", "key", "string_length", f"Key must have 1 to {KEY_MAX} characters", key)
        )
    query = request.query_params
    ids: dict[str, str | None] = {}
    for name, limit, _ in QUERY_IDS:
        value = query.get(name)
        if value is not None and len(value) > limit:
            problems.append(
                _error(
                    "query",
                    name,
                    "string_too_long",
                    f"String should have at most {limit} characters",
                    value,
                )
            )
        ids[name] = value
    if problems:
        raise RequestValidationError(problems)
    return Target(scope, key, **ids)


async def memory_call(request: Request) -> MemoryCall:
    """The one dependency of the memory routes: the bearer token (401) and the target (422)."""
    token = bearer_token(request.headers.get("authorization"))
    return MemoryCall(Caller(request, token, request.app.state.services), target_of(request))


def _parameter(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    title = name.replace("_", " ").title()
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": {**schema, "description": description, "title": title},
        "description": description,
    }


TARGET_OPENAPI: dict[str, Any] = {
    "security": [{"HTTPBearer": []}],
    "parameters": [
        _parameter("scope", "path", {"enum": list(SCOPES), "type": "string"}, "The memory scope."),
        _parameter(
            "key",
            "path",
            {"type": "string", "minLength": 1, "maxLength": KEY_MAX},
            "The buffer or record key.",
        ),
        *(
            _parameter(
                name,
                "query",
                {"anyOf": [{"type": "string", "maxLength": limit}, {"type": "null"}]},
                description,
            )
            for name, limit, description in QUERY_IDS
        ),
    ],
}
"""What ``memory_call`` reads, for the OpenAPI document (``openapi_extra`` of each route)."""
