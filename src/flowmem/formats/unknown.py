"""The refusal of a payload in no format flowmem reads, saying which formats it reads (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.errors import UnknownFormatError

READ_FORMATS = (
    "rows (flowmem messages: role system, user, assistant or tool, with content), "
    "openai (Chat Completions messages), "
    "responses (Responses API / Agents SDK input items), "
    "anthropic (Messages API messages, with system), "
    "gemini (google-genai contents: role user or model, with parts)"
)
"""The formats flowmem reads, as the refusal names them."""


def _entries(payload: object) -> list[Any]:
    if isinstance(payload, Mapping):
        payload = next((payload[key] for key in ("messages", "contents", "input") if key in payload), [payload])
    return list(payload) if isinstance(payload, (list, tuple)) else []


def _is_pydantic_ai(entry: Mapping[str, Any]) -> bool:
    parts = entry.get("parts")
    return entry.get("kind") in ("request", "response") or (
        isinstance(parts, list) and any(isinstance(p, Mapping) and "part_kind" in p for p in parts)
    )


def _is_langchain(entry: Mapping[str, Any]) -> bool:
    return isinstance(entry.get("type"), str) and isinstance(entry.get("data"), Mapping) and "role" not in entry


def looks_like(payload: object) -> str | None:
    """Name the library whose dump ``payload`` seems to be (pydantic-ai, LangChain), or None."""
    maps = [entry for entry in _entries(payload) if isinstance(entry, Mapping)]
    if maps and all(_is_pydantic_ai(entry) for entry in maps):
        return (
            "a pydantic-ai message history (ModelMessagesTypeAdapter); "
            "flowmem does not read that format"
        )
    if maps and all(_is_langchain(entry) for entry in maps):
        return (
            "a LangChain messages_to_dict dump; load it with "
            "langchain_core.messages.messages_from_dict and store the messages through "
            "flowmem's LangChain integration (docs/integrations.md)"
        )
    return None


def unknown_format(payload: object, where: str = "payload") -> UnknownFormatError:
    """Return the ``unknown_format`` error for a payload no format reads, naming the formats read."""
    seen = looks_like(payload)
    found = f": it looks like {seen}" if seen else ""
    return UnknownFormatError(
        f"{where} is in no format flowmem reads{found}. flowmem reads {READ_FORMATS}",
        field=where,
    )
