"""LangChain chat history backed by a flowmem buffer (the ``langchain`` extra).

For LangChain 0.x apps: langchain-core 1.x deprecates ``BaseChatMessageHistory`` and
``RunnableWithMessageHistory``; a LangChain 1.x agent (``create_agent``) keeps its
conversation in a checkpointer, ``flowmem.integrations.langgraph.saver.FlowmemSaver``.

``FlowmemChatMessageHistory`` is a ``BaseChatMessageHistory``: every write goes
through ``Memory.append``, in process (``MemoryService``) or on a ``flowmem serve``
(``flowmem.client.Client``) with the same rules either way, so LangChain gets
flowmem's guarantees — a re-delivered ``ToolMessage`` is stored once (MEM-1), a
``HumanMessage`` after an interrupted tool call heals it (MEM-3), a late real
result replaces the placeholder (MEM-10), ``max_messages`` windows the buffer, and
a ``session``/``user`` scope without a real identity refuses instead of sharing
one history (MEM-6, 7, 13).

Nothing a LangChain message carries is lost (decision 0021): content blocks become
neutral parts where one exists (text, image, audio, file, reasoning) and
``provider`` parts otherwise; every field flowmem does not model (``id``,
``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, ``artifact``, the class …) is kept in
``extra["langchain"]``, so ``row_to_message(message_to_row(m)) == m``.
"""

from __future__ import annotations

from flowmem.integrations import memory_of, require

require("langchain_core", "langchain")

import asyncio  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import threading  # noqa: E402
import weakref  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from pydantic import ValidationError  # noqa: E402

from flowmem.core import Message, normalize  # noqa: E402
from flowmem.errors import (  # noqa: E402
    InvalidMessageError,
    NotSerializableError,
    UnknownRoleError,
)
from flowmem.formats._common import input_object  # noqa: E402
from flowmem.memory import Memory  # noqa: E402
from flowmem.results import BufferResult, TokenWindow  # noqa: E402
from flowmem.scope import ExecutionContext  # noqa: E402

log = logging.getLogger("flowmem")

LANGCHAIN = "langchain"

# The message classes a row can come back as; a row names its class in
# ``extra.langchain.class`` only when it is not the default class of its role.
_CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (
        HumanMessage,
        HumanMessageChunk,
        AIMessage,
        AIMessageChunk,
        SystemMessage,
        SystemMessageChunk,
        ToolMessage,
        ToolMessageChunk,
        ChatMessage,
        ChatMessageChunk,
    )
}
_DEFAULT_CLASS = {
    "user": "HumanMessage",
    "assistant": "AIMessage",
    "system": "SystemMessage",
    "tool": "ToolMessage",
}
# ``ChatMessage.role`` values flowmem takes, and the row role each becomes
# (``developer`` is a system message, as in the OpenAI formats).
CHAT_ROLES: dict[str, str] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}
# Fields a row models itself; every other field of a message goes to ``extra``.
_MODELED = frozenset({"content", "type", "tool_calls", "tool_call_id", "status"})
# Content blocks that repeat a call ``tool_calls``/``invalid_tool_calls`` carry:
# kept verbatim at their position in ``extra.langchain.blocks``, never as parts.
_CALL_BLOCKS = frozenset(
    {"tool_call", "tool_call_chunk", "invalid_tool_call", "tool_use", "function_call"}
)
# Blocks kept as ``provider`` parts under the provider whose shape they have.
_ANTHROPIC_BLOCKS = frozenset(
    {"server_tool_use", "mcp_tool_use", "mcp_tool_result", "search_result", "container_upload"}
)
_RESPONSES_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "image_generation_call",
        "local_shell_call",
    }
)
_AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/x-wav": "wav"}


# --- content blocks <-> parts --------------------------------------------------------
#
# A *form* is one spelling of a block kind (a v1 standard ``image`` block, an OpenAI
# ``image_url`` block, an Anthropic ``image`` block with a ``source`` …). Each form
# reads its block into a neutral part plus the block's remaining fields, and writes
# them back. A block is mapped by the first form that reads it *and* writes it back
# equal; any other block is a ``provider`` part holding it verbatim.

Fields = dict[str, Any]
_Reader = Callable[[dict[str, Any]], "tuple[dict[str, Any], Fields] | None"]
_Writer = Callable[[dict[str, Any], Fields], Any]


def _rest(block: Mapping[str, Any], *used: str) -> Fields:
    return {k: v for k, v in block.items() if k not in used}


