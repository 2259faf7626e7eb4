"""Every route of the API as a ``Call``: method, path, query, body and how to read the answer.

Pure: nothing here sends anything. ``Client`` and ``AsyncClient`` run the same
calls, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Generic, TypedDict, TypeVar
from urllib.parse import quote

from flowmem.client.types import (
    BufferRead,
    CheckResult,
    Health,
    NormalizeResult,
    RepairLog,
    ResetResult,
    SearchResult,
    Session,
    SessionPage,
    StopResult,
    TranscriptPage,
    TranscriptRow,
    TurnResult,
    UserErasure,
)
from flowmem.results import (
    REFUSED_KEY,
    UNANSWERED,
    BufferResult,
    CompactionPlanResult,
    CompactResult,
    PopResult,
    ReadResult,
    WriteResult,
    fields_of,
)
from flowmem.scope import Refusal

T = TypeVar("T")
R = TypeVar("R")

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"  # "true" on an answer repeated from a stored key


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and the reader of its answer (``None`` body for a 204)."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False
    idempotency_key: str | None = None
    """The caller's ``Idempotency-Key`` for a write; None: a fresh random one."""

    @property
    def is_write(self) -> bool:
        """True for a request that changes something (it carries an ``Idempotency-Key``)."""
        return self.method in WRITE_METHODS

    def keyed(self, idempotency_key: str | None) -> Call[T]:
        """This call sent with ``idempotency_key`` (itself when None)."""
        return self if idempotency_key is None else replace(self, idempotency_key=idempotency_key)

    def then(self, convert: Callable[[T], R]) -> Call[R]:
        """This call with its answer read, then passed through ``convert``."""
        parse = self.parse
        return replace(self, parse=lambda data: convert(parse(data)))  # type: ignore[arg-type, return-value]

    def query(self) -> dict[str, str]:
        """The query parameters that are set, as text (booleans as ``true``/``false``)."""
        out: dict[str, str] = {}
        for name, value in self.params.items():
            if value is None:
                continue
            out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out


def _segment(value: str) -> str:
    return quote(str(value), safe="")


def _none(_: Any) -> None:
    return None


def refusal_of(data: dict[str, Any]) -> Refusal | None:
    """The refusal a memory answer names in ``refused`` (decision 0047), None when it names none."""
    code = data.get(REFUSED_KEY)
    return Refusal.from_code(code) if isinstance(code, str) else None


def _answered(result: type[R], data: dict[str, Any], **absent: Any) -> R:
    """A result from its JSON answer (``to_dict``'s); ``absent``: defaults of the fields it may leave out.

    Every other field it answers is required; the refusal is read from ``refused``.
    """
    values = {
        item.name: data.get(item.name, absent[item.name]) if item.name in absent else data[item.name]
        for item in fields(result)  # type: ignore[arg-type]
        if item.name not in UNANSWERED and item.name != "window"
    }
    values["refusal"] = refusal_of(data)
    return result(**values)


def _buffer_result(data: dict[str, Any]) -> BufferResult:
    return _answered(BufferResult, data)


def _write_result(data: dict[str, Any]) -> WriteResult:
    return _answered(WriteResult, data, removed=0)


def _read_result(data: dict[str, Any]) -> ReadResult:
    return _answered(ReadResult, data)


def _pop_result(data: dict[str, Any]) -> PopResult:
    return _answered(PopResult, data, removed=0)


# --- health ------------------------------------------------------------------------------
def health() -> Call[Health]:
    """``GET /health``."""
    return Call("GET", "/health", Health.from_json)


def store_health() -> Call[Health]:
    """``GET /health/store``."""
    return Call("GET", "/health/store", Health.from_json)


# --- sessions ----------------------------------------------------------------------------
def create_session(
    name: str = "", agent: str | None = None, metadata: dict[str, Any] | None = None
) -> Call[Session]:
    """``POST /v1/sessions``."""
    body: dict[str, Any] = {"name": name, "metadata": metadata or {}}
    if agent is not None:
        body["agent"] = agent
    return Call("POST", "/v1/sessions", Session.from_json, body=body, has_body=True)


def list_sessions(limit: int = 20, offset: int = 0) -> Call[SessionPage]:
    """``GET /v1/sessions``."""
    params = {"limit": limit, "offset": offset}
    return Call("GET", "/v1/sessions", SessionPage.from_json, params=params)


def get_session(session_id: str) -> Call[Session]:
    """``GET /v1/sessions/{id}``."""
    return Call("GET", f"/v1/sessions/{_segment(session_id)}", Session.from_json)


def delete_session(session_id: str) -> Call[None]:
    """``DELETE /v1/sessions/{id}``."""
    return Call("DELETE", f"/v1/sessions/{_segment(session_id)}", _none)


