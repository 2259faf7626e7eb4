"""One memory or buffer request: where it goes, under which scope, and its one short call.

The memory routes are the hot path of the API (an append per agent step), and
FastAPI's per-parameter work (six path and query parameters, a security
dependency, a sub-dependency) cost more CPU than the store call itself: about
0.3 ms per request. ``memory_call`` reads the bearer token, the path and the
scope-id query parameters in one pass, refuses invalid ones with FastAPI's own
``RequestValidationError`` (so the 422 looks like every other), and
``TARGET_OPENAPI`` declares the same parameters and security in the OpenAPI
document that FastAPI would have generated.

``scope_context`` says which scope id the caller gets:

- ``user``: the caller's own user id; a principal without one (a service token)
  gets a context with no user, so the scope refuses and the result is neutral
  (MEM-6, MEM-7).
- ``session``: the ``session_id`` query parameter names a session the caller may
  view (reads, loads) or drive (writes, appends, deletes, clears); the context's
  user is the session's owner, never the caller (MEM-8). Without ``session_id``
  the scope refuses (MEM-13) and the result is neutral. A session the caller may
  not view is 404; one it may view but not drive is 403 for a write.
- ``global``/``workflow``/``pipeline``/``execution`` (shared scopes): need the
  ``memory:shared`` permission, the ``shared_memory`` action of
  ``flowmem.access.decide`` (403 otherwise); the ids come from the
  ``workflow_id``/``pipeline_id``/``execution_id`` query parameters.

``ShortCall`` is the rule that lets a call run on the event loop, as a type: one
of the memory service's named single-transaction operations (``Operation``), each
of which reads, or changes one record or buffer as its last step. Only a
``ShortCall`` goes to the pool's short path (``StorePool.short``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from flowmem.access import Principal, decide
from flowmem.api.deps import Caller
from flowmem.api.gate import request_principal
from flowmem.auth import bearer_token
from flowmem.errors import AccessDeniedError
from flowmem.scope import SCOPES, ExecutionContext, check_scope
from flowmem.sessions import SessionService, memory_context
from flowmem.store.base import SESSION_SCOPE, WriteGuard

KEY_MAX = 255
NODE_ID = "http"

# (name, max length, description) of the scope-id query parameters
QUERY_IDS: tuple[tuple[str, int, str], ...] = (
    ("session_id", 64, "For scope `session`: a session the caller may view/drive."),
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

    async def short(self, operation: Operation, **arguments: Any) -> Any:
        """Run ``operation`` of the memory service on this target in the pool's short path."""
        return await self.caller.services.pool.short(ShortCall(self, operation, arguments))

    async def answer(self, operation: Operation, **arguments: Any) -> dict[str, Any]:
        """``short``, then the JSON form of the operation's result."""
        result = await self.short(operation, **arguments)
        answer: dict[str, Any] = result.to_dict()
        return answer


class Operation(Enum):
    """The memory service's single-transaction operations: each changes at most one thing, last.

    That is what makes a call safe to run on the event loop and, when it raises
    ``WouldBlock`` (it found a lock taken, before it changed anything), to run
    again in a thread. The value is the ``MemoryService`` method's name.
    """

    READ = "read"  # reads one record
    LOAD = "load_text"  # reads one buffer
    WRITE = "write"  # one record upsert, guarded
    DELETE = "delete"  # one record
    APPEND = "append"  # one buffer's append transaction, guarded
    CLEAR = "clear"  # one buffer

    @property
    def writes(self) -> bool:
        """True when the operation changes the store (a session scope needs ``drive``)."""
        return self not in (Operation.READ, Operation.LOAD)

    @property
    def guarded(self) -> bool:
        """True when the write checks a ``WriteGuard`` inside its transaction (decision 0014)."""
        return self in (Operation.WRITE, Operation.APPEND)


@dataclass(frozen=True)
class ShortCall:
    """One ``Operation`` of a memory request, with its arguments after the context."""

    call: MemoryCall
    operation: Operation
    arguments: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> Any:
        """Authenticate, resolve the scope, then run the operation (blocking; one transaction).

        ``guard`` is what a write must find still true inside its transaction: the
        caller's token, and for the ``session`` scope the session (docs/decisions/0014).
        """
        caller, target = self.call.caller, self.call.target
        services = caller.services
        principal = request_principal(caller.request, caller.token, services.store)
        context = scope_context(services.sessions, principal, target, write=self.operation.writes)
        arguments = self.arguments
        if self.operation.guarded:
            session = context.session_id if target.scope == SESSION_SCOPE else None
            arguments = {**arguments, "guard": WriteGuard(principal.token_id, session)}
        method = getattr(services.memory, self.operation.value)
        return method(target.scope, target.key, context=context, **arguments)


def scope_context(
    sessions: SessionService, principal: Principal, target: Target, *, write: bool
) -> ExecutionContext:
    """Return the execution context a memory request of ``principal`` runs under."""
    name = check_scope(target.scope)
    if name == "user":
        return ExecutionContext(user_id=principal.identity, node_id=NODE_ID)
    if name == "session":
        if target.session_id is None:
            return ExecutionContext(node_id=NODE_ID)  # refuses: no session (MEM-13)
        session = sessions.load(principal, target.session_id, "drive" if write else "view")
        return memory_context(session, NODE_ID)
    decision = decide(principal, "shared_memory", None)
    if not decision.allowed:
        raise AccessDeniedError(decision.reason, rule=decision.rule)
    return ExecutionContext(
        workflow_id=target.workflow_id,
        pipeline_id=target.pipeline_id,
        execution_id=target.execution_id,
        node_id=NODE_ID,
    )


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
