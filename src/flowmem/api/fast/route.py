"""One memory or buffer request, read and answered by hand: the direct route of the hot path.

**The route** (``DirectRoute``). FastAPI documents a route from its endpoint's
signature and, per request, solves that signature again (dependencies, body,
response model). On an append that
solving cost about as much CPU as the store work itself (decision 0007). A
``DirectRoute`` keeps the endpoint and its signature as the contract (the OpenAPI
document is generated from them as before) but handles a request in one plain
function, through FastAPI's documented extension point (a custom ``APIRoute``
whose ``get_route_handler`` returns the handler):

- the one dependency (``memory_call``: bearer token, 401; path and query, 422)
  is called directly;
- the body, when the endpoint takes one, is the JSON document the body
  gate already parsed (``gate.PARSED_BODY``; ``json.loads``, as FastAPI parses
  it), validated by its pydantic model as FastAPI validates it (in a thread for
  a large body, ``gate.LARGE_BODY``); errors keep FastAPI's shape and wording,
  with the location under ``body``;
- the endpoint's dict result is written as compact JSON, as FastAPI's own
  ``JSONResponse`` would, without validating it again against the response model
  (a test checks the two agree, and schemathesis checks every response).

An endpoint whose signature has anything else (a query parameter, a second
dependency) is handled by FastAPI as usual.

**The target** (``memory_call``). The memory routes are the hot path of the API
(an append per agent step), and FastAPI's per-parameter work (six path and query parameters, a security
dependency, a sub-dependency) cost more CPU than the store call itself: about
0.3 ms per request. ``memory_call`` reads the bearer token, the path and the
scope-id query parameters in one pass, refuses invalid ones with FastAPI's own
``RequestValidationError`` (so the 422 looks like every other), and
``TARGET_OPENAPI`` declares the same parameters and security in the OpenAPI
document that FastAPI would have generated.

**The scope** (``scope_context``): which scope id the caller gets.

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

**The store work** (``ShortCall``): the rule that lets a call run on the event
loop, as a type. It is one
of the memory service's named single-transaction operations (``Operation``),
each of which reads, or changes one record or buffer as its last step. Only a
``ShortCall`` goes to the pool's short path (``StorePool.short``), and a route's
store work is one: ``MemoryCall.answer(Operation.APPEND, ...)``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from flowmem import access
from flowmem.access import Principal, decide
from flowmem.api.deps import Caller
from flowmem.api.idempotency import PARAMETER as IDEMPOTENCY_PARAMETER
from flowmem.api.idempotency import REFUSED_HEADER, Answer, Keyed
from flowmem.api.lookup import LookupCache
from flowmem.api.principal import LARGE_BODY, PARSED_BODY, request_principal
from flowmem.api.query import KnownQueryRoute, check_query, known_query, route_name
from flowmem.api.render import render
from flowmem.auth import bearer_token
from flowmem.errors import AccessDeniedError, NotFoundError
from flowmem.scope import NAME_MAX, SCOPES, ExecutionContext, check_scope
from flowmem.sessions import SessionService, memory_context
from flowmem.store.base import SESSION_SCOPE, SessionRecord, WriteGuard

_UNPARSED = object()
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _body_model(annotation: Any) -> type[BaseModel] | None:
    """Return ``annotation`` when it is a pydantic model class (a JSON body), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _takes_only_request(dependency: Callable[..., Any]) -> bool:
    """True for an async dependency whose one parameter is the ``Request``."""
    if not inspect.iscoroutinefunction(dependency):
        return False
    parameters = list(inspect.signature(dependency, eval_str=True).parameters.values())
    return len(parameters) == 1 and parameters[0].annotation is Request


