"""Request and response bodies of the HTTP API (they define the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from flowmem.api.messages import MESSAGE_SCHEMA, MessageIn

SessionStatus = Literal["idle", "running", "completed", "failed"]

Format = Literal["rows", "openai", "responses", "anthropic", "gemini"]
FORMAT_NAMES: tuple[str, ...] = ("rows", "openai", "responses", "anthropic", "gemini")


def _integral(value: Any) -> Any:
    """Read an integral JSON number written with a fraction (``5.0``) as the integer it is."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# A JSON integer: RFC 8259 and JSON Schema make 5 and 5.0 the same number, so both are
# accepted; 5.5, "5" and true are still refused (strict models).
JsonInt = Annotated[int, BeforeValidator(_integral)]



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


NO_NUL = r"^[^\x00]*$"


class SessionCreate(BaseModel):
    """A new session: the caller becomes its owner."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # the schema says what flowmem.sessions refuses: text without NUL (a client generated
    # from it must not send one and meet a 422)
    name: str = Field(default="", max_length=200, pattern=NO_NUL)
    agent: str | None = Field(default=None, min_length=1, max_length=200, pattern=NO_NUL)
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionConversation(BaseModel):
    """The buffer that holds a session's conversation now, whatever wrote it (decision 0110)."""

    buffer: str = Field(
        description="Its key in the `session` scope: read it with "
        "`GET /v1/buffers/session/{buffer}?session_id=…`."
    )
    messages: int = Field(description="How many rows it holds.")
    found_by: Literal["latest_checkpoint", "head_entry", "newest_buffer", "default"] = Field(
        description="`latest_checkpoint`: the line a LangGraph thread's latest checkpoint "
        "references; `head_entry`: the line a pydantic-ai conversation's head entry ends; "
        "`newest_buffer`: the session's buffer created last (a non-empty one first); "
        "`default`: the session has no buffer (`chat_history`, 0)."
    )


class SessionBuffer(BaseModel):
    """One buffer of a session's `session` scope."""

    name: str
    messages: int
    stale: bool = Field(
        description="A line of a LangGraph thread or pydantic-ai conversation that is not its "
        "head: older checkpoints (entries) read it (`GET /v1/sessions/{id}/checkpoints`)."
    )


class Session(BaseModel):
    """A session with an owner (null for an unowned session) and where its conversation is."""

    id: str
    name: str
    owner: str | None
    status: SessionStatus
    agent: str | None
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    conversation: SessionConversation


class SessionDetail(Session):
    """One session, with every buffer of its `session` scope."""

    buffers: list[SessionBuffer] = Field(
        description="The session's buffers in key order, at most 100 (`buffers_more`: more exist)."
    )
    buffers_more: bool


class SessionList(BaseModel):
    """A page of sessions the caller may view."""

    data: list[Session]
    pagination: Pagination


class TranscriptRow(BaseModel):
    """One transcript message with its per-session sequence number."""

    model_config = ConfigDict(extra="allow")

    seq: int
    role: str
    content: str | list[dict[str, Any]] = Field(description="A string or a list of parts.")
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


_ROWS_MESSAGES: TypeAdapter[Any] = TypeAdapter(MessageIn | list[MessageIn])
_PROVIDER_MESSAGES: TypeAdapter[Any] = TypeAdapter(dict[str, Any] | list[dict[str, Any]])
_SYSTEM: TypeAdapter[Any] = TypeAdapter(str | list[dict[str, Any]])
_SYSTEM_INSTRUCTION: TypeAdapter[Any] = TypeAdapter(str | dict[str, Any])
# a provider's system field: the format that has it and what it holds (Anthropic's
# top-level ``system``: a string or blocks; Gemini's ``system_instruction``: a string or a Content)
_SYSTEM_FIELDS: dict[str, tuple[str, TypeAdapter[Any]]] = {
    "system": ("anthropic", _SYSTEM),
    "system_instruction": ("gemini", _SYSTEM_INSTRUCTION),
}

_PROVIDER_MESSAGE: dict[str, Any] = {
    "type": "object",
    "description": "A message (OpenAI Chat, Anthropic), an input item (Responses, Agents "
    "SDK) or a content (Gemini) exactly as the provider's API takes it; converted to rows "
    "(`from_openai`, `from_responses`, `from_anthropic`, `from_gemini`) before the append.",
    "additionalProperties": True,
}


def _one_or_many(item: dict[str, Any], min_items: int = 0) -> dict[str, Any]:
    many: dict[str, Any] = {"type": "array", "items": item}
    if min_items:
        many["minItems"] = min_items
    return {"anyOf": [item, many]}


