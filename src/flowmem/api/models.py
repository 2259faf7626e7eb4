"""Request and response bodies of the HTTP API (they define the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

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

# --- content parts (decision 0021) -----------------------------------------------------------

_EXTRA = Field(
    default=None,
    description="Fields of a provider's object that flowmem does not model, by format "
    "(`openai`, `responses`, `anthropic`, `gemini`): re-emitted verbatim to that format only.",
)


class _Part(BaseModel):
    """A content part: a JSON object with a string ``type``; unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    extra: dict[str, Any] | None = _EXTRA


class TextPart(_Part):
    """Text."""

    type: Literal["text"]
    text: str


class ImagePart(_Part):
    """An image: a URL, base64 `data` with its `media_type`, or a provider `file_id`."""

    type: Literal["image"]
    url: str | None = None
    data: str | None = Field(default=None, description="Base64, never decoded by flowmem.")
    media_type: str | None = None
    file_id: str | None = None
    detail: str | None = None


class AudioPart(_Part):
    """Audio: base64 `data` with its `format` (`wav`, `mp3`, …), or a provider audio `id`."""

    type: Literal["audio"]
    data: str | None = None
    format: str | None = None
    id: str | None = None
    transcript: str | None = None


class FilePart(_Part):
    """A file (a PDF, a document): `file_id`, `url` or base64 `data`."""

    type: Literal["file"]
    file_id: str | None = None
    url: str | None = None
    data: str | None = None
    filename: str | None = None
    media_type: str | None = None


class ReasoningPart(_Part):
    """Reasoning: visible `text` and/or `summary`, with its opaque signature, kept unchanged."""

    type: Literal["reasoning"]
    provider: str = Field(description="The format it came from.")
    text: str | None = None
    summary: list[str] | None = None
    signature: str | None = None
    encrypted_content: str | None = None
    redacted_data: str | None = None


class ProviderPart(_Part):
    """Any other provider block or item (hosted-tool calls and results, citations …), verbatim."""

    type: Literal["provider"]
    provider: str = Field(description="The format's name.")
    block: dict[str, Any] = Field(description="The provider's block or item, unchanged.")


Part = Annotated[
    TextPart | ImagePart | AudioPart | FilePart | ReasoningPart | ProviderPart,
    Field(discriminator="type"),
]
PART_KINDS: tuple[str, ...] = ("text", "image", "audio", "file", "reasoning", "provider")
_PARTS: TypeAdapter[list[Any]] = TypeAdapter(list[Part])


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """Replace every local ``$ref`` of a pydantic schema by the definition it names."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in schema.items() if k not in ("$defs", "discriminator")}
    if isinstance(schema, list):
        return [_inline(item, defs) for item in schema]
    return schema


def _parts_schema() -> dict[str, Any]:
    """The JSON schema of a list of parts, self-contained (no references)."""
    raw = _PARTS.json_schema()
    inlined: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    return inlined


_CALLS: dict[str, Any] = {
    "type": ["array", "null"],
    "items": {
        "type": "object",
        "description": "A tool call entry: `tool_call_id` (or `id`), `name`, `args`; `kind` "
        "(`function` by default; `custom`, `computer`, `local_shell`, `shell`, `apply_patch`, "
        "`mcp_approval`) and `extra` are kept.",
    },
}
# What ``flowmem.core.to_row`` accepts, stated as a schema: the core itself validates
# (an unknown role is refused with the code ``unknown_role``), the schema documents it.
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A message, flat (`tool_calls`/`tool_call_id` at the top) or stored "
    "(tool data under `metadata`). Content is a string or a list of parts, kept as given; "
    "a number, boolean or null is coerced to text. Other top-level keys are kept under "
    "`metadata`.",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
        "content": {
            "anyOf": [
                {"type": "string"},
                _parts_schema(),
                {"type": ["number", "boolean", "null"]},
            ]
        },
        "tool_calls": _CALLS,
        "tool_call_id": {},
        "is_error": {
            "type": ["boolean", "null"],
            "description": "On a tool result: the tool failed (stored as `metadata.is_error`).",
        },
        "extra": {
            "type": ["object", "null"],
            "description": "Message fields flowmem does not model, by format (stored under "
            "`metadata.extra`).",
        },
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


def _content_shape(content: object) -> None:
    """Refuse structured content that is not a list of parts (it would be stored as text)."""
    if isinstance(content, (dict, list)):
        if isinstance(content, dict):
            raise ValueError("content must be a string or a list of parts, got an object")
        try:
            _PARTS.validate_python(content)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(step) for step in first["loc"])
            raise ValueError(
                f"content must be a string or a list of parts ({', '.join(PART_KINDS)}): "
                f"content.{where}: {first['msg']}"
            ) from None


def check_message_shape(message: dict[str, Any]) -> dict[str, Any]:
    """Enforce the shape MESSAGE_SCHEMA states for content, tool data and flags, whatever the role."""
    _content_shape(message.get("content"))
    _calls_shape(message.get("tool_calls"), "tool_calls")
    if message.get("is_error") is not None and not isinstance(message["is_error"], bool):
        raise ValueError("is_error must be a boolean or null")
    if message.get("extra") is not None and not isinstance(message["extra"], dict):
        raise ValueError("extra must be an object or null")
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

_PROVIDER_MESSAGE: dict[str, Any] = {
    "type": "object",
    "description": "A message (OpenAI Chat, Anthropic), an input item (Responses, Agents "
    "SDK) or a content (Gemini) exactly as the provider's API takes it; converted to rows "
    "(`from_openai`, `from_responses`, `from_anthropic`, `from_gemini`) before the append.",
    "additionalProperties": True,
}


def _one_or_many(item: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [item, {"type": "array", "items": item}]}


def _append_schema(schema: dict[str, Any]) -> None:
    """State the append body per format: rows messages, or a provider's own messages."""
    properties = schema["properties"]
    common = {name: properties[name] for name in ("max_messages", "return_messages")}

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
    provider = _one_or_many(_PROVIDER_MESSAGE)
    variants = [
        variant(["rows"], _one_or_many(MESSAGE_SCHEMA)),
        variant(["openai", "responses"], provider),
        variant(["anthropic"], provider, system=system),
        variant(["gemini"], provider, system_instruction=instruction),
    ]
    for name in [key for key in schema if key not in ("title", "description")]:
        del schema[name]
    schema["oneOf"] = variants