def _plan(endpoint: Callable[..., Any]) -> tuple[str, Callable[..., Any], str | None, Any] | None:
    """Return (dependency parameter, its callable, body parameter, body model), or None.

    None when the endpoint's signature is anything other than one ``Depends``
    parameter and at most one pydantic-model body parameter.
    """
    if not inspect.iscoroutinefunction(endpoint):
        return None
    dependency: tuple[str, Callable[..., Any]] | None = None
    body: tuple[str, type[BaseModel]] | None = None
    for name, parameter in inspect.signature(endpoint, eval_str=True).parameters.items():
        model = _body_model(parameter.annotation)
        if isinstance(parameter.default, Depends) and dependency is None:
            call = parameter.default.dependency
            if call is None or not _takes_only_request(call):
                return None
            dependency = (name, call)
        elif model is not None and body is None and parameter.default is inspect.Parameter.empty:
            body = (name, model)
        else:
            return None
    if dependency is None:
        return None
    return (*dependency, *(body if body is not None else (None, None)))


def _validate(model: type[BaseModel], document: Any) -> BaseModel:
    return model.model_validate(document, from_attributes=True)


def _body_errors(error: ValidationError) -> list[dict[str, Any]]:
    """Return pydantic's errors the way FastAPI reports a body: located under ``body``."""
    return [{**item, "loc": ("body", *item["loc"])} for item in error.errors(include_url=False)]


async def _document(request: Request) -> Any:
    """Return the request's JSON body: as the body middleware parsed it, else parsed here.

    A missing or unreadable body is a 422 under ``body``, as FastAPI reports it.
    """
    document = request.scope.get(PARSED_BODY, _UNPARSED)
    if document is _UNPARSED:
        raw = await request.body()
        if not raw:
            missing = {"type": "missing", "loc": ("body",), "msg": "Field required"}
            raise RequestValidationError([{**missing, "input": None}])
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as exc:  # as FastAPI reports it
            invalid = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error"}
            raise RequestValidationError(
                [{**invalid, "input": {}, "ctx": {"error": exc.msg}}]
            ) from None
    return document


def refused_response(answer: dict[str, Any], code: str) -> Response:
    """The 200 answer of a refused scope: the neutral result and ``X-Flowmem-Refused: code``."""
    return Response(
        render(answer), 200, headers={REFUSED_HEADER: code}, media_type="application/json"
    )


def direct_handler(
    endpoint: Callable[..., Any],
    status_code: int = 200,
    query: tuple[frozenset[str], str] | None = None,
) -> Handler | None:
    """Return a request handler calling ``endpoint`` directly, or None when its signature does not fit.

    ``query``: the names the route takes and how to name it; any other query
    parameter is refused first (``flowmem.api.query``).
    """
    plan = _plan(endpoint)
    if plan is None:
        return None
    dependency_name, dependency, body_name, model = plan

    async def handler(request: Request) -> Response:
        if query is not None and request.scope.get("query_string"):
            check_query(request, *query)
        values: dict[str, Any] = {dependency_name: await dependency(request)}
        if body_name is not None:
            document = await _document(request)
            try:
                if request.scope.get(LARGE_BODY):  # off the loop, as the gate parsed it
                    values[body_name] = await run_in_threadpool(_validate, model, document)
                else:
                    values[body_name] = model.model_validate(document, from_attributes=True)
            except ValidationError as exc:
                raise RequestValidationError(_body_errors(exc), body=document) from None
        result = await endpoint(**values)
        if isinstance(result, Response):
            return result
        return Response(render(result), status_code, media_type="application/json")

    return handler


class DirectRoute(KnownQueryRoute):
    """An ``APIRoute`` handled by ``direct_handler`` when its endpoint fits (else FastAPI's own).

    Either way an unknown query parameter is refused first (``flowmem.api.query``).
    """

    def get_route_handler(self) -> Handler:
        """Return the direct handler for this endpoint, or FastAPI's when it does not fit."""
        query = (known_query(self), route_name(self))
        handler = direct_handler(self.endpoint, self.status_code or 200, query)
        return handler if handler is not None else super().get_route_handler()


__all__ = ["DirectRoute", "direct_handler", "refused_response", "render"]


KEY_MAX = NAME_MAX
NODE_ID = "http"