def _format_variants(schema: dict[str, Any], extra: tuple[str, ...], min_items: int = 0) -> None:
    """State a body of messages per format: rows, or a provider's own messages.

    ``extra``: the body's other fields; ``min_items``: the fewest messages a list holds.
    """
    properties = schema["properties"]
    common = {name: properties[name] for name in extra}

    def variant(formats: list[str], messages: dict[str, Any], **more: Any) -> dict[str, Any]:
        required = ["messages"] if formats == ["rows"] else ["format", "messages"]
        fmt = {**properties["format"], "enum": formats}
        fmt.pop("default", None)
        if formats == ["rows"]:
            fmt["default"] = "rows"
        return {
            "type": "object",
            "additionalProperties": False,
            "required": required,
            "properties": {"format": fmt, "messages": messages, **more, **common},
        }

    system = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            {"type": "null"},
        ],
        "description": "Anthropic's top-level `system` (a string or text blocks), stored as "
        "the leading system row.",
    }
    instruction = {
        "anyOf": [
            {"type": "string"},
            {"type": "object", "additionalProperties": True},
            {"type": "null"},
        ],
        "description": "Gemini's `system_instruction` (a string or a Content), stored as "
        "the leading system row.",
    }
    provider = _one_or_many(_PROVIDER_MESSAGE, min_items)
    variants = [
        variant(["rows"], _one_or_many(MESSAGE_SCHEMA, min_items)),
        variant(["openai", "responses"], provider),
        variant(["anthropic"], provider, system=system),
        variant(["gemini"], provider, system_instruction=instruction),
    ]
    for name in [key for key in schema if key not in ("title", "description")]:
        del schema[name]
    schema["oneOf"] = variants


class FormattedMessages(BaseModel):
    """Messages in a format: flowmem rows (default) or a provider's own, converted to rows.

    With `format` `openai`, `responses`, `anthropic` or `gemini` the messages are
    that provider's own (Anthropic's `system`, Gemini's `system_instruction` too).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    format: Format = Field(
        default="rows",
        description="The format of `messages`: flowmem rows (default), or a provider's "
        "request messages (`openai` Chat Completions, `responses` items, `anthropic`, "
        "`gemini` contents).",
    )
    messages: Any = Field(description="One message or a list, in `format`.")
    system: Any = Field(default=None, description="With `format` `anthropic` only.")
    system_instruction: Any = Field(default=None, description="With `format` `gemini` only.")

    @field_validator("messages")
    @classmethod
    def _messages_of_format(cls, value: Any, info: ValidationInfo) -> Any:
        """Rows are checked as rows (content parts …); a provider's messages as objects."""
        fmt = info.data.get("format")
        if fmt is None:  # the format itself is invalid: that is the error reported
            return value
        return (_ROWS_MESSAGES if fmt == "rows" else _PROVIDER_MESSAGES).validate_python(value)

    @field_validator("system", "system_instruction")
    @classmethod
    def _system_of_its_format(cls, value: Any, info: ValidationInfo) -> Any:
        """A provider's system field, with its format only (``_SYSTEM_FIELDS``)."""
        if value is None:
            return None
        name = str(info.field_name)
        fmt, adapter = _SYSTEM_FIELDS[name]
        if info.data.get("format") != fmt:
            raise ValueError(f"{name} is taken only with format {fmt}")
        return adapter.validate_python(value)


class BufferAppend(FormattedMessages):
    """Messages to append to a conversation buffer: one message or a list.

    With `format` `openai`, `responses`, `anthropic` or `gemini` the messages are
    that provider's own (Anthropic's `system`, Gemini's `system_instruction` too),
    converted to rows before the append.
    """

    model_config = ConfigDict(
        json_schema_extra=lambda schema, _: _format_variants(
            schema, ("max_messages", "return_messages")
        ),
    )

    max_messages: JsonInt = Field(default=0, ge=0, description="Window size; 0 = unlimited.")
    return_messages: bool = Field(
        default=False,
        description="Also return the whole buffer after the append (costs a read of it); "
        "by default `messages` is `[]` and the append's cost does not grow with the buffer.",
    )


