"""The typed answers of the HTTP API, as frozen dataclasses (``flowmem.client``).

The memory results (``ReadResult``, ``WriteResult``, ``BufferResult``, ``PopResult``)
are the very types ``MemoryService`` returns (``flowmem.results``); the types here
are the API's own answers: sessions, transcripts, turns, erasure, check and
normalize, health, and a buffer read with its cursor and format fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Self

from flowmem.core import Message
from flowmem.results import BufferResult, TokenWindow, replayed_field
from flowmem.scope import Refusal


def _extra(data: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known}


def reads(convert: Callable[[Any], Any]) -> dict[str, Any]:
    """The metadata of a field whose JSON value ``_Answer.from_json`` passes through ``convert``."""
    return {"read": convert}


def _list_of(kind: Any) -> Callable[[list[Any]], list[Any]]:
    """The reader of a JSON list of ``kind`` answers."""
    return lambda items: [kind.from_json(item) for item in items]


def _code(value: Any) -> str | None:
    """A refusal's code, as the answer's ``refused`` names it (None unless text)."""
    return value if isinstance(value, str) else None


def _window(cut: Any) -> TokenWindow | None:
    """What a token window cut, from its JSON object (None for anything else)."""
    return TokenWindow(**cut) if isinstance(cut, dict) else None


def _span(pair: Any) -> tuple[int, int] | None:
    """A compaction's (first, last) archive numbers (None when the answer gives none)."""
    return (int(pair[0]), int(pair[1])) if pair else None


class _Answer:
    """An answer whose JSON is its fields (but the client's ``replayed``).

    A field without a default is required (KeyError when the answer lacks it); one
    with a default takes it when the answer leaves the field out or gives ``null``.
    A field with ``reads(convert)`` as its metadata is passed through ``convert``.
    """

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """Build from the JSON answer."""
        values: dict[str, Any] = {}
        for name, required, convert in _reading(cls):
            if required:
                value = data[name]
            elif (value := data.get(name)) is None:
                continue
            values[name] = value if convert is None else convert(value)
        return cls(**values)


_Reading = tuple[tuple[str, bool, Callable[[Any], Any] | None], ...]
_READINGS: dict[type, _Reading] = {}


def _reading(kind: type) -> _Reading:
    """How ``_Answer.from_json`` reads each field of ``kind``: its name, whether required, its converter."""
    found = _READINGS.get(kind)
    if found is None:
        found = _READINGS[kind] = tuple(
            (item.name, item.default is MISSING and item.default_factory is MISSING, item.metadata.get("read"))
            for item in fields(kind)
            if item.name != "replayed"
        )
    return found


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
class SessionBuffer(_Answer):
    """One buffer of a session (``Session.buffers``); ``stale``: a line its thread left (history)."""

    name: str
    messages: int
    stale: bool = field(metadata=reads(bool), default=False)


@dataclass(frozen=True)
class Session(_Answer):
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
    metadata: dict[str, Any] = field(metadata=reads(dict))
    created_at: float
    updated_at: float
    replayed: bool = replayed_field()
    conversation: SessionConversation | None = field(metadata=reads(SessionConversation.from_json), default=None)
    buffers: list[SessionBuffer] | None = field(metadata=reads(_list_of(SessionBuffer)), default=None)
    buffers_more: bool = field(metadata=reads(bool), default=False)


@dataclass(frozen=True)
class SessionPage(_Answer):
    """A page of ``GET /v1/sessions``: the sessions and the pagination envelope."""

    data: list[Session] = field(metadata=reads(_list_of(Session)))
    total: int
    limit: int
    offset: int
    has_more: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionPage:
        """Build from the JSON answer (the page's numbers are in its ``pagination``)."""
        return super().from_json({**data["pagination"], "data": data["data"]})


@dataclass(frozen=True)
class TranscriptRow(_Answer):
    """A transcript message: its sequence number, role, content (text or parts)."""

    seq: int
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] = field(metadata=reads(dict), default_factory=dict)
    timestamp: int | None = None
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class TranscriptPage(_Answer):
    """A page of ``GET /v1/sessions/{id}/messages`` with its cursors."""

    data: list[TranscriptRow] = field(metadata=reads(_list_of(TranscriptRow)))
    has_more: bool
    next_since: int | None = None
    next_before: int | None = None