def _one_of(block: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    found = [k for k in keys if isinstance(block.get(k), str)]
    return found[0] if len(found) == 1 else None


def _read_text(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "text" or not isinstance(block.get("text"), str):
        return None
    return {"type": "text", "text": block["text"]}, _rest(block, "type", "text")


def _write_text(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "text", "text": part.get("text", ""), **fields}


def _source_part(kind: str, block: Mapping[str, Any], media_key: str) -> dict[str, Any] | None:
    """Read a v1 standard ``url``/``base64``/``file_id`` source into a neutral part."""
    key = _one_of(block, ("url", "base64", "file_id"))
    if key is None:
        return None
    if key == "base64":
        part = {"type": kind, "data": block["base64"]}
        if isinstance(block.get("mime_type"), str):
            part[media_key] = block["mime_type"]
        return part
    return {"type": kind, key: block[key]}


def _v1_source(part: Mapping[str, Any], media_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "data" in part:
        out["base64"] = part["data"]
        if media_key in part:
            out["mime_type"] = part[media_key]
    elif "url" in part:
        out["url"] = part["url"]
    elif "file_id" in part:
        out["file_id"] = part["file_id"]
    return out


def _is_v1(block: Mapping[str, Any]) -> bool:
    return "source" not in block and "source_type" not in block


def _read_v1_image(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "image" or not _is_v1(block):
        return None
    part = _source_part("image", block, "media_type")
    if part is None:
        return None
    used = ("type", "url", "file_id") if "data" not in part else ("type", "base64", "mime_type")
    return part, _rest(block, *used)


def _write_v1_image(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "image", **_v1_source(part, "media_type"), **fields}


def _read_v1_file(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "file" or not _is_v1(block) or "file" in block:
        return None
    part = _source_part("file", block, "media_type")
    if part is None:
        return None
    used = ("type", "url", "file_id") if "data" not in part else ("type", "base64", "mime_type")
    return part, _rest(block, *used)


def _write_v1_file(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "file", **_v1_source(part, "media_type"), **fields}


def _read_v1_audio(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "audio" or not _is_v1(block) or not isinstance(block.get("base64"), str):
        return None
    if "url" in block or "file_id" in block:
        return None
    part: dict[str, Any] = {"type": "audio", "data": block["base64"]}
    mime = block.get("mime_type")
    if isinstance(mime, str) and mime.startswith("audio/"):
        part["format"] = _AUDIO_FORMATS.get(mime, mime.split("/", 1)[1])
    # the MIME type is kept as given: ``format`` alone cannot restore ``audio/mpeg``
    return part, _rest(block, "type", "base64")


def _write_v1_audio(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "audio", "base64": part.get("data", "")}
    if "mime_type" not in fields and isinstance(part.get("format"), str):
        block["mime_type"] = f"audio/{part['format']}"
    return {**block, **fields}


def _read_anthropic_source(
    block: dict[str, Any], block_type: str, kind: str
) -> tuple[dict[str, Any], Fields] | None:
    source = block.get("source")
    if block.get("type") != block_type or not isinstance(source, Mapping):
        return None
    stype = source.get("type")
    if stype == "base64" and set(source) == {"type", "media_type", "data"}:
        part = {"type": kind, "data": source["data"], "media_type": source["media_type"]}
    elif stype == "url" and set(source) == {"type", "url"}:
        part = {"type": kind, "url": source["url"]}
    elif stype == "file" and set(source) == {"type", "file_id"}:
        part = {"type": kind, "file_id": source["file_id"]}
    else:
        return None
    return part, _rest(block, "type", "source")


def _anthropic_source(part: Mapping[str, Any]) -> dict[str, Any]:
    if "data" in part:
        return {"type": "base64", "media_type": part.get("media_type"), "data": part["data"]}
    if "url" in part:
        return {"type": "url", "url": part["url"]}
    return {"type": "file", "file_id": part.get("file_id")}


def _read_anthropic_image(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    return _read_anthropic_source(block, "image", "image")


def _write_anthropic_image(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "image", "source": _anthropic_source(part), **fields}


def _read_anthropic_document(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    return _read_anthropic_source(block, "document", "file")


def _write_anthropic_document(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "document", "source": _anthropic_source(part), **fields}


_V0_KEYS = {"url": "url", "base64": "data", "id": "id"}


def _read_v0(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    kind = block.get("type")
    source_type = block.get("source_type")
    if kind not in ("image", "file", "audio") or source_type not in _V0_KEYS:
        return None
    value = block.get(_V0_KEYS[str(source_type)])
    if not isinstance(value, str):
        return None
    if source_type == "url":
        part: dict[str, Any] = {"type": kind, "url": value}
    elif source_type == "base64":
        part = {"type": kind, "data": value}
    elif kind == "audio":
        return None  # a v0 audio id is not a provider audio id
    else:
        part = {"type": kind, "file_id": value}
    return part, _rest(block, "type", _V0_KEYS[str(source_type)])


def _write_v0(part: dict[str, Any], fields: Fields) -> Any:
    source_type = fields.get("source_type")
    key = _V0_KEYS.get(str(source_type), "url")
    value = part.get({"url": "url", "data": "data", "id": "file_id"}[key])
    return {"type": part["type"], key: value, **fields}


def _read_image_url(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("image_url")
    if block.get("type") != "image_url":
        return None
    if isinstance(inner, str):
        return {"type": "image", "url": inner}, _rest(block, "type", "image_url")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("url"), str):
        return None
    if set(inner) - {"url", "detail"}:
        return None
    part: dict[str, Any] = {"type": "image", "url": inner["url"]}
    if "detail" in inner:
        part["detail"] = inner["detail"]
    return part, _rest(block, "type", "image_url")


def _write_image_url(part: dict[str, Any], fields: Fields) -> Any:
    inner: dict[str, Any] = {"url": part.get("url")}
    if "detail" in part:
        inner["detail"] = part["detail"]
    return {"type": "image_url", "image_url": inner, **fields}


def _write_image_url_str(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "image_url", "image_url": part.get("url"), **fields}


def _read_input_audio(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("input_audio")
    if block.get("type") != "input_audio" or not isinstance(inner, Mapping):
        return None
    if set(inner) != {"data", "format"}:
        return None
    part = {"type": "audio", "data": inner["data"], "format": inner["format"]}
    return part, _rest(block, "type", "input_audio")


def _write_input_audio(part: dict[str, Any], fields: Fields) -> Any:
    inner = {"data": part.get("data"), "format": part.get("format")}
    return {"type": "input_audio", "input_audio": inner, **fields}


def _read_openai_file(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("file")
    if block.get("type") != "file" or not isinstance(inner, Mapping):
        return None
    if set(inner) - {"file_data", "file_id", "filename"}:
        return None
    part: dict[str, Any] = {"type": "file"}
    data = inner.get("file_data")
    if isinstance(data, str):
        head, sep, payload = data.partition(";base64,")
        if not sep or not head.startswith("data:"):
            return None
        part["media_type"] = head[len("data:") :]
        part["data"] = payload
    if "file_id" in inner:
        part["file_id"] = inner["file_id"]
    if "filename" in inner:
        part["filename"] = inner["filename"]
    return part, _rest(block, "type", "file")


def _write_openai_file(part: dict[str, Any], fields: Fields) -> Any:
    inner: dict[str, Any] = {}
    if "data" in part:
        inner["file_data"] = f"data:{part.get('media_type', '')};base64,{part['data']}"
    if "file_id" in part:
        inner["file_id"] = part["file_id"]
    if "filename" in part:
        inner["filename"] = part["filename"]
    return {"type": "file", "file": inner, **fields}


def _read_v1_reasoning(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "reasoning" or "summary" in block:
        return None
    part: dict[str, Any] = {"type": "reasoning", "provider": LANGCHAIN}
    if isinstance(block.get("reasoning"), str):
        part["text"] = block["reasoning"]
        return part, _rest(block, "type", "reasoning")
    return part, _rest(block, "type")


def _write_v1_reasoning(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "reasoning"}
    if isinstance(part.get("text"), str):
        block["reasoning"] = part["text"]
    if "signature" in part and "extras" not in fields:
        # a thinking block written by another format: LangChain keeps its signature here
        block["extras"] = {"signature": part["signature"]}
    return {**block, **fields}


def _read_thinking(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "thinking" or not isinstance(block.get("thinking"), str):
        return None
    part: dict[str, Any] = {"type": "reasoning", "text": block["thinking"], "provider": "anthropic"}
    if isinstance(block.get("signature"), str):
        part["signature"] = block["signature"]
        return part, _rest(block, "type", "thinking", "signature")
    return part, _rest(block, "type", "thinking")


def _write_thinking(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "thinking", "thinking": part.get("text", "")}
    if "signature" in part:
        block["signature"] = part["signature"]
    return {**block, **fields}


def _read_redacted(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "redacted_thinking" or not isinstance(block.get("data"), str):
        return None
    part = {"type": "reasoning", "redacted_data": block["data"], "provider": "anthropic"}
    return part, _rest(block, "type", "data")


def _write_redacted(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "redacted_thinking", "data": part.get("redacted_data", ""), **fields}


def _read_responses_reasoning(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    summary = block.get("summary")
    if block.get("type") != "reasoning" or not isinstance(summary, list):
        return None
    texts: list[str] = []
    for item in summary:
        if not isinstance(item, Mapping) or set(item) != {"type", "text"}:
            return None
        if item["type"] != "summary_text" or not isinstance(item["text"], str):
            return None
        texts.append(item["text"])
    part: dict[str, Any] = {"type": "reasoning", "summary": texts, "provider": "responses"}
    if isinstance(block.get("encrypted_content"), str):
        part["encrypted_content"] = block["encrypted_content"]
        return part, _rest(block, "type", "summary", "encrypted_content")
    return part, _rest(block, "type", "summary")


def _write_responses_reasoning(part: dict[str, Any], fields: Fields) -> Any:
    summary = [{"type": "summary_text", "text": t} for t in part.get("summary", [])]
    block: dict[str, Any] = {"type": "reasoning", "summary": summary}
    if "encrypted_content" in part:
        block["encrypted_content"] = part["encrypted_content"]
    return {**block, **fields}


# form name -> (reader, writer). A part names its form in extra.langchain.form only
# when the form is not the one named after the part's type (the v1 standard block).
_FORMS: dict[str, tuple[_Reader, _Writer]] = {
    "text": (_read_text, _write_text),
    "image": (_read_v1_image, _write_v1_image),
    "file": (_read_v1_file, _write_v1_file),
    "audio": (_read_v1_audio, _write_v1_audio),
    "reasoning": (_read_v1_reasoning, _write_v1_reasoning),
    "v0": (_read_v0, _write_v0),
    "image_url": (_read_image_url, _write_image_url),
    "image_url_str": (_read_image_url, _write_image_url_str),
    "input_audio": (_read_input_audio, _write_input_audio),
    "openai_file": (_read_openai_file, _write_openai_file),
    "anthropic_image": (_read_anthropic_image, _write_anthropic_image),
    "anthropic_document": (_read_anthropic_document, _write_anthropic_document),
    "thinking": (_read_thinking, _write_thinking),
    "redacted_thinking": (_read_redacted, _write_redacted),
    "responses_reasoning": (_read_responses_reasoning, _write_responses_reasoning),
}
_PART_FORM = {"text": "text", "image": "image", "file": "file", "audio": "audio"}


def _provider_of(block: Mapping[str, Any]) -> str:
    """Return the provider whose shape a block has: anthropic, responses, or langchain."""
    kind = block.get("type")
    if isinstance(kind, str):
        if kind in _ANTHROPIC_BLOCKS or (kind.endswith("_tool_result") and kind != "tool_result"):
            return "anthropic"
        if kind == "document":
            return "anthropic"
        if kind in _RESPONSES_ITEMS:
            return "responses"
    return LANGCHAIN


def _with_lc(part: dict[str, Any], lc: dict[str, Any]) -> dict[str, Any]:
    if lc:
        part["extra"] = {LANGCHAIN: lc}
    return part


def block_to_part(block: object) -> dict[str, Any]:
    """Return one LangChain content block as a flowmem part (neutral where one exists).

    The part keeps in ``extra.langchain`` (``form``, ``fields``) whatever it needs
    to give the block back equal; a block no form reads is a ``provider`` part.
    """
    if isinstance(block, str):
        return _with_lc({"type": "text", "text": block}, {"form": "str"})
    if not isinstance(block, dict):
        raise InvalidMessageError(f"a content block must be a string or an object: {block!r}")
    for form, (read, write) in _FORMS.items():
        found = read(block)
        if found is None:
            continue
        part, fields = found
        if write(part, fields) != block:
            continue
        lc: dict[str, Any] = {}
        if form != part["type"]:
            lc["form"] = form
        if fields:
            lc["fields"] = fields
        return _with_lc(part, lc)
    return {"type": "provider", "provider": _provider_of(block), "block": block}


def _natural_block(part: Mapping[str, Any]) -> Any:
    """Return a part that no LangChain form wrote as a LangChain v1 standard block."""
    kind = part.get("type")
    if kind == "provider":
        return part.get("block")
    if kind == "reasoning":
        return _write_v1_reasoning(dict(part), {})
    if kind == "audio" and "data" not in part and "id" in part:
        return {"type": "audio", "id": part["id"]}
    writer = _FORMS.get(_PART_FORM.get(str(kind), ""), (None, None))[1]
    if writer is None:
        return {"type": "non_standard", "value": dict(part)}
    block = writer(dict(part), {})
    if kind == "file" and "filename" in part:
        block["extras"] = {"filename": part["filename"]}
    return block


def part_to_block(part: object) -> Any:
    """Return one flowmem part as the LangChain content block it was (or its v1 form)."""
    if not isinstance(part, Mapping):
        return part
    extra = part.get("extra")
    lc = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    if not isinstance(lc, Mapping):
        return _natural_block(part)
    form = lc.get("form", part.get("type"))
    if form == "str":
        return part.get("text", "")
    writer = _FORMS.get(str(form), (None, None))[1]
    if writer is None:
        return _natural_block(part)
    neutral = {k: v for k, v in part.items() if k != "extra"}
    return writer(neutral, dict(lc.get("fields") or {}))


# --- messages <-> rows -------------------------------------------------------------------


def _edit_refused(message: RemoveMessage) -> InvalidMessageError:
    """The refusal of a ``RemoveMessage``: a flowmem history is append-only."""
    return InvalidMessageError(
        f"RemoveMessage(id={message.id!r}) cannot be applied: a flowmem history is "
        "append-only (rows are removed only by windowing, clear() or the store's "
        "retention); call clear() and add the messages to keep instead"
    )


def _role_of(message: BaseMessage) -> str:
    """Return the flowmem role of a LangChain message; raise for one flowmem cannot take."""
    if isinstance(message, RemoveMessage):
        raise _edit_refused(message)
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        role = CHAT_ROLES.get(message.role)
        if role is None:
            raise UnknownRoleError(
                f"ChatMessage role {message.role!r} is not one flowmem can store: use one of "
                f"{', '.join(sorted(CHAT_ROLES))}, or ToolMessage for a tool result",
                role=message.role,
            )
        return role
    if isinstance(message, FunctionMessage):
        raise InvalidMessageError(
            "FunctionMessage (the legacy OpenAI functions API) names no tool call id, "
            "so flowmem cannot pair it with its call: use ToolMessage(tool_call_id=...)"
        )
    raise InvalidMessageError(f"{type(message).__name__} is not a message flowmem can store")


@functools.cache
def _defaults(cls: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    """Return ``(field, default)`` for the fields of a message class a row does not model."""
    return tuple(
        (name, info.get_default(call_default_factory=True))
        for name, info in cls.model_fields.items()
        if name not in _MODELED
    )


@functools.cache
def _all_defaults(cls: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    """Every field of a message class with a default, and that default (computed once)."""
    return tuple(
        (name, info.get_default(call_default_factory=True))
        for name, info in cls.model_fields.items()
        if not info.is_required()
    )


def _fresh(value: Any) -> Any:
    """A default as a new object of its own: a list or dict is copied (never shared)."""
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def _unmodeled_fields(message: BaseMessage) -> dict[str, Any]:
    """Return the fields of a message a row does not model, each only when not its default."""
    fields: dict[str, Any] = {}
    for name, default in _defaults(type(message)):
        value = getattr(message, name)
        if name == "role" or value != default:
            fields[name] = value
    fields.update(message.model_extra or {})
    return fields


def _plain_json(value: Any) -> bool:
    """Return True when ``value`` is built only of types JSON gives back as they are."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(_plain_json(item) for item in value)
    if kind is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    return False


def _checked_json(row: Message, message: BaseMessage) -> Message:
    """Return ``row`` when it survives JSON unchanged; raise ``NotSerializableError`` else."""
    if _plain_json(row):
        return row  # the common case, without encoding it
    try:
        same = json.loads(json.dumps(row, allow_nan=False)) == row
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotSerializableError(
            f"{type(message).__name__} holds a value flowmem cannot store as JSON: {exc}",
            argument="messages",
        ) from exc
    if not same:
        raise NotSerializableError(
            f"{type(message).__name__} holds a value JSON would change (a tuple, a "
            "non-string key, a non-finite float ...): flowmem stores messages as JSON",
            argument="messages",
        )
    return row


def message_to_row(message: BaseMessage) -> Message:
    """Return a LangChain message as a flowmem flat row, losing nothing.

    ``HumanMessage``→user, ``AIMessage``→assistant (``tool_calls`` become
    ``{"tool_call_id", "name", "args"}``), ``ToolMessage``→tool (``tool_call_id``;
    ``status="error"`` is ``is_error``), ``SystemMessage``→system, a ``ChatMessage``
    with a role in ``CHAT_ROLES`` (``developer`` is system); chunk classes too.
    List content becomes parts (``block_to_part``); call blocks in the content stay
    in ``extra.langchain.blocks`` at their position. Raises ``InvalidMessageError``
    for ``RemoveMessage`` and ``FunctionMessage``, ``UnknownRoleError`` for another
    ``ChatMessage`` role and ``NotSerializableError`` for a value JSON cannot keep.
    """
    role = _role_of(message)
    row: Message = {"role": role}
    lc: dict[str, Any] = {}
    raw = message.content
    if isinstance(raw, str):
        row["content"] = raw
    else:
        parts: list[dict[str, Any]] = []
        blocks: list[list[Any]] = []
        for index, block in enumerate(raw):
            if isinstance(block, dict) and block.get("type") in _CALL_BLOCKS:
                blocks.append([index, block])
            else:
                parts.append(block_to_part(block))
        row["content"] = parts
        if blocks:
            lc["blocks"] = blocks
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = []
        for call in message.tool_calls:
            entry: dict[str, Any] = {
                "tool_call_id": call.get("id"),
                "name": call["name"],
                "args": call["args"],
            }
            more = _rest(call, "id", "name", "args", "type")
            if call.get("type", "tool_call") != "tool_call":
                more["type"] = call.get("type")
            if more:
                entry["extra"] = {LANGCHAIN: more}
            calls.append(entry)
        row["tool_calls"] = calls
    if isinstance(message, ToolMessage):
        row["tool_call_id"] = message.tool_call_id
        if message.status == "error":
            row["is_error"] = True
    if role == "assistant" and not row.get("tool_calls") and row["content"] in ("", []):
        attempts = _attempted_calls(message, lc)
        if attempts:
            # A turn whose every call failed to parse says what the model tried: with
            # no content it would be nothing to append (DESIGN §2) and the turn lost.
            lc["empty"] = row["content"]
            row["content"] = attempts
    if type(message).__name__ != _DEFAULT_CLASS[role]:
        lc["class"] = type(message).__name__
    fields = _unmodeled_fields(message)
    if fields:
        lc["fields"] = fields
    if lc:
        row["extra"] = {LANGCHAIN: lc}
    return _checked_json(row, message)


def _attempted_calls(message: BaseMessage, lc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the calls an AI turn tried and could not make, as ``provider`` parts.

    They stand in for the empty content of a turn that holds nothing else (its
    ``invalid_tool_calls``, else its call blocks); ``row_to_message`` restores the
    content from ``extra.langchain.empty``.
    """
    invalid = getattr(message, "invalid_tool_calls", None) or [block for _, block in lc.get("blocks", [])]
    return [{"type": "provider", "provider": LANGCHAIN, "block": dict(call)} for call in invalid]


def _read(row: Mapping[str, Any], key: str) -> Any:
    """Read a row key at the top level (a flat row), else under ``metadata`` (stored)."""
    if key in row:
        return row[key]
    meta = row.get("metadata")
    return meta.get(key) if isinstance(meta, Mapping) else None


def row_to_message(row: Mapping[str, Any]) -> BaseMessage:
    """Return a flowmem row (flat or stored) as the LangChain message it was written from.

    A row written by ``message_to_row`` comes back equal (``==``); any other row
    comes back as the default class of its role, its parts as LangChain v1
    standard blocks (``provider`` parts as their block).
    """
    role = row.get("role") if isinstance(row, Mapping) else None
    if role not in _DEFAULT_CLASS:
        raise UnknownRoleError(f"not a flowmem message: {row!r}", role=role)
    extra = _read(row, "extra")
    lc = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    lc = lc if isinstance(lc, Mapping) else {}
    cls = _CLASSES.get(str(lc.get("class")), _CLASSES[_DEFAULT_CLASS[str(role)]])
    content = lc["empty"] if "empty" in lc else row.get("content")  # see ``_attempted_calls``
    if isinstance(content, list):
        content = [part_to_block(part) for part in content]
    elif content is None:
        content = ""
    elif not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    blocks = lc.get("blocks")
    if isinstance(blocks, list) and blocks:
        content = [] if content == "" else ([content] if isinstance(content, str) else content)
        for index, block in blocks:
            content.insert(index, block)
    kwargs: dict[str, Any] = {"content": content, **dict(lc.get("fields") or {})}
    if issubclass(cls, AIMessage):
        calls = _read(row, "tool_calls") or []
        if calls:
            kwargs["tool_calls"] = [_lc_call(call) for call in calls]
    if issubclass(cls, ToolMessage):
        kwargs["tool_call_id"] = str(_read(row, "tool_call_id") or "")
        if _read(row, "is_error") is True:
            kwargs["status"] = "error"
    if issubclass(cls, ChatMessage) and "role" not in kwargs:
        kwargs["role"] = role
    try:
        validated = cls(**kwargs)
    except ValidationError as exc:
        raise InvalidMessageError(f"row is not a valid {cls.__name__}: {exc}") from exc
    if lc:
        # Written by ``message_to_row`` from a validated message: these are its field
        # values as they were. Validating them again can change them (an
        # ``AIMessageChunk`` re-derives its calls from its chunks), so, once they are
        # known to validate, they are set as they are.
        # the unset fields are handed over as the validated message has them: else
        # ``model_construct`` computes each default again, and pydantic inspects every
        # default factory's signature to do so (~200 µs a message)
        given = {name: _fresh(value) for name, value in _all_defaults(cls) if name not in kwargs}
        return cls.model_construct(_fields_set=set(kwargs), **given, **kwargs)
    return validated


def _lc_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """Return a flowmem call entry as a LangChain ``ToolCall``."""
    extra = call.get("extra")
    more = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    cid = call.get("tool_call_id", call.get("id"))
    args = call.get("args")
    return {
        "name": call.get("name") or "",
        "args": {} if args is None else input_object(args),
        "id": cid if cid is None else str(cid),
        "type": "tool_call",
        **(dict(more) if isinstance(more, Mapping) else {}),
    }


# --- the history ---------------------------------------------------------------------------

# Batches whose write failed, per memory (service or client) and buffer, waiting to be
# retried (in this process) before the next read or write of the same history. LangChain's
# ``RunnableWithMessageHistory`` writes from a callback that logs and swallows
# exceptions, so without this a failed write would lose the turn silently.
_UNSTORED: weakref.WeakKeyDictionary[Memory, dict[tuple[Any, ...], list[BaseMessage]]] = (
    weakref.WeakKeyDictionary()
)
_UNSTORED_LOCK = threading.Lock()
MAX_UNSTORED_MESSAGES = 1000
"""At most this many messages wait per history; a failed write beyond it is only raised."""


class FlowmemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in one flowmem buffer (scope, key, context).

    ``messages`` is the buffer normalized (MEM-5), i.e. what a provider accepts: a
    call still waiting for its result reads as interrupted, while the stored buffer
    keeps the call open so the real result can still land (``raw_messages`` shows
    the stored rows). Give either ``context`` or ``session_id`` (a shortcut for
    ``ExecutionContext(session_id=...)``, what ``RunnableWithMessageHistory`` passes).
    ``service`` is any ``flowmem.memory.Memory``: a ``MemoryService`` on a local
    database, or a ``flowmem.client.Client`` talking to a ``flowmem serve``.

    A write that fails raises, and its messages are also kept (in this process) and
    written first by the next read or write of the same history; while they cannot
    be, that read or write raises too, so a turn whose write a callback swallowed is
    never lost silently. ``discard_unstored()`` drops them.

    ``max_tokens``: the history read is the longest sendable suffix within that many
    tokens (a call with its results, a reasoning part with its turn; issue 28), and
    ``last_window`` says what the last read cut.
    """

    def __init__(
        self,
        service: Memory,
        *,
        session_id: Any = None,
        context: ExecutionContext | None = None,
        scope: str = "session",
        key: str = "chat_history",
        max_messages: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        if context is None and session_id is not None:
            context = ExecutionContext(session_id=session_id)
        self.service = memory_of(service, "FlowmemChatMessageHistory")
        self.context = context
        self.scope = scope
        self.key = key
        self.max_messages = max_messages
        self.max_tokens = max_tokens
        self.last_result: BufferResult | None = None
        self.last_window: TokenWindow | None = None

    def _address(self) -> tuple[Any, ...]:
        ctx = self.context
        ids = () if ctx is None else tuple(repr(getattr(ctx, f)) for f in _CONTEXT_IDS)
        return (self.scope, self.key, ids)

    def _rows(self) -> list[Message]:
        self._flush_unstored()
        if self.max_tokens is None:
            return self.service.load(self.scope, self.key, self.context).messages
        loaded = self.service.load(self.scope, self.key, self.context, max_tokens=self.max_tokens)
        self.last_window = loaded.window
        return loaded.messages

    @property
    def raw_messages(self) -> list[BaseMessage]:
        """The stored rows as LangChain messages, placeholders and all, not normalized."""
        return [row_to_message(row) for row in self._rows()]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The history as stored, with tool pairing repaired (MEM-5 steps 1, 3, 4), parts kept.

        Nothing is reordered: a system message stays where it was added (LangChain's
        chat models send it there, or join it with the others themselves; DESIGN §5).
        """
        rows = normalize(self._rows(), keep_content=True, systems_first=False).messages
        return [row_to_message(row) for row in rows]

    def _write(self, messages: Sequence[BaseMessage]) -> None:
        rows = [message_to_row(message) for message in messages]
        self.last_result = self.service.append(
            self.scope, self.key, rows, self.context, self.max_messages, return_messages=False
        )

    def _flush_unstored(self, then: Sequence[BaseMessage] = ()) -> None:
        """Write the messages an earlier failed write left (and ``then``) in one append."""
        address = self._address()
        with _UNSTORED_LOCK:
            # claimed, so a concurrent writer of the same history cannot write them too
            pending = _UNSTORED.get(self.service, {}).pop(address, [])
        if not pending:
            if then:
                self._write(then)
            return
        # A caller retrying the very batch that failed must not store it twice.
        batch = pending if then and list(then) == pending[-len(then) :] else [*pending, *then]
        try:
            self._write(batch)
        except Exception as exc:
            with _UNSTORED_LOCK:
                waiting = _UNSTORED.setdefault(self.service, {})
                waiting[address] = [*pending, *waiting.get(address, [])]
            exc.add_note(
                f"flowmem: {len(pending)} message(s) of an earlier turn of this history "
                "could not be stored and are still pending; "
                "FlowmemChatMessageHistory.discard_unstored() drops them"
            )
            raise
        log.warning(
            "flowmem: %d message(s) whose earlier write failed are now stored", len(pending)
        )

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append through ``Memory.append`` (dedup, healing, window, refusal).

        Implements MEM-1, MEM-3 and MEM-10 through the memory (service or server). All messages are
        converted before anything is written; ``last_result`` holds what the append
        reported (``appended`` 0 and ``refusal`` set when the scope refused). When
        the write fails, the error is raised and logged, and the messages wait to
        be written before the next read or write (see the class docstring). A batch
        holding a ``RemoveMessage`` is refused whole (``InvalidMessageError``) before
        anything is written, and nothing of it waits: it is an edit, not a turn.
        """
        batch = list(messages)
        _refuse_edits(batch)
        try:
            self._flush_unstored(batch)
        except Exception:
            address = self._address()
            with _UNSTORED_LOCK:
                pending = _UNSTORED.setdefault(self.service, {}).setdefault(address, [])
                kept = not batch or pending[-len(batch) :] == batch
                if not kept and len(pending) + len(batch) <= MAX_UNSTORED_MESSAGES:
                    pending.extend(batch)
                    kept = True
            if kept:
                log.exception(
                    "flowmem: a write to history %s/%s failed; its messages will be "
                    "written before the next read or write of it",
                    self.scope,
                    self.key,
                )
            else:
                log.exception(
                    "flowmem: a write to history %s/%s failed and its %d message(s) are "
                    "not kept for a retry: %d already wait (MAX_UNSTORED_MESSAGES)",
                    self.scope,
                    self.key,
                    len(batch),
                    len(pending),
                )
            raise

    def unstored(self) -> list[BaseMessage]:
        """Return the messages whose write failed and that wait to be written."""
        with _UNSTORED_LOCK:
            return list(_UNSTORED.get(self.service, {}).get(self._address(), []))

    def discard_unstored(self) -> list[BaseMessage]:
        """Drop (and return) the messages whose write failed, so reads stop retrying them."""
        with _UNSTORED_LOCK:
            return _UNSTORED.get(self.service, {}).pop(self._address(), [])

    def clear(self) -> None:
        """Delete every row of the buffer and any unstored messages (nothing when refused)."""
        self.discard_unstored()
        self.service.clear(self.scope, self.key, self.context)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async ``messages`` (the store call runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async ``add_messages`` (the store call runs in a worker thread)."""
        await asyncio.to_thread(self.add_messages, list(messages))

    async def aclear(self) -> None:
        """Async ``clear`` (the store call runs in a worker thread)."""
        await asyncio.to_thread(self.clear)


def _refuse_edits(batch: Sequence[BaseMessage]) -> None:
    """Raise ``InvalidMessageError`` when ``batch`` holds a ``RemoveMessage`` (an append-only history)."""
    for message in batch:
        if isinstance(message, RemoveMessage):
            raise _edit_refused(message)


_CONTEXT_IDS = ("workflow_id", "pipeline_id", "execution_id", "node_id", "session_id", "user_id")

__all__ = [
    "CHAT_ROLES",
    "FlowmemChatMessageHistory",
    "block_to_part",
    "message_to_row",
    "part_to_block",
    "row_to_message",
]
