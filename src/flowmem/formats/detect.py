"""Which format a payload is in: flowmem rows, one provider's request shape, or none (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flowmem.formats.gemini_parts import PART_FIELDS, camel_key
from flowmem.formats.responses_items import CALL_ITEMS, OUTPUT_ITEMS
from flowmem.formats.unknown import unknown_format

DETECTED: tuple[str, ...] = ("openai", "responses", "anthropic", "gemini", "rows")
"""What ``detect_format`` answers: the four provider formats and flowmem rows."""

_PREFERENCE = ("rows", "openai", "responses", "anthropic", "gemini")  # when a payload fits several

# Item types only the Responses API has at the top level of its input list.
_RESPONSES_ITEMS = frozenset(CALL_ITEMS) | frozenset(OUTPUT_ITEMS) | {
    "message",
    "reasoning",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "item_reference",
    "compaction",
    "tool_search_call",
    "tool_search_output",
    "additional_tools",
    "configuration_update",
    "compaction_trigger",
    "program",
    "program_output",
}
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio"})
_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "server_tool_use",
        "container_upload",
    }
)
_ROWS_PARTS = frozenset({"audio", "reasoning", "provider"})

_OPENAI = frozenset({"openai"})
_RESPONSES = frozenset({"responses"})
_ANTHROPIC = frozenset({"anthropic"})
_ROWS = frozenset({"rows"})
_GEMINI = frozenset({"gemini"})
_NOT_GEMINI = frozenset(DETECTED) - _GEMINI

# Roles a message of some format has (Gemini's ``model`` only with ``parts``).
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_GEMINI_PART_KEYS = PART_FIELDS | {camel_key(key) for key in PART_FIELDS}
_GEMINI_BODY = frozenset({"contents", "system_instruction", "systemInstruction"})


def _gemini_part(part: object) -> bool:
    return isinstance(part, Mapping) and "type" not in part and any(key in _GEMINI_PART_KEYS for key in part)


def is_gemini_content(entry: Mapping[str, Any]) -> bool:
    """Return True for a Gemini ``Content``: only ``role`` and ``parts``, each part a Gemini part.

    A ``Content`` has no other field (the SDK forbids them), which tells it from a
    message with ``content`` and from other libraries' ``parts`` (pydantic-ai's
    have ``part_kind``). A content of no parts must say it is the model's.
    """
    if not entry.keys() <= {"role", "parts"}:
        return False
    parts = entry.get("parts")
    if isinstance(parts, list) and parts:
        return all(_gemini_part(part) for part in parts)
    return entry.get("role") == "model" or (isinstance(parts, list) and isinstance(entry.get("role"), str))


def _readable(entry: Mapping[str, Any]) -> bool:
    """Return True when some format reads ``entry`` as a message or an item."""
    role = entry.get("role")
    if isinstance(role, str) and role in _ROLES:
        return True
    kind = entry.get("type")
    if isinstance(kind, str) and kind in _RESPONSES_ITEMS:
        return True
    if entry.keys() == {"id"}:  # a Responses item reference without its type
        return True
    return is_gemini_content(entry)


def _part_signal(part: Mapping[str, Any]) -> frozenset[str] | None:
    kind = part.get("type")
    if not isinstance(kind, str):
        return None
    if kind in _RESPONSES_PARTS:
        return _RESPONSES
    if kind in _OPENAI_PARTS or (kind == "file" and isinstance(part.get("file"), Mapping)):
        return _OPENAI
    if kind == "refusal":
        return frozenset({"openai", "responses"})
    if kind in _ANTHROPIC_BLOCKS or kind.endswith("_tool_result"):
        return _ANTHROPIC
    if kind == "image":
        return _ANTHROPIC if "source" in part else _ROWS
    if kind == "file" or kind in _ROWS_PARTS:
        return _ROWS
    return None


def _call_signal(call: object) -> frozenset[str] | None:
    if not isinstance(call, Mapping):
        return None
    if "function" in call or "custom" in call:
        return _OPENAI
    if "tool_call_id" in call or "args" in call or "kind" in call:
        return _ROWS
    return None


def _role_signals(entry: Mapping[str, Any]) -> Iterable[frozenset[str]]:
    """What a message's own keys and role say: flowmem rows' fields, OpenAI-only roles and fields."""
    if "metadata" in entry or "extra" in entry or "is_error" in entry:
        yield _ROWS
    role = entry.get("role")
    if role == "developer":
        yield frozenset({"openai", "responses"})
    elif role == "function":
        yield _OPENAI
    elif role == "tool":
        yield frozenset({"openai", "rows"})
    if role == "assistant" and ("audio" in entry or "refusal" in entry or "function_call" in entry):
        yield _OPENAI


def _inner_signals(entry: Mapping[str, Any]) -> Iterable[frozenset[str]]:
    """What a message's tool calls and content parts say."""
    calls = entry.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            signal = _call_signal(call)
            if signal is not None:
                yield signal
    content = entry.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                signal = _part_signal(part)
                if signal is not None:
                    yield signal