@dataclass(frozen=True)
class TurnResult:
    """An accepted (or, with ``wait``, finished) turn; ``extra`` holds what the runtime adds."""

    turn_id: str
    status: str
    extra: dict[str, Any] = field(default_factory=dict)
    replayed: bool = replayed_field()

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
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class ResetResult(_Answer):
    """The session's conversation buffer was cleared; its status."""

    reset: bool
    status: str
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class UserErasure(_Answer):
    """What ``DELETE /v1/users/{user_id}`` deleted (``user_id`` None: not a usable identity)."""

    user_id: str | None
    sessions: int
    buffers: int
    records: int
    tokens: int
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class BufferRead(_Answer):
    """A buffer read (``GET /v1/buffers/{scope}/{key}``): rows or a provider's messages.

    ``count`` is the whole buffer's; ``next_before`` the cursor of the older page
    (with ``last``). With a provider ``format``, ``messages`` is sendable as is and
    ``dropped``/``not_carried`` say what was left out (``system`` for Anthropic).
    """

    messages: list[Message]
    count: int
    resolved_scope_id: str
    next_before: int | None = None
    format: str = field(metadata=reads(lambda name: name or "rows"), default="rows")  # "" too
    system: str | list[dict[str, Any]] | None = None
    dropped: int = 0
    not_carried: dict[str, int] = field(metadata=reads(dict), default_factory=dict)
    refused: str | None = field(metadata=reads(_code), default=None)
    """The code of the scope's refusal (``no_session_id`` …; decision 0047), None when it did not refuse."""
    window: TokenWindow | None = field(metadata=reads(_window), default=None)
    """With ``max_tokens``: what the token window cut."""

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
class NormalizeResult(_Answer):
    """``POST /v1/normalize``: the history normalized, in format ``to``."""

    format: str
    to: str
    messages: list[dict[str, Any]]
    dropped: int
    not_carried: dict[str, int] = field(metadata=reads(dict), default_factory=dict)
    system: str | list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Violation(_Answer):
    """One thing a provider would reject: the message index and a stable code."""

    index: int
    code: str
    message: str


@dataclass(frozen=True)
class CheckResult(_Answer):
    """``POST /v1/check``: whether the history is sendable, and what is not."""

    format: str
    sendable: bool
    violations: list[Violation] = field(metadata=reads(_list_of(Violation)))


@dataclass(frozen=True)
class RepairEntry(_Answer):
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
    call_ids: list[str] = field(metadata=reads(list))
    count: int
    positions: list[int] = field(metadata=reads(list), default_factory=list)
    kind: str = field(metadata=reads(str), default="")
    archived: tuple[int, int] | None = field(metadata=reads(_span), default=None)


@dataclass(frozen=True)
class RepairLog(_Answer):
    """A page of a buffer's repair log (``GET …/repairs``), newest first.

    ``next_before``: pass it as ``before`` for the older page (None: none).
    """

    repairs: list[RepairEntry] = field(metadata=reads(_list_of(RepairEntry)))
    resolved_scope_id: str
    next_before: int | None = None
    refused: str | None = field(metadata=reads(_code), default=None)
    """The code of the scope's refusal (``no_session_id`` …), None when it did not refuse."""


@dataclass(frozen=True)
class SearchHit:
    """A record a vector search found: its key, value and score (higher is closer)."""

    key: str
    value: Any
    score: float


def _hits(found: list[dict[str, Any]]) -> list[SearchHit]:
    """The hits of a search's answer (a hit without a value: None)."""
    return [SearchHit(str(hit["key"]), hit.get("value"), float(hit["score"])) for hit in found]


@dataclass(frozen=True)
class SearchResult(_Answer):
    """A vector search's answer (``POST /v1/search/{scope}``): the records found, best first."""

    data: list[SearchHit] = field(metadata=reads(_hits))
    resolved_scope_id: str
    refused: str | None = field(metadata=reads(_code), default=None)
    """The code of the scope's refusal (``no_user_id`` …), None when it did not refuse."""
