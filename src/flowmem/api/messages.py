"""A message as the HTTP API takes it: its content parts and the shape every role must have (decision 0021).

``MessageIn`` is a message of a request body; its OpenAPI schema is ``MESSAGE_SCHEMA``,
and ``check_message_shape`` refuses what the schema does not allow.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)

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