# (name, max length, description) of the scope-id query parameters
QUERY_IDS: tuple[tuple[str, int, str], ...] = (
    (
        "session_id",
        NAME_MAX,
        "For scope `session`: a session the caller may view/drive (a write to an id that names none creates it, owned by the caller).",
    ),
    ("workflow_id", NAME_MAX, "For scope `workflow`."),
    ("pipeline_id", NAME_MAX, "For scope `pipeline`."),
    ("execution_id", NAME_MAX, "For scope `execution`."),
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

    async def in_thread(
        self, operation: Operation, then: Callable[[Any], Response], **arguments: Any
    ) -> Response:
        """Run ``operation``, then ``then`` on its result (building the answer), both in a store thread.

        For the reads whose work grows with the buffer (``Operation.long``: a token
        window, a whole read with the archive, a compaction plan) and the answers
        built from them: the event loop never runs them, and at most ``StorePool.long_reads``
        are built at once (issue 38 §2).
        """
        call = ShortCall(self, operation, arguments)
        return await self.caller.services.pool.long(lambda: then(call()))

    async def answer(self, operation: Operation, **arguments: Any) -> dict[str, Any] | Response:
        """``short``, then the JSON form of the operation's result.

        A write with an ``Idempotency-Key`` is answered with a ``Response``: its
        answer, or the first answer on a repeat (docs/decisions/0031).
        """
        keyed = Keyed.of(self.caller.request) if operation.writes else None
        if keyed is None:
            result = await self.short(operation, **arguments)
            answer: dict[str, Any] = result.to_dict()
            if result.refusal is not None:  # the neutral result, and which refusal (decision 0047)
                return refused_response(answer, result.refusal.code)
            return answer
        call = ShortCall(self, operation, arguments, keyed)
        pool = self.caller.services.pool
        # a claimed key is a change before the operation's: never on the short path
        keyed_answer: Answer = await (pool.short(call) if operation.fuses_key else pool.in_thread(call))
        return keyed_answer.response()


class Operation(Enum):
    """The memory service's single-transaction operations: each changes at most one thing, last.

    That is what makes a call safe to run on the event loop and, when it raises
    ``WouldBlock`` (it found a lock taken, before it changed anything), to run
    again in a thread. ``method`` is the ``MemoryService`` method it calls (the value,
    but for the two whole-buffer reads, which both call ``load``).
    """

    READ = "read"  # reads one record
    LOAD = "first_page"  # reads one buffer (its first page: a large read is paged)
    WINDOW = "window"  # one buffer's token-budget window (its cut from its end; rows then paged, 0113)
    WRITE = "write"  # one record upsert, guarded
    DELETE = "delete"  # one record
    APPEND = "append"  # one buffer's append transaction, guarded
    CLEAR = "clear"  # one buffer
    POP = "pop_last"  # one buffer's last row
    LOAD_ALL = "load_all"  # reads one buffer whole (with its archive: ``include_archived``)
    COMPACT_PLAN = "compaction_plan"  # reads one buffer (issue 28 §2)
    COMPACT = "apply_compaction"  # one buffer's compaction transaction
    COMPACT_TO = "compact_to"  # one buffer's whole-history replacement, archiving it
    REPAIRS = "repairs"  # reads a page of one buffer's repair log (issue 37 §2)
    NOTE_DROPPED = "note_dropped"  # a whole read's normalization drops, in the log (0121)

    @property
    def method(self) -> str:
        """The name of the ``MemoryService`` method the operation calls."""
        return "load" if self in (Operation.WINDOW, Operation.LOAD_ALL) else self.value

    @property
    def writes(self) -> bool:
        """True when the operation changes the store (a session scope needs ``drive``)."""
        return self not in (
            Operation.READ,
            Operation.LOAD,
            Operation.WINDOW,
            Operation.LOAD_ALL,
            Operation.COMPACT_PLAN,
            Operation.REPAIRS,
            Operation.NOTE_DROPPED,  # the memory's own note of a read: viewing is enough
        )

    @property
    def long(self) -> bool:
        """True when the operation's work grows with the buffer's length: never on the event loop."""
        return self in (Operation.WINDOW, Operation.LOAD_ALL, Operation.COMPACT_PLAN)

    @property
    def guarded(self) -> bool:
        """True when the write checks a ``WriteGuard`` inside its transaction (decision 0014)."""
        return self in (Operation.WRITE, Operation.APPEND)

    @property
    def fuses_key(self) -> bool:
        """True when the store records an idempotency key in the operation's own transaction."""
        return self.writes and self not in (Operation.POP, Operation.COMPACT, Operation.COMPACT_TO)

    @property
    def creates(self) -> bool:
        """True when a write to a ``session_id`` naming no session creates it (decision 0032)."""
        return self.guarded


@dataclass(frozen=True)
class ShortCall:
    """One ``Operation`` of a memory request, with its arguments after the context."""

    call: MemoryCall
    operation: Operation
    arguments: dict[str, Any] = field(default_factory=dict)
    keyed: Keyed | None = None  # the request's Idempotency-Key (an Answer is returned then)

    def __call__(self) -> Any:
        """Authenticate, resolve the scope, then run the operation (blocking; one transaction).

        ``guard`` is what a write must find still true inside its transaction: the
        caller's token, and for the ``session`` scope the session with its owner
        (docs/decisions/0014). A write that ``creates`` to a ``session_id`` naming no
        session creates it, owned by the caller, with its first row (decision 0032).
        """
        caller, target = self.call.caller, self.call.target
        if not (self.operation.guarded and target.scope == SESSION_SCOPE and not access.HOOKS):
            return self._run(None)
        cache, sid = caller.services.recent_sessions, target.session_id
        session = None if sid is None else cache.get(sid)
        if session is None:
            return self._run(cache)
        try:
            return self._run(None, session)
        except (NotFoundError, AccessDeniedError):
            # the session may have been deleted (or made again) since it was remembered:
            # the guard refused the write, nothing changed; judged again on a fresh lookup
            cache.drop(str(sid))
            return self._run(cache)

    def _run(
        self, cache: LookupCache[str, SessionRecord] | None, session: SessionRecord | None = None
    ) -> Any:
        """``__call__`` with a remembered ``session`` (a guarded write), else a fresh lookup.

        ``cache``: where a guarded write remembers the session it looked up.
        """
        caller, target = self.call.caller, self.call.target
        services = caller.services
        principal = request_principal(caller.request, caller.token, services.store)
        operation, arguments = self.operation, self.arguments
        if operation.writes and target.scope == SESSION_SCOPE and target.session_id is not None:
            sid = target.session_id
            if session is None:
                since = -1 if cache is None else cache.generation
                session = services.sessions.find(sid)
                if session is not None and cache is not None:
                    cache.put(sid, session, since)
            context, guard = services.sessions.write_target_for(
                principal, sid, session, create=operation.creates, node_id=NODE_ID
            )
        else:
            context = scope_context(services.sessions, principal, target, write=operation.writes)
            guard = WriteGuard(principal.token_id)
        if operation.guarded:
            arguments = {**arguments, "guard": guard}
        method = getattr(services.memory, operation.method)
        keyed = self.keyed
        if keyed is None:
            return method(target.scope, target.key, context=context, **arguments)
        if not operation.fuses_key:
            return keyed.claimed(
                principal,
                lambda: method(target.scope, target.key, context=context, **arguments),
                lambda result: result.to_dict(),
            )
        return keyed.fused(
            principal,
            lambda idem: method(
                target.scope, target.key, context=context, idempotency=idem, **arguments
            ),
            lambda result: result.to_dict(),
        )


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
WRITE_OPENAPI: dict[str, Any] = {
    **TARGET_OPENAPI,
    "parameters": [*TARGET_OPENAPI["parameters"], IDEMPOTENCY_PARAMETER],
}
"""The same for a memory write, which also takes an ``Idempotency-Key`` (decision 0031)."""
