"""The typed answers of the HTTP API, as frozen dataclasses (``flowmem.client``).

The memory results (``ReadResult``, ``WriteResult``, ``BufferResult``, ``PopResult``)
are the very types ``MemoryService`` returns (``flowmem.results``); the types here
are the API's own answers: sessions, transcripts, turns, erasure, check and
normalize, health, and a buffer read with its cursor and format fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Self

from flowmem.core import Message
from flowmem.results import BufferResult, TokenWindow
from flowmem.scope import Refusal


def _extra(data: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known}


class _Answer:
    """An answer whose JSON is its fields, each required (but the client's ``replayed``)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """Build from the JSON answer."""
        names = (item.name for item in fields(cls))  # type: ignore[arg-type]
        return cls(**{name: data[name] for name in names if name != "replayed"})


@dataclass(frozen=True)
class Health(_Answer):
    """``GET /health`` (liveness) or ``GET /health/store`` (readiness)."""

    status: str
    version: str


@dataclass(frozen=True)
class SessionConversation(_Answer):
    """The buffer that holds a session's conversation now (``Session.conversation``).

    ``buffer``: its key in the ``session`` scope (``client.load("session", buffer,
    session_id=…)`` reads it); ``messages``: its row count; ``found_by``:
    ``latest_checkpoint`` (a LangGraph thread), ``head_entry`` (a pydantic-ai
    conversation), ``newest_buffer`` or ``default`` (no buffer yet: ``chat_history``).
    """

    buffer: str
    messages: int
    found_by: str


@dataclass(frozen=True)
class SessionBuffer:
    """One buffer of a session (``Session.buffers``); ``stale``: a line its thread left (history)."""

    name: str
    messages: int
    stale: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionBuffer:
        """Build from the JSON answer."""
        return cls(name=data["name"], messages=data["messages"], stale=bool(data.get("stale")))


@dataclass(frozen=True)
class Session:
    """A session: its id (a UUID), owner, status, metadata and where its conversation is.

    ``conversation`` is None only from a server older than issue 37; ``buffers`` (every
    buffer of the session, at most 100, ``buffers_more`` when there are more) is given
    by ``get_session`` only, None in a list.
    """

    id: str
    name: str
    owner: str | None
    status: str
    agent: str | None
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""
    conversation: SessionConversation | None = None
    buffers: list[SessionBuffer] | None = None
    buffers_more: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        """Build from the JSON answer."""
        conversation = data.get("conversation")
        buffers = data.get("buffers")
        return cls(
            id=data["id"],
            name=data["name"],
            owner=data["owner"],
            status=data["status"],
            agent=data["agent"],
            metadata=dict(data["metadata"]),
            created_at=data["created_at"],
            updated_at=data["updated_at"],
            conversation=None if conversation is None else SessionConversation.from_json(conversation),
            buffers=None if buffers is None else [SessionBuffer.from_json(b) for b in buffers],
            buffers_more=bool(data.get("buffers_more", False)),
        )


@dataclass(frozen=True)
class SessionPage:
    """A page of ``GET /v1/sessions``: the sessions and the pagination envelope."""

    data: list[Session]
    total: int
    limit: int
    offset: int
    has_more: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionPage:
        """Build from the JSON answer."""
        page = data["pagination"]
        return cls(
            data=[Session.from_json(s) for s in data["data"]],
            total=page["total"],
            limit=page["limit"],
            offset=page["offset"],
            has_more=page["has_more"],
        )


@dataclass(frozen=True)
class TranscriptRow:
    """A transcript message: its sequence number, role, content (text or parts)."""

    seq: int
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: int | None = None
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TranscriptRow:
        """Build from the JSON answer."""
        return cls(
            seq=data["seq"],
            role=data["role"],
            content=data["content"],
            metadata=dict(data.get("metadata") or {}),
            timestamp=data.get("timestamp"),
        )


@dataclass(frozen=True)
class TranscriptPage:
    """A page of ``GET /v1/sessions/{id}/messages`` with its cursors."""

    data: list[TranscriptRow]
    has_more: bool
    next_since: int | None
    next_before: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TranscriptPage:
        """Build from the JSON answer."""
        return cls(
            data=[TranscriptRow.from_json(r) for r in data["data"]],
            has_more=data["has_more"],
            next_since=data.get("next_since"),
            next_before=data.get("next_before"),
        )


@dataclass(frozen=True)
class TurnResult:
    """An accepted (or, with ``wait``, finished) turn; ``extra`` holds what the runtime adds."""

    turn_id: str
    status: str
    extra: dict[str, Any] = field(default_factory=dict)
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnResult:
        """Build from the JSON answer."""
        return cls(
            turn_id=data["turn_id"],
            status=data["status"],
            extra=_extra(data, ("turn_id", "status")),
        )


@dataclass(frozen=True)
class StopResult(_Answer):
    """Whether a running turn was stopped, and the session's status."""

    stopped: bool
    status: str
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""


@dataclass(frozen=True)
class ResetResult(_Answer):
    """The session's conversation buffer was cleared; its status."""

    reset: bool
    status: str
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""


@dataclass(frozen=True)
class UserErasure(_Answer):
    """What ``DELETE /v1/users/{user_id}`` deleted (``user_id`` None: not a usable identity)."""

    user_id: str | None
    sessions: int
    buffers: int
    records: int
    tokens: int
    replayed: bool = field(default=False, compare=False)
    """The server answered a repeated ``Idempotency-Key`` with this first answer."""


@dataclass(frozen=True)
class BufferRead:
    """A buffer read (``GET /v1/buffers/{scope}/{key}``): rows or a provider's messages.

    ``count`` is the whole buffer's; ``next_before`` the cursor of the older page
    (with ``last``). With a provider ``format``, ``messages`` is sendable as is and
    ``dropped``/``not_carried`` say what was left out (``system`` for Anthropic).
    """

    messages: list[Message]
    count: int
    resolved_scope_id: str
    next_before: int | None = None
    format: str = "rows"
    system: str | list[dict[str, Any]] | None = None
    dropped: int = 0
    not_carried: dict[str, int] = field(default_factory=dict)
    refused: str | None = None
    """The code of the scope's refusal (``no_session_id`` …; decision 0047), None when it did not refuse."""
    window: TokenWindow | None = None
    """With ``max_tokens``: what the token window cut."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BufferRead:
        """Build from the JSON answer."""
        refused = data.get("refused")
        window = data.get("window")
        return cls(
            messages=data["messages"],
            count=data["count"],
            resolved_scope_id=data["resolved_scope_id"],
            next_before=data.get("next_before"),
            format=data.get("format") or "rows",
            system=data.get("system"),
            dropped=data.get("dropped") or 0,
            not_carried=dict(data.get("not_carried") or {}),
            refused=refused if isinstance(refused, str) else None,
            window=TokenWindow(**window) if isinstance(window, dict) else None,
        )

    def as_result(self) -> BufferResult:
        """The read as ``MemoryService.load`` answers it (the ``Memory`` protocol's ``load``)."""
        return BufferResult(
            messages=self.messages,
            count=self.count,
            resolved_scope_id=self.resolved_scope_id,
            refusal=None if self.refused is None else Refusal.from_code(self.refused),
            window=self.window,
        )


@dataclass(frozen=True)
class NormalizeResult:
    """``POST /v1/normalize``: the history normalized, in format ``to``."""

    format: str
    to: str
    messages: list[dict[str, Any]]
    dropped: int
    not_carried: dict[str, int]
    system: str | list[dict[str, Any]] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NormalizeResult:
        """Build from the JSON answer."""
        return cls(
            format=data["format"],
            to=data["to"],
            messages=data["messages"],
            dropped=data["dropped"],
            not_carried=dict(data.get("not_carried") or {}),
            system=data.get("system"),
        )


@dataclass(frozen=True)
class Violation:
    """One thing a provider would reject: the message index and a stable code."""

    index: int
    code: str
    message: str


@dataclass(frozen=True)
class CheckResult:
    """``POST /v1/check``: whether the history is sendable, and what is not."""

    format: str
    sendable: bool
    violations: list[Violation]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        """Build from the JSON answer."""
        return cls(
            format=data["format"],
            sendable=data["sendable"],
            violations=[
                Violation(index=v["index"], code=v["code"], message=v["message"])
                for v in data["violations"]
            ],
        )


@dataclass(frozen=True)
class RepairEntry:
    """One change the memory made to a buffer besides adding rows (issue 37 §2).

    ``rule``: ``MEM-3`` (placeholders inserted), ``MEM-10`` (placeholders replaced),
    ``MEM-1`` / ``MEM-2`` (results / turns refused as duplicates), ``window`` (rows
    evicted), ``compaction`` (rows archived), ``MEM-5`` (entries a read's
    normalization dropped) or a refused write's error code; ``kind``: ``heal``,
    ``replace``, ``duplicate``, ``evict``, ``compact``, ``normalize`` or ``refuse``;
    ``positions``: row indexes (a heal's, a replacement's: in the buffer now; an
    eviction's, a compaction's: those the removed rows had just before);
    ``archived``: a compaction's archive numbers (first, last); ``at``: seconds since
    the epoch.
    """

    seq: int
    at: float
    rule: str
    call_ids: list[str]
    count: int
    positions: list[int]
    kind: str = ""
    archived: tuple[int, int] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepairEntry:
        """Build from one entry of the JSON answer (a server without kinds: none)."""
        archived = data.get("archived")
        return cls(
            seq=data["seq"],
            at=data["at"],
            rule=data["rule"],
            call_ids=list(data["call_ids"]),
            count=data["count"],
            positions=list(data.get("positions") or []),
            kind=str(data.get("kind") or ""),
            archived=None if not archived else (int(archived[0]), int(archived[1])),
        )


@dataclass(frozen=True)
class RepairLog:
    """A page of a buffer's repair log (``GET …/repairs``), newest first.

    ``next_before``: pass it as ``before`` for the older page (None: none).
    """

    repairs: list[RepairEntry]
    resolved_scope_id: str
    next_before: int | None = None
    refused: str | None = None
    """The code of the scope's refusal (``no_session_id`` …), None when it did not refuse."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepairLog:
        """Build from the JSON answer."""
        refused = data.get("refused")
        return cls(
            repairs=[RepairEntry.from_json(entry) for entry in data["repairs"]],
            resolved_scope_id=data["resolved_scope_id"],
            next_before=data.get("next_before"),
            refused=refused if isinstance(refused, str) else None,
        )


@dataclass(frozen=True)
class SearchHit:
    """A record a vector search found: its key, value and score (higher is closer)."""

    key: str
    value: Any
    score: float


@dataclass(frozen=True)
class SearchResult:
    """A vector search's answer (``POST /v1/search/{scope}``): the records found, best first."""

    data: list[SearchHit]
    resolved_scope_id: str
    refused: str | None = None
    """The code of the scope's refusal (``no_user_id`` …), None when it did not refuse."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchResult:
        """Build from the JSON answer."""
        refused = data.get("refused")
        return cls(
            data=[SearchHit(str(h["key"]), h.get("value"), float(h["score"])) for h in data["data"]],
            resolved_scope_id=data["resolved_scope_id"],
            refused=refused if isinstance(refused, str) else None,
        )
