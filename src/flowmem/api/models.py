"""Request and response bodies of the HTTP API (they define the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

SessionStatus = Literal["idle", "running", "completed", "failed"]


def _integral(value: Any) -> Any:
    """Read an integral JSON number written with a fraction (``5.0``) as the integer it is."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# A JSON integer: RFC 8259 and JSON Schema make 5 and 5.0 the same number, so both are
# accepted; 5.5, "5" and true are still refused (strict models).
JsonInt = Annotated[int, BeforeValidator(_integral)]

_CALLS: dict[str, Any] = {"type": ["array", "null"], "items": {"type": "object"}}
# What ``flowmem.core.to_row`` accepts, stated as a schema: the core itself validates
# (an unknown role is refused with the code ``unknown_role``), the schema documents it.
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A message, flat (`tool_calls`/`tool_call_id` at the top) or stored "
    "(tool data under `metadata`). Content that is not text is serialized.",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
        "content": {},
        "tool_calls": _CALLS,
        "tool_call_id": {},
        "metadata": {
            "type": ["object", "null"],
            "properties": {"tool_calls": _CALLS},
            "additionalProperties": True,
        },
        "timestamp": {},
    },
    "additionalProperties": True,
}


def _calls_shape(calls: object, where: str) -> None:
    if calls is None:
        return
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ValueError(f"{where} must be a list of objects or null")


def check_message_shape(message: dict[str, Any]) -> dict[str, Any]:
    """Enforce the shape MESSAGE_SCHEMA states for tool data, whatever the role."""
    _calls_shape(message.get("tool_calls"), "tool_calls")
    metadata = message.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ValueError("metadata must be an object or null")
        _calls_shape(metadata.get("tool_calls"), "metadata.tool_calls")
    return message


MessageIn = Annotated[
    dict[str, Any], AfterValidator(check_message_shape), WithJsonSchema(MESSAGE_SCHEMA)
]


class ErrorDetail(BaseModel):
    """One invalid field of a 422 refusal."""

    field: str
    message: str


class ErrorInfo(BaseModel):
    """What went wrong: a stable code, a sentence, and per-field details on 422."""

    code: str
    message: str
    details: list[ErrorDetail] | None = None


class ErrorBody(BaseModel):
    """Every refusal: ``{"error": {"code", "message"}}``."""

    error: ErrorInfo


class Pagination(BaseModel):
    """Offset pagination: the total under the same filter and whether more exist."""

    total: int
    limit: int
    offset: int
    has_more: bool


class SessionCreate(BaseModel):
    """A new session: the caller becomes its owner."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(default="", max_length=200)
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Session(BaseModel):
    """A session with an owner (null for an unowned session)."""

    id: str
    name: str
    owner: str | None
    status: SessionStatus
    agent: str | None
    metadata: dict[str, Any]
    created_at: float
    updated_at: float


class SessionList(BaseModel):
    """A page of sessions the caller may view."""

    data: list[Session]
    pagination: Pagination


class TranscriptRow(BaseModel):
    """One transcript message with its per-session sequence number."""

    model_config = ConfigDict(extra="allow")

    seq: int
    role: str
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: int | None = None


class MessagePage(BaseModel):
    """A page of a transcript by sequence cursor."""

    data: list[TranscriptRow]
    has_more: bool
    next_since: int | None = Field(
        default=None, description="Pass as `since` to continue (oldest-first order)."
    )
    next_before: int | None = Field(
        default=None, description="Pass as `before` to continue (newest-first order)."
    )


class TurnCreate(BaseModel):
    """A user turn sent to a session."""

    model_config = ConfigDict(extra="forbid", strict=True)

    content: str = Field(min_length=1)


class TurnResult(BaseModel):
    """The accepted turn: its id and status (the runtime may add more fields)."""

    model_config = ConfigDict(extra="allow")

    turn_id: str
    status: str


class StopResult(BaseModel):
    """Whether a running turn was stopped, and the session's status."""

    stopped: bool
    status: str


class ResetResult(BaseModel):
    """The conversation buffer was cleared; the transcript stays."""

    reset: bool
    status: str


class UserErasure(BaseModel):
    """What erasing a user deleted."""

    user_id: str | None = Field(
        description="The canonical user id erased; null for an id that is not a usable identity."
    )
    sessions: int = Field(description="Sessions the user owned, with their data.")
    buffers: int = Field(description="Buffers in those sessions' scopes and the user's scope.")
    records: int = Field(description="Memory records in those scopes.")
    tokens: int = Field(description="The user's API tokens.")


class BufferAppend(BaseModel):
    """Messages to append to a conversation buffer: one message or a list."""

    model_config = ConfigDict(extra="forbid", strict=True)

    messages: MessageIn | list[MessageIn]
    max_messages: JsonInt = Field(default=0, ge=0, description="Window size; 0 = unlimited.")
    return_messages: bool = Field(
        default=False,
        description="Also return the whole buffer after the append (costs a read of it); "
        "by default `messages` is `[]` and the append's cost does not grow with the buffer.",
    )


class BufferResult(BaseModel):
    """A buffer after a load or an append (MEM-14); empty with count 0 when refused."""

    messages: list[dict[str, Any]]
    count: int
    appended: int
    appended_any: bool
    resolved_scope_id: str


class BufferRead(BufferResult):
    """A buffer read: all rows or the last N (a page); `next_before` pages to older rows."""

    next_before: int | None = Field(
        default=None,
        description="With `last`: the cursor to pass as `before` for the older messages "
        "(null when there are none, and always null without `last`).",
    )


class MemoryWrite(BaseModel):
    """A memory record value (any JSON) with an optional time to live in seconds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    value: Any = None
    ttl: float | None = Field(default=None, gt=0)


class ReadResult(BaseModel):
    """A memory read: the value (or the default) and whether it was found."""

    value: Any = None
    found: bool
    resolved_scope_id: str


class WriteResult(BaseModel):
    """A write, delete or clear: success is false when the scope refused."""

    success: bool
    resolved_scope_id: str
    removed: int = 0


class MessageList(BaseModel):
    """A message list for the stateless endpoints."""

    model_config = ConfigDict(extra="forbid", strict=True)

    messages: list[Any]


class NormalizeOut(BaseModel):
    """The normalized, provider-sendable list and how many entries were dropped (MEM-5)."""

    messages: list[dict[str, Any]]
    dropped: int


class Violation(BaseModel):
    """One reason a provider would reject the list."""

    index: int
    code: str
    message: str


class CheckOut(BaseModel):
    """Whether the list is sendable, and every violation."""

    sendable: bool
    violations: list[Violation]


class Health(BaseModel):
    """The server answers (``/health``), and the store too (``/health/store``)."""

    status: Literal["ok"]
    version: str