class BufferAppend(BaseModel):
    """Messages to append to a conversation buffer: one message or a list.

    With `format` `openai`, `responses`, `anthropic` or `gemini` the messages are
    that provider's own (Anthropic's `system`, Gemini's `system_instruction` too),
    converted to rows before the append.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=lambda schema, _: _append_schema(schema),
    )

    format: Format = Field(
        default="rows",
        description="The format of `messages`: flowmem rows (default), or a provider's "
        "request messages (`openai` Chat Completions, `responses` items, `anthropic`, "
        "`gemini` contents).",
    )
    messages: Any = Field(description="One message or a list, in `format`.")
    system: Any = Field(default=None, description="With `format` `anthropic` only.")
    system_instruction: Any = Field(default=None, description="With `format` `gemini` only.")
    max_messages: JsonInt = Field(default=0, ge=0, description="Window size; 0 = unlimited.")
    return_messages: bool = Field(
        default=False,
        description="Also return the whole buffer after the append (costs a read of it); "
        "by default `messages` is `[]` and the append's cost does not grow with the buffer.",
    )

    @field_validator("messages")
    @classmethod
    def _messages_of_format(cls, value: Any, info: ValidationInfo) -> Any:
        """Rows are checked as rows (content parts …); a provider's messages as objects."""
        fmt = info.data.get("format")
        if fmt is None:  # the format itself is invalid: that is the error reported
            return value
        return (_ROWS_MESSAGES if fmt == "rows" else _PROVIDER_MESSAGES).validate_python(value)

    @field_validator("system")
    @classmethod
    def _system_of_anthropic(cls, value: Any, info: ValidationInfo) -> Any:
        """``system`` is Anthropic's top-level field: a string or blocks, with that format only."""
        if value is None:
            return None
        if info.data.get("format") != "anthropic":
            raise ValueError("system is taken only with format anthropic")
        return _SYSTEM.validate_python(value)

    @field_validator("system_instruction")
    @classmethod
    def _system_of_gemini(cls, value: Any, info: ValidationInfo) -> Any:
        """``system_instruction`` is Gemini's: a string or a Content, with that format only."""
        if value is None:
            return None
        if info.data.get("format") != "gemini":
            raise ValueError("system_instruction is taken only with format gemini")
        return _SYSTEM_INSTRUCTION.validate_python(value)


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