def messages(
    session_id: str,
    since: int | None = None,
    before: int | None = None,
    limit: int = 20,
    newest_first: bool = False,
) -> Call[TranscriptPage]:
    """``GET /v1/sessions/{id}/messages``."""
    params = {"since": since, "before": before, "limit": limit, "newest_first": newest_first}
    path = f"/v1/sessions/{_segment(session_id)}/messages"
    return Call("GET", path, TranscriptPage.from_json, params=params)


def send_turn(session_id: str, content: str, wait: bool = False) -> Call[TurnResult]:
    """``POST /v1/sessions/{id}/turns``."""
    path = f"/v1/sessions/{_segment(session_id)}/turns"
    return Call(
        "POST",
        path,
        TurnResult.from_json,
        params={"wait": wait},
        body={"content": content},
        has_body=True,
    )


def stop_session(session_id: str) -> Call[StopResult]:
    """``POST /v1/sessions/{id}/stop``."""
    return Call("POST", f"/v1/sessions/{_segment(session_id)}/stop", StopResult.from_json)


def reset_session(session_id: str) -> Call[ResetResult]:
    """``POST /v1/sessions/{id}/reset``."""
    return Call("POST", f"/v1/sessions/{_segment(session_id)}/reset", ResetResult.from_json)


def edit_message(session_id: str, seq: int, message: dict[str, Any]) -> Call[TranscriptRow]:
    """``PATCH /v1/sessions/{id}/messages/{seq}`` (admin only)."""
    path = f"/v1/sessions/{_segment(session_id)}/messages/{int(seq)}"
    return Call("PATCH", path, TranscriptRow.from_json, body=message, has_body=True)


def delete_message(session_id: str, seq: int) -> Call[None]:
    """``DELETE /v1/sessions/{id}/messages/{seq}`` (admin only)."""
    return Call("DELETE", f"/v1/sessions/{_segment(session_id)}/messages/{int(seq)}", _none)


# --- buffers and records -----------------------------------------------------------------
@dataclass(frozen=True)
class Where:
    """The scope-id query parameters of a memory request (``session_id`` for ``session`` …)."""

    session_id: str | None = None
    workflow_id: str | None = None
    pipeline_id: str | None = None
    execution_id: str | None = None

    def params(self) -> dict[str, Any]:
        """Return the four parameters (``Call.query`` leaves out those that are None)."""
        return fields_of(self)


class FlowIds(TypedDict, total=False):
    """The shared scopes' ids as a client method's keywords (``workflow_id=`` …)."""

    workflow_id: str | None
    pipeline_id: str | None
    execution_id: str | None


class ScopeIds(FlowIds, total=False):
    """Every scope id as a client method's keywords: ``Where``'s fields (``Where(**ids)``)."""

    session_id: str | None


def _memory_path(kind: str, scope: str, key: str, tail: str = "") -> str:
    return f"/v1/{kind}/{_segment(scope)}/{_segment(key)}{tail}"


def append_buffer(
    scope: str,
    key: str,
    messages: Any,
    where: Where,
    max_messages: int = 0,
    return_messages: bool = False,
    format: str = "rows",
    system: Any = None,
) -> Call[BufferResult]:
    """``POST /v1/buffers/{scope}/{key}``."""
    body: dict[str, Any] = {"messages": messages, "format": format, "max_messages": max_messages}
    if return_messages:
        body["return_messages"] = True
    if system is not None:
        body["system"] = system
    path = _memory_path("buffers", scope, key)
    return Call("POST", path, _buffer_result, params=where.params(), body=body, has_body=True)


def load_buffer(
    scope: str,
    key: str,
    where: Where,
    last: int | None = None,
    before: int | None = None,
    format: str = "rows",
    max_tokens: int | None = None,
    archived: bool = False,
) -> Call[BufferRead]:
    """``GET /v1/buffers/{scope}/{key}`` (``archived``: with the rows compactions archived)."""
    params = {**where.params(), "last": last, "before": before, "max_tokens": max_tokens}
    if format != "rows":
        params["format"] = format
    if archived:
        params["archived"] = True
    return Call("GET", _memory_path("buffers", scope, key), BufferRead.from_json, params=params)


def clear_buffer(scope: str, key: str, where: Where) -> Call[WriteResult]:
    """``DELETE /v1/buffers/{scope}/{key}``."""
    path = _memory_path("buffers", scope, key)
    return Call("DELETE", path, _write_result, params=where.params())


def pop_buffer(scope: str, key: str, where: Where) -> Call[PopResult]:
    """``DELETE /v1/buffers/{scope}/{key}/last``."""
    path = _memory_path("buffers", scope, key, "/last")
    return Call("DELETE", path, _pop_result, params=where.params())


def repairs(
    scope: str, key: str, where: Where, before: int | None = None, limit: int | None = None
) -> Call[RepairLog]:
    """``GET /v1/buffers/{scope}/{key}/repairs`` (a page of the repair log, newest first)."""
    path = _memory_path("buffers", scope, key, "/repairs")
    params = {**where.params(), "before": before, "limit": limit}
    return Call("GET", path, RepairLog.from_json, params=params)


