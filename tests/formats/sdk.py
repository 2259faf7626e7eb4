"""Validate flowmem output against the official SDKs' request types (tests only)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from anthropic.types import MessageParam, TextBlockParam
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