class CompactionReplace(FormattedMessages):
    """A history compacted elsewhere (the output of `responses.compact`) to replace the buffer's.

    With `format` `responses` the items exactly as the compaction call answered them.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema, _: _format_variants(schema, (), 1))

    @field_validator("messages")
    @classmethod
    def _at_least_one(cls, value: Any) -> Any:
        """A compacted history is not empty: to empty a buffer, clear it."""
        if value == []:
            raise ValueError("a compacted history has at least one message (to empty a buffer, clear it)")
        return value


REFUSED = Field(
    default=None,
    description="Only when the scope refused (MEM-7; the result is then the neutral one and "
    "nothing was stored or read): which refusal, also in the `X-Flowmem-Refused` header. "
    "`no_session_id` (scope `session` without `session_id`), `no_user_id` (scope `user` "
    "with a token that has no user), `unusable_session_id`, `placeholder_session_id` … "
    "(docs/api.md, decision 0047).",
)


class BufferResult(BaseModel):
    """A buffer after a load or an append (MEM-14); empty with count 0 when refused."""

    messages: list[dict[str, Any]]
    count: int
    appended: int
    appended_any: bool
    resolved_scope_id: str
    refused: str | None = REFUSED


NOT_CARRIED = Field(
    default=None,
    description="What the output format cannot carry and left out, per kind "
    '(`{"reasoning": 2, "web_search_call": 1}`; docs/formats.md).',
)
DROPPED_ROWS = Field(
    default=None,
    description="Entries normalization dropped or removed (orphan results, duplicates, "
    "calls whose result cannot be text).",
)
SYSTEM_OUT = Field(
    default=None,
    description="With format `anthropic`: the top-level `system` (a string or text blocks; "
    "null when there is none).",
)
SYSTEM_INSTRUCTION_OUT = Field(
    default=None,
    description="With format `gemini`: the `system_instruction` (a Content, or a string when "
    "it was sent as one; null when there is none).",
)


class TokenWindowOut(BaseModel):
    """What a token-budget read cut (`max_tokens`): see docs/memory.md, "Token windows"."""

    budget: int = Field(description="The budget asked for (`max_tokens`).")
    tokens: int = Field(description="The window's tokens (the default counter's estimate).")
    start: int = Field(
        description="The index (0-based) of the window's first row in the buffer, "
        "the system rows kept before it aside."
    )
    cut_messages: int = Field(description="Messages left out.")
    cut_tokens: int | None = Field(description="Tokens left out.")


class BufferRead(BufferResult):
    """A buffer read: all rows or the last N (a page); `next_before` pages to older rows.

    With `format` other than `rows`, `messages` is the page normalized and written
    in that provider's format, with `format`, `dropped` and `not_carried` (and
    `system` for Anthropic, `system_instruction` for Gemini).
    """

    next_before: int | None = Field(
        default=None,
        description="With `last`: the cursor to pass as `before` for the older messages "
        "(null when there are none, and always null without `last`).",
    )
    format: Format | None = Field(
        default=None, description="The format of `messages` (absent for stored rows)."
    )
    system: str | list[dict[str, Any]] | None = SYSTEM_OUT
    system_instruction: str | dict[str, Any] | None = SYSTEM_INSTRUCTION_OUT
    dropped: int | None = DROPPED_ROWS
    not_carried: dict[str, int] | None = NOT_CARRIED
    window: TokenWindowOut | None = Field(
        default=None, description="With `max_tokens`: what the token window cut."
    )
    archived: int | None = Field(
        default=None,
        description="With `archived=true`: how many of `messages`, first, are archived rows.",
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
    refused: str | None = REFUSED


class WriteResult(BaseModel):
    """A write, delete or clear: success is false when the scope refused."""

    success: bool
    resolved_scope_id: str
    removed: int = 0
    refused: str | None = REFUSED


class PopResult(WriteResult):
    """A buffer's last message removed: `message` is it (null when empty or refused)."""

    message: dict[str, Any] | None = None


PAYLOAD_SCHEMA: dict[str, Any] = {
    "description": "A message list (a bare array), or a request body: `{messages}` (flowmem "
    "rows, OpenAI Chat), Responses `{input, instructions}`, Anthropic `{system, messages}`, "
    "Gemini `{contents, system_instruction}`; other fields of a provider's request body "
    "(`model`, `tools` …) are ignored. A payload in no format flowmem reads is refused 422 "
    "`unknown_format`.",
    "anyOf": [
        {"type": "array", "items": {}},
        {
            "type": "object",
            "required": ["messages"],
            "properties": {"messages": {"type": "array", "items": {}}},
            "additionalProperties": True,
        },
        {
            "type": "object",
            "required": ["input"],
            "properties": {"input": {"type": ["string", "array"], "items": {}}},
            "additionalProperties": True,
        },
        {
            "type": "object",
            "required": ["contents"],
            "properties": {"contents": {"type": "array", "items": {}}},
            "additionalProperties": True,
        },
    ],
}
Payload = Annotated[list[Any] | dict[str, Any], WithJsonSchema(PAYLOAD_SCHEMA)]


class NormalizeOut(BaseModel):
    """The normalized, provider-sendable history in the output format, and what was left out."""

    format: Format = Field(description="The format the payload was read in (given or detected).")
    to: Format = Field(description="The format of `messages`.")
    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None = SYSTEM_OUT
    system_instruction: str | dict[str, Any] | None = SYSTEM_INSTRUCTION_OUT
    dropped: int = Field(
        description="Entries normalization dropped or removed (orphan results, duplicates, "
        "calls whose result cannot be text)."
    )
    not_carried: dict[str, int] = Field(
        description="What the output format cannot carry and left out, per kind."
    )


class Violation(BaseModel):
    """One reason a provider would reject the list."""

    index: int
    code: str
    message: str


class CheckOut(BaseModel):
    """Whether the list is sendable, and every violation."""

    format: Format = Field(description="The format the payload was read in (given or detected).")
    sendable: bool
    violations: list[Violation]


class Health(BaseModel):
    """The server answers (``/health``), and the store too (``/health/store``)."""

    status: Literal["ok"]
    version: str