def _message_signals(entry: Mapping[str, Any]) -> Iterable[frozenset[str]]:
    if is_gemini_content(entry):
        yield _GEMINI
        return
    yield _NOT_GEMINI
    kind = entry.get("type")
    if isinstance(kind, str) and (kind in _RESPONSES_ITEMS or "role" not in entry):
        yield _RESPONSES
        return
    yield from _role_signals(entry)
    yield from _inner_signals(entry)


def detect_format(payload: object) -> str:
    """Return the format of ``payload``: ``"openai"``, ``"responses"``, ``"anthropic"``, ``"gemini"`` or ``"rows"``.

    A request body says it by its keys (``input``/``instructions``: Responses;
    ``system``: Anthropic; ``contents``/``system_instruction``: Gemini); otherwise
    each message is read for what only one format has: Gemini contents (only
    ``role`` and ``parts``); Responses item types and ``input_*``/``output_text``
    parts; Anthropic blocks (``tool_use``, ``tool_result``, ``thinking``, an
    ``image`` with a ``source``, ``document``); OpenAI ``tool_calls[].function``,
    ``image_url``/``input_audio``/``file`` parts, an assistant ``audio`` or
    ``refusal``, the ``function`` role; flowmem rows' ``metadata``, call entries
    with ``tool_call_id``/``args`` and neutral parts. A payload that fits several
    (plain text messages are the same everywhere but in Gemini) is ``"rows"``;
    conflicting signals are resolved by the first ones found. A payload no format
    reads raises ``UnknownFormatError`` (``unknown_format``) naming the formats.
    """
    candidates = format_candidates(payload)
    if not candidates:
        raise unknown_format(payload)
    return next(name for name in _PREFERENCE if name in candidates)


def format_candidates(payload: object) -> frozenset[str]:
    """Return every format ``payload`` may be in (``detect_format`` picks one of them).

    Plain text messages fit all but Gemini; a payload with a signal only one
    format has fits that one. A format outside this set is one the payload
    plainly is not; the empty set says no format reads it: not a list or a
    request body, a body without a known key, or a non-empty list of which no
    entry is a message or an item of any format (a pydantic-ai or LangChain dump).
    """
    messages: object = payload
    candidates = frozenset(DETECTED)
    if isinstance(payload, Mapping):
        if "input" in payload or ("instructions" in payload and "parts" not in payload):
            return _RESPONSES  # (a pydantic-ai request has instructions beside its parts)
        if _GEMINI_BODY & payload.keys():
            return _GEMINI
        if "system" in payload:
            candidates = _ANTHROPIC
        elif "messages" not in payload:
            return frozenset()
        messages = payload.get("messages", [])
    elif not isinstance(payload, (list, tuple)):
        return frozenset()
    if isinstance(messages, (list, tuple)):
        readable = False
        for entry in messages:
            if not isinstance(entry, Mapping):
                continue
            readable = readable or _readable(entry)
            for signal in _message_signals(entry):
                narrowed = candidates & signal
                if narrowed:
                    candidates = narrowed
        if messages and not readable:
            return frozenset()
    return candidates
