"""Validate flowmem output against the official SDKs' request types (tests only)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from anthropic.types import MessageParam, TextBlockParam
from google.genai import types as gemini_types
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import BaseModel, TypeAdapter


def _materialize(value: Any) -> Any:
    """Consume pydantic's lazy ``Iterable`` validators so every nested item is validated."""
    if isinstance(value, dict):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialize(item) for item in value]
    if isinstance(value, (str, bytes)) or value is None:
        return value
    if isinstance(value, BaseModel):  # a union member that is a response model (anthropic ContentBlock)
        return _materialize(value.model_dump(mode="python", exclude_unset=True, by_alias=True))
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_materialize(item) for item in value]
    return value


@cache
def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _validated(kind: type[Any], value: Any) -> Any:
    """Validate ``value`` fully; unknown keys are dropped by pydantic, so compare to see them."""
    checked = _materialize(_adapter(kind).validate_python(value))
    assert checked == value, f"SDK type {kind} dropped or changed fields:\n{checked}\n!=\n{value}"
    return checked


def assert_openai_chat(messages: list[dict[str, Any]]) -> None:
    """Every message is a valid ``openai.types.chat.ChatCompletionMessageParam``, keys included."""
    for message in messages:
        _validated(ChatCompletionMessageParam, message)  # type: ignore[arg-type]


def assert_responses(items: list[dict[str, Any]]) -> None:
    """Every item is a valid ``openai.types.responses.ResponseInputItemParam``, keys included."""
    for item in items:
        _validated(ResponseInputItemParam, item)  # type: ignore[arg-type]


def assert_anthropic(system: object, messages: list[dict[str, Any]]) -> None:
    """Every message is a valid ``anthropic.types.MessageParam``; ``system`` is text, text blocks or absent."""
    assert system is None or (isinstance(system, str) and system != "") or isinstance(system, list)
    if isinstance(system, list):
        assert system, "an empty system block list is left out"
        for block in system:
            _validated(TextBlockParam, block)  # type: ignore[arg-type]
    for message in messages:
        _validated(MessageParam, message)  # type: ignore[arg-type]


_BYTES_FIELDS = frozenset({"data", "thought_signature", "thoughtSignature"})


def _urlsafe(value: Any, key: str = "") -> Any:
    """``value`` with base64 text in the URL-safe alphabet, as pydantic writes ``bytes`` back."""
    if isinstance(value, dict):
        return {k: v if k in ("args", "response") else _urlsafe(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_urlsafe(item, key) for item in value]
    if isinstance(value, str) and key in _BYTES_FIELDS:
        return value.replace("+", "-").replace("/", "_")
    return value


def _camel(content: dict[str, Any]) -> bool:
    parts = content.get("parts") or []
    return any(any(c.isupper() for c in key) for part in parts for key in part)


def assert_gemini_content(content: dict[str, Any]) -> None:
    """``content`` is a valid ``google.genai.types.Content`` (unknown keys forbidden), nothing changed."""
    model = gemini_types.Content.model_validate(content)
    dumped = model.model_dump(mode="json", exclude_none=True, by_alias=_camel(content))
    assert dumped == _urlsafe(content), f"google-genai changed the content:\n{dumped}\n!=\n{content}"


def assert_gemini(system_instruction: object, contents: list[dict[str, Any]]) -> None:
    """Every content and the system instruction (a Content or a string) are valid google-genai values."""
    assert system_instruction is None or (isinstance(system_instruction, str) and system_instruction)  or isinstance(system_instruction, dict)
    if isinstance(system_instruction, dict):
        assert system_instruction.get("parts"), "an empty system instruction is left out"
        assert_gemini_content(system_instruction)
    for content in contents:
        assert content.get("parts"), "Gemini rejects a content without parts"
        assert_gemini_content(content)


def assert_document(name: str, document: Any) -> None:
    """``document`` (``write_document(name, …)``) validates against format ``name``'s SDK types."""
    if name == "openai":
        assert_openai_chat(document)
    elif name == "responses":
        assert_responses(document)
    elif name == "anthropic":
        assert_anthropic(document.get("system"), document["messages"])
    else:
        assert name == "gemini"
        assert_gemini(document.get("system_instruction"), document["contents"])