def _reported(kind: Any) -> Callable[[dict[str, Any]], Any]:
    """The reader of a result whose JSON answer is its fields (``results.Answered``), each if present."""

    def read(data: dict[str, Any]) -> Any:
        names = {f.name for f in fields(kind)} - {"refusal"}
        return kind(**{name: data[name] for name in names if name in data}, refusal=refusal_of(data))

    return read


def compaction_plan(
    scope: str, key: str, where: Where, keep_tokens: int
) -> Call[CompactionPlanResult]:
    """``GET /v1/buffers/{scope}/{key}/compact/plan``."""
    path = _memory_path("buffers", scope, key, "/compact/plan")
    params = {**where.params(), "keep_tokens": keep_tokens}
    return Call("GET", path, _reported(CompactionPlanResult), params=params)


def apply_compaction(
    scope: str, key: str, where: Where, plan: str, summary: Any
) -> Call[CompactResult]:
    """``POST /v1/buffers/{scope}/{key}/compact``."""
    path = _memory_path("buffers", scope, key, "/compact")
    body = {"plan": plan, "summary": summary}
    return Call("POST", path, _reported(CompactResult), params=where.params(), body=body, has_body=True)


def compact_to(scope: str, key: str, where: Where, messages: Any) -> Call[CompactResult]:
    """``POST /v1/buffers/{scope}/{key}/compact/replace`` (rows)."""
    path = _memory_path("buffers", scope, key, "/compact/replace")
    body = {"messages": messages}
    return Call("POST", path, _reported(CompactResult), params=where.params(), body=body, has_body=True)


def read_record(scope: str, key: str, where: Where, default: Any = None) -> Call[ReadResult]:
    """``GET /v1/memory/{scope}/{key}`` (``default`` is sent as JSON text)."""
    params = where.params()
    if default is not None:
        params["default"] = json.dumps(default, ensure_ascii=False)
    return Call("GET", _memory_path("memory", scope, key), _read_result, params=params)


def write_record(
    scope: str, key: str, value: Any, where: Where, ttl: float | None = None
) -> Call[WriteResult]:
    """``PUT /v1/memory/{scope}/{key}``."""
    body: dict[str, Any] = {"value": value}
    if ttl is not None:
        body["ttl"] = ttl
    path = _memory_path("memory", scope, key)
    return Call("PUT", path, _write_result, params=where.params(), body=body, has_body=True)


def delete_record(scope: str, key: str, where: Where) -> Call[WriteResult]:
    """``DELETE /v1/memory/{scope}/{key}``."""
    path = _memory_path("memory", scope, key)
    return Call("DELETE", path, _write_result, params=where.params())


def write_vectors(
    scope: str,
    key: str,
    value: Any,
    where: Where,
    space: tuple[str, int],
    vectors: Sequence[tuple[str, Sequence[float]]],
    ttl: float | None = None,
) -> Call[WriteResult]:
    """``PUT /v1/memory/{scope}/{key}/vectors``: ``space`` is (name, dims), ``vectors`` (field, numbers)."""
    body: dict[str, Any] = {
        "value": value,
        "space": {"name": space[0], "dims": space[1]},
        "vectors": [{"field": path, "vector": list(numbers)} for path, numbers in vectors],
    }
    if ttl is not None:
        body["ttl"] = ttl
    path = _memory_path("memory", scope, key, "/vectors")
    return Call("PUT", path, _write_result, params=where.params(), body=body, has_body=True)


def search_records(
    scope: str,
    where: Where,
    space: tuple[str, int],
    vector: Sequence[float],
    *,
    distance: str = "cosine",
    prefix: str = "",
    limit: int = 10,
    offset: int = 0,
) -> Call[SearchResult]:
    """``POST /v1/search/{scope}``."""
    body = {
        "space": {"name": space[0], "dims": space[1]},
        "vector": list(vector),
        "distance": distance,
        "prefix": prefix,
        "limit": limit,
        "offset": offset,
    }
    path = f"/v1/search/{_segment(scope)}"
    return Call("POST", path, SearchResult.from_json, params=where.params(), body=body, has_body=True)


# --- users and the stateless functions ---------------------------------------------------
def erase_user(user_id: str) -> Call[UserErasure]:
    """``DELETE /v1/users/{user_id}`` (admin only)."""
    return Call("DELETE", f"/v1/users/{_segment(user_id)}", UserErasure.from_json)


def normalize(
    payload: Any, format: str | None = None, to: str | None = None
) -> Call[NormalizeResult]:
    """``POST /v1/normalize``."""
    params = {"format": format, "to": to}
    return Call(
        "POST", "/v1/normalize", NormalizeResult.from_json, params=params, body=payload, has_body=True
    )


def check(payload: Any, format: str | None = None) -> Call[CheckResult]:
    """``POST /v1/check``."""
    return Call(
        "POST",
        "/v1/check",
        CheckResult.from_json,
        params={"format": format},
        body=payload,
        has_body=True,
    )
